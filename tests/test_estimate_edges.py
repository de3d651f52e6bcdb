"""Issue 26, the estimator's silent answers: each test failed on the code before the fix.

Degenerate counts at huge M, ``max_iter = 0``, ``clipped`` on a constant
metric, a single user, per-user estimators on astronomically many users,
popularity intervals that moved with the row order, and the popularity
bounds named for what they are.
"""
import warnings

import numpy as np
import pandas as pd
import pytest

from sampling_lib import estimate
from sampling_lib import popularity as pop
from sampling_lib._display import COLUMN_NOTES
from sampling_lib.estimators import logspline_fit
from sampling_lib.exceptions import ConvergenceWarning
from sampling_lib.exceptions import MemoryLimitError


# --- the default on degenerate counts at huge M ---------------------------------
def test_default_is_stable_on_degenerate_counts_at_huge_M():
    # users at two sampled ranks only: no smooth prior reproduces them, and with the users'
    # weight unbounded the coefficients diverged (recall@10 0.497, 0.0, 0.27 at 1e6, 1e10, 1e12)
    est = [estimate(pd.DataFrame({"rank": [1, 5], "count": [c, c]}), 1000, 10, "recall@10",
                    n_boot=0).estimate[0] for c in (10**6, 10**10, 10**12)]
    assert est[0] > 0.3
    np.testing.assert_allclose(est[1:], est[0], rtol=0.01)


