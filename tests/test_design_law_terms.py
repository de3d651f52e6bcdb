"""The running terms of the planner's count laws (design._law): log P(X = start + j) per row, binomial and
hypergeometric, against scipy's exact pmf, on and off the support and at the edges p = 0 and p = 1."""
import numpy as np
import pytest
from scipy import stats

from sampling_lib.design import _law


def _close(log_ours, ref):
    ours = np.exp(log_ours)
    assert ((ours > 0) == (ref > 0)).all()
    big = ref > 1e-250
    np.testing.assert_allclose(ours[big], ref[big], rtol=1e-8)


@pytest.mark.parametrize("m", [1, 2, 7, 99, 1000, 19_199])
def test_binomial_terms_match_scipy(m):
    rng = np.random.default_rng(m)
    p = rng.uniform(0, 1, (40, 1))
    p[:4, 0] = [0.0, 1.0, 1e-12, 1 - 1e-12]
    start = rng.integers(0, m + 1, 40).astype(float)
    start[1] = max(m - 3, 0)                       # p = 1 from below m: its point mass at m inside the run
    width = 50
    x = start[:, None] + np.arange(width)[None, :]
    _close(_law._binom_log_pmf_run(start, width, m, p), stats.binom.pmf(x, m, p))


@pytest.mark.parametrize("table", [True, False], ids=["table of log k!", "ratios beyond it"])
@pytest.mark.parametrize("total", [5, 60, 3706, 100_000])
def test_hypergeometric_terms_match_scipy(total, table, monkeypatch):
    if not table:
        monkeypatch.setattr(_law, "LOG_FACTORIAL_MAX", 1)
    rng = np.random.default_rng(total)
    good = rng.integers(0, total + 1, (40, 1)).astype(float)
    bad = total - good
    m = np.minimum(float(rng.integers(1, min(total, 20_000) + 1)), good + bad)
    lower = np.maximum(m - bad, 0.0)[:, 0]
    start = np.maximum(lower, np.floor(m[:, 0] * good[:, 0] / total) - rng.integers(0, 30, 40))
    width = 60
    x = start[:, None] + np.arange(width)[None, :]
    _close(_law._log_pmf_run(start, width, good, bad, m), stats.hypergeom.pmf(x, total, good, m))
