"""BV and MN with per-user item counts N_u: every group of users sharing an N_u at once.

BV (TORS24 eqs 8-10) and MN (eq 42) have no per-user likelihood: with per-user item counts they are fitted
per group of users with equal N_u (:meth:`sampling_lib.estimators.Estimator._groups`) and the groups
averaged with their user shares. A group's data enter only through its sampled-rank distribution, so the
rest is computed once per group in one pass over the groups' kernels
(:func:`sampling_lib.kernels.kernels_ascending`): the data-free solutions of a fixed prior
(:func:`linear_group_solutions`, shared by an evaluation's models), or, for a fitted prior, each group's
sampled metrics with the estimates' gradient in the prior (:func:`linear_groups_prior_fit`, for the
one-step bootstrap of MN; BV's replicates are solved at nodes in log N, :mod:`sampling_lib.estimators.
_linear_nodes`). The single-N estimators and their Gram matrices are in :mod:`sampling_lib.estimators._linear`.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, eqs 8-10, 42 and Sec 8.1.5.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .._threads import map_parts
from .._validation import check_float, check_int, check_scheme
from ..kernels import kernels_ascending
from ._linear import _linear_gram, _solve_sym

__all__ = ["GroupSolution", "HeadWeights", "group_prior", "linear_group_solutions", "PriorGroupsFit",
           "linear_groups_prior_fit", "keep_last", "GROUP_CACHE_BYTES", "GROUP_THREADS_MIN"]


@dataclass(frozen=True)
class GroupSolution:
    """BV or MN of one group of users sharing N_u = N, for metrics on ranks 1..H_b.

    ``Z = G^{-1} K[:H_b]^T`` (n, H_b), H_b = min(H, N), and ``head`` = the prior on ranks
    1..H_b. With the group's sampled-rank distribution P~ and metric values F on ranks 1..H_b:

    * the weights of ranks 1..H_b are ``head * (Z^T P~)`` (w = D K G^{-1} P~, G symmetric);
    * the sampled metric is ``Z @ (head * F)`` (x = G^{-1} K^T D F, F = 0 beyond H_b).
    """

    N: int
    Z: np.ndarray
    head: np.ndarray


class HeadWeights:
    """A length-N weight vector whose first H entries are computed, the rest on demand.

    ``head(H')`` for H' <= H returns the computed entries (all a top-K metric with K <= H
    needs, module docstring of :mod:`sampling_lib.estimators`); ``full()`` (or ``np.asarray``)
    calls ``full_fn`` once for the length-N vector, whose first H entries equal the head to
    rounding.

    Examples
    --------
    >>> w = HeadWeights(np.array([0.5, 0.25]), 4, lambda: np.array([0.5, 0.25, 0.125, 0.125]))
    >>> w.head(1).tolist(), w.shape, np.asarray(w).tolist()
    ([0.5], (4,), [0.5, 0.25, 0.125, 0.125])
    """

    __slots__ = ("_head", "N", "_full_fn", "_full")

    def __init__(self, head, N, full_fn):
        self._head = np.asarray(head, dtype=float)
        self.N = int(N)
        self._full_fn = full_fn
        self._full = None

    @property
    def shape(self):
        return (self.N,)

    @property
    def size(self):
        return self.N

    def head(self, H):
        """The weights of ranks 1..H."""
        H = check_int(H, "H", low=1)
        if H > self.N:
            raise ValueError(f"H must lie in 1..N={self.N}; got H={H}")
        if H <= self._head.size:
            return self._head[:H].copy()
        return self.full()[:H].copy()

    def full(self):
        """The length-N weight vector (computed on the first call)."""
        if self._full is None:
            self._full = np.asarray(self._full_fn(), dtype=float)
            self._full.setflags(write=False)
        return self._full

    def __array__(self, dtype=None, copy=None):
        a = self.full().copy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return f"HeadWeights(N={self.N}, head={self._head.size})"


def group_prior(prior, N):
    """A prior over ranks 1..max N_u restricted to a group's ranks 1..N and renormalised.

    Examples
    --------
    >>> group_prior([0.5, 0.25, 0.25], 2).tolist()
    [0.6666666666666666, 0.3333333333333333]
    """
    p = np.asarray(prior, dtype=float)[:N]
    total = p.sum()
    if not total > 0:
        raise ValueError(f"prior has no mass on ranks 1..{N}, the candidates of a group of users with N_u <= {N}")
    return p / total


#: Largest total size of the group solutions kept for the next call (the same evaluation's next
#: model shares its users' N_u and so every group's Z).
GROUP_CACHE_BYTES = 256 << 20
_GROUP_CACHE = {}


def keep_last(cache, key, solutions, nbytes):
    """Keep ``solutions`` (a dict of group solutions, ``nbytes`` in all) as the only entry of ``cache``
    under ``key`` when at most :data:`GROUP_CACHE_BYTES` (the next model of an evaluation asks for the
    same groups); ``key`` None keeps nothing. Returns ``solutions``."""
    if key is not None:
        cache.clear()
        if nbytes <= GROUP_CACHE_BYTES:
            cache[key] = solutions
    return solutions


def linear_group_solutions(kind, n_items, n, H, *, scheme="binomial", gamma=0.01, M=None, prior=None):
    """BV or MN solutions for every distinct item count in ``n_items`` (a dict N_b -> :class:`GroupSolution`).

    The estimators without a per-user-N likelihood are fitted per group of users with equal N_u
    (BV: TORS24 eqs 8-10; MN: TORS24 eq 42, with the evaluation's M), and the data enter a
    group's fit only through its sampled-rank distribution P~ (w = D K G^{-1} P~). So
    everything else, ``Z = G^{-1} K[:H]^T``, is computed once per group: the kernels in
    increasing N (:func:`sampling_lib.kernels.kernels_ascending`), the Gram matrix of
    :func:`bv` / :func:`mn` (dense products), and one symmetric solve with H right-hand
    sides. With the uniform prior the solutions of the last call are reused when
    the next asks for the same groups (the next model of an evaluation), up to
    :data:`GROUP_CACHE_BYTES`.

    Parameters
    ----------
    kind : {"bv", "mn"}
    n_items : array_like of int
        The groups' item counts N_b (>= n).
    n : int
        Sample-set size.
    H : int
        Metrics are 0 beyond rank H (top-K metrics with K <= H).
    scheme : {"binomial", "hypergeometric"}
    gamma : float, BV only
    M : int, MN only
        Users in MN's variance term.
    prior : array_like or None
        P(R) on ranks 1..max N_b, restricted to each group's ranks and renormalised;
        None is uniform on 1..N_b.

    Returns
    -------
    dict of int to GroupSolution

    Examples
    --------
    >>> from sampling_lib.estimators import bv_sampled_metric
    >>> from sampling_lib.metrics import metric_values
    >>> s = linear_group_solutions("bv", [150, 120], 10, 5)[150]
    >>> F = metric_values("recall@5", 150)
    >>> bool(np.allclose(s.Z @ (s.head * F[:5]), bv_sampled_metric(F, 150, 10)))
    True
    """
    if kind not in ("bv", "mn"):
        raise ValueError(f"kind must be 'bv' or 'mn'; got {kind!r}")
    n = check_int(n, "n", low=2)
    H = check_int(H, "H", low=1)
    scheme = check_scheme(scheme)
    Ns = np.unique(np.asarray(n_items, dtype=np.int64))
    extra = check_float(gamma, "gamma", 0.0, 1.0) if kind == "bv" else check_int(M, "M", low=1)
    key = None
    if prior is None:
        key = (kind, n, H, scheme, float(extra), hashlib.blake2b(Ns.tobytes(), digest_size=16).digest())
        if key in _GROUP_CACHE:
            return _GROUP_CACHE[key]
    else:
        prior = np.asarray(prior, dtype=float)
    out = {}
    for N, K in kernels_ascending(Ns, n, scheme):
        p = np.full(N, 1.0 / N) if prior is None else group_prior(prior, N)
        # dense Gram products (BLAS on the whole kernel: 3x faster here than the row windows of
        # _weighted_gram for one-off kernels, and exact where the windows skip entries < 1e-17)
        KtK = K.T @ K
        Ks = None if prior is None else K * np.sqrt(p)[:, None]
        KDK = KtK * p[0] if prior is None else Ks.T @ Ks
        G = _linear_gram(kind, K, KDK, (extra, K.T @ p) if kind == "bv" else extra, KtK=KtK)
        Hb = min(H, N)
        out[N] = GroupSolution(N, _solve_sym(G, np.ascontiguousarray(K[:Hb].T), kind), p[:Hb].copy())
    return keep_last(_GROUP_CACHE, key, out, sum(s.Z.nbytes + s.head.nbytes for s in out.values()))


@dataclass(frozen=True)
class PriorGroupsFit:
    """BV or MN with a fitted prior, per group of N_u (:func:`linear_groups_prior_fit`).

    Attributes
    ----------
    head : ndarray, shape (H,)
        The weights of ranks 1..H (the groups' weights averaged with their user shares).
    X : ndarray, shape (cells, m)
        Each cell's sampled metrics under its group's restricted prior: the estimate is
        (1/M) sum_cells count * X.
    gradient : ndarray, shape (max N_b, m), or None
        d estimate / d prior_R at the fitted prior (the prior as given, before each group
        restricts and renormalises it); None when not asked for.
    """

    head: np.ndarray
    X: np.ndarray
    gradient: np.ndarray


def linear_groups_prior_fit(kind, groups, ranks, counts, n, F, prior, *, scheme="binomial", gamma=0.01, M=None,
                            gradient=True):
    """BV or MN with a fitted prior per group of N_u in one pass, with the estimates' gradient in the prior.

    Group b (users with N_u = N_b, sampled-rank distribution P~_b, user share s_b) uses the prior
    restricted to ranks 1..N_b, p = prior[:N_b] / S_b. Its sampled metric is x = G(p)^{-1} K^T (p * F)
    (BV: TORS24 eqs 8-10, G = (1 - gamma) K^T D_p K + gamma diag(K^T p); MN: eq 42,
    G = K^T D_p K - K^T K / M + diag(K^T 1) / M) and its estimate t_b = P~_b . x. Both G and
    K^T (p * F) are linear in p, so with lam = G^{-1} P~_b (G symmetric)

        d t_b / d p_R = lam . (F_R k_R - (d G / d p_R) x)
                      = (K lam)_R F_R - (1 - gamma) (K lam)_R (K x)_R - gamma (K (lam * x))_R   (BV)
                      = (K lam)_R F_R - (K lam)_R (K x)_R                                       (MN)

    (k_R the kernel's row R), and the renormalisation gives d t_b / d prior_R = (g_R - p . g) / S_b
    for R <= N_b. The gradient of the estimate sum_b s_b t_b is what the one-step bootstrap of
    :class:`sampling_lib.estimators._bootstrap.FittedEstimator` needs: a replicate's estimate with a
    refitted prior pi* is, to first order in pi* - prior, the estimate at the fitted prior on the
    replicate's counts plus gradient . (pi* - prior). ``tests/test_peruser.py`` checks the gradient
    against finite differences and the replicates against refits.

    One pass over the groups' kernels (:func:`sampling_lib.kernels.kernels_ascending`): the Gram
    matrix, one symmetric solve for [x_1..x_m, lam], and three kernel products.

    Parameters
    ----------
    kind : {"bv", "mn"}
    groups : list of (N_b, boolean selection over the cells)
    ranks, counts : ndarray of int
        Each cell's sampled rank (1..n) and number of users.
    n : int
    F : ndarray, shape (H, m)
        Metric values on ranks 1..H (0 beyond H).
    prior : array_like
        P(R) on ranks 1..max N_b.
    scheme : {"binomial", "hypergeometric"}
    gamma : float, BV only
    M : int, MN only
        Users in MN's variance term (the evaluation's, in every group).
    gradient : bool, default True
        Compute the gradient (False: ``gradient`` is None; the three kernel products are skipped).

    Returns
    -------
    PriorGroupsFit

    References
    ----------
    TORS24 eqs 8-10, 42 and Sec 8.1.5 (the fitted priors).
    """
    if kind not in ("bv", "mn"):
        raise ValueError(f"kind must be 'bv' or 'mn'; got {kind!r}")
    extra = check_float(gamma, "gamma", 0.0, 1.0) if kind == "bv" else check_int(M, "M", low=1)
    prior = np.asarray(prior, dtype=float)
    H, m = F.shape
    sel_of = dict(groups)
    Nmax = max(sel_of)
    X = np.zeros((ranks.size, m))
    Ns = np.sort(np.fromiter(sel_of, dtype=np.int64))
    # two halves of the groups (about equal work, the sum of N_b) on two threads: the products and
    # solves run in BLAS / LAPACK, which release the GIL; each half steps its own kernels
    cut = int(np.searchsorted(np.cumsum(Ns), Ns.sum() / 2)) + 1 if Ns.size >= GROUP_THREADS_MIN else Ns.size
    parts = [Ns[:cut], Ns[cut:]] if cut < Ns.size else [Ns]
    args = (kind, extra, sel_of, ranks, counts, n, F, prior, scheme, X, Nmax, gradient)
    outs = map_parts(lambda part: _prior_groups_pass(part, *args), parts, "sampling-lib-groups")
    return PriorGroupsFit(sum(o[0] for o in outs), X, sum(o[1] for o in outs) if gradient else None)


#: Groups of N_u from which :func:`linear_groups_prior_fit` splits its pass over two threads.
GROUP_THREADS_MIN = 64


def _prior_groups_pass(Ns, kind, extra, sel_of, ranks, counts, n, F, prior, scheme, X, Nmax, gradient):
    """:func:`linear_groups_prior_fit` over the groups ``Ns``: (head, gradient or None), X filled in place."""
    H, m = F.shape
    Mtot = counts.sum()
    head = np.zeros(min(H, Nmax))
    grad = np.zeros((Nmax, m))
    for N, K in kernels_ascending(Ns, n, scheme):
        sel = sel_of[N]
        S = prior[:N].sum()
        p = group_prior(prior, N)
        if kind == "bv":
            Ks = K * np.sqrt(p)[:, None]
            G = _linear_gram(kind, K, Ks.T @ Ks, (extra, K.T @ p))
        else:               # K^T D K - K^T K / M + diag(K^T 1) / M in one product
            G = (K * (p - 1.0 / extra)[:, None]).T @ K
            G[np.diag_indices_from(G)] += K.sum(axis=0) / extra
        Hb = min(H, N)
        Fb = F[:Hb]
        r, c = ranks[sel], counts[sel]
        users = c.sum()
        pt = np.bincount(r - 1, weights=c, minlength=n) / max(users, 1)
        sol = _solve_sym(G, np.column_stack([K[:Hb].T @ (p[:Hb, None] * Fb), pt]), kind)
        x, lam = sol[:, :m], sol[:, m]
        X[sel] = x[r - 1]
        if not users:       # a group whose cells count no users: its cells' rows, and no weight
            continue
        share = users / Mtot
        Klam = K @ lam
        head[:Hb] += share * p[:Hb] * Klam[:Hb]
        if not gradient:
            continue
        Kx = K @ x
        g = -Klam[:, None] * Kx
        if kind == "bv":
            g *= 1.0 - extra
            g -= extra * (K @ (lam[:, None] * x))
        g[:Hb] += Klam[:Hb, None] * Fb
        grad[:N] += share * (g - p @ g) / S
    return head, grad
