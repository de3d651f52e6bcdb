"""Recommenders for implicit feedback, global ranks and score-based sampled ranks.

Four classical models of KDD20 Appendix A (the non-deep ones), all pure numpy/scipy:

- :class:`Popularity` - score of item i = number of training users of i.
- :class:`ItemKNN` - item-based cosine neighbourhood (Deshpande & Karypis 2004).
- :class:`EASE` - Steck (2019) closed form ``B = I - P diag(1/diag(P))``,
  ``P = (X^T X + lambda I)^{-1}`` obtained by a Cholesky solve.
- :class:`ALS` - weighted matrix factorisation for implicit feedback (Hu, Koren &
  Volinsky 2008) solved with the conjugate-gradient ALS of Takacs, Pilaszy & Tikk
  (2011), vectorised over all users (or items) at once.

Every model has ``fit(train)`` (a binary user x item CSR matrix) and
``score(users)`` (dense float64 scores of the given users for all N items);
:func:`iter_score_blocks` walks the users in blocks so memory stays
O(block_size * N) (EASE additionally holds a dense N x N item matrix, which is inherent
to it; item-KNN a sparse one, one entry per co-occurring item pair).

Ranks
-----
:func:`global_ranks` gives the rank R_u in 1..N of each user's held-out item among
all N items (KDD20 Sec 2.1.1); :func:`sampled_ranks_from_scores` ranks it among n-1
sampled items (KDD20 Sec 2.1.2, Appendix A Table 5: ``binomial`` = with replacement,
``hypergeometric`` = without replacement, ``actual`` = without replacement from the
items the user never interacted with).

Tie rule (decision, tested): ``ties="pessimistic"`` (default) puts the held-out item
*after* every other item with an equal score, so R = #{j : s_j >= s_test} and a
constant scorer gets the worst rank; ``"optimistic"`` puts it before them
(R = 1 + #{j : s_j > s_test}); ``"random"`` places it uniformly among them (a random
tie-breaking order). The same rule is used for sampled ranks, so the score-based
sampled ranks follow exactly the binomial / hypergeometric laws of KDD20 Sec 2.2
given the global ranks.

Training items: with ``train_last=True`` (default, the usual protocol) a user's
training items are ranked after all other items (their scores become -inf), so R_u
counts only items the user has not interacted with above the held-out item (KDD20
Table 5 "actual (training data rank bottom)"). ``train_last=False`` keeps their
model scores (KDD20 Table 5 "binom"/"hyper" rows, where trained items crowd the
top of the list and hit ratios are lower).

Convention of the candidate set (what N means). With ``train_last=True`` the
global rank is the rank among the user's non-history items: R_u <= N_u =
N - |history_u| (the convention of RecBole's full ranking and of most
frameworks); :func:`n_candidates` gives these N_u, which are the per-user item
counts to pass to :func:`sampling_lib.correct.estimate` with sampled ranks whose
negatives exclude the history. With ``train_last=False`` every user ranks among all
N items (N_u = N; ``n_candidates(train, train_last=False)``).

References
----------
KDD20 Sec 2.1 and Appendix A (Tables 4-6); Steck (2019) "Embarrassingly Shallow
Autoencoders for Sparse Data", WWW; Hu, Koren & Volinsky (2008) "Collaborative
Filtering for Implicit Feedback Datasets", ICDM, eqs 3-4; Takacs, Pilaszy & Tikk (2011)
"Applications of the conjugate gradient method for implicit feedback collaborative
filtering", RecSys; Deshpande & Karypis (2004) "Item-based top-N recommendation
algorithms", TOIS.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import scipy.sparse as sp

from ._models import ALS, EASE, MODELS, ItemKNN, Popularity, Recommender, make_recommender, pair_scorer
from ._validation import check_int
from .ranking import TIE_RULES, apply_ties

__all__ = ["pair_scorer", 
    "Recommender",
    "Popularity",
    "ItemKNN",
    "EASE",
    "ALS",
    "MODELS",
    "make_recommender",
    "iter_score_blocks",
    "global_ranks",
    "mask_train",
    "sampled_ranks_from_scores",
    "SCORE_SCHEMES",
    "actual_shr_mean_var",
    "n_candidates",
]

SCORE_SCHEMES = ("binomial", "hypergeometric", "actual")


# --------------------------------------------------------------------------- scoring
def _default_block(N: int) -> int:
    return int(max(1, min(4096, (1 << 22) // max(N, 1))))  # ~32 MB of float64 scores


def iter_score_blocks(scorer, n_users: int | None = None, block_size: int | None = None
                      ) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield ``(start, stop, scores[start:stop])`` over users in blocks.

    ``scorer`` is a fitted :class:`Recommender` or a dense (M, N) score array.
    Each yielded block is a fresh float64 array that the caller may modify.

    Examples
    --------
    >>> [(s, e, b.shape) for s, e, b in iter_score_blocks(np.zeros((5, 3)), block_size=2)]
    [(0, 2, (2, 3)), (2, 4, (2, 3)), (4, 5, (1, 3))]
    """
    if isinstance(scorer, Recommender):
        scorer._check_fitted()
        M, N = scorer.n_users_, scorer.n_items_
        get = scorer.score
    else:
        S = np.asarray(scorer, dtype=np.float64)
        if S.ndim != 2:
            raise ValueError(f"scores must be a 2-D user x item array; got shape {S.shape}")
        M, N = S.shape
        get = lambda u: S[u[0]:u[-1] + 1].copy()  # noqa: E731
    if n_users is not None:
        M = check_int(n_users, "n_users", low=1, high=M)
    bs = _default_block(N) if block_size is None else check_int(block_size, "block_size", low=1)
    for s in range(0, M, bs):
        e = min(s + bs, M)
        yield s, e, np.array(get(np.arange(s, e)), dtype=np.float64, copy=True)


