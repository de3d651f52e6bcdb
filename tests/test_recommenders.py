"""Tests for sampling_lib.recommenders: models, global ranks, tie rule, sampled ranks."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from sampling_lib._validation import ConvergenceWarning
from sampling_lib.data import leave_one_out, synthetic_ratings
from sampling_lib.recommenders import (
    ALS,
    EASE,
    ItemKNN,
    Popularity,
    actual_shr_mean_var,
    global_ranks,
    iter_score_blocks,
    make_recommender,
    sampled_ranks_from_scores,
)

# ---------------------------------------------------------------- hand-made 4 x 5 case
# Scores of 4 users on 5 items, their held-out items and training items.
S4 = np.array([
    [0.9, 0.1, 0.5, 0.5, 0.3],   # test 2; tie with item 3; item 0 (train) above
    [0.2, 0.2, 0.2, 0.2, 0.2],   # test 4; all tied; items 1, 2 are training items
    [0.0, 1.0, 2.0, 3.0, 4.0],   # test 0; worst; item 4 is a training item
    [5.0, 4.0, 3.0, 2.0, 1.0],   # test 1; items 3, 4 (train) are below it anyway
])
T4 = np.array([2, 4, 0, 1])
TRAIN4 = sp.csr_matrix(np.array([
    [1, 0, 0, 0, 0],
    [0, 1, 1, 0, 0],
    [0, 0, 0, 0, 1],
    [0, 0, 0, 1, 1],
]))

# Hand-computed ranks (R = 1 + #greater (+ #equal if pessimistic)):
RANKS4 = [
    # (train_last, ties, expected ranks)
    (False, "pessimistic", [3, 5, 5, 2]),
    (False, "optimistic", [2, 1, 5, 2]),
    (True, "pessimistic", [2, 3, 4, 2]),
    (True, "optimistic", [1, 1, 4, 2]),
]


@pytest.mark.parametrize("train_last,ties,expected", RANKS4)
@pytest.mark.parametrize("block_size", [None, 1, 3])
def test_global_ranks_hand_computed(train_last, ties, expected, block_size):
    R = global_ranks(S4, TRAIN4 if train_last else None, T4, train_last=train_last,
                     ties=ties, block_size=block_size)
    assert R.tolist() == expected


def test_random_ties_lie_between_optimistic_and_pessimistic_and_are_uniform():
    R = np.array([global_ranks(S4, TRAIN4, T4, ties="random", rng=s) for s in range(400)])
    assert np.all(R >= np.array([1, 1, 4, 2])) and np.all(R <= np.array([2, 3, 4, 2]))
    # user 1: 3 tied candidates (items 0, 3, 4) -> rank uniform on {1, 2, 3}
    counts = np.bincount(R[:, 1], minlength=4)[1:]
    assert stats.chisquare(counts).pvalue > 1e-3


def test_popularity_hand_computed():
    # item counts [3, 2, 1, 1, 0]
    X = sp.csr_matrix(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 0, 0],
                                [1, 1, 0, 0, 0], [0, 0, 0, 1, 0]]))
    m = Popularity().fit(X)
    np.testing.assert_array_equal(m.item_counts_, [3, 2, 1, 1, 0])
    test = np.array([3, 1, 4, 0])
    assert global_ranks(m, X, test).tolist() == [2, 1, 3, 1]
    assert global_ranks(m, X, test, ties="optimistic").tolist() == [1, 1, 3, 1]


def test_itemknn_hand_computed():
    X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 1, 0]]))
    m = ItemKNN().fit(X)
    c01, c12 = 2 / np.sqrt(6), 1 / np.sqrt(3)   # |U0&U1|/sqrt(2*3), |U1&U2|/sqrt(3*1)
    np.testing.assert_allclose(m.sim_.toarray(), [[0, c01, 0], [c01, 0, c12], [0, c12, 0]])
    np.testing.assert_allclose(m.score([1]), [[c01, c12, c12]])
    # one neighbour per target item keeps only the largest similarity in each column
    m1 = ItemKNN(neighbors=1).fit(X)
    np.testing.assert_allclose(m1.sim_.toarray(), [[0, c01, 0], [c01, 0, c12], [0, 0, 0]])


def _ease_reference(X, lam):
    """Column-wise constrained ridge: b_{-j} = (X_{-j}^T X_{-j} + lam I)^{-1} X_{-j}^T x_j."""
    X = X.toarray()
    N = X.shape[1]
    B = np.zeros((N, N))
    for j in range(N):
        o = np.delete(np.arange(N), j)
        A = X[:, o].T @ X[:, o] + lam * np.eye(N - 1)
        B[o, j] = np.linalg.solve(A, X[:, o].T @ X[:, j])
    return B


@pytest.mark.parametrize("lam", [0.5, 10.0, 200.0])
def test_ease_equals_constrained_ridge(lam):
    X = sp.random(40, 12, density=0.3, random_state=1, format="csr")
    m = EASE(lam=lam).fit(X)
    np.testing.assert_allclose(m.B_, _ease_reference((X > 0).astype(float), lam), atol=1e-10)
    assert np.all(np.diag(m.B_) == 0)


def test_ease_float32_close():
    X = sp.random(60, 20, density=0.2, random_state=2, format="csr")
    a = EASE(lam=5.0).fit(X).B_
    b = EASE(lam=5.0, dtype=np.float32).fit(X).B_
    assert b.dtype == np.float32
    np.testing.assert_allclose(a, b, atol=1e-5)


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.mark.parametrize("threshold", [5, 50])
def test_ease_factors_with_one_blas_thread_from_its_threshold(monkeypatch, threshold):
    # OpenBLAS's multi-threaded Cholesky crashed the process from N = 15,800 (EASE's docstring):
    # from EASE_ONE_THREAD_ITEMS items on, the factorization and the inversion see one BLAS thread,
    # below it the caller's setting; the fit is the same either way
    from threadpoolctl import threadpool_limits

    import sampling_lib._models as models

    if not _blas_threads():
        pytest.skip("no BLAS library seen by threadpoolctl")
    seen = []
    real = models.sla.get_lapack_funcs

    def watched(names, arrays):
        def wrap(name, f):
            def call(*a, **k):
                seen.append((name, _blas_threads()))
                return f(*a, **k)
            return call
        return tuple(wrap(n, f) for n, f in zip(names, real(names, arrays)))

    monkeypatch.setattr(models.sla, "get_lapack_funcs", watched)
    monkeypatch.setattr(models, "EASE_ONE_THREAD_ITEMS", threshold)
    X = sp.random(40, 12, density=0.3, random_state=1, format="csr")
    with threadpool_limits(limits=2, user_api="blas"):
        ambient = _blas_threads()
        B = EASE(lam=10.0).fit(X).B_
        after = _blas_threads()
    want = [1] * len(ambient) if 12 >= threshold else ambient
    assert seen == [("potrf", want), ("potri", want)]
    assert after == ambient
    np.testing.assert_allclose(B, _ease_reference((X > 0).astype(float), 10.0), atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ease_inverts_in_the_gram_matrix_memory_in_row_blocks(monkeypatch, dtype):
    # the fit holds one N x N matrix: potrf / potri overwrite the Gram matrix, the mirrored triangle
    # and the column scaling go by row blocks (here 4 rows, so 13 items make 3 full blocks and a
    # partial one); the result is the per-column constrained ridge's, C-ordered
    import sampling_lib._models as models

    monkeypatch.setattr(models, "_BLOCK_ROWS", 4)
    grams = []
    real = models._dense_gram

    def gram(*a, **k):
        grams.append(real(*a, **k))
        return grams[-1]

    monkeypatch.setattr(models, "_dense_gram", gram)
    X = sp.random(60, 13, density=0.3, random_state=4, format="csr")
    B = EASE(lam=3.0, dtype=dtype).fit(X).B_
    assert B.flags.c_contiguous and B.dtype == dtype
    assert np.shares_memory(B, grams[0])
    np.testing.assert_allclose(B, _ease_reference((X > 0).astype(float), 3.0),
                               atol=1e-10 if dtype == np.float64 else 1e-5)


def test_spd_inverse_inplace_refuses_a_matrix_that_is_not_positive_definite():
    from sampling_lib._models import _spd_inverse_inplace

    G = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        _spd_inverse_inplace(G)


def test_als_cg_with_f_steps_equals_exact_solve():
    # CG on an f x f SPD system is exact after f steps (in exact arithmetic)
    X = sp.random(50, 30, density=0.15, random_state=3, format="csr")
    kw = dict(factors=4, iterations=1, rng=0)
    cg = ALS(cg_steps=4, **kw)
    ex = ALS(solver="exact", **kw)
    R = (X > 0).astype(float).tocsr()
    rng = np.random.default_rng(0)
    U0, V = rng.standard_normal((50, 4)), rng.standard_normal((30, 4))
    np.testing.assert_allclose(cg._update(U0, V, R), ex._update(U0, V, R), rtol=1e-6, atol=1e-8)


def test_als_loss_decreases_and_matches_definition():
    X = (sp.random(60, 40, density=0.15, random_state=4, format="csr") > 0).astype(float)
    m = ALS(factors=5, iterations=8, reg=0.5, alpha=5.0, rng=1).fit(X)
    assert m.n_iter_ == 8 and m.loss_trace_.shape == (8,)
    assert np.all(np.diff(m.loss_trace_) <= 1e-9 * m.loss_trace_[0])
    # objective recomputed densely (Hu et al. 2008 eq 3)
    P = X.toarray()
    C = 1 + 5.0 * P
    U, V = m.user_factors_, m.item_factors_
    dense = np.sum(C * (P - U @ V.T) ** 2) + 0.5 * (np.sum(U ** 2) + np.sum(V ** 2))
    assert m.loss_trace_[-1] == pytest.approx(dense, rel=1e-10)


def test_als_convergence_warning_and_tol_stop():
    X = sp.random(60, 40, density=0.15, random_state=4, format="csr")
    with pytest.warns(ConvergenceWarning, match="did not reach tol"):
        ALS(factors=5, iterations=2, tol=1e-12, rng=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = ALS(factors=5, iterations=200, tol=1e-3, rng=0).fit(X)
    assert m.converged_ and m.n_iter_ < 200


def test_models_beat_popularity_on_synthetic():
    s = leave_one_out(synthetic_ratings(600, 200, rng=7))
    hr = {}
    for name in ("popularity", "itemknn", "ease", "als"):
        params = {"rng": 0} if name == "als" else {}
        m = make_recommender(name, **params).fit(s.train)
        hr[name] = np.mean(global_ranks(m, s.train, s.test_items) <= 10)
    assert min(hr["itemknn"], hr["ease"], hr["als"]) > hr["popularity"]


def test_scores_block_invariance():
    s = leave_one_out(synthetic_ratings(120, 50, rng=2))
    m = EASE(lam=10.0).fit(s.train)
    full = np.vstack([b for _, _, b in iter_score_blocks(m, block_size=1000)])
    np.testing.assert_allclose(full, np.vstack([b for _, _, b in iter_score_blocks(m, block_size=7)]))
    np.testing.assert_array_equal(global_ranks(m, s.train, s.test_items, block_size=1),
                                  global_ranks(m, s.train, s.test_items))


def test_input_errors():
    with pytest.raises(ValueError, match="ties must be one of"):
        global_ranks(S4, TRAIN4, T4, ties="average")
    with pytest.raises(ValueError, match="test_items must be 4 integer item ids"):
        global_ranks(S4, TRAIN4, [0, 1, 2])
    with pytest.raises(ValueError, match="test item 0 of user 0 is also in that user's training"):
        global_ranks(S4, TRAIN4, [0, 4, 0, 1])
    with pytest.raises(ValueError, match="needs the training matrix"):
        global_ranks(S4, None, T4)
    with pytest.raises(ValueError, match="NaN"):
        global_ranks(np.full((4, 5), np.nan), None, T4, train_last=False)
    with pytest.raises(RuntimeError, match="not fitted"):
        EASE().score([0])
    with pytest.raises(ValueError, match="model must be one of"):
        make_recommender("svd")
    with pytest.raises(ValueError, match="lam must"):
        EASE(lam=-1.0).fit(TRAIN4)
    with pytest.raises(ValueError, match="scheme must be one of"):
        sampled_ranks_from_scores(S4, TRAIN4, T4, 3, "uniform")
    with pytest.raises(ValueError, match="too large for scheme='actual': user 1 has only 2"):
        sampled_ranks_from_scores(S4, TRAIN4, T4, 4, "actual")


# ---------------------------------------------------------------- sampled ranks
def _identical_users(M=3000, N=50, R=11):
    """M users with the same strictly ordered scores; held-out item at global rank R."""
    S = np.tile(np.arange(N, 0, -1, dtype=float), (M, 1))   # item j has rank j+1
    return S, np.full(M, R - 1)


@pytest.mark.parametrize("scheme,law", [
    ("binomial", lambda N, R, n: stats.binom(n - 1, (R - 1) / (N - 1))),            # KDD20 eq 6
    ("hypergeometric", lambda N, R, n: stats.hypergeom(N - 1, R - 1, n - 1)),       # KDD20 Sec 2.2
])
def test_sampled_ranks_follow_kdd_laws(scheme, law):
    N, R, n, M = 50, 11, 10, 3000
    S, t = _identical_users(M, N, R)
    r = sampled_ranks_from_scores(S, None, t, n, scheme, train_last=False, rng=0)
    assert r.min() >= 1 and r.max() <= n
    pmf = law(N, R, n).pmf(np.arange(n))
    obs = np.bincount(r - 1, minlength=n)
    keep = pmf * M >= 5
    exp = np.r_[pmf[keep] * M, pmf[~keep].sum() * M]
    o = np.r_[obs[keep], obs[~keep].sum()]
    assert stats.chisquare(o, exp * o.sum() / exp.sum()).pvalue > 1e-4


def test_hypergeometric_sample_has_distinct_items_full_sample_is_global_rank():
    # n = N: all other items are in the sample, so r = R exactly (with any tie rule)
    for ties in ("pessimistic", "optimistic"):
        r = sampled_ranks_from_scores(S4, TRAIN4, T4, 5, "hypergeometric", ties=ties, rng=0)
        assert r.tolist() == global_ranks(S4, TRAIN4, T4, ties=ties).tolist()
        r = sampled_ranks_from_scores(S4, None, T4, 5, "hypergeometric", train_last=False,
                                      ties=ties, rng=0)
        assert r.tolist() == global_ranks(S4, None, T4, train_last=False, ties=ties).tolist()


def test_actual_sampling_ignores_training_items():
    # training items have the top scores; 'actual' never samples them
    M, N = 500, 30
    S = np.tile(np.arange(N, 0, -1, dtype=float), (M, 1))
    train = sp.csr_matrix((np.ones(M * 5), (np.repeat(np.arange(M), 5), np.tile(np.arange(5), M))),
                          shape=(M, N))
    t = np.full(M, 5)   # best item that is not a training item
    assert np.all(sampled_ranks_from_scores(S, train, t, 10, "actual", rng=1) == 1)
    # 'actual' with n-1 = all 24 never-interacted items equals the global rank (train last)
    t2 = np.full(M, 12)
    assert np.all(sampled_ranks_from_scores(S, train, t2, 25, "actual", rng=1)
                  == global_ranks(S, train, t2))
    # without train_last, binomial sampling sees the 5 training items above the test item
    r = sampled_ranks_from_scores(S, train, t, 10, "binomial", train_last=False, rng=1)
    assert r.mean() > 1.5


def test_actual_matches_hypergeometric_on_non_interacted_items():
    s = leave_one_out(synthetic_ratings(800, 60, mean_interactions=10.0, rng=3))
    m = Popularity().fit(s.train)
    n = 8
    R = global_ranks(m, s.train, s.test_items)               # train last: rank among N_u
    Nu = s.n_items - np.diff(s.train.indptr)
    expected = 1 + (n - 1) * (R - 1) / (Nu - 1)       # hypergeometric mean + 1
    reps = [sampled_ranks_from_scores(m, s.train, s.test_items, n, "actual", rng=k) for k in range(5)]
    r = np.concatenate(reps)
    z = (r.mean() - np.tile(expected, 5).mean()) / (r.std() / np.sqrt(r.size))
    assert abs(z) < 4


def test_size_draws_independent_repeats_with_one_scoring_pass():
    S, t = _identical_users(M=200, N=50, R=11)
    r = sampled_ranks_from_scores(S, None, t, 10, "hypergeometric", train_last=False, size=30, rng=0)
    assert r.shape == (30, 200) and r.min() >= 1 and r.max() <= 10
    assert not np.all(r[0] == r[1])
    # the single-draw call equals the first repeat of the same stream
    r1 = sampled_ranks_from_scores(S, None, t, 10, "hypergeometric", train_last=False, size=1, rng=0)
    r0 = sampled_ranks_from_scores(S, None, t, 10, "hypergeometric", train_last=False, rng=0)
    np.testing.assert_array_equal(r1[0], r0)


# exact SHR@k moments under actual sampling vs brute-force enumeration of all samples
@pytest.mark.parametrize("R,Nu,n", [(1, 5, 3), (3, 5, 3), (5, 6, 4), (2, 4, 4)])
def test_actual_shr_mean_var_enumeration(R, Nu, n):
    from itertools import combinations

    others = [j for j in range(1, Nu + 1) if j != R]      # candidate ranks other than the held-out
    samples = list(combinations(others, n - 1))
    ks = np.arange(1, n + 1)
    p = np.array([np.mean([1 + sum(j < R for j in smp) <= k for smp in samples]) for k in ks])
    mean, var = actual_shr_mean_var([R, R], [Nu, Nu], n, ks)
    np.testing.assert_allclose(mean, p, atol=1e-12)
    np.testing.assert_allclose(var, 2 * p * (1 - p) / 4, atol=1e-12)


def test_actual_shr_mean_var_errors():
    with pytest.raises(ValueError, match="n_candidates must be >= n=5"):
        actual_shr_mean_var([1], [4], 5, [1])
    with pytest.raises(ValueError, match="1..n_candidates"):
        actual_shr_mean_var([5], [4], 3, [1])
    with pytest.raises(ValueError, match="k must lie in 1..n=3"):
        actual_shr_mean_var([1], [4], 3, [4])


@pytest.mark.parametrize("max_elems", [50, 1000, 1 << 26])
def test_dense_gram_blocks(max_elems):
    from sampling_lib._models import _dense_gram

    X = sp.random(200, 37, density=0.1, format="csr", random_state=3)
    G = _dense_gram(X, np.float32, max_elems=max_elems)
    assert G.dtype == np.float32 and G.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(G, (X.T @ X).toarray(), rtol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 8, 30])
def test_itemknn_sparse_similarity_and_scores_equal_the_dense_form(k):
    """The sparse similarity (k-th largest per column from the sorted co-occurrences) and the
    sparse scores are bit-identical to the dense computation: G = X^T X, S = (G inv_i) inv_j,
    zero diagonal, np.partition cut per column, X_u @ S; with an item without users, columns with
    fewer than k positive entries, and ties."""
    from sampling_lib._models import _dense_gram

    rng = np.random.default_rng(k)
    X = sp.random(120, 40, density=0.03 if k < 30 else 0.1, format="csr", random_state=rng)
    X.data[:] = 1.0
    X = X.tolil()
    X[:, 7] = 0                                           # an item without training users
    X = X.tocsr()
    X.eliminate_zeros()
    S = _dense_gram(X)
    inv = np.divide(1.0, np.sqrt(np.diag(S).copy()), out=np.zeros(40), where=np.diag(S) > 0)
    S *= inv[:, None]
    S *= inv[None, :]
    np.fill_diagonal(S, 0.0)
    cut = np.partition(S, 40 - k, axis=0)[40 - k]
    assert (cut == 0).any() and (cut > 0).any()
    S[S < cut[None, :]] = 0.0
    m = ItemKNN(neighbors=k).fit(X)
    np.testing.assert_array_equal(m.sim_.toarray(), S)
    np.testing.assert_array_equal(m.score(np.arange(120)), X @ S)
