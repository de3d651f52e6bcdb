"""Ground truth and simulations from a model's full scores, and the rank-mass curve with its bounds.

From all scores, :func:`popularity_truth` gives every user's R_u, Q_u, N_u
and sum_{A_u} 1/q_j; ``simulate_popularity_log`` / ``simulate_popularity_ranks``
draw popularity-sampled evaluations of the same model; the rank-mass curve
rho(Q) (eq 5, :class:`RankMassCurve`, ``exact_rank_mass_curve``) and the rank
bounds k_min(Q), k_max(Q) (``mass_rank_bounds``, ``user_mass_rank_bounds``)
and ``bernstein_tolerance`` back the checks of notebook 11.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from .._validation import check_float, check_int
from ._logs import check_ties, popularity_log, ranked_above
from ._sampler import draw_block_size, draw_items
from ._weights import candidate_totals, exclusion_matrix, weights_array

__all__ = [
    "PopularityTruth",
    "popularity_truth",
    "simulate_popularity_log",
    "simulate_popularity_ranks",
    "RankMassCurve",
    "mass_grid",
    "exact_rank_mass_curve",
    "mass_rank_bounds",
    "user_mass_rank_bounds",
    "bernstein_tolerance",
]


# ----------------------------------------------------------------------------
# ground truth and simulation from real scores
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PopularityTruth:
    """Exact per-user quantities of a model under popularity sampling (from all scores).

    Attributes
    ----------
    ranks : ndarray of int
        R_u = 1 + |A_u|, the rank among the user's candidates (+ held-out item).
    mass_above : ndarray
        Q_u (eq 2).
    n_candidates : ndarray of int
        N_u - 1, the number of candidates.
    inv_q_above : ndarray
        sum_{j in A_u} 1/q_j (gives Var of the HT estimate, eq 4).
    max_inv_q_above : ndarray
        max_{j in A_u} 1/q_j (0 when A_u is empty): the largest term of eq 4
        times n - 1 (bounds a single draw's contribution).
    """

    ranks: np.ndarray
    mass_above: np.ndarray
    n_candidates: np.ndarray
    inv_q_above: np.ndarray
    max_inv_q_above: np.ndarray

    def ht_variance(self, n):
        """Var[A_hat_u] = (sum_{A_u} 1/q_j - |A_u|^2) / (n - 1) for sample size n."""
        A = self.ranks - 1.0
        return (self.inv_q_above - A * A) / (check_int(n, "n", low=2) - 1)


def _prepare_scores(scorer, train, test_items, item_weights):
    from ..recommenders import check_scoring_inputs

    M, N, t, X = check_scoring_inputs(scorer, train, test_items)
    w, _ = weights_array(item_weights, N)
    E = exclusion_matrix(np.arange(M), X if X is not None else None, pd.RangeIndex(N), t)
    total, n_cand = candidate_totals(w, E)
    if np.any(n_cand < 1):
        u = int(np.argmin(n_cand))
        raise ValueError(f"user {u} has no candidate negatives (positive weight, not a training item)")
    return M, N, t, w, E, total, n_cand


def _score_blocks(scorer, M, block_size):
    from ..recommenders import iter_score_blocks

    return iter_score_blocks(scorer, M, block_size)


def popularity_truth(scorer, train, test_items, item_weights, *, ties="pessimistic", block_size=None):
    """R_u, Q_u, N_u and sum_{A_u} 1/q_j of every user, from the full scores.

    Parameters
    ----------
    scorer : Recommender (fitted) or array (M, N)
    train : sparse or dense (M, N) or None
        History: excluded from the candidates (None: nothing excluded but
        the held-out item).
    test_items : array of int, shape (M,)
    item_weights : array_like, shape (N,)
        Weights over the N item columns.
    ties : {"pessimistic", "optimistic"}, keyword-only

    Returns
    -------
    PopularityTruth

    Examples
    --------
    >>> S = np.array([[0.9, 0.5, 0.1, 0.7]])
    >>> t = popularity_truth(S, None, [1], [1.0, 1.0, 2.0, 4.0])
    >>> t.ranks.tolist(), t.mass_above.round(4).tolist(), t.n_candidates.tolist()
    ([3], [0.7143], [3])
    """
    ties = check_ties(ties)
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    R = np.empty(M, np.int64)
    Q = np.empty(M)
    V = np.empty(M)
    Vmax = np.empty(M)
    inv_w = np.divide(1.0, w, out=np.zeros_like(w), where=w > 0)
    for s, e, S in _score_blocks(scorer, M, block_size):
        if np.isnan(S).any():
            raise ValueError(f"scores contain NaN (users {s}..{e - 1})")
        ts = S[np.arange(e - s), t[s:e]]
        cand = np.broadcast_to(w > 0, S.shape).copy()
        blk = E[s:e]
        cand[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = False
        A = ranked_above(S, ts[:, None], ties) & cand
        R[s:e] = 1 + A.sum(axis=1)
        Q[s:e] = np.minimum((A @ w) / total[s:e], 1.0)
        V[s:e] = (A @ inv_w) * total[s:e]
        Vmax[s:e] = np.where(A, inv_w, 0.0).max(axis=1) * total[s:e]
    return PopularityTruth(R, Q, n_cand, V, Vmax)


def _sim_blocks(scorer, train, test_items, item_weights, n, replace, ties, rng, block_size, size):
    """Yield per block and repeat: (s, e, rep, pos scores, neg scores, neg q, n_cand)."""
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    k = check_int(n, "n", low=2) - 1
    if not replace and np.any(n_cand < k):
        u = int(np.argmin(n_cand))
        raise ValueError(f"n={n} too large for sampling without replacement: user {u} has only "
                         f"{int(n_cand[u])} candidates (needs n-1={k})")
    rng = np.random.default_rng(rng)
    bs = block_size or draw_block_size(N, 2)
    for s, e, S in _score_blocks(scorer, M, bs):
        if np.isnan(S).any():
            raise ValueError(f"scores contain NaN (users {s}..{e - 1})")
        ar = np.arange(e - s)
        ts = S[ar, t[s:e]]
        Wb = np.tile(w, (e - s, 1))
        blk = E[s:e]
        Wb[np.repeat(ar, np.diff(blk.indptr)), blk.indices] = 0.0
        for rep in range(size):
            idx = draw_items(Wb, k, replace, rng)
            yield (s, e, rep, ts, np.take_along_axis(S, idx, axis=1),
                   np.take_along_axis(Wb, idx, axis=1) / total[s:e, None], n_cand[s:e], M, w, E)


def simulate_popularity_log(scorer, train, test_items, item_weights, n, *, replace=True,
                            ties="pessimistic", block_size=None, rng=None):
    """One popularity-sampled evaluation from real scores, with every draw logged.

    Each user draws n - 1 negatives from its candidates with probabilities
    q (eq 1; history = ``train`` excluded) and the held-out item is ranked
    among them with the model's scores: what a logged ``popN`` evaluation
    records. The returned log carries the item weights and exclusions, so
    :func:`sampling_lib.estimators.popularity_bounds` applies.

    Returns
    -------
    PopularityLog

    Examples
    --------
    >>> S = np.tile(np.arange(6.0)[::-1], (2, 1))       # item 0 best ... item 5 worst
    >>> log = simulate_popularity_log(S, None, [0, 5], [1, 1, 1, 1, 1, 1.0], 4, rng=0)
    >>> log.x.tolist(), log.n_candidates.tolist()       # the best item is never beaten
    ([0, 3], [5, 5])
    """
    if replace not in (True, False):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    ties = check_ties(ties)
    parts = []
    meta = None
    for s, e, _, ts, neg, q, nc, M, w, E in _sim_blocks(scorer, train, test_items, item_weights, n,
                                                         replace, ties, rng, block_size, 1):
        parts.append((ts, neg, q, nc))
        meta = (w, E)
    ts, neg, q, nc = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return popularity_log(ts, neg, q, nc, ties=ties, item_weights=meta[0], excluded=meta[1])


def simulate_popularity_ranks(scorer, train, test_items, item_weights, n, *, size=1, replace=True,
                              ties="pessimistic", block_size=None, rng=None):
    """Repeated popularity-sampled evaluations from real scores: X_u and the HT estimate only.

    Every user block is scored once and ``size`` independent sets of n - 1
    negatives are drawn for it (for Monte Carlo checks of eqs 3-4).

    Returns
    -------
    x : ndarray of int, shape (size, M)
        X_u = r_u - 1 per repeat.
    ht : ndarray, shape (size, M)
        A_hat_u (eq 4) per repeat.

    Examples
    --------
    >>> S = np.tile(np.arange(6.0)[::-1], (2, 1))
    >>> x, ht = simulate_popularity_ranks(S, None, [0, 5], np.ones(6), 4, size=3, rng=0)
    >>> x.shape, x[:, 0].tolist(), ht[:, 1].tolist()   # all 5 candidates above user 1's item
    ((3, 2), [0, 0, 0], [5.0, 5.0, 5.0])
    """
    ties = check_ties(ties)
    size = check_int(size, "size", low=1)
    cur = None
    for s, e, rep, ts, neg, q, nc, M, w, E in _sim_blocks(scorer, train, test_items, item_weights, n,
                                                           replace, ties, rng, block_size, size):
        if cur is None:
            cur = (np.empty((size, M), np.int64), np.empty((size, M)))
        above = ranked_above(neg, ts[:, None], ties)
        cur[0][rep, s:e] = above.sum(axis=1)
        cur[1][rep, s:e] = (above / q).sum(axis=1) / neg.shape[1]
    return cur


# ----------------------------------------------------------------------------
# the rank-mass curve (its estimation from the logs: sampling_lib.estimators.rank_mass_curve)
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RankMassCurve:
    """The average fraction rho(Q) of candidates whose q-mass position is below Q (eq 5).

    ``rho`` is increasing from rho(0) = 0 to rho(1) = 1; rho(Q) = Q under
    uniform sampling. :meth:`mass_of` is its inverse G: the q-mass above a
    held-out item with a fraction rho of the candidates above it.

    Attributes
    ----------
    mass : ndarray
        Grid of Q in [0, 1] (denser near 0).
    rho : ndarray
        rho(Q) on the grid.
    draws : int
        Logged negatives used (0 for :meth:`uniform`).
    """

    mass: np.ndarray
    rho: np.ndarray
    draws: int = 0

    @classmethod
    def uniform(cls):
        """rho(Q) = Q: the curve of uniform sampling ("pretend uniform")."""
        g = np.linspace(0.0, 1.0, 3)
        return cls(g, g.copy(), 0)

    def rho_of(self, Q):
        """rho(Q) by linear interpolation."""
        return np.interp(np.asarray(Q, float), self.mass, self.rho)

    def mass_of(self, rho):
        """G(rho) = rho^{-1}: the q-mass above a fraction rho of the candidates."""
        return np.interp(np.asarray(rho, float), self.rho, self.mass)


def mass_grid(size):
    """The grid of Q in [0, 1] of the rank-mass curves: uniform and geometric parts (denser near 0)."""
    g = np.concatenate([np.linspace(0.0, 1.0, size), np.geomspace(1e-7, 1.0, size)])
    return np.unique(np.concatenate([[0.0], g, [1.0]]))


def exact_rank_mass_curve(scorer, train, test_items, item_weights, *, grid_size=1025, block_size=None):
    """The average rank-mass curve rho(Q) = mean_u rho_u(Q), computed from all the scores.

    For user u the candidates are ordered by score (descending; equal scores
    by item index) and rho_u is the piecewise-linear curve through the points
    (mass of the first k candidates, k / (N_u - 1)), k = 0..N_u - 1: the
    exact version of what :func:`sampling_lib.estimators.rank_mass_curve` estimates from the logged
    negatives. A held-out item with q-mass Q_u above it has
    R_u - 1 = (N_u - 1) rho_u(Q_u) (with the pessimistic tie rule).

    Returns
    -------
    RankMassCurve

    Examples
    --------
    >>> S = np.array([[0.9, 0.1, 0.5, 0.7]])
    >>> c = exact_rank_mass_curve(S, None, [1], [2.0, 1.0, 1.0, 0.0])    # candidates 0, then 2
    >>> c.rho_of([0.25, 0.5, 1.0]).tolist()            # item 0 holds mass 2/3, half the candidates
    [0.1875, 0.375, 1.0]
    """
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    mass = mass_grid(check_int(grid_size, "grid_size", low=3))
    rho = np.zeros(mass.size)
    for s, e, S in _score_blocks(scorer, M, block_size):
        cand = np.broadcast_to(w > 0, S.shape).copy()
        blk = E[s:e]
        cand[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = False
        for b in range(e - s):
            j = np.flatnonzero(cand[b])
            order = j[np.argsort(-S[b, j], kind="stable")]
            P = np.concatenate([[0.0], np.cumsum(w[order]) / total[s + b]])
            P[-1] = 1.0
            rho += np.interp(mass, P, np.arange(P.size) / (P.size - 1))
    return RankMassCurve(mass, rho / M, 0)


def mass_rank_bounds(candidate_q, Q):
    """Sharp bounds on |A| for a set A of candidates with q-mass Q (no logs).

    k_min(Q) = min{k : mass of the k most probable candidates >= Q} and
    k_max(Q) = max{k : mass of the k least probable candidates <= Q}; every
    set with mass Q has between k_min and k_max items, and both are attained
    by the models ranking the most (resp. least) popular items first.

    Parameters
    ----------
    candidate_q : array_like
        q_j of one user's candidates (sum 1).
    Q : array_like
        Masses in [0, 1].

    Returns
    -------
    k_min, k_max : ndarray of int

    Examples
    --------
    >>> mass_rank_bounds([0.5, 0.25, 0.125, 0.125], [0.0, 0.5, 0.75, 1.0])
    (array([0, 1, 2, 4]), array([0, 3, 3, 4]))
    """
    q = np.asarray(candidate_q, float)
    Q = np.asarray(Q, float)
    desc = np.sort(q)[::-1]
    P = np.concatenate([[0.0], np.cumsum(desc)])
    B = np.concatenate([[0.0], np.cumsum(desc[::-1])])
    eps = 1e-12 * max(1.0, float(P[-1]))
    kmin = np.searchsorted(P, Q - eps, side="left")
    kmax = np.searchsorted(B, Q + eps, side="right") - 1
    return np.minimum(kmin, q.size), np.clip(kmax, 0, q.size)


def user_mass_rank_bounds(train, test_items, item_weights, mass_above):
    """Per user, the no-log bounds k_min(Q_u) <= R_u - 1 <= k_max(Q_u) of :func:`mass_rank_bounds`.

    Parameters
    ----------
    train : sparse or dense (M, N) or None
        History (excluded from the candidates).
    test_items : array of int, shape (M,)
    item_weights : array_like, shape (N,)
    mass_above : array_like, shape (M,)
        Q_u of each user (e.g. :attr:`PopularityTruth.mass_above`).

    Returns
    -------
    k_min, k_max : ndarray of int, shape (M,)

    Examples
    --------
    >>> user_mass_rank_bounds(None, [0], [1.0, 4.0, 2.0, 2.0], [0.5])    # candidates q = .5, .25, .25
    (array([1]), array([2]))
    """
    t = np.asarray(test_items)
    M = t.size
    w, _ = weights_array(item_weights)
    N = w.size
    X = None if train is None else sparse.csr_matrix(train)
    if X is not None and X.shape != (M, N):
        raise ValueError(f"train must have shape (len(test_items), len(item_weights)) = {(M, N)}; got {X.shape}")
    Q = np.asarray(mass_above, float)
    if Q.shape != (M,) or np.any(~((Q >= 0) & (Q <= 1))):
        raise ValueError(f"mass_above must hold {M} values in [0, 1]; got shape {Q.shape}")
    E = exclusion_matrix(np.arange(M), X, pd.RangeIndex(N), t)
    kmin = np.empty(M, np.int64)
    kmax = np.empty(M, np.int64)
    for u in range(M):
        keep = w > 0
        keep[E.indices[E.indptr[u]:E.indptr[u + 1]]] = False
        cq = w[keep] / w[keep].sum()
        a, b = mass_rank_bounds(cq, Q[u:u + 1])
        kmin[u], kmax[u] = a[0], b[0]
    return kmin, kmax


def bernstein_tolerance(variance, bound, pvalue=1e-4):
    """Deviation t with P(|S - E S| >= t) <= pvalue for any sum S of independent terms.

    Bernstein's inequality: if every centred term is bounded by ``bound`` in
    absolute value and Var S = ``variance``, then
    P(|S - E S| >= t) <= 2 exp(-(t^2 / 2) / (variance + bound t / 3)); the
    returned t solves 2 exp(...) = pvalue. Unlike a normal z-score it stays
    valid for heavy-tailed terms (e.g. the 1/q_j of rare items in eq 4): it
    grows with ``bound``.

    Examples
    --------
    >>> round(bernstein_tolerance(1.0, 0.0, 1e-4) / 1.0, 3)    # bounded-free limit: sqrt(2 log(2/p))
    4.45
    """
    v = check_float(variance, "variance", low=0.0)
    b = check_float(bound, "bound", low=0.0)
    p = check_float(pvalue, "pvalue", 0.0, 1.0, low_open=True, high_open=True)
    L = math.log(2.0 / p)
    return L * b / 3.0 + math.sqrt((L * b / 3.0) ** 2 + 2.0 * L * v)