def check_scoring_inputs(scorer, train, test_items):
    """Validate (scores or fitted model, history, held-out items); returns ``(M, N, test_items, train CSR or None)``.

    Shared by the functions that rank held-out items from full scores (here
    and in :mod:`sampling_lib.popularity`): a held-out item must be an item id
    of its user's row and not one of its training items.
    """
    if isinstance(scorer, Recommender):
        scorer._check_fitted()
        M, N = scorer.n_users_, scorer.n_items_
    else:
        shp = np.shape(scorer)
        if len(shp) != 2:
            raise ValueError(f"scores must be a 2-D user x item array; got shape {shp}")
        M, N = shp
    t = np.asarray(test_items)
    if t.ndim != 1 or t.size != M or (t.size and (t.dtype.kind not in "iu" or t.min() < 0 or t.max() >= N)):
        raise ValueError(
            f"test_items must be {M} integer item ids (one per user) in 0..{N - 1}; got shape "
            f"{t.shape}, dtype {t.dtype}")
    X = None
    if train is not None:
        X = sp.csr_matrix(train)
        if X.shape != (M, N):
            raise ValueError(f"train must have shape {(M, N)} like the scores; got {X.shape}")
        X.eliminate_zeros()
        hit = np.asarray(X[np.arange(M), t.astype(np.int64)]).ravel() != 0
        if hit.any():
            u = int(np.flatnonzero(hit)[0])
            raise ValueError(
                f"test item {int(t[u])} of user {u} is also in that user's training items; "
                f"a held-out item must not be a training item")
    return M, N, t.astype(np.int64), X


def mask_train(S, X, s, e):
    """Set the scores of users s..e-1's training items to -inf in place (``S``: their score block,
    ``X``: the users x items training matrix, CSR)."""
    blk = X[s:e]
    rows = np.repeat(np.arange(e - s), np.diff(blk.indptr))
    S[rows, blk.indices] = -np.inf


def global_ranks(scorer, train, test_items, *, train_last: bool = True,
                 ties: str = "pessimistic", block_size: int | None = None, rng=None
                 ) -> np.ndarray:
    """Rank R_u in 1..N of each user's held-out item among all N items.

    ``R_u = 1 + #{j != i_u : s_uj > s_ui_u} + (tied items, by the tie rule)``; with
    ``train_last=True`` the user's training items get score -inf first, i.e. they
    are ranked after every other item (see the module docstring for the tie rule).

    Parameters
    ----------
    scorer : Recommender (fitted) or array of shape (M, N)
    train : sparse or dense (M, N) binary matrix or None
        Training interactions (needed for ``train_last=True``; a test item that is
        also a training item of its user raises ValueError).
    test_items : array of int, shape (M,)
    train_last : bool, default True
    ties : {"pessimistic", "optimistic", "random"}, default "pessimistic"
    block_size : int or None
        Users per scoring block (default: ~32 MB of scores).
    rng : None, int or Generator, keyword-only (only for ``ties="random"``)

    Returns
    -------
    ndarray of int64, shape (M,), values in 1..N

    References
    ----------
    KDD20 Sec 2.1.1 (R_u = A(u, i_u, I)), Appendix A Table 5 ("training data rank bottom").

    Examples
    --------
    >>> S = np.array([[0.9, 0.5, 0.5, 0.1], [0.2, 0.8, 0.4, 0.4]])
    >>> global_ranks(S, None, [2, 2], train_last=False).tolist()      # pessimistic ties
    [3, 3]
    >>> global_ranks(S, None, [2, 2], train_last=False, ties="optimistic").tolist()
    [2, 2]
    >>> global_ranks(S, np.array([[1, 0, 0, 0], [0, 1, 0, 0]]), [2, 2]).tolist()
    [2, 2]
    """
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {ties!r}")
    M, N, t, X = check_scoring_inputs(scorer, train, test_items)
    if train_last and X is None:
        raise ValueError("train_last=True needs the training matrix (train=None given)")
    rng = np.random.default_rng(rng)
    out = np.empty(M, dtype=np.int64)
    for s, e, S in iter_score_blocks(scorer, M, block_size):
        if np.isnan(S).any():
            raise ValueError(f"scores contain NaN (users {s}..{e - 1})")
        if train_last:
            mask_train(S, X, s, e)
        ts = S[np.arange(e - s), t[s:e]]
        greater = (S > ts[:, None]).sum(axis=1)
        equal = (S == ts[:, None]).sum(axis=1) - 1
        out[s:e] = apply_ties(greater, equal, ties, rng)
    return out


