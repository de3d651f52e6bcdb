"""The running terms of the count laws that the kernels' windows (kernels.window_pmf) and the planner
(design._law) share: log P(X = start + j) per row, binomial and hypergeometric, against scipy's exact pmf,
on and off the support and at the edges p = 0 and p = 1; and window_pmf, through them, against scipy."""
import numpy as np
import pytest
from scipy import stats

from sampling_lib.kernels import _laws, log_binom_window, log_hypergeom_window, window_pmf


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
    _close(log_binom_window(start, width, m, p), stats.binom.pmf(x, m, p))


@pytest.mark.parametrize("table", [True, False], ids=["table of log k!", "ratios beyond it"])
@pytest.mark.parametrize("total", [5, 60, 3706, 100_000])
def test_hypergeometric_terms_match_scipy(total, table, monkeypatch):
    if not table:
        monkeypatch.setattr(_laws, "LOG_FACTORIAL_MAX", 1)
    rng = np.random.default_rng(total)
    good = rng.integers(0, total + 1, (40, 1)).astype(float)
    bad = total - good
    m = np.minimum(float(rng.integers(1, min(total, 20_000) + 1)), good + bad)
    lower = np.maximum(m - bad, 0.0)[:, 0]
    start = np.maximum(lower, np.floor(m[:, 0] * good[:, 0] / total) - rng.integers(0, 30, 40))
    width = 60
    x = start[:, None] + np.arange(width)[None, :]
    _close(log_hypergeom_window(start, width, good, bad, m), stats.hypergeom.pmf(x, total, good, m))


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("N, n", [(50, 10), (3706, 100), (100_000, 5000)])
def test_window_pmf_through_the_shared_terms_matches_scipy(N, n, scheme):
    # window_pmf's rows start below, inside and above each row's support, and reach past its end
    rng = np.random.default_rng(N + n)
    R = np.r_[1, 2, N - 1, N, rng.integers(1, N + 1, 30)]
    d = n - 1
    first = np.clip(np.round(d * (R - 1) / (N - 1)).astype(np.int64) - rng.integers(-5, 40, R.size), -3, d)
    width = 45
    x = first[:, None] + np.arange(width)[None, :]
    ref = (stats.binom.pmf(x, d, ((R - 1) / (N - 1))[:, None]) if scheme == "binomial"
           else stats.hypergeom.pmf(x, N - 1, (R - 1)[:, None], d))
    with np.errstate(divide="ignore"):                  # log 0 = -inf off the support
        _close(np.log(window_pmf(N, n, R, first, width, scheme)), ref)


def test_hypergeometric_terms_far_off_the_support_are_zero():
    # windows starting far below 0 and reaching far past min(good, m): every look-up stays in the table and
    # every term off the support is 0 (the table's indices run past both ends there)
    good, bad, m = np.array([3, 40, 0, 500]), np.array([500, 2, 7, 0]), np.array([5, 30, 7, 200])
    start, width = np.array([-900, -50, -3, 150]), 1200
    x = start[:, None] + np.arange(width)[None, :]
    ref = stats.hypergeom.pmf(x, (good + bad)[:, None], good[:, None], m[:, None])
    _close(log_hypergeom_window(start, width, good, bad, m), ref)


@pytest.mark.parametrize("call, match", [
    (lambda: log_binom_window([0], 0, 5, [0.5]), "width"),
    (lambda: log_binom_window([0], 3, -1, [0.5]), "m"),
    (lambda: log_binom_window([0], 3, 5, [1.5]), "p must lie"),
    (lambda: log_binom_window([0, 1], 3, 5, [0.5]), "start must hold"),
    (lambda: log_hypergeom_window([0.5], 3, [4], [5], [3]), "start must hold"),
    (lambda: log_hypergeom_window([0], 3, [4], [5], [10]), "m <= good \\+ bad"),
    (lambda: log_hypergeom_window([0], 3, [-1], [5], [1]), ">= 0"),
    (lambda: log_hypergeom_window([0], 3, [4, 4], [5], [1]), "one entry per row"),
])
def test_window_terms_refuse_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
