"""Property tests of issue 16 (hypothesis): what must hold for any input.

Kept fast: small N, no bootstrap unless the property is about it.
"""
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sampling_lib import mapping, metrics
from sampling_lib.correct import compare, estimate
from sampling_lib.estimators import get_estimator
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_matrix
from sampling_lib.sampling import sample_negatives, sample_ranks

FAST = settings(max_examples=20, deadline=None)
FEW = settings(max_examples=5, deadline=None)         # compare: ~0.3 s a call


@st.composite
def sampled_setting(draw, max_users=40):
    N = draw(st.integers(20, 300))
    n = draw(st.integers(2, min(N, 25)))
    r = draw(st.lists(st.integers(1, n), min_size=1, max_size=max_users))
    return N, n, np.array(r)


# --- estimates lie in the metric's range, or are flagged -------------------------
@FAST
@given(sampled_setting(), st.sampled_from(["bv", "mn", "mle", "bv_mle"]))
def test_estimates_in_range_or_flagged(setting, method):
    N, n, r = setting
    mets = ["recall@1", "recall@5", "ndcg@5", "precision@3", "ap@10"]
    t = estimate(r, N, n, metrics=mets, method=method, n_boot=0)
    F = metric_matrix(mets, N)
    raw = get_estimator(method)(r, N, n) @ F
    lo, hi = F.min(axis=0), F.max(axis=0)
    assert ((t.estimate >= lo) & (t.estimate <= hi)).all()
    tol = 1e-12 * (hi - lo)          # the documented rule: rounding below 1e-12 of the range
    out = (raw < lo - tol) | (raw > hi + tol)
    assert (t.clipped.to_numpy() == out).all()
    assert np.allclose(t.estimate, np.clip(raw, lo, hi), rtol=0, atol=1e-12)


# --- Recall@K non-decreasing in K, NDCG@K <= Recall@K ------------------------------
@FAST
@given(st.lists(st.integers(1, 500), min_size=1, max_size=50), st.integers(1, 60))
def test_metric_functions_ordering(R, K):
    rec = [metrics.metric_from_ranks(R, f"recall@{k}") for k in range(1, K + 1)]
    assert np.all(np.diff(rec) >= 0)
    for k in range(1, K + 1):
        assert metrics.metric_from_ranks(R, f"ndcg@{k}") <= rec[k - 1] + 1e-15


@FAST
@given(sampled_setting())
def test_estimated_recall_monotone_and_above_ndcg(setting):
    N, n, r = setting
    Ks = [1, 2, 5, 10, 20]
    t = estimate(r, N, n, metrics=[f"recall@{k}" for k in Ks] + [f"ndcg@{k}" for k in Ks],
                 n_boot=0)
    rec = t.estimate.to_numpy()[:len(Ks)]
    nd = t.estimate.to_numpy()[len(Ks):]
    assert np.all(np.diff(rec) >= -1e-12)
    assert np.all(nd <= rec + 1e-12)


# --- invariance to user order ---------------------------------------------------------
@FAST
@given(sampled_setting(max_users=30), st.randoms(use_true_random=False))
def test_estimate_invariant_to_user_order(setting, rnd):
    N, n, r = setting
    perm = list(range(r.size))
    rnd.shuffle(perm)
    a = estimate(r, N, n, metrics=["recall@5", "ndcg@5"], n_boot=30, rng=0)
    b = estimate(r[perm], N, n, metrics=["recall@5", "ndcg@5"], n_boot=30, rng=0)
    pd.testing.assert_frame_equal(a, b)


@FEW
@given(sampled_setting(max_users=30), st.randoms(use_true_random=False), st.integers(0, 2**31))
def test_compare_invariant_to_user_order(setting, rnd, seed):
    N, n, r = setting
    rb = np.random.default_rng(seed).integers(1, n + 1, r.size)
    perm = list(range(r.size))
    rnd.shuffle(perm)
    kw = dict(metrics="recall@5", n_boot=30, rng=0)
    a = compare({"A": r, "B": rb}, N, n, **kw)
    b = compare({"A": r[perm], "B": rb[perm]}, N, n, **kw)
    pd.testing.assert_frame_equal(a, b)