def sampled_ranks_from_scores(scorer, train, test_items, n: int, scheme: str = "binomial", *,
                              train_last: bool = True, ties: str = "pessimistic",
                              size: int | None = None, block_size: int | None = None,
                              rng=None) -> np.ndarray:
    """Rank r_u in 1..n of each held-out item among n-1 sampled items, from real scores.

    Schemes (KDD20 Appendix A, Table 5):

    - ``"binomial"``: n-1 items drawn uniformly *with replacement* from the N-1
      items other than the held-out one;
    - ``"hypergeometric"``: n-1 distinct items drawn *without replacement* from them;
    - ``"actual"``: n-1 distinct items drawn without replacement from the items the
      user never interacted with (neither training nor held-out item); needs every
      user to have at least n-1 such items (else ValueError).

    For ``binomial``/``hypergeometric`` the sampled training items keep their scores
    (``train_last=False``, KDD20 Table 5 binom/hyper) or rank last (``train_last=True``).
    Given the global ranks computed with the same ``train_last`` and tie rule, r_u - 1
    is then exactly Binomial(n-1, (R_u-1)/(N-1)) resp. Hypergeometric(N-1, R_u-1, n-1)
    (KDD20 Sec 2.2), which the tests check; ``actual`` is Hypergeometric(N_u-1, R_u-1,
    n-1) with N_u = N - |training items of u| and R_u from ``train_last=True``.

    ``size=S`` draws S independent sample sets per user while scoring every user
    block once (S repeats of the experiment at the cost of one scoring pass).

    Returns
    -------
    ndarray of int64, shape (M,) (or (size, M)), values in 1..n

    References
    ----------
    KDD20 Sec 2.1.2 (r^u = A(u, i_u, I_n)), Sec 2.2 (eq 6), Appendix A Tables 5-6.

    Examples
    --------
    >>> S = np.tile(np.arange(10.0)[::-1], (3, 1))    # item 0 best ... item 9 worst
    >>> sampled_ranks_from_scores(S, None, [0, 0, 0], 5, "hypergeometric", train_last=False, rng=0).tolist()
    [1, 1, 1]
    """
    if scheme not in SCORE_SCHEMES:
        raise ValueError(f"scheme must be one of {SCORE_SCHEMES}; got {scheme!r}")
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {ties!r}")
    M, N, t, X = check_scoring_inputs(scorer, train, test_items)
    n = check_int(n, "n", low=2, high=N)
    if (train_last or scheme == "actual") and X is None:
        raise ValueError(f"scheme={scheme!r} with train_last={train_last} needs the training matrix")
    if scheme == "actual":
        avail = N - 1 - np.diff(X.indptr)
        if avail.min() < n - 1:
            u = int(np.argmin(avail))
            raise ValueError(
                f"n={n} too large for scheme='actual': user {u} has only {int(avail[u])} items "
                f"it never interacted with (needs n-1={n - 1})")
    rng = np.random.default_rng(rng)
    reps = 1 if size is None else check_int(size, "size", low=1)
    out = np.empty((reps, M), dtype=np.int64)
    if block_size is None:
        block_size = max(1, _default_block(N) // reps)
    for s, e, S in iter_score_blocks(scorer, M, block_size):
        B = e - s
        ar = np.arange(B)
        tb = t[s:e]
        ts = S[ar, tb].copy()
        if train_last and scheme != "actual":
            mask_train(S, X, s, e)
        excl = None
        if scheme == "actual":
            blk = X[s:e]
            excl = (np.repeat(ar, np.diff(blk.indptr)), blk.indices)
        for rep in range(reps):
            if scheme == "binomial":
                idx = rng.integers(0, N - 1, size=(B, n - 1))
                idx += idx >= tb[:, None]
            else:
                keys = rng.random((B, N))
                keys[ar, tb] = np.inf
                if excl is not None:
                    keys[excl] = np.inf
                idx = (np.argpartition(keys, n - 2, axis=1)[:, : n - 1] if n - 1 < N
                       else np.argsort(keys, axis=1)[:, : n - 1])
            neg = np.take_along_axis(S, idx, axis=1)
            greater = (neg > ts[:, None]).sum(axis=1)
            equal = (neg == ts[:, None]).sum(axis=1)
            out[rep, s:e] = apply_ties(greater, equal, ties, rng)
    return out[0] if size is None else out


def n_candidates(train, *, train_last: bool = True) -> np.ndarray:
    """Number of candidates N_u of every user under the pipeline's convention.

    ``train_last=True`` (the default of :func:`global_ranks`): the user's
    training (history) items are not candidates, N_u = N - |history_u|, and
    :func:`global_ranks` returns R_u in 1..N_u. ``train_last=False``: every
    item is a candidate, N_u = N.

    Parameters
    ----------
    train : sparse or dense (M, N) binary matrix
        Training interactions (nonzero = history item).
    train_last : bool, default True, keyword-only
        The convention (same meaning as in :func:`global_ranks`).

    Returns
    -------
    ndarray of int64, shape (M,)

    Examples
    --------
    >>> X = np.array([[1, 0, 0, 1], [0, 0, 0, 0]])
    >>> n_candidates(X).tolist(), n_candidates(X, train_last=False).tolist()
    ([2, 4], [4, 4])
    """
    X = sp.csr_matrix(train)
    X.eliminate_zeros()
    M, N = X.shape
    if not train_last:
        return np.full(M, N, dtype=np.int64)
    return (N - np.diff(X.indptr)).astype(np.int64)


def actual_shr_mean_var(global_ranks, n_candidates, n: int, k) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and variance of SHR@k under ``actual`` sampling (own derivation).

    With training items ranked last, user u's held-out item has rank R_u among its
    N_u = ``n_candidates[u]`` candidates (all items minus its training items). Actual
    sampling draws n-1 of the other N_u - 1 candidates without replacement, so
    r_u - 1 ~ Hypergeometric(N_u - 1, R_u - 1, n - 1) (KDD20 Sec 2.2 applied per user)
    and, for independent users (KDD20 eqs 4-5),
    E[SHR@k] = (1/M) sum_u p_u(k), Var[SHR@k] = (1/M^2) sum_u p_u(k)(1 - p_u(k)),
    p_u(k) = Pr(r_u <= k).

    Parameters
    ----------
    global_ranks : array of int
        R_u from :func:`global_ranks` with ``train_last=True``, 1 <= R_u <= N_u.
    n_candidates : array of int
        N_u = N - (number of training items of u), N_u >= n.
    n : int
    k : int or array of int in 1..n

    Returns
    -------
    mean, var : ndarray, shape (len(k),)

    References
    ----------
    KDD20 Sec 2.2 (hypergeometric sampled rank), eqs 4-5, Appendix A Table 5 ("actual").

    Examples
    --------
    >>> m, v = actual_shr_mean_var([1, 3], [4, 4], 4, [1, 4])   # n = N_u: r = R
    >>> m.tolist(), v.tolist()
    ([0.5, 1.0], [0.0, 0.0])
    """
    from scipy import stats

    R = np.asarray(global_ranks, dtype=np.int64)
    Nu = np.asarray(n_candidates, dtype=np.int64)
    if R.ndim != 1 or R.shape != Nu.shape or R.size == 0:
        raise ValueError(f"global_ranks and n_candidates must be 1-D of equal length; got {R.shape}, {Nu.shape}")
    n = check_int(n, "n", low=2)
    if np.any(Nu < n):
        raise ValueError(f"n_candidates must be >= n={n}; got min {int(Nu.min())}")
    if np.any(R < 1) or np.any(R > Nu):
        raise ValueError("global_ranks must lie in 1..n_candidates for every user")
    k = np.atleast_1d(np.asarray(k, dtype=np.int64))
    if np.any(k < 1) or np.any(k > n):
        raise ValueError(f"k must lie in 1..n={n}; got {k.tolist()}")
    p = stats.hypergeom.cdf(k[None, :] - 1, Nu[:, None] - 1, R[:, None] - 1, n - 1)
    p = np.clip(p, 0.0, 1.0)
    M = R.size
    return p.mean(axis=0), (p * (1 - p)).sum(axis=0) / M ** 2