@pytest.mark.parametrize("rank_one", [10**5, 10**9, 10**15])
def test_default_fits_nearly_every_user_at_rank_1(rank_one):
    # 10^5..10^15 users at sampled rank 1 and 231 over ranks 2-100 (N = 3706, n = 100): the first Newton step
    # put all prior mass at R = 1, the other users' probability underflowed, c / q overflowed and the next
    # step stopped with "Eigenvalues did not converge"
    from sampling_lib.estimators._logspline import _fit_from, _setup_counts, fit_counts_weight
    from sampling_lib.estimators._logspline_newton import gradient, objective

    others = np.random.default_rng(45).integers(2, 101, 231)
    counts = pd.DataFrame({"rank": np.r_[1, np.unique(others)],
                           "count": np.r_[rank_one, np.unique(others, return_counts=True)[1]]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if rank_one > 10**7:
            # the prior is fitted with the users weighted as at most FIT_USERS_MAX: beyond, the 231 weigh little,
            # the fit leaves most of them at probabilities below 1e-50, and the default says so
            warnings.filterwarnings("ignore", "log-spline fit: no smooth prior reproduces", ConvergenceWarning)
        t = estimate(counts, 3706, 100, ["recall@10", "ndcg@10"], n_boot=50, rng=0)
        # the fit is an optimum: its gradient vanishes (relative to the users it weighs)
        c = np.zeros(100)
        c[counts["rank"] - 1] = counts["count"]
        _, _, c, grid, K, P, _, _ = _setup_counts(c, 3706, 100, "binomial", 70.0, 0.4, 256)
        fit = _fit_from(c, K, grid, P, 70.0, 0.4)
    assert np.all(np.isfinite(t[["estimate", "ci_low", "ci_high"]].to_numpy()))
    assert np.all((t.ci_low <= t.estimate) & (t.estimate <= t.ci_high) & (t.ci_high <= 1) & (t.ci_low > 0.99))
    w = fit_counts_weight(c)
    f, g, q = objective(fit.beta, w, K, grid, P)
    assert fit.converged and np.isfinite(f)
    assert np.abs(gradient(fit.beta, w, K, grid, P, g, q)).max() <= 1e-5 * w.sum()


def test_default_goes_on_with_the_observed_hessian_where_fisher_scoring_stalls():
    # 1,999 users at sampled rank 1 and one at rank 2: Fisher scoring's first step put all prior mass at
    # R = 1, where the expected information is singular, and the fit stopped there (f = 8,497, a
    # ConvergenceWarning, recall@10 exactly 1). The optimum, found by an independent optimizer (scipy's
    # BFGS on the same objective from the flat prior), is at f = 8.63.
    from scipy.optimize import minimize

    from sampling_lib.estimators._logspline import _setup
    from sampling_lib.estimators._logspline_newton import gradient, objective

    r = np.r_[np.ones(1999, dtype=int), 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = logspline_fit(r, 3706, 100)
        t = estimate(r, 3706, 100, "recall@10", n_boot=50, rng=0)
    _, _, c, grid, K, P, _, _ = _setup(r, 3706, 100, "binomial", 70.0, 0.4, 256)

    def fun(b):
        f, g, q = objective(b, c, K, grid, P)
        return f, gradient(b, c, K, grid, P, g, q)

    ref = minimize(fun, np.zeros(fit.beta.size), jac=True, method="BFGS", options={"gtol": 1e-8, "maxiter": 5000})
    assert fit.converged and fun(fit.beta)[0] == pytest.approx(ref.fun, rel=1e-7, abs=1e-7)
    g_fit = objective(fit.beta, c, K, grid, P)[1]
    g_ref = objective(ref.x, c, K, grid, P)[1]
    assert g_fit[0] == pytest.approx(g_ref[0], abs=1e-5)          # the prior mass at R = 1
    assert 0.999 < t.estimate[0] < 1.0                            # not exactly 1: one user is below rank 1


def test_default_warns_where_no_smooth_prior_reproduces_the_ranks():
    # 1,999 users at the last sampled rank and one at rank 1: every smooth prior that serves the 1,999 makes
    # the one a near-impossible event; recall@10 came out 0 with an interval up to 1e-236 and no word
    r = np.r_[np.full(1999, 100), 1]
    with pytest.warns(ConvergenceWarning, match="no smooth prior reproduces these sampled ranks.*method='mle'"):
        estimate(r, 3706, 100, "recall@10", n_boot=20, rng=0)
    m = estimate(r, 3706, 100, "recall@10", n_boot=200, rng=0, method="mle")
    assert m.estimate[0] == pytest.approx(1 / 2000, rel=0.2) and m.ci_high[0] > 1e-4


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
def test_default_with_per_user_n_fits_every_user_at_the_last_sampled_rank(scheme):
    # what a constant scorer gives under pessimistic ties, with per-user N_u: the warm start (one N =
    # max N_u, pooled ranks) put the prior beyond the other users' N_u, where their cells are impossible,
    # and the fit stopped with "Eigenvalues did not converge" after a division by zero
    g = np.random.default_rng(11)
    Nu = g.integers(2224, 3707, 5000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = estimate(np.full(5000, 100), Nu, 100, ["recall@10", "ndcg@10"], n_boot=50, rng=0, scheme=scheme)
        one = estimate(np.r_[1, np.full(4999, 100)], Nu, 100, "recall@10", n_boot=50, rng=0, scheme=scheme)
    ends = t[["estimate", "ci_low", "ci_high"]].to_numpy()
    assert np.all((ends >= 0) & (ends < 1e-12)), ends          # every user below all 99 negatives
    assert 0.0 <= one.estimate[0] <= one.ci_high[0] and 1 / 5000 <= one.ci_high[0] < 0.01


def test_default_on_merged_ladder_ranks_nearly_all_at_the_last_sampled_rank():
    # one N, sets of 100 or 200 items, every user at the last rank of its set but 5: at a probability floor
    # of 1e-200 the observed Hessian's c / q^2 overflowed ("Eigenvalues did not converge"); the floor is
    # 1e-100. The data sit near the recession direction (all prior mass at R = N), so the fit may stop
    # with a ConvergenceWarning; it must not fail, nor give a non-finite number
    from sampling_lib.exceptions import ConvergenceWarning

    g = np.random.default_rng(11)
    sizes = g.choice([100, 200], 5000)
    r = sizes.copy()
    r[:5] = g.integers(1, 100, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = estimate(r, 3706, None, ["recall@10", "ndcg@10"], sample_sizes=sizes, n_boot=30, rng=0)
    ends = t[["estimate", "ci_low", "ci_high"]].to_numpy()
    assert np.all(np.isfinite(ends) & (ends >= 0) & (ends <= 5 / 5000 + 1e-12)), ends


@pytest.mark.parametrize("scheme", ["binomial", "hypergeometric"])
@pytest.mark.parametrize("table", ["both ends", "rank 1 and five others"])
def test_default_never_fails_on_users_at_one_end(table, scheme):
    # from a fuzz of degenerate counts tables (10^4 users, N = 3706, n = 100): these stopped with
    # "Eigenvalues did not converge" before the probability floor; a warning may remain, a failure not
    from sampling_lib.exceptions import ConvergenceWarning

    rk, ct = ([1, 100], [10**4, 1]) if table == "both ends" else ([1, 7, 23, 40, 77, 99], [10**4, 1, 1, 1, 1, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = estimate(pd.DataFrame({"rank": rk, "count": ct}), 3706, 100, ["recall@10", "ndcg@10"], n_boot=20,
                     rng=0, scheme=scheme)
    ends = t[["ci_low", "estimate", "ci_high"]].to_numpy()
    assert np.all(np.isfinite(ends) & (ends >= 0) & (ends <= 1)), ends
    assert np.all(np.diff(ends, axis=1) >= 0), ends


def test_fit_counts_weight_caps_users_and_keeps_small_counts():
    from sampling_lib.estimators._logspline import FIT_USERS_MAX, fit_counts_weight

    c = np.array([3.0, 1.0, 0.0])
    assert fit_counts_weight(c) is not None and np.array_equal(fit_counts_weight(c), c)
    big = np.array([[1e12, 3e12], [1.0, 2.0]])
    w = fit_counts_weight(big)
    assert w[0].sum() == pytest.approx(FIT_USERS_MAX) and w[0, 1] / w[0, 0] == pytest.approx(3.0)
    np.testing.assert_array_equal(w[1], big[1])          # rows are scaled on their own


# --- options -------------------------------------------------------------------
@pytest.mark.parametrize("method", ["mle", "wmle", "adaptive_mle"])
def test_max_iter_zero_is_refused(method):
    # it returned the EM's starting point as the estimate
    with pytest.raises(ValueError, match="max_iter"):
        estimate([1, 2, 5, 9], 100, 10, method=method, options={"max_iter": 0}, n_boot=0)


# --- constant metrics and a single user ------------------------------------------
def test_constant_metric_is_not_clipped_and_is_named():
    # K >= N: recall@10 is 1 for every ranking of 5 items; clipped=True appeared
    with pytest.warns(RuntimeWarning, match="every ranking of N <= 5"):
        t = estimate([3, 1, 2, 1], 5, 3, ["recall@10", "ndcg@10"], rng=0, n_boot=20)
    assert not t.clipped.any()
    assert t.estimate[0] == pytest.approx(1.0) and t.estimate[1] < 1.0   # NDCG@10 still varies with R


def test_metric_that_varies_gives_no_constant_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        estimate([3, 1, 2, 1, 7], 50, 10, "recall@10", rng=0, n_boot=20)


def test_one_user_has_no_interval_and_says_so():
    # the bootstrap of one user is that user: a degenerate interval, shown without a word
    with pytest.warns(RuntimeWarning, match="one user"):
        t = estimate([3], 100, 10, ["recall@10", "ndcg@10"], rng=0)
    assert t.users[0] == 1 and np.isfinite(t.estimate).all()
    for col in ("ci_low", "ci_high", "naive_ci_low", "naive_ci_high", "se"):
        assert t[col].isna().all(), col
    t0 = estimate([3], 100, 10, "recall@10", n_boot=0)          # no interval asked: no warning needed
    assert t0.ci_low.isna().all()


# --- per-user estimators on too many users ---------------------------------------
@pytest.mark.parametrize("method", ["mle", "bv", "mes"])
def test_per_user_estimators_refuse_astronomic_M_up_front(method):
    counts = pd.DataFrame({"rank": [1, 5], "count": [10**12, 10**12]})
    with pytest.raises(MemoryLimitError, match="logspline"):
        estimate(counts, 1000, 10, "recall@10", method=method, n_boot=0)


def test_per_user_limit_follows_the_configured_limit(monkeypatch):
    counts = pd.DataFrame({"rank": [1, 5], "count": [600, 400]})
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", str(4 * 8 * 999))
    with pytest.raises(MemoryLimitError, match="1,000 users"):
        estimate(counts, 1000, 10, "recall@10", method="mle", n_boot=0)
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", str(4 * 8 * 1000))
    assert np.isfinite(estimate(counts, 1000, 10, "recall@10", method="mle", n_boot=0).estimate[0])


# --- popularity: intervals independent of the row order ---------------------------
def _popularity_case(M=60, k=6, seed=3):
    rng = np.random.default_rng(seed)
    return rng.random(M), rng.random((M, k)), rng.uniform(0.001, 0.02, (M, k)), np.full(M, 150)


@pytest.mark.slow
def test_popularity_interval_does_not_depend_on_user_order():
    pos, neg, q, nc = _popularity_case()
    perm = np.random.default_rng(9).permutation(pos.size)
    a = estimate(pop.popularity_log(pos, neg, q, nc), None, None, ["recall@10", "ndcg@10"], n_boot=200, rng=0)
    b = estimate(pop.popularity_log(pos[perm], neg[perm], q[perm], nc[perm]), None, None,
                 ["recall@10", "ndcg@10"], n_boot=200, rng=0)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_popularity_table_rows_shuffled_give_the_same_table():
    pos, neg, q, nc = _popularity_case(M=40, k=5, seed=5)
    M, k = neg.shape
    rows = pd.DataFrame({"user": np.repeat([f"u{i}" for i in range(M)], k + 1),
                         "item": np.arange(M * (k + 1)),
                         "score": np.column_stack([pos, neg]).ravel(),
                         "label": np.tile([1] + [0] * k, M),
                         "q": np.column_stack([np.full(M, np.nan), q]).ravel(),
                         "n_candidates": np.repeat(nc, k + 1)})
    shuffled = rows.sample(frac=1.0, random_state=1).reset_index(drop=True)
    a = estimate(rows, None, None, "recall@10", n_boot=100, rng=0)
    b = estimate(shuffled, None, None, "recall@10", n_boot=100, rng=0)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_canonical_order_is_a_permutation_of_users_and_draws():
    pos, neg, q, nc = _popularity_case(M=30, k=4, seed=8)
    log = pop.popularity_log(pos, neg, q, nc, users=np.array([f"u{29 - i:02d}" for i in range(30)]))
    c = pop.canonical_order(log)
    assert list(c.users) == sorted(log.users)
    for u in range(c.M):                       # each user keeps its own x, and its own draws in order
        i = int(np.flatnonzero(log.users == c.users[u])[0])
        assert c.x[u] == log.x[i] and c.sizes[u] == log.sizes[i]
        np.testing.assert_array_equal(c.draw_q[c.draw_user == u], log.draw_q[log.draw_user == i])
        np.testing.assert_array_equal(c.draw_above[c.draw_user == u], log.draw_above[log.draw_user == i])
    assert pop.canonical_order(c) is c         # already canonical: returned as is


# --- popularity bounds named for what they are ------------------------------------
def test_popularity_bounds_are_called_point_bounds():
    # "the range that holds without the logged negatives" missed the truth in 13 of 54 intervals
    note = COLUMN_NOTES["bound_low"]
    assert "point bounds" in note and "no sampling" in note and "holds without" not in note
