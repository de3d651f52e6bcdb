"""Issue 18: estimate / compare need only ranks 1..max K of the weights (top-K metrics).

The truncated path (metric matrix and weights on ranks 1..H, H = min(N, max K))
must give the same tables as the full-N path (``_estimate_rows._METRIC_HEAD = False``:
metric matrix and weights on every rank 1..N) to rtol 1e-12, for every method,
per-user N and compare; the lazy log-spline weights must expand exactly to the
full vector; and the default must run at an N whose full-N arrays would be
refused (memory independent of N).
"""
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from sampling_lib import _estimate_rows, correct
from sampling_lib import counts as C
from sampling_lib.correct import compare, estimate
from sampling_lib.estimators import DEFAULT_METHOD, METHODS, get_estimator
from sampling_lib.estimators import _logspline as L
from sampling_lib.estimators import _logspline_boot as LB
from sampling_lib.metrics import METRICS as METRIC_FUNCS
from sampling_lib.metrics import metric_matrix, parse_metrics

N, n, M = 300, 20, 250
METRICS = ["recall@5", "ndcg@10", "ap@20"]
NUMERIC = ["naive", "naive_ci_low", "naive_ci_high", "estimate", "se", "ci_low", "ci_high",
           "sensitivity_low", "sensitivity_high"]


def _ranks(seed, size=M, NN=N):
    rng = np.random.default_rng(seed)
    R = np.minimum(NN, np.ceil(NN * rng.beta(0.4, 3.0, size))).astype(np.int64)
    return 1 + rng.binomial(n - 1, (R - 1) / (NN - 1))


@pytest.fixture
def full_path(monkeypatch):
    """Run a call on the full-N reference path."""
    def run(f, *a, **k):
        with monkeypatch.context() as m:
            m.setattr(_estimate_rows, "_METRIC_HEAD", False)
            return f(*a, **k)
    return run


def _same(a, b, cols):
    for c in cols:
        np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), rtol=1e-12,
                                   atol=1e-15, equal_nan=True, err_msg=c)
    for c in set(a.columns) - set(cols):
        pd.testing.assert_series_equal(a[c], b[c], obj=c)


def test_metrics_are_top_k():
    """The premise of the truncation: every metric is 0 beyond its cutoff K (metrics docstring)."""
    R = np.arange(1, 500)
    for name, f in METRIC_FUNCS.items():
        for K in (1, 7, 100):
            v = f(R, K)
            assert np.all(v[K:] == 0.0), name
            assert np.all(v[:K] > 0.0), name