# --- convergence to the truth as M grows, for a known P(R) --------------------------------
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["recall@2", "ndcg@3", "ap@4"]))
def test_estimate_converges_to_the_truth(seed, metric):
    """n = N: the binomial kernel is invertible, so P(R) is identifiable and BV with
    gamma = 0 (uniform prior) is the unbiased sampled metric x = K^{-1} F. Its error at
    M users has the exact standard deviation sd_M = sqrt(Var x[r] / M): the estimate must
    lie within 6 sd_M of the truth (failure probability < 1e-8 per M), and sd_M -> 0.
    """
    N = n = 6
    g = np.random.default_rng(seed)
    pmf = g.dirichlet(np.ones(N))
    F = metric_matrix([metric], N)[:, 0]
    truth = float(pmf @ F)
    K = np.asarray(kernel(N, n))
    x = np.linalg.solve(K, F)                           # E[x_r | R] = F(R)
    q = K.T @ pmf                                       # P(r)
    var = float(q @ x**2 - (q @ x) ** 2)
    for M in (1_000, 100_000):
        R = g.choice(np.arange(1, N + 1), size=M, p=pmf)
        r = sample_ranks(R, N, n, rng=g)
        est = estimate(r, N, n, metrics=metric, method="bv", options={"gamma": 0.0},
                       n_boot=0).estimate[0]
        assert abs(est - truth) <= 6 * np.sqrt(var / M) + 1e-9, (M, est, truth)


# --- compare: antisymmetric, identical models give 0 --------------------------------------
@FEW
@given(sampled_setting(max_users=30), st.integers(0, 2**31))
def test_compare_antisymmetric(setting, seed):
    N, n, r = setting
    rb = np.random.default_rng(seed).integers(1, n + 1, r.size)
    kw = dict(metrics=["recall@5", "ndcg@5"], n_boot=20, rng=1)
    ab = compare({"A": r, "B": rb}, N, n, **kw)
    ba = compare({"B": rb, "A": r}, N, n, **kw)
    assert (ab.model_a == "A").all() and (ba.model_a == "B").all()
    assert np.allclose(ab.difference, -ba.difference, rtol=0, atol=1e-14)
    assert np.allclose(ab.se, ba.se, rtol=1e-12, atol=1e-15)
    assert np.allclose(ab.pvalue, ba.pvalue, rtol=1e-12, atol=1e-15)
    assert np.allclose(ab.ci_low, -ba.ci_high, rtol=0, atol=1e-12)
    assert (ab.reject == ba.reject).all()


@FEW
@given(sampled_setting(max_users=30))
def test_compare_identical_models_give_zero(setting):
    N, n, r = setting
    t = compare({"A": r, "B": r.copy()}, N, n, metrics=["recall@5", "ndcg@5"], n_boot=20, rng=0)
    assert (t.difference == 0).all() and (t.ci_low == 0).all() and (t.ci_high == 0).all()
    assert (t.decision == "no significant difference").all()


# --- mapping functions ------------------------------------------------------------------------
@FAST
@given(st.integers(2, 10**6), st.data())
def test_maps_increasing_with_f_n_equal_N(N, data):
    n = data.draw(st.integers(2, min(N, 2000)))
    for f in (mapping.linear(N, n), mapping.bound(N, n), mapping.uniform(N, n)):
        assert f.shape == (n,)
        assert np.all(np.diff(f) > 0)
        assert f[-1] == pytest.approx(N, rel=1e-12)
        assert f[0] >= 1


# --- sample_negatives never returns a held-out or excluded item -------------------------------
@FAST
@given(st.integers(5, 80), st.integers(1, 6), st.booleans(), st.integers(0, 2**31), st.data())
def test_sample_negatives_never_returns_held_out_or_excluded(N, n_users, replace, seed, data):
    g = np.random.default_rng(seed)
    n = data.draw(st.integers(2, max(2, N // 3)))
    users = [f"u{i}" for i in range(n_users)]
    held = g.integers(0, N, n_users)
    excl = {u: g.choice(N, size=data.draw(st.integers(0, N // 2)), replace=False) for u in users}
    avail = [N - len(set(excl[u]) | {held[i]}) for i, u in enumerate(users)]
    assume(min(avail) >= (1 if replace else n - 1))
    neg = sample_negatives(users, N, n, exclude=excl, held_out=held, rng=seed,
                           scheme="binomial" if replace else "hypergeometric")
    assert neg.groupby("user", sort=False).size().tolist() == [n - 1] * n_users
    for i, u in enumerate(users):
        items = neg.loc[neg.user == u, "item"].to_numpy()
        assert ((items >= 0) & (items < N)).all()
        assert held[i] not in items
        assert not np.isin(items, excl[u]).any()
        if not replace:
            assert np.unique(items).size == items.size