@pytest.mark.parametrize("method", METHODS)
def test_estimate_head_equals_full(method, full_path):
    r = _ranks(0)
    kw = dict(metrics=METRICS, method=method, n_boot=12, rng=5)
    if method == "adaptive_mle":
        kw["sample_sizes"] = np.where(np.arange(M) % 2 == 0, n, n - 5)
        r = np.minimum(r, kw["sample_sizes"])
        a = estimate(r, N, **kw)
        b = full_path(estimate, r, N, **kw)
    else:
        a = estimate(r, N, n, **kw)
        b = full_path(estimate, r, N, n, **kw)
    _same(a, b, NUMERIC)
    # and the point estimate is the public estimator's length-N weights times F(1..N)
    if method != "adaptive_mle":
        opts = {"max_rank": 20} if method == "cls" else {}
        w = get_estimator(method, **opts)(r, N, n)
        F = metric_matrix(METRICS, N)
        ref = np.clip(w @ F, F.min(axis=0), F.max(axis=0))
        np.testing.assert_allclose(a["estimate"], ref, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("method", METHODS)
def test_estimate_per_user_N_head_equals_full(method, full_path):
    rng = np.random.default_rng(3)
    Nu = rng.choice([240, 270, 300], M)
    r = np.minimum(_ranks(1), n)
    kw = dict(metrics=METRICS, method=method, n_boot=8, rng=2)
    if method == "adaptive_mle":
        kw["sample_sizes"] = np.full(M, n)
    a = estimate(r, Nu, None if method == "adaptive_mle" else n, **kw)
    b = full_path(estimate, r, Nu, None if method == "adaptive_mle" else n, **kw)
    _same(a, b, NUMERIC)


@pytest.mark.parametrize("method, counts", [(DEFAULT_METHOD, False), (DEFAULT_METHOD, True),
                                            ("mle", False), ("bv_mle", True), ("mn", False)])
def test_compare_head_equals_full(method, counts, full_path):
    r = {"A": _ranks(10), "B": _ranks(11), "C": _ranks(12)}
    if counts:
        frames = [C.rank_counts(v, n, n_items=N).to_frame().assign(model=k) for k, v in r.items()]
        r = pd.concat(frames, ignore_index=True)
    kw = dict(metrics=METRICS, method=method, n_boot=10, rng=4)
    a = compare(r, N, n, **kw)
    b = full_path(compare, r, N, n, **kw)
    _same(a, b, ["estimate_a", "estimate_b", "difference", "se", "statistic", "pvalue",
                 "pvalue_adjusted", "ci_low", "ci_high"])


def test_compare_per_user_N_head_equals_full(full_path):
    Nu = np.random.default_rng(5).choice([200, 300], M)
    r = {"A": _ranks(20), "B": _ranks(21)}
    kw = dict(metrics=METRICS, n_boot=10, rng=1)
    _same(compare(r, Nu, n, **kw), full_path(compare, r, Nu, n, **kw),
          ["estimate_a", "estimate_b", "difference", "se", "ci_low", "ci_high"])


@pytest.mark.parametrize("exact_ranks", [1, 5, 256])
def test_grid_weights_head_is_prefix_of_full(exact_ranks):
    r = _ranks(7, NN=5000)
    fit = L.logspline_fit(r, 5000, n, exact_ranks=exact_ranks)
    full = fit.weights_grid.full()
    np.testing.assert_array_equal(full, fit.weights)
    assert full.shape == (5000,) and np.asarray(fit.weights_grid).shape == (5000,)
    lo = fit.weights_grid._grid.lo
    straddle = int(lo[np.flatnonzero(np.diff(lo) > 1)[0]]) + 1 if np.any(np.diff(lo) > 1) else 3
    for H in {1, 2, 10, straddle, exact_ranks, 4999, 5000}:
        np.testing.assert_array_equal(fit.weights_grid.head(H), full[:H])
        np.testing.assert_array_equal(fit.prior_grid.head(H), fit.prior[:H])
    with pytest.raises(ValueError, match="H must lie in 1..N=5000; got H=5001"):
        fit.weights_grid.head(5001)


def test_cell_metric_head_equals_padded():
    grid = L.spline_grid(5000, n, L.DEFAULT_KNOT_SPACING, 4)
    parsed = parse_metrics(["recall@7", "ndcg@30", "ap@3"])
    full = LB.cell_metric(metric_matrix(parsed, 5000), grid)
    for H in (30, 31, 257, 5000):          # H >= max K = 30: F is 0 beyond H
        np.testing.assert_array_equal(LB.cell_metric(metric_matrix(parsed, 5000)[:H], grid), full)
    with pytest.raises(ValueError, match="at most N=5000 rows; got 5001"):
        LB.cell_metric(np.zeros((5001, 1)), grid)


def test_fit_counts_checks_F():
    st = C.rank_counts(_ranks(0), n, n_items=N)
    est = get_estimator(DEFAULT_METHOD)
    with pytest.raises(ValueError, match=r"1 <= H <= N=300; got shape \(301, 2\)"):
        est.fit_counts(st, N, np.zeros((N + 1, 2)))


def test_default_memory_does_not_grow_with_N():
    """N = 10^9: the full-N path would need 8 GB per length-N vector (refused by
    check_array_size); the truncated default stays far below one such vector."""
    r = _ranks(3, size=2000, NN=10**9)
    tracemalloc.start()
    try:
        t = estimate(r, 10**9, n, metrics=["recall@10", "ndcg@50"], n_boot=4, rng=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t["estimate"].between(0, 1).all() and t["ci_low"].notna().all()
    assert peak < 100e6, peak          # one length-N float vector is 8e9 bytes


@pytest.mark.parametrize("per_user", [False, True])
def test_logspline_cells_fit_equals_per_user_fit(per_user):
    """The default fits on the cells of the counts (no per-user arrays): same weights as the
    fit on the per-user ranks they count."""
    r = _ranks(4)
    Nu = np.random.default_rng(0).choice([250, 300], M) if per_user else np.full(M, N)
    st = C.rank_counts(r, n, n_items=Nu)
    w, beta = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts)
    ref = L.logspline_fit(r, Nu if per_user else N, n)
    np.testing.assert_allclose(w.full(), ref.weights, rtol=1e-12, atol=1e-300)
    # the cells path keeps (beta, grid, kernel) for the bootstrap; beta comes first
    beta = beta[0] if isinstance(beta, tuple) else beta
    np.testing.assert_allclose(beta, ref.beta, rtol=1e-12)
    w, _ = L.counts_fit_state(st.n_items, st.sizes, st.ranks, st.counts, penalty=7.0)
    ref = L.logspline_fit(r, Nu if per_user else N, n, penalty=7.0)
    np.testing.assert_allclose(w.full(), ref.weights, rtol=1e-12, atol=1e-300)


def test_default_memory_does_not_grow_with_users():
    """10^10 users given as counts: no per-user array is formed (one int64 per user is 80 GB)."""
    rng, NN, nn = np.random.default_rng(0), 10**6, 100
    R = np.minimum(NN, np.ceil(NN * rng.beta(0.4, 3.0, 10**5)))
    q = np.bincount(rng.binomial(nn - 1, (R - 1) / (NN - 1)), minlength=nn) / 10**5
    counts = rng.multinomial(10**10, q)
    st = C.RankCounts(sizes=np.full(nn, nn), ranks=np.arange(1, nn + 1), counts=counts,
                            n_items=np.full(nn, NN))
    tracemalloc.start()
    try:
        t = estimate(st, metrics=["recall@10"], n_boot=4, rng=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t["users"][0] == 10**10 and t["estimate"].between(0, 1).all()
    assert peak < 100e6, peak
