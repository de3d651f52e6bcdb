"""Estimators of the global rank distribution P(R) from sampled ranks.

The sampled rank of a user whose held-out item has global rank R follows
P(r | R) (a binomial law for sampling with replacement, AAAI21 eq 16, TORS24
eq 29), so sampled ranks are draws from the mixture

    P(r | pi) = sum_R pi_R P(r | R),                     (AAAI21 eq 18, TORS24 eq 31)

whose mixing weights pi are the rank distribution. Any top-K metric is then
estimated as ``pi @ F(1..N)`` (AAAI21 eq 14, TORS24 eq 27). This module learns
pi by

* :func:`mle` -- maximum likelihood by EM (AAAI21 eqs 19-21, TORS24 eqs 32-34);
* :func:`wmle` -- weighted maximum likelihood (AAAI21 eqs 22-23);
* :func:`mes` -- maximal entropy with a squared distribution distance
  (AAAI21 eqs 24-27, TORS24 eqs 35-36), by cvxpy or a dedicated dual Newton solver;
* :func:`adaptive_mle` -- MLE by EM for users with different sample sizes
  (TORS24 Sec 6.2, eq 43, Appendix H eqs 60-62).

Every estimator returns a length-N probability vector. The companion ``*_fit``
functions return the same vector inside a frozen dataclass with the solver
diagnostics (:class:`EMResult`, :class:`MESResult`).

The EM estimators share one core that works on *sufficient statistics*: the
counts of users per (sample size, sampled rank). Each block is the pair
(kernel columns P(r | R) for the observed ranks r, counts), so one iteration
costs O(N x number of distinct observed (size, rank) pairs) <= O(N n) per size,
instead of O(N M) for the per-user update of AAAI21 eq 20 (see
``benchmarks/bench_em.py``).

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 13-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 4 (eqs 26-36), Sec 6.2 (eq 43),
   Appendices D and H (eqs 57-62).
.. [SQUAREM] Varadhan, Roland. Simple and globally convergent methods for
   accelerating the convergence of any EM algorithm. Scand. J. Stat. 35 (2008).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import linalg, special

from .._validation import (check_float, check_int, check_n_items, check_N_n, check_pmf, check_ranks,
                           check_scheme)
from ..exceptions import ConvergenceWarning
from ..kernels import DEFAULT_N_ITEMS_TOL, kernel_columns, kernel_groups, n_items_bins, rank_grid

__all__ = [
    "EMResult",
    "MESResult",
    "mle",
    "mle_fit",
    "wmle",
    "wmle_fit",
    "wmle_weights",
    "mes",
    "mes_fit",
    "mes_objective",
    "adaptive_mle",
    "adaptive_mle_fit",
    "mixture_loglik",
    "mixture_em",
    "em_grid",
]


# ----------------------------------------------------------------------------
# result types
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class EMResult:
    """Result of an EM fit of the rank distribution (:func:`mle_fit`,
    :func:`wmle_fit`, :func:`adaptive_mle_fit`).

    Attributes
    ----------
    pmf : ndarray, shape (N,)
        Estimated rank distribution pi (nonnegative, sums to 1).
    loglik : float
        (Weighted) log-likelihood at ``pmf``: sum_u w_u log P(r_u | pi)
        (AAAI21 eqs 19 and 22; w_u = 1 for :func:`mle`).
    loglik_trace : ndarray, shape (n_iter + 1,)
        Log-likelihood at the initial point and after every iteration; never
        decreases (EM and the monotone SQUAREM variant are ascent methods).
    n_iter : int
        Iterations done (EM updates, or SQUAREM cycles).
    n_estep : int
        E-step evaluations (one per EM update; up to four per SQUAREM cycle).
    gap : float
        Certified bound on the per-user log-likelihood suboptimality,
        max_R dl/dpi_R / W - 1 >= (l* - l(pi)) / W, where W is the total
        weight; 0 exactly at the maximum likelihood estimate.
    converged : bool
        ``gap <= tol`` (always False when ``tol`` is None, i.e. a fixed
        number of iterations was requested).
    tol : float or None
        The requested tolerance on ``gap``.
    method : str
        ``"em"`` or ``"squarem"``.
    """

    pmf: np.ndarray
    loglik: float
    loglik_trace: np.ndarray
    n_iter: int
    n_estep: int
    gap: float
    converged: bool
    tol: float | None
    method: str


@dataclass(frozen=True)
class MESResult:
    """Result of a maximal-entropy fit (:func:`mes_fit`).

    Attributes
    ----------
    pmf : ndarray, shape (N,)
        The maximizer pi of ``lam * H(pi) - E(pi)`` on the simplex.
    objective : float
        ``lam * H(pi) - E(pi)`` at ``pmf`` (the maximized objective of TORS24
        eq 36 / AAAI21 eq 26), evaluated by :func:`mes_objective`.
    entropy : float
        H(pi) = -sum_R pi_R log pi_R (natural logarithm).
    distance : float
        E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25, TORS24 eq 35).
    lam : float
        Weight of the entropy: ``eta / n`` (form "tors") or ``eta`` (form "aaai").
    eta : float
    form : str
    solver : str
        ``"fast"`` or ``"cvxpy:<SOLVER>"``.
    n_iter : int
        Newton iterations (fast) or the solver's iteration count (cvxpy).
    objective_trace : ndarray
        Objective of the primal iterate after every Newton step (fast); the
        single final value (cvxpy).
    gap : float
        Duality gap certified by the fast solver (primal minus dual value,
        in units of the minimized ``E - lam H``); NaN for cvxpy.
    kkt_residual : float
        Fast solver: max_R |log pi_R + (dE/dpi_R) / lam - c|, the violation of
        the optimality condition pi = softmax(-grad E(pi) / lam) (<= 1e-9 on
        convergence unless rounding stops it earlier; never above 1e-6); NaN
        for cvxpy.
    converged : bool
    """

    pmf: np.ndarray
    objective: float
    entropy: float
    distance: float
    lam: float
    eta: float
    form: str
    solver: str
    n_iter: int
    objective_trace: np.ndarray
    gap: float
    kkt_residual: float
    converged: bool


# ----------------------------------------------------------------------------
# sufficient statistics and kernel columns
# ----------------------------------------------------------------------------
def _block(N, n, counts, scheme):
    """(kernel columns, counts) restricted to the ranks with positive counts."""
    cols = np.flatnonzero(counts > 0) + 1
    return kernel_columns(N, n, cols, scheme), np.asarray(counts, dtype=float)[cols - 1]


def count_blocks(N, sizes, ranks, weights, scheme, *, n_items=None, n_items_tol=0.0):
    """EM blocks of a table of cells (sample size, sampled rank, weight).

    One block per distinct sample size: (P(r | R; n) columns for the cells'
    ranks, shape (N, k), and the cells' weights, shape (k,) or (B, k) for a
    batch of B weight vectors, e.g. bootstrap replicates of the counts).
    Returns the blocks and the cell order they use (a permutation of the cells).

    With per-cell item counts ``n_items`` (N_u <= N), the blocks are those of
    :func:`em_operators` (one per (N_u bin, n) group; kernel rows beyond N_u
    are 0), in the order of the cells' groups.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    if n_items is not None:
        ops = em_operators(n_items, sizes, ranks, scheme, tol=n_items_tol)
        return [(op, weights[..., idx]) for op, idx in ops], np.concatenate([i for _, i in ops])
    blocks, order = [], []
    for nb in np.unique(sizes):
        sel = np.flatnonzero(sizes == nb)
        blocks.append((kernel_columns(N, int(nb), ranks[sel], scheme), weights[..., sel]))
        order.append(sel)
    return blocks, np.concatenate(order)


# ----------------------------------------------------------------------------
# the compressed rank grid (issue 18)
# ----------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _grid_kernel(N, n, scheme, tol):
    """(RankGrid, its (G, n) representative kernel rows, read-only), cached."""
    g = rank_grid(N, n, scheme=scheme, tol=tol)
    K = g.kernel()
    K.setflags(write=False)
    return g, K


def em_grid(N, n, scheme, grid_tol):
    """The compressed grid of (N, n) for an estimator option ``grid_tol``, or None (exact).

    None when ``grid_tol`` is 0/None or when the grid would hold every rank
    (N <= its exact head): then the estimators run on the exact N x n kernel,
    bit for bit as without the option.
    """
    if grid_tol is None or grid_tol == 0:
        return None
    g, K = _grid_kernel(int(N), int(n), scheme, float(check_float(grid_tol, "grid_tol", 0.0, 1.0,
                                                                    high_open=True)))
    return None if g.exact else (g, K)


def _em_on_grid(grid, Kg, counts, init, tol, max_iter, accelerate):
    """EM on the grid atoms (multiplicities ``grid.size``), expanded to length N.

    On the kernel K' whose rows in a bin all equal the bin's representative
    row (:func:`sampling_lib.kernels.rank_grid`), the EM update multiplies
    every rank of a bin by the same factor, so EM from ``init`` keeps the
    within-bin proportions of ``init`` and only the bin masses p_j move:
    exactly the EM of the G-atom mixture with rows Kg and start
    p_j = sum_{R in bin j} init_R (uniform init: p_j proportional to the bin
    size). The result is that EM expanded with ``init``'s within-bin shape.
    """
    init_full = None if init is None else check_pmf(init, grid.N, name="init")
    p0 = grid.size / grid.N if init_full is None else grid.bin_sums(init_full)
    cols = np.flatnonzero(counts > 0)
    res = _em_core([(np.ascontiguousarray(Kg[:, cols]), counts[cols])], grid.lo.size, p0, tol,
                   max_iter, accelerate)
    return replace(res, pmf=grid.expand(res.pmf, within=init_full))


# ----------------------------------------------------------------------------
# per-user item counts N_u: EM operators on groups of cells
# ----------------------------------------------------------------------------
_TRUNC_ELEMS = 1 << 22          # batch x rows x columns elements per truncated-operator chunk


class _TruncatedOp:
    """Cells that share kernel columns K (N_b, k) but end at their own N_u <= N_b.

    Cell c has probability q_c = sum_{R <= N_c} pi_R K[R, col_c] (a prefix sum
    along R), and contributes K[R, col_c] 1[R <= N_c] ratio_c to the gradient
    (a suffix sum along R). Cost O(N_b k) per distribution, whatever the
    number of distinct N_u in the group.
    """

    def __init__(self, K, col, end):
        self.K = K
        self.rows, self.k = K.shape
        self.flat = (np.asarray(end, dtype=np.int64) - 1) * self.k + np.asarray(col, dtype=np.int64)
        self.distinct = np.unique(self.flat).size == self.flat.size

    def _chunks(self, B):
        step = max(1, _TRUNC_ELEMS // max(1, self.rows * self.k))
        return [(a, min(B, a + step)) for a in range(0, B, step)]

    def q(self, pi):
        if pi.ndim == 1:
            return self.q(pi[None])[0]
        out = np.empty((pi.shape[0], self.flat.size))
        for a, b in self._chunks(pi.shape[0]):
            P = pi[a:b, : self.rows, None] * self.K
            np.cumsum(P, axis=1, out=P)
            out[a:b] = P.reshape(b - a, -1)[:, self.flat]
        return out

    def back(self, v, g):
        if v.ndim == 1:
            self.back(v[None], g[None])
            return
        for a, b in self._chunks(v.shape[0]):
            S = np.zeros((b - a, self.rows * self.k))
            if self.distinct:
                S[:, self.flat] = v[a:b]
            else:
                np.add.at(S, (slice(None), self.flat), v[a:b])
            S = S.reshape(b - a, self.rows, self.k)[:, ::-1].cumsum(axis=1)[:, ::-1]
            g[a:b, : self.rows] += np.einsum("brk,rk->br", S, self.K)


def _op_q(op, pi):
    """P(r | pi) of the operator's cells: kernel columns (rows <= N, zero beyond) or truncated."""
    if isinstance(op, np.ndarray):
        return pi[..., : op.shape[0]] @ op if op.shape[0] != pi.shape[-1] else pi @ op
    return op.q(pi)


def _op_back(op, v, g):
    """g += sum_c v_c (kernel column of cell c) for one (k,) or a batch (B, k) of v."""
    if isinstance(op, np.ndarray):
        rows = op.shape[0]
        if g.ndim == 1:
            g[:rows] += op @ v
        else:
            g[:, :rows] += v @ op.T
        return
    op.back(v, g)


def em_operators(n_items, sizes, ranks, scheme="binomial", *, tol=0.0):
    """EM operators of a table of cells (N_u, n_u, r): a list of (operator, cell indices).

    Groups of :func:`sampling_lib.kernels.kernel_groups`; a group whose cells
    all have the group's N (always when ``tol`` is 0) is a plain block of
    kernel columns with N_b rows (rows beyond are 0); a binned group is a
    :class:`_TruncatedOp` that keeps every cell's own support 1..N_u. Many
    plain groups are concatenated into one zero-padded block when the padding
    at most doubles the memory (one matrix product instead of a Python loop).
    """
    _check_kernel_memory(n_items, sizes, ranks, scheme, tol)
    groups = kernel_groups(n_items, sizes, ranks, scheme, tol=tol)
    plain = [g for g in groups if g.exact]
    ops = [(_TruncatedOp(g.K, g.col, g.end), g.cells) for g in groups if not g.exact]
    if len(plain) > 8:
        rows = max(g.n_items for g in plain)
        size = sum(g.K.size for g in plain)
        cols = sum(g.cells.size for g in plain)
        if rows * cols <= 2 * size:
            K = np.zeros((rows, cols))
            j = 0
            for g in plain:
                K[: g.n_items, j : j + g.cells.size] = g.K[:, g.col]
                j += g.cells.size
            return [(K, np.concatenate([g.cells for g in plain]))] + ops
    return [(g.K[:, g.col] if not np.array_equal(g.col, np.arange(g.col.size)) else g.K, g.cells)
            for g in plain] + ops


_KERNEL_BYTES_MAX = 1 << 31     # per-user EM kernels larger than 2 GiB are refused with advice


def _check_kernel_memory(n_items, sizes, ranks, scheme, tol):
    """Refuse per-user EM kernels that would not fit (sum over groups of N_b x ranks x 8 bytes)."""
    Nu = np.asarray(n_items, dtype=np.int64)
    rep = n_items_bins(Nu, sizes, tol, scheme) if tol > 0 else Nu
    key = np.unique(np.stack([rep, np.asarray(sizes), np.asarray(ranks)]), axis=1)
    need = 8.0 * float(key[0].sum())
    if need > _KERNEL_BYTES_MAX:
        raise MemoryError(
            f"per-user N: the EM kernels would need {need / 2**30:.1f} GiB (max N_u "
            f"{int(Nu.max())}, {key.shape[1]} (N_u bin, n, r) columns); use method='logspline' "
            "(its compressed rank grid does not grow with N), a larger n_items_tol, or one N")


def _user_cells(ranks, sizes, n_items):
    """Distinct (N_u, n_u, r) cells of per-user arrays and their counts."""
    key = np.stack([n_items, sizes, ranks])
    cells, counts = np.unique(key, axis=1, return_counts=True)
    return cells[0], cells[1], cells[2], counts.astype(float)


def _peruser_blocks(ranks, sizes, n_items, scheme, tol, rank_weight=None):
    """EM blocks (operator, cell weights) of per-user ranks with per-user N_u."""
    Nc, nc, rc, cnt = _user_cells(ranks, sizes, n_items)
    if rank_weight is not None:
        for s in np.unique(nc):
            sel = nc == s
            cnt[sel] = cnt[sel] * rank_weight(int(s))[rc[sel] - 1]
    return [(op, cnt[idx]) for op, idx in em_operators(Nc, nc, rc, scheme, tol=tol)]


def _ranks_items(sampled_ranks, N, n):
    """Checked (r, N, n): N an int, or per-user item counts (int64 array) of the users."""
    if np.ndim(N) == 0:
        N, n = check_N_n(N, n)
        return check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n"), N, n
    n = check_int(n, "n", low=2)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    N = check_n_items(N, r.size)
    if isinstance(N, int):
        N, n = check_N_n(N, n)
    else:
        _check_peruser(r, np.full(r.size, n), N)
    return r, N, n


def _check_peruser(r, sizes, N, what="n"):
    """Per-user N_u (array, length M) against the sample sizes: n_u <= N_u."""
    bad = np.flatnonzero(sizes > N)
    if bad.size:
        i = bad[0]
        raise ValueError(f"{what} must lie in 2..N_u for every user; user index {i} has "
                         f"{what}={sizes[i]} > N_u={N[i]}")


def _rank_counts(sampled_ranks, n):
    return np.bincount(sampled_ranks - 1, minlength=n).astype(float)


def _check_init(init, N):
    if init is None:
        return np.full(N, 1.0 / N)
    return check_pmf(init, N, name="init").copy()


def _check_tol(tol, name="tol"):
    if tol is None:
        return None
    return check_float(tol, name, low=0.0, low_open=True)


# ----------------------------------------------------------------------------
# the shared EM core
# ----------------------------------------------------------------------------
def _estep(pi, blocks, W):
    """Log-likelihood at pi and the normalized gradient g = (1/W) dl/dpi.

    The EM map is pi -> pi * g (AAAI21 eq 21 / 23, TORS24 eq 34 / 62).
    ``pi`` is one distribution (N,) with block weights (k,) and a scalar W,
    or a batch (B, N) with weights (B, k) and W of shape (B, 1). A block's
    kernel is an (N_b, k) array with N_b <= N rows (rows beyond are 0: users
    with N_u = N_b items) or a truncated operator (:func:`em_operators`).
    """
    if pi.ndim == 1:
        ll = 0.0
        g = np.zeros(pi.size)
        for Kb, cb in blocks:
            q = _op_q(Kb, pi)  # P(r | pi) for the observed ranks of this block
            if np.any(q <= 0.0):
                return -np.inf, None
            ll += float(cb @ np.log(q))
            _op_back(Kb, cb / q, g)
    else:
        ll = np.zeros(pi.shape[0])
        g = np.zeros_like(pi)
        for Kb, cb in blocks:
            q = _op_q(Kb, pi)
            if np.any(q <= 0.0):
                return -np.inf, None
            ll += (cb * np.log(q)).sum(axis=1)
            _op_back(Kb, cb / q, g)
    g /= W
    return ll, g


def _em_update(pi, g):
    """One EM step pi -> pi * g, renormalized (exact in exact arithmetic; removes drift)."""
    pi = pi * g
    pi /= pi.sum(axis=-1, keepdims=True)
    return pi


def em_fixed_iterations(blocks, init, n_iter):
    """``n_iter`` plain EM updates from ``init`` for one or a batch of weight vectors.

    The estimator "``max_iter`` EM steps from ``init``" (the papers' protocol,
    :func:`mle_fit` with ``tol=None``) on blocks whose weights have shape
    (k,) (one fit, returns (N,)) or (B, k) (B fits at once, e.g. bootstrap
    replicates, returns (B, N)). Same update as :func:`mle_fit` (AAAI21 eq 21 /
    23, TORS24 eqs 34, 62).
    """
    batched = np.ndim(blocks[0][1]) == 2
    if batched:
        B = np.shape(blocks[0][1])[0]
        W = sum(cb.sum(axis=1) for _, cb in blocks)[:, None]
        pi = np.broadcast_to(np.asarray(init, dtype=float), (B, np.size(init))).copy()
    else:
        W = float(sum(cb.sum() for _, cb in blocks))
        pi = np.asarray(init, dtype=float).copy()
    for _ in range(n_iter):
        _, g = _estep(pi, blocks, W)
        if g is None:
            raise ValueError("init gives probability 0 to an observed sampled rank")
        pi = _em_update(pi, g)
    return pi


def _em_core(blocks, N, init, tol, max_iter, accelerate):
    """EM (or monotone SQUAREM) for the mixture weights over a list of blocks.

    ``blocks`` is a list of (P(r|R) columns of shape (N, k_b), weights of shape
    (k_b,)) -- one block per sample size. Returns an :class:`EMResult`.
    """
    W = float(sum(cb.sum() for _, cb in blocks))
    pi = _check_init(init, N)
    ll, g = _estep(pi, blocks, W)
    if g is None:
        raise ValueError(
            "init gives probability 0 to an observed sampled rank; "
            "use an init with positive mass on more global ranks"
        )
    trace = [ll]
    n_estep = 1
    it = 0
    # zero weights of init stay zero: the problem solved is the MLE over
    # distributions supported on supp(init), and the gap is taken there
    supp = None if np.all(pi > 0.0) else pi > 0.0

    def _gap(g):
        return float((g if supp is None else g[supp]).max() - 1.0)

    gap = _gap(g)
    while True:
        if tol is not None and gap <= tol:
            break
        if it >= max_iter:
            break
        it += 1
        if accelerate is None:
            pi = _em_update(pi, g)
            ll, g = _estep(pi, blocks, W)
            n_estep += 1
        else:
            # SQUAREM (scheme S3) with a monotonicity safeguard: the
            # extrapolated cycle is accepted only if it is at least as good as
            # two plain EM steps, otherwise the two EM steps are kept.
            p1 = _em_update(pi, g)
            l1, g1 = _estep(p1, blocks, W)
            p2 = _em_update(p1, g1)
            l2, g2 = _estep(p2, blocks, W)
            n_estep += 2
            r = p1 - pi
            v = p2 - p1 - r
            vv = float(v @ v)
            new = (p2, l2, g2)
            if vv > 0.0:
                alpha = min(-np.sqrt(float(r @ r) / vv), -1.0)
                pe = pi - 2.0 * alpha * r + alpha * alpha * v
                pos = pi > 0.0  # zero weights of init stay zero in EM
                while np.any(pe[pos] <= 0.0) and alpha < -1.0:
                    # keep every weight positive: zero weights are absorbing
                    # for EM and would change the fixed point
                    alpha = (alpha - 1.0) / 2.0
                    if alpha > -1.01:
                        alpha = -1.0
                    pe = pi - 2.0 * alpha * r + alpha * alpha * v
                if alpha < -1.0:
                    pe /= pe.sum()
                    le, ge = _estep(pe, blocks, W)
                    n_estep += 1
                    if ge is not None:
                        pn = _em_update(pe, ge)
                        ln, gn = _estep(pn, blocks, W)
                        n_estep += 1
                        if gn is not None and ln >= l2:
                            new = (pn, ln, gn)
            pi, ll, g = new
        trace.append(ll)
        gap = _gap(g)
    return _em_result(pi, ll, trace, it, n_estep, gap, tol, max_iter, accelerate, stacklevel=4)


def _em_result(pi, ll, trace, n_iter, n_estep, gap, tol, max_iter, accelerate, *, stacklevel):
    """The :class:`EMResult` of one fit (:func:`_em_core`, a row of :func:`em_core_batch`), with a
    ConvergenceWarning when a tolerance was asked for and not reached within ``max_iter``."""
    converged = tol is not None and gap <= tol
    if tol is not None and not converged:
        warnings.warn(
            f"EM stopped after max_iter={max_iter} iterations with gap={gap:.3g} > tol={tol:g} "
            f"(log-likelihood {ll:.10g}); increase max_iter or use accelerate='squarem'",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )
    return EMResult(pmf=pi, loglik=float(ll), loglik_trace=np.asarray(trace), n_iter=int(n_iter),
                    n_estep=int(n_estep), gap=float(gap), converged=bool(converged), tol=tol,
                    method="em" if accelerate is None else "squarem")


def _estep_rows(pi, K, C, W):
    """Batched E-step with a validity flag per row: (ll (B,), g (B, N), ok (B,)).

    ``pi`` (B, N), kernel columns K (N, k), weights C (B, k), W (B,). Unlike
    :func:`_estep` on a batch, a row whose distribution gives probability 0 to
    a cell it observes (C > 0) only marks that row (ll -inf, ok False); cells
    with weight 0 do not count, so one K with every column serves rows that
    observe different ranks (the single-fit path drops those columns).
    """
    q = pi @ K
    obs = C > 0.0
    ok = ~np.any((q <= 0.0) & obs, axis=1)
    safe = np.where(obs, q, 1.0)
    ll = np.where(ok, (C * np.log(safe)).sum(axis=1), -np.inf)
    g = (np.where(obs, C / safe, 0.0) @ K.T) / W[:, None]
    return ll, g, ok


def em_core_batch(K, C, init=None, tol=None, max_iter=100, accelerate=None):
    """:func:`mle_fit`'s EM (or monotone SQUAREM) for B weight vectors at once: a list of B EMResults.

    The same iteration as the single fit, row by row (AAAI21 eqs 21 / 23,
    TORS24 eqs 34 / 62; SQUAREM S3 with the same monotonicity safeguard and
    the same stop on the certified gap), but each E-step of the rows still
    running is one (B, N) x (N, k) matrix product instead of B vector
    products and B passes of Python: for many small fits (the B samples of a
    simulation study) the per-step overhead is paid once per step, not B
    times. Rows agree with :func:`mle_fit` on the same counts to rounding;
    SQUAREM's path depends on rounding, so converged rows agree to the
    tolerance where the maximizer is unique (N <= n), not beyond. A row that
    reaches ``max_iter`` before ``tol`` warns like the single fit.

    Parameters
    ----------
    K : ndarray, shape (N, k)
        Kernel columns P(r | R) of the cells (e.g. :func:`sampling_lib.kernels.kernel`).
    C : array_like, shape (B, k)
        Weights (counts of sampled ranks, or weighted counts) of the cells, one row per fit.
    init, tol, max_iter, accelerate
        As :func:`mle_fit` (``init`` of shape (N,), shared by the rows).

    Returns
    -------
    list of EMResult

    References
    ----------
    AAAI21 eqs 18-23; TORS24 eqs 31-34; [SQUAREM].

    Examples
    --------
    >>> from sampling_lib.kernels import kernel
    >>> C = np.array([[5.0, 3.0, 2.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    >>> fits = em_core_batch(kernel(50, 5), C)
    >>> r = np.repeat(np.arange(1, 6), C[0].astype(int))
    >>> bool(np.allclose(fits[0].pmf, mle(r, 50, 5), rtol=1e-12, atol=0))
    True
    """
    tol, max_iter, accelerate = _check_em_options(tol, max_iter, accelerate)
    K = np.asarray(K, dtype=float)
    C = np.atleast_2d(np.asarray(C, dtype=float))
    if K.ndim != 2 or C.ndim != 2 or C.shape[1] != K.shape[1]:
        raise ValueError(f"C must have shape (B, k) with k = K.shape[1] = {K.shape[1]}; got {C.shape}")
    if not (np.all(np.isfinite(C)) and np.all(C >= 0.0) and np.all(C.sum(axis=1) > 0.0)):
        raise ValueError("C must hold finite weights >= 0 with a positive sum in every row")
    B, N = C.shape[0], K.shape[0]
    W = C.sum(axis=1)
    pi0 = _check_init(init, N)
    pi = np.broadcast_to(pi0, (B, N)).copy()
    ll, g, ok = _estep_rows(pi, K, C, W)
    if not ok.all():
        raise ValueError(
            "init gives probability 0 to an observed sampled rank; "
            "use an init with positive mass on more global ranks"
        )
    supp = None if np.all(pi0 > 0.0) else pi0 > 0.0

    def gaps(g):
        return (g if supp is None else g[:, supp]).max(axis=1) - 1.0

    traces = [[float(v)] for v in ll]
    n_estep = np.ones(B, dtype=np.int64)
    n_iter = np.zeros(B, dtype=np.int64)
    gap = gaps(g)
    while True:
        run = n_iter < max_iter
        if tol is not None:
            run &= gap > tol
        A = np.flatnonzero(run)
        if A.size == 0:
            break
        n_iter[A] += 1
        CA, WA = C[A], W[A]
        if accelerate is None:
            pA = _em_update(pi[A], g[A])
            lA, gA, _ = _estep_rows(pA, K, CA, WA)
            n_estep[A] += 1
        else:
            p0 = pi[A]
            p1 = _em_update(p0, g[A])
            l1, g1, _ = _estep_rows(p1, K, CA, WA)
            p2 = _em_update(p1, g1)
            l2, g2, _ = _estep_rows(p2, K, CA, WA)
            n_estep[A] += 2
            pA, lA, gA = p2, l2, g2
            r = p1 - p0
            v = p2 - p1 - r
            vv = np.einsum("ij,ij->i", v, v)
            ext = vv > 0.0
            alpha = np.full(A.size, -1.0)
            alpha[ext] = np.minimum(-np.sqrt(np.einsum("ij,ij->i", r[ext], r[ext]) / vv[ext]), -1.0)
            pe = p0 - 2.0 * alpha[:, None] * r + (alpha * alpha)[:, None] * v
            while True:   # keep every weight positive (zero weights are absorbing for EM)
                bad = ext & np.any((pe <= 0.0) & (p0 > 0.0), axis=1) & (alpha < -1.0)
                if not bad.any():
                    break
                a = (alpha[bad] - 1.0) / 2.0
                alpha[bad] = np.where(a > -1.01, -1.0, a)
                pe[bad] = p0[bad] - 2.0 * alpha[bad, None] * r[bad] + (alpha[bad] ** 2)[:, None] * v[bad]
            X = np.flatnonzero(ext & (alpha < -1.0))
            if X.size:
                pe = pe[X] / pe[X].sum(axis=1, keepdims=True)
                le, ge, oke = _estep_rows(pe, K, CA[X], WA[X])
                n_estep[A[X]] += 1
                Y = np.flatnonzero(oke)
                if Y.size:
                    pn = _em_update(pe[Y], ge[Y])
                    ln, gn, okn = _estep_rows(pn, K, CA[X[Y]], WA[X[Y]])
                    n_estep[A[X[Y]]] += 1
                    acc = okn & (ln >= l2[X[Y]])
                    rows = X[Y][acc]
                    pA[rows], lA[rows], gA[rows] = pn[acc], ln[acc], gn[acc]
        pi[A], ll[A], g[A] = pA, lA, gA
        for j, a in enumerate(A):
            traces[a].append(float(lA[j]))
        gap[A] = gaps(gA)
    out = []
    for b in range(B):   # a loop, not a comprehension: stacklevel 3 is em_core_batch's caller
        out.append(_em_result(pi[b].copy(), ll[b], traces[b], n_iter[b], n_estep[b], gap[b], tol, max_iter,
                              accelerate, stacklevel=3))
    return out


def _check_em_options(tol, max_iter, accelerate):
    tol = _check_tol(tol)
    max_iter = check_int(max_iter, "max_iter", low=0)
    if accelerate not in (None, "squarem"):
        raise ValueError(f"accelerate must be None or 'squarem'; got {accelerate!r}")
    if accelerate is not None and tol is None:
        raise ValueError(
            "accelerate='squarem' needs a tolerance tol: with tol=None the estimator is "
            "defined by a fixed number of plain EM iterations"
        )
    return tol, max_iter, accelerate


def mixture_em(likelihood, weights, *, tol=None, max_iter=100, init=None, accelerate=None):
    """EM for the mixing weights of a mixture with a given likelihood matrix.

    The EM core of :func:`mle_fit` for any kernel: maximizes
    sum_k c_k log sum_g pi_g L[g, k] over distributions pi, where
    L[g, k] is the probability of observation cell k under component g and
    c_k the (weighted) number of observations in cell k, by the update

        pi_g <- pi_g sum_k (c_k / C) L[g, k] / sum_j pi_j L[j, k]

    (AAAI21 eqs 18-21, TORS24 eq 34, where L is the kernel P(r | R)). Used
    for kernels that are not a sampling kernel of :mod:`sampling_lib.kernels`,
    e.g. the popularity-sampling law of :mod:`sampling_lib.popularity`.

    Parameters
    ----------
    likelihood : array_like, shape (G, k)
        L[g, k] >= 0, finite: the likelihood of cell k under component g.
    weights : array_like, shape (k,)
        c_k >= 0, finite, positive sum: observations per cell (cells with
        weight 0 are dropped).
    tol, max_iter, init, accelerate
        As :func:`mle_fit` (default: exactly 100 EM steps from the uniform
        distribution, the papers' protocol); ``init`` has shape (G,).

    Returns
    -------
    EMResult
        ``pmf`` has shape (G,).

    References
    ----------
    AAAI21 eqs 18-21; TORS24 eqs 31-34; [SQUAREM].

    Examples
    --------
    >>> from sampling_lib.kernels import binomial
    >>> r = np.array([1, 1, 2, 3, 5])
    >>> L = binomial(20, 5)[:, r - 1]                      # P(r_u | R) for R = 1..20
    >>> res = mixture_em(L, np.ones(r.size))
    >>> bool(np.allclose(res.pmf, mle(r, 20, 5)))          # the same EM as the MLE
    True
    """
    tol, max_iter, accelerate = _check_em_options(tol, max_iter, accelerate)
    L = np.asarray(likelihood, dtype=float)
    if L.ndim != 2 or L.shape[0] < 1 or L.shape[1] < 1:
        raise ValueError(f"likelihood must be a non-empty 2-D array (components x cells); got shape {L.shape}")
    bad = ~(np.isfinite(L) & (L >= 0.0))
    if bad.any():
        g, k = np.argwhere(bad)[0]
        raise ValueError(f"likelihood must hold finite numbers >= 0; got {L[g, k]:g} at [{g}, {k}]")
    c = np.asarray(weights, dtype=float)
    if c.shape != (L.shape[1],):
        raise ValueError(f"weights must have one entry per likelihood column ({L.shape[1]}); got shape {c.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c >= 0.0) and c.sum() > 0.0):
        raise ValueError(f"weights must be finite, >= 0 and not all 0; got min {np.min(c):g}, sum {np.sum(c):g}")
    keep = c > 0.0
    return _em_core([(L[:, keep], c[keep])], L.shape[0], init, tol, max_iter, accelerate)


# ----------------------------------------------------------------------------
# MLE and weighted MLE
# ----------------------------------------------------------------------------
def mixture_loglik(pmf, sampled_ranks, N, n, *, scheme="binomial", weights=None):
    """Log-likelihood sum_u w_u log sum_R pi_R P(r_u | R) (AAAI21 eqs 19, 22; TORS24 eq 32).

    Parameters
    ----------
    pmf : array_like, shape (N,)
        Mixing weights pi (a rank distribution).
    sampled_ranks : array_like of int in 1..n
    N : int or array_like of int, shape (M,)
        Number of items, or per-user item counts N_u (then ``pmf`` has length
        max N_u and user u's kernel is 0 beyond N_u).
    n : int
    scheme : {"binomial", "hypergeometric"}
    weights : array_like, shape (n,), optional
        Weight w(r) per sampled rank (weighted likelihood, AAAI21 eq 22).

    Returns
    -------
    float
        ``-inf`` if an observed rank has probability 0 under ``pmf``.

    Examples
    --------
    >>> pi = np.full(4, 0.25)
    >>> round(mixture_loglik(pi, [1, 2, 2], 4, 2), 12)   # P(r) = (1/2, 1/2)
    -2.079441541680
    """
    r, N, n = _ranks_items(sampled_ranks, N, n)
    check_scheme(scheme)
    if not isinstance(N, int):
        pmf = check_pmf(pmf, int(N.max()))
        wfun = None if weights is None else (lambda s: _check_weight_vector(weights, n))
        blocks = _peruser_blocks(r, np.full(r.size, n), N, scheme, 0.0, wfun)
        with np.errstate(divide="ignore"):
            return float(sum(cb @ np.log(_op_q(op, pmf)) for op, cb in blocks))
    pmf = check_pmf(pmf, N)
    c = _rank_counts(r, n)
    if weights is not None:
        c = c * _check_weight_vector(weights, n)
    Kb, cb = _block(N, n, c, scheme)
    q = pmf @ Kb
    with np.errstate(divide="ignore"):
        return float(cb @ np.log(q))


def mle_fit(
    sampled_ranks,
    N,
    n,
    *,
    scheme="binomial",
    tol=None,
    max_iter=100,
    init=None,
    accelerate=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """Maximum-likelihood rank distribution by EM, with diagnostics.

    Fits the mixing weights pi of the mixture P(r | pi) = sum_R pi_R P(r | R)
    (AAAI21 eq 18) to the sampled ranks by the EM update on the sufficient
    statistic P~(r) (AAAI21 eq 21, TORS24 eq 34)

        pi_R <- sum_r P~(r) pi_R P(r|R) / sum_j pi_j P(r|j),

    O(N n) per iteration.

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
        Rank r_u of each user's held-out item among its n-item sample set.
    N : int or array_like of int, shape (M,)
        Number of items (global ranks 1..N), or per-user candidate counts N_u
        (see Notes; the result then has length max N_u).
    n : int
        Sample-set size (held-out item plus n - 1 sampled items).
    scheme : {"binomial", "hypergeometric"}
        Kernel P(r|R): sampling with replacement (the papers) or without
        replacement (beyond the papers).
    tol : float or None, default None
        Stop as soon as the certified suboptimality bound ``gap`` (see
        :class:`EMResult`) is <= tol; a :class:`ConvergenceWarning` is emitted
        if ``max_iter`` is reached first. ``None`` runs exactly ``max_iter``
        EM iterations (no warning).
    max_iter : int, default 100
        Maximum number of iterations (EM updates or SQUAREM cycles).
    init : array_like, shape (N,), optional
        Starting distribution (default uniform). Zero entries stay zero: the
        fit is then the MLE over distributions supported on supp(init), and
        ``gap`` is computed on that support.
    accelerate : {None, "squarem"}
        SQUAREM extrapolation (requires ``tol``). It is safeguarded to be
        monotone and has the same fixed points as EM.
    n_items_tol : float in [0, 1), default :data:`sampling_lib.kernels.DEFAULT_N_ITEMS_TOL`
        Per-user N only: users whose N_u differ by so little that every kernel
        row moves by at most ``n_items_tol`` in total variation share one kernel
        (:func:`sampling_lib.kernels.n_items_bins`, bound
        :func:`sampling_lib.kernels.n_items_tv_bound`); each keeps its own
        support 1..N_u. 0 is exact.
    grid_tol : float in [0, 1) or None, default None (exact)
        Run on the compressed rank grid :func:`sampling_lib.kernels.rank_grid`
        with this total-variation tolerance (one N only; per-user N and
        N <= 256 are always exact). The registry's ``mle`` uses
        :data:`sampling_lib.kernels.DEFAULT_GRID_TOL`. See Notes.

    Returns
    -------
    EMResult

    Notes
    -----
    *Compressed kernel* (``grid_tol > 0``; sampling-lab, issue 18). The EM is
    run on the kernel K' whose rows in each bin of the grid equal the bin's
    representative row (every row within ``grid_tol`` in total variation,
    :func:`sampling_lib.kernels.rank_grid`). What this implies, for any data:

    * the model: for every rank distribution pi, the predicted sampled-rank
      law pi K' is within ``grid_tol`` in TV of pi K (AAAI21 eq 18), so the
      likelihood surfaces compare law for law;
    * one EM step (AAAI21 eq 21) from the same pi, hence any posterior-mean
      estimate sum_r P~(r) E_pi[F(R) | r] of a metric with 0 <= F <= 1,
      moves by at most 2 sum_r P~(r) e_r / q'_r <= 4 grid_tol
      max_r P~(r) / q'_r, with e_r = sum_R pi_R |K(r|R) - K'(r|R)| and
      q' = pi K' (|A/q - A'/q'| <= (|A - A'| + |q - q'|) / q' with A <= q);
    * after 100 steps the errors of the steps compound through the EM map;
      no closed bound is claimed. The tests check the estimates of Recall
      and NDCG@1..50 against the exact kernel within ``grid_tol`` (a
      tolerance fixed before running them), for N up to 10^5.

    Cost O(G n) per step instead of O(N n), G <= 256 + 1.6 sqrt(n) /
    grid_tol bins whatever N.

    *Per-user item counts* (sampling-lab). User u ranks its held-out item
    among its own N_u candidates (items outside its history in most
    frameworks), R_u in 1..N_u, and r_u - 1 ~ Binomial(n - 1, (R_u - 1)/(N_u - 1))
    (or the hypergeometric analogue; KDD20 Sec 2.2 per user). The estimand
    pools users: P(R) on 1..max N_u; user u's kernel is P(r | R; N_u, n) for
    R <= N_u and 0 beyond. Users are grouped by (N_u, n) so that kernels are
    shared (:func:`sampling_lib.kernels.kernel_groups`).
    The EM update (AAAI21 eq 21) is then pi_R <- (1/M) sum_u P(R_u = R | r_u; pi),
    the average of the users' posteriors, which maximizes
    sum_u log sum_{R <= N_u} pi_R P(r_u | R; N_u, n) (the multiplicative EM
    update increases this likelihood for any nonnegative kernel). An array of
    equal N_u gives exactly the result of the int.

    *Decision (paper ambiguity).* AAAI21 and TORS24 say "when eq (20)
    converges"; the authors' released code runs exactly 100 EM iterations
    from the uniform distribution. We follow the code: ``tol=None,
    max_iter=100`` is the default and defines the estimator "MLE" of the
    papers' tables. Solving to the maximum likelihood (e.g. ``tol=1e-6,
    max_iter=100_000, accelerate="squarem"``) is available, but the exact
    maximizer is a nonparametric MLE of a mixing distribution: a sparse
    distribution with few atoms, because P(r | pi) only identifies n - 1
    moments of pi. Its metric estimates are 2-5x more variable than those of
    the early-stopped EM, though less biased for top-heavy metrics (NDCG,
    AP); neither dominates in RMSE (notebook 03). Early stopping from the
    uniform distribution acts as a regularizer.

    References
    ----------
    AAAI21 eqs 18-21; TORS24 eqs 31-34 and Appendix D (eqs 57-58).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = rng.integers(1, 6, size=200)     # sampled ranks in 1..5
    >>> res = mle_fit(r, N=50, n=5)
    >>> res.pmf.shape, round(float(res.pmf.sum()), 12), res.n_iter
    ((50,), 1.0, 100)
    >>> bool(np.all(np.diff(res.loglik_trace) >= -1e-9))
    True

    Per-user item counts (equal counts give exactly the int result):

    >>> mle_fit(r, N=np.r_[np.full(100, 40), np.full(100, 50)], n=5).pmf.shape
    (50,)
    >>> bool(np.array_equal(mle_fit(r, N=np.full(200, 50), n=5).pmf, res.pmf))
    True
    """
    r, N, n = _ranks_items(sampled_ranks, N, n)
    scheme = check_scheme(scheme)
    tol, max_iter, accelerate = _check_em_options(tol, max_iter, accelerate)
    if not isinstance(N, int):
        blocks = _peruser_blocks(r, np.full(r.size, n), N, scheme, _check_n_items_tol(n_items_tol))
        return _em_core(blocks, int(N.max()), init, tol, max_iter, accelerate)
    grid = em_grid(N, n, scheme, grid_tol)
    if grid is not None:
        return _em_on_grid(*grid, _rank_counts(r, n), init, tol, max_iter, accelerate)
    blocks = [_block(N, n, _rank_counts(r, n), scheme)]
    return _em_core(blocks, N, init, tol, max_iter, accelerate)


def _check_n_items_tol(tol):
    return check_float(tol, "n_items_tol", 0.0, 1.0, high_open=True)


def mle(sampled_ranks, N, n, *, scheme="binomial", tol=None, max_iter=100, init=None, accelerate=None,
        n_items_tol=DEFAULT_N_ITEMS_TOL, grid_tol=None):
    """Maximum-likelihood (EM) estimate of the rank distribution P(R), R = 1..N.

    Same parameters as :func:`mle_fit`; returns only the length-N probability
    vector ``pi`` (estimate any metric as ``pi @ F(1..N)``, AAAI21 eq 14).

    References
    ----------
    AAAI21 eqs 18-21; TORS24 eqs 31-34.

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> pi = mle([1, 1, 2, 3, 5], N=20, n=5)
    >>> round(float(pi @ metric_values("recall@20", 20)), 12)
    1.0
    """
    return mle_fit(
        sampled_ranks, N, n, scheme=scheme, tol=tol, max_iter=max_iter, init=init, accelerate=accelerate,
        n_items_tol=n_items_tol, grid_tol=grid_tol,
    ).pmf


def _check_weight_vector(w, n):
    w = np.asarray(w, dtype=float)
    if w.shape != (n,):
        raise ValueError(f"weights must have shape (n,)=({n},); got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be finite and > 0; got min {np.nanmin(w):g}")
    return w


def wmle_weights(n, weight="ndcg", C=10):
    """Weights w(r), r = 1..n, of the weighted MLE (AAAI21 eq 22).

    ``"ndcg"``: w(r) = M_NDCG(r / C) = 1 / log2(1 + r / C);
    ``"ap"``: w(r) = M_AP(r / C) = C / r; a callable is called with the array
    r = 1..n; an array of length n is used as is. Weights must be positive.

    Examples
    --------
    >>> wmle_weights(3, "ap", C=10)
    array([10. ,  5. ,  3.33333333])
    >>> wmle_weights(2, lambda r: np.ones(r.size))
    array([1., 1.])
    """
    n = check_int(n, "n", low=1)
    r = np.arange(1, n + 1, dtype=float)
    if isinstance(weight, str):
        C = check_float(C, "C", low=0.0, low_open=True)
        if weight == "ndcg":
            w = 1.0 / np.log2(1.0 + r / C)
        elif weight == "ap":
            w = C / r
        else:
            raise ValueError(f"weight must be 'ndcg', 'ap', a callable or an array; got {weight!r}")
    elif callable(weight):
        w = np.broadcast_to(np.asarray(weight(r), dtype=float), (n,)).copy()
    else:
        w = weight
    return _check_weight_vector(w, n)


def wmle_fit(
    sampled_ranks,
    N,
    n,
    *,
    scheme="binomial",
    weight="ndcg",
    C=10,
    tol=None,
    max_iter=100,
    init=None,
    accelerate=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """Weighted maximum-likelihood rank distribution by EM, with diagnostics.

    Maximizes sum_u w(r_u) log P(r_u | pi) (AAAI21 eq 22) by the update
    (AAAI21 eq 23)

        pi_R <- sum_r [P~(r) w(r) / sum_s P~(s) w(s)] pi_R P(r|R) / sum_j pi_j P(r|j),

    i.e. the EM core of :func:`mle_fit` run on the weighted counts.

    Parameters
    ----------
    weight : {"ndcg", "ap"}, callable or array_like, default "ndcg"
        See :func:`wmle_weights`. AAAI21 Tables 2-4 use "ndcg" with C = 10.
    C : float, default 10
        Slows the decay of the weight (C > 1 in AAAI21).
    Other parameters as :func:`mle_fit` (``loglik`` is the weighted one;
    ``N`` may be per-user item counts; ``grid_tol`` the compressed kernel).

    Returns
    -------
    EMResult

    References
    ----------
    AAAI21 eqs 22-23; TORS24 Appendix D (weighted form, eqs 57-58).

    Examples
    --------
    >>> r = [1, 1, 2, 4, 5]
    >>> a = wmle(r, 30, 5, weight=lambda r: np.full(r.size, 3.0))
    >>> bool(np.allclose(a, mle(r, 30, 5)))        # constant weights give the MLE
    True
    """
    r, N, n = _ranks_items(sampled_ranks, N, n)
    scheme = check_scheme(scheme)
    tol, max_iter, accelerate = _check_em_options(tol, max_iter, accelerate)
    w = wmle_weights(n, weight, C)
    if not isinstance(N, int):
        blocks = _peruser_blocks(r, np.full(r.size, n), N, scheme, _check_n_items_tol(n_items_tol),
                                 lambda s: w)
        return _em_core(blocks, int(N.max()), init, tol, max_iter, accelerate)
    grid = em_grid(N, n, scheme, grid_tol)
    if grid is not None:
        return _em_on_grid(*grid, _rank_counts(r, n) * w, init, tol, max_iter, accelerate)
    blocks = [_block(N, n, _rank_counts(r, n) * w, scheme)]
    return _em_core(blocks, N, init, tol, max_iter, accelerate)


def wmle(
    sampled_ranks,
    N,
    n,
    *,
    scheme="binomial",
    weight="ndcg",
    C=10,
    tol=None,
    max_iter=100,
    init=None,
    accelerate=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """Weighted-MLE estimate of the rank distribution (AAAI21 eqs 22-23).

    Same parameters as :func:`wmle_fit`; returns the length-N probability vector.

    References
    ----------
    AAAI21 eqs 22-23.

    Examples
    --------
    >>> pi = wmle([1, 1, 2, 3], N=40, n=4, weight="ap", C=10)
    >>> pi.shape, round(float(pi.sum()), 12)
    ((40,), 1.0)
    """
    return wmle_fit(
        sampled_ranks, N, n, scheme=scheme, weight=weight, C=C, tol=tol, max_iter=max_iter,
        init=init, accelerate=accelerate, n_items_tol=n_items_tol, grid_tol=grid_tol,
    ).pmf


# ----------------------------------------------------------------------------
# adaptive MLE
# ----------------------------------------------------------------------------
def adaptive_mle_fit(
    sampled_ranks,
    sample_sizes,
    N,
    *,
    scheme="binomial",
    tol=None,
    max_iter=100,
    init=None,
    accelerate=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """MLE of the rank distribution from users with different sample sizes (EM).

    User u has sampled rank r_u among n_u items, P(r_u | R; n_u) =
    Bin(r_u - 1; n_u - 1, (R-1)/(N-1)) (TORS24 eq 43). The EM of TORS24
    Appendix H (eqs 60-62), pi_k <- (1/M) sum_u P(R_u = k | r_u; pi), is
    computed on the sufficient statistics: the number of users per
    (n_u, r_u). Each distinct sample size contributes one block of kernel
    columns (only the observed ranks), so an iteration costs
    O(N x #distinct (n_u, r_u) pairs), not O(N M). With all sample sizes
    equal this is exactly :func:`mle_fit` (same code path).

    Why the plain kernel is the right likelihood under Algorithm 1 (TORS24
    uses it without comment): a user who stops at n_u = n_j > n_0 with rank
    r_u had r = 1 at every earlier size, i.e. all r_u - 1 items ranked above
    the held-out one are in the last batch. Given that r_u - 1 of the n_u - 1
    exchangeable sampled items rank above, the chance that they all fall in
    the last batch does not depend on R. So P(r_u, n_u | R) = c(r_u, n_u)
    P(r_u | R; n_u) with a constant c free of R, and the likelihood in pi,
    hence the EM and its fixed points, is that of eq 43 (for both schemes).

    Parameters
    ----------
    sampled_ranks : array_like of int, shape (M,)
        r_u in 1..n_u.
    sample_sizes : array_like of int, shape (M,)
        n_u in 2..N (e.g. from :func:`sampling_lib.sampling.adaptive_sample_ranks`).
    N : int or array_like of int, shape (M,)
        Number of items, or per-user candidate counts N_u >= n_u (groups of
        equal (N_u, n_u) share a kernel; the model is that of :func:`mle_fit`).
    scheme, tol, max_iter, init, accelerate, n_items_tol
        As :func:`mle_fit`. The default (100 EM iterations from uniform) is
        the protocol of :func:`mle_fit`; the authors' adaptive code runs 50.
    grid_tol : float or None
        As :func:`mle_fit`, used when all sample sizes are equal (one N);
        varying sizes run on the exact kernels.

    Returns
    -------
    EMResult

    References
    ----------
    TORS24 Sec 6.2 (eq 43) and Appendix H (eqs 60-62); Algorithm 1.

    Examples
    --------
    >>> r = [1, 3, 2, 1, 5]
    >>> a = adaptive_mle(r, [10, 10, 10, 10, 10], N=100)
    >>> bool(np.array_equal(a, mle(r, 100, 10)))
    True
    >>> adaptive_mle([1, 3, 1], [20, 10, 40], N=100).shape
    (100,)
    """
    if np.ndim(N) == 0:
        N = check_int(N, "N", low=2)
    else:
        N = check_n_items(N, np.size(sample_sizes))
    scheme = check_scheme(scheme)
    tol, max_iter, accelerate = _check_em_options(tol, max_iter, accelerate)
    Nmax = N if isinstance(N, int) else int(N.max())
    sizes = check_ranks(sample_sizes, Nmax, name="sample_sizes", upper_name="N")
    if sizes.min() < 2:
        raise ValueError(f"sample_sizes must lie in 2..N={Nmax}; got min {sizes.min()}")
    r = check_ranks(sampled_ranks, sizes.max(), name="sampled_ranks", upper_name="max(sample_sizes)")
    if r.shape != sizes.shape:
        raise ValueError(
            f"sampled_ranks and sample_sizes must have the same length; got {r.size} and {sizes.size}"
        )
    bad = np.flatnonzero(r > sizes)
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"sampled_ranks must lie in 1..sample_sizes; got sampled_ranks[{i}]={r[i]} > "
            f"sample_sizes[{i}]={sizes[i]}"
        )
    if not isinstance(N, int):
        _check_peruser(r, sizes, N, what="sample_sizes")
        blocks = _peruser_blocks(r, sizes, N, scheme, _check_n_items_tol(n_items_tol))
        return _em_core(blocks, Nmax, init, tol, max_iter, accelerate)
    grid = em_grid(N, int(sizes[0]), scheme, grid_tol) if np.unique(sizes).size == 1 else None
    if grid is not None:
        return _em_on_grid(*grid, _rank_counts(r, int(sizes[0])), init, tol, max_iter, accelerate)
    blocks = []
    for nb in np.unique(sizes):
        sel = sizes == nb
        blocks.append(_block(N, int(nb), _rank_counts(r[sel], int(nb)), scheme))
    return _em_core(blocks, N, init, tol, max_iter, accelerate)


def adaptive_mle(sampled_ranks, sample_sizes, N, *, scheme="binomial", tol=None, max_iter=100,
                 init=None, accelerate=None, n_items_tol=DEFAULT_N_ITEMS_TOL, grid_tol=None):
    """Adaptive-sampling MLE of the rank distribution (TORS24 Sec 6.2, Appendix H).

    Same parameters as :func:`adaptive_mle_fit`; returns the length-N
    probability vector.

    References
    ----------
    TORS24 Sec 6.2 (eq 43), Appendix H (eqs 60-62).

    Examples
    --------
    >>> pi = adaptive_mle([2, 1, 4], [10, 40, 10], N=200)
    >>> round(float(pi.sum()), 12)
    1.0
    """
    return adaptive_mle_fit(
        sampled_ranks, sample_sizes, N, scheme=scheme, tol=tol, max_iter=max_iter, init=init,
        accelerate=accelerate, n_items_tol=n_items_tol, grid_tol=grid_tol,
    ).pmf


# ----------------------------------------------------------------------------
# maximal entropy with squared distribution distance (MES)
# ----------------------------------------------------------------------------
_ETA_DEFAULT = {"tors": 0.01, "aaai": 0.001}


def _mes_lambda(eta, form, n):
    if form not in _ETA_DEFAULT:
        raise ValueError(f"form must be 'tors' or 'aaai'; got {form!r}")
    eta = _ETA_DEFAULT[form] if eta is None else check_float(eta, "eta", low=0.0, low_open=True)
    return eta, (eta / n if form == "tors" else eta)


def _mes_parts(pi, Kb, p, size=None):
    """(E, H): squared distance on the observed ranks and the entropy of pi.

    With grid multiplicities ``size``, pi holds bin masses spread uniformly
    over their bins: H = -sum_j pi_j log(pi_j / size_j).
    """
    d = pi @ Kb - p
    E = float(p @ (d * d))
    H = float(-special.xlogy(pi, pi).sum())
    if size is not None:
        H += float(pi @ np.log(size))
    return E, H


def _pooled_block(r, Nu, n, scheme, tol):
    """(pooled kernel columns, counts) of per-user item counts N_u (MES).

    Kbar(r | R) = (1/M) sum_u P(r | R; N_u, n) 1[R <= N_u]: the kernel of the
    pooled sampled-rank distribution, q(r) = (1/M) sum_u sum_{R <= N_u} pi_R
    P(r | R; N_u, n) = sum_R pi_R Kbar(r | R). Users of a bin of N_u
    (:func:`sampling_lib.kernels.n_items_bins`) share the kernel values of
    its N_b; each keeps its own support (the fraction of the bin's users
    with N_u >= R multiplies row R).
    """
    c = _rank_counts(r, n)
    cols = np.flatnonzero(c > 0) + 1
    M = Nu.size
    reps = n_items_bins(Nu, n, tol, scheme)
    Kbar = np.zeros((int(Nu.max()), cols.size))
    ub = np.unique(reps)
    for b in ub:
        b = int(b)
        cnt = np.bincount(Nu[reps == b], minlength=b + 1)[1:]
        frac = cnt[::-1].cumsum()[::-1] / M            # share of users with N_u >= R, R = 1..b
        Kbar[:b] += kernel_columns(b, n, cols, scheme, cache=ub.size <= 2) * frac[:, None]
    return Kbar, c[cols - 1]


def mes_objective(pmf, sampled_ranks, N, n, eta=None, *, form="tors", scheme="binomial"):
    """The MES objective lam * H(pi) - E(pi) to be maximized.

    E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25, TORS24
    eq 35), H the entropy in nats, lam = eta / n (TORS24 eq 36, ``form="tors"``)
    or lam = eta (AAAI21 eq 26, ``form="aaai"``). With per-user item counts
    ``N`` (array), P(r|R) is the pooled kernel of :func:`mes_fit` (exact, no
    binning).

    Returns
    -------
    float

    Examples
    --------
    >>> pi = np.full(4, 0.25)
    >>> round(mes_objective(pi, [1, 2], 4, 2, eta=0.2, form="tors"), 12)  # E = 0, H = log 4
    0.138629436112
    """
    r, N, n = _ranks_items(sampled_ranks, N, n)
    check_scheme(scheme)
    eta, lam = _mes_lambda(eta, form, n)
    if isinstance(N, int):
        pmf = check_pmf(pmf, N)
        Kb, cb = _block(N, n, _rank_counts(r, n), scheme)
    else:
        pmf = check_pmf(pmf, int(N.max()))
        Kb, cb = _pooled_block(r, N, n, scheme, 0.0)
    E, H = _mes_parts(pmf, Kb, cb / cb.sum())
    return lam * H - E


_KKT_TOL = 1e-9


def _mes_dual_newton(Kb, p, lam, tol, max_iter, size=None):
    """Dual Newton method for min_{pi in simplex} E(pi) - lam H(pi).

    With s = sqrt(p) and B = Kb * s (N x k), E(pi) = ||s * (Kb^T pi - p)||^2 =
    max_y y.(s*(Kb^T pi - p)) - ||y||^2 / 4, and min_pi a.pi - lam H(pi) =
    -lam logsumexp(-a / lam) at pi = softmax(-a / lam). Hence the dual

        g(y) = -||y||^2 / 4 - y.(s*p) - lam logsumexp(-B y / lam),

    a smooth, strongly concave function of k <= n variables, maximized by a
    damped Newton method (Armijo backtracking). The primal iterate is
    pi(y) = softmax(-B y / lam); f(pi(y)) - g(y) >= 0 is the duality gap.

    Stopping: damped Newton until the gap <= tol * (E + lam H) (or rounding
    stops the line search), then up to 5 full "polishing" Newton steps while
    the optimality residual max_R |log pi_R + dE/dpi_R / lam - c| (c its
    pi-average) decreases, until it is <= 1e-9. Converged means gap <=
    max(tol, 1e-9) relative and residual <= 1e-6. The gap alone is not enough
    for small lam: it is quadratic in y - y*, while the residual is
    (B (y* - y))_R / lam.

    On the compressed grid (``size``: ranks per bin, all rows of a bin equal)
    the rows are the bins and pi(y) = softmax(-B y / lam + log size) holds
    the bin masses: min over pi of a.pi - lam H(pi) sums exp(-a_R / lam) over
    the size_j equal ranks of each bin.
    """
    N, k = Kb.shape
    s = np.sqrt(p)
    B = Kb * s
    sp = s * p
    logsize = 0.0 if size is None else np.log(size)

    def dual(y):
        z = -(B @ y) / lam + logsize
        lse = special.logsumexp(z)
        pi = np.exp(z - lse)
        return -0.25 * (y @ y) - y @ sp - lam * lse, pi

    def primal(pi):
        E, H = _mes_parts(pi, Kb, p, size)
        return E - lam * H, E, H

    def kkt(y, pi):
        # log pi + grad E / lam = (B (2 s (q - p) - y)) / lam + const
        v = (B @ (2.0 * s * (pi @ Kb - p) - y)) / lam
        return float(np.abs(v - pi @ v).max())

    def newton_direction(y, pi):
        m = B.T @ pi
        grad = -0.5 * y - sp + m
        Cm = (B.T * pi) @ B - np.outer(m, m)  # B^T (diag(pi) - pi pi^T) B
        Hn = Cm / lam
        Hn[np.diag_indices_from(Hn)] += 0.5
        try:
            d = linalg.solve(Hn, grad, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            d = linalg.lstsq(Hn, grad)[0]
        return d, float(grad @ d)

    y = np.zeros(k)
    gval, pi = dual(y)
    trace = []
    converged = False
    it = 0
    while True:
        f, E, H = primal(pi)
        trace.append(-f)
        gap = f - gval
        scale = E + lam * H
        res = kkt(y, pi)
        if gap <= tol * scale:
            break
        if it >= max_iter:
            break
        it += 1
        d, slope = newton_direction(y, pi)
        t = 1.0
        g_new = -np.inf
        while slope > 0:
            g_new, pi_new = dual(y + t * d)
            if g_new >= gval + 0.25 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if slope <= 0 or g_new <= gval:
            break  # rounding stops the line search; the polish below decides
        y = y + t * d
        gval, pi = g_new, pi_new
    # Polish: near the optimum full Newton steps converge quadratically; the
    # line search on g cannot see progress below its rounding level, the
    # optimality residual can. Keep steps while the residual drops (at most 5).
    for _ in range(5):
        if res <= _KKT_TOL or it >= max_iter:
            break
        d, _ = newton_direction(y, pi)
        g_new, pi_new = dual(y + d)
        res_new = kkt(y + d, pi_new)
        if not res_new < res:
            break
        it += 1
        y = y + d
        gval, pi, res = g_new, pi_new, res_new
        f, E, H = primal(pi)
        trace.append(-f)
        gap = f - gval
        scale = E + lam * H
    converged = bool(gap <= max(tol, 1e-9) * scale and res <= 1e-6)
    return pi, it, np.asarray(trace), float(gap), float(res), converged, y


def _mes_batch(Kb, P, lam, size, q0, p0, tol=1e-13, max_iter=50, outer=None):
    """MES bin masses for B sampled-rank distributions at once (bootstrap replicates).

    The dual Newton method of :func:`_mes_dual_newton` run on all rows of
    ``P`` (B, k) together, with the same kernel columns ``Kb`` (G, k) (the
    full sample's observed ranks; a replicate's unobserved rank has P = 0 and
    drops out of E). Warm start at the full-sample solution: pi(y) depends
    on y through B y = Kb (s y), and the full-sample optimum has
    s0 y0 = 2 p0 (q0 - p0) (optimality y* = 2 s (q - p)), so the start
    y_b = 2 p0 (q0 - p0) / s_b (0 where s_b = 0) gives every replicate the
    full-sample pi. Each replicate
    takes damped Newton steps (its own Hessian, batched solves, Armijo
    backtracking on its own dual) until its duality gap is <= tol (E + lam H)
    and its optimality residual <= 1e-9 (the criteria of the one-fit
    solver), or until no step improves its dual, when it is accepted under
    the one-fit solver's convergence test (gap <= max(tol, 1e-9) relative,
    residual <= 1e-6); the others have ``done`` False so that the caller
    refits them one by one. ``outer`` caches :func:`grid_outer` (``Kb``).

    Returns
    -------
    pi : ndarray (B, G)
    done : ndarray of bool (B,)
    """
    P = np.asarray(P, dtype=float)
    Bn, k = P.shape
    logsize = np.log(size)
    S = np.sqrt(P)
    SP = S * P
    from ._linear import batched_gram
    u0 = 2.0 * p0 * (q0 - p0)
    y = np.divide(u0[None, :], S, out=np.zeros_like(S), where=S > 0)

    def dual(y, idx):
        z = -((y * S[idx]) @ Kb.T) / lam + logsize
        lse = special.logsumexp(z, axis=1)
        pi = np.exp(z - lse[:, None])
        return -0.25 * np.einsum("bk,bk->b", y, y) - np.einsum("bk,bk->b", y, SP[idx]) - lam * lse, pi

    def primal(pi, idx):
        d = pi @ Kb - P[idx]
        E = np.einsum("bk,bk->b", P[idx], d * d)
        H = -special.xlogy(pi, pi).sum(axis=1) + pi @ logsize
        return E - lam * H, E + lam * H, d

    act = np.arange(Bn)
    g, pi = dual(y, act)
    out = np.empty((Bn, Kb.shape[0]))
    done = np.zeros(Bn, dtype=bool)
    stalled = np.zeros(Bn, dtype=bool)

    def residual(y, pi, d, Sa):
        # optimality residual of the one-fit solver: v = B (2 s (q - p) - y) / lam
        v = ((2.0 * Sa * d - y) * Sa) @ Kb.T / lam
        return np.abs(v - np.einsum("bg,bg->b", pi, v)[:, None]).max(axis=1)

    for _ in range(max_iter + 1):
        f, scale, d = primal(pi, act)
        Sa = S[act]
        res = residual(y, pi, d, Sa)
        gap = f - g
        ok = (gap <= tol * scale) & (res <= _KKT_TOL)
        ok |= stalled & (gap <= max(tol, 1e-9) * scale) & (res <= 1e-6)
        out[act[ok]] = pi[ok]
        done[act[ok]] = True
        keep = ~(ok | stalled)            # stalled and not certified: refitted by the caller
        act, y, g, pi, Sa, res = act[keep], y[keep], g[keep], pi[keep], Sa[keep], res[keep]
        if act.size == 0:
            break
        m = (pi @ Kb) * Sa
        grad = -0.5 * y - SP[act] + m
        C = batched_gram(pi, Kb, outer)
        qa = pi @ Kb
        C -= qa[:, :, None] * qa[:, None, :]
        H = C * (Sa[:, :, None] * Sa[:, None, :]) / lam
        H[:, np.arange(k), np.arange(k)] += 0.5
        step = np.linalg.solve(H, grad[..., None])[..., 0]
        slope = np.einsum("bk,bk->b", grad, step)
        t = np.ones(act.size)
        gn, pn = dual(y + step, act)
        # an increase below the rounding level of the dual cannot be seen by the
        # line search: those replicates go to the polish below
        tiny = slope <= 1e-13 * np.maximum(1.0, np.abs(g))
        for _ in range(30):
            bad = (gn < g + 0.25 * t * slope) & ~tiny
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
            gb, pb = dual(y[bad] + t[bad, None] * step[bad], act[bad])
            gn[bad], pn[bad] = gb, pb
        moved = (gn > g) & ~tiny
        stalled = np.zeros(act.size, dtype=bool)
        if (~moved).any():
            # no increase along the step (rounding): try the full Newton step, the
            # one-fit solver's polish, and keep it if the residual drops
            sel = np.flatnonzero(~moved)
            yf = y[sel] + step[sel]
            gf, pf = dual(yf, act[sel])
            _, _, df = primal(pf, act[sel])
            better = residual(yf, pf, df, Sa[sel]) < res[sel]
            y[sel[better]], g[sel[better]], pi[sel[better]] = yf[better], gf[better], pf[better]
            stalled[sel[~better]] = True
        y = np.where(moved[:, None], y + t[:, None] * step, y)
        g = np.where(moved, gn, g)
        pi = np.where(moved[:, None], pn, pi)
    return out, done


def _mes_cvxpy(Kb, p, lam, solver, size=None):
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - cvxpy is a declared dependency
        raise ImportError("mes(solver='cvxpy') needs cvxpy; use solver='fast'") from exc
    installed = cp.installed_solvers()
    if solver is None:
        if "CLARABEL" in installed:
            solver = "CLARABEL"
        elif "SCS" in installed:
            warnings.warn(
                "Clarabel is not installed; falling back to SCS, a first-order solver "
                "whose accuracy is lower (about 1e-4-1e-6 relative)",
                UserWarning,
                stacklevel=4,
            )
            solver = "SCS"
        else:
            raise ImportError(
                "mes(solver='cvxpy') needs the Clarabel or SCS solver for the exponential cone; "
                f"installed: {installed}; use solver='fast'"
            )
    elif solver not in installed:
        raise ValueError(f"cvxpy_solver {solver!r} is not installed; installed: {installed}")
    N = Kb.shape[0]
    s = np.sqrt(p)
    x = cp.Variable(N)
    # Minimize (E - lam H) / lam: same minimizer, objective of order log N,
    # which suits the solvers' absolute tolerances.
    resid = cp.multiply(s, Kb.T @ x - p)
    # grid: bin masses x_j over size_j equal ranks, H = sum entr(x) + x . log(size)
    ent = cp.sum(cp.entr(x)) + (0.0 if size is None else x @ np.log(size))
    obj = cp.Minimize(cp.sum_squares(resid) / lam - ent)
    prob = cp.Problem(obj, [cp.sum(x) == 1, x >= 0])
    opts = {}
    if solver == "CLARABEL":
        opts = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    elif solver == "SCS":
        opts = dict(eps_abs=1e-9, eps_rel=1e-9, max_iters=200_000)
    prob.solve(solver=solver, **opts)
    if prob.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        raise RuntimeError(f"cvxpy solver {solver} failed on the MES problem: status {prob.status}")
    pi = np.clip(np.asarray(x.value, dtype=float), 0.0, None)
    pi /= pi.sum()
    stats = prob.solver_stats
    n_iter = int(stats.num_iters) if stats is not None and stats.num_iters is not None else -1
    return pi, n_iter, solver, prob.status == "optimal"


def mes_fit(
    sampled_ranks,
    N,
    n,
    eta=None,
    *,
    form="tors",
    solver="auto",
    scheme="binomial",
    tol=1e-13,
    max_iter=200,
    cvxpy_solver=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """Maximal-entropy rank distribution with squared distribution distance (MES).

    Solves

        max_pi  lam * H(pi) - E(pi)   s.t.  pi_R >= 0,  sum_R pi_R = 1,

    with E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25,
    TORS24 eq 35) and H the entropy (natural logarithm). The objective is
    strictly concave, so the solution is unique (and has full support).

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
    N : int or array_like of int, shape (M,)
        Number of items, or per-user candidate counts N_u (see Notes).
    n : int
    eta : float, optional
        Entropy weight. Default 0.01 for ``form="tors"`` (TORS24 Sec 8.3) and
        0.001 for ``form="aaai"`` (AAAI21 Tables 2-4).
    form : {"tors", "aaai"}, default "tors"
        ``"tors"``: lam = eta / n (TORS24 eq 36, also the authors' code, which
        minimizes n E - eta H); ``"aaai"``: lam = eta (AAAI21 eq 26).
    solver : {"auto", "fast", "cvxpy"}, default "auto"
        ``"fast"``: damped Newton on the k-dimensional dual (k = number of
        distinct observed sampled ranks <= n; O(N k^2) per step), stopped on
        the certified duality gap and the optimality residual (see
        :class:`MESResult`); raises ``RuntimeError`` if it does not converge
        in ``max_iter`` steps. ``"cvxpy"``: the reference conic
        formulation (exponential cone) solved by Clarabel; if Clarabel is not
        installed, SCS with a warning (lower accuracy); ImportError if neither.
        ``"auto"``: the fast solver, and if it does not converge, a
        :class:`sampling_lib.exceptions.ConvergenceWarning` with its
        diagnostics and the cvxpy solution (``solver`` of the result tells
        which one was used).
    scheme : {"binomial", "hypergeometric"}
    tol : float, default 1e-13
        Fast solver: stop when the duality gap <= tol * (E + lam H). Newton
        converges quadratically, so the default costs one or two steps more
        than 1e-10 and makes the optimality condition hold to ~1e-9 (the gap
        is quadratic in the distance to the optimum). If rounding stops all
        progress first, a gap <= 1e-9 relative is accepted.
    max_iter : int, default 200
        Fast solver: maximum Newton steps.
    cvxpy_solver : str, optional
        Force a cvxpy solver name (e.g. "SCS").
    n_items_tol : float in [0, 1), default :data:`sampling_lib.kernels.DEFAULT_N_ITEMS_TOL`
        Per-user N only: bin tolerance of the item counts (as :func:`mle_fit`).
    grid_tol : float in [0, 1) or None, default None (exact)
        Solve on the compressed kernel K' of
        :func:`sampling_lib.kernels.rank_grid` (one N; the registry's ``mes``
        uses :data:`sampling_lib.kernels.DEFAULT_GRID_TOL`). The rows of K'
        are equal within a bin, so the (unique, full-support) MES solution
        on K' is uniform within each bin (its optimality condition
        pi = softmax(-grad E / lam) is), and the problem is the G-atom one
        with the entropy -sum_j p_j log(p_j / size_j): solved exactly as
        that, O(G k^2) per Newton step. What the TV bound gives: for every
        pi, sum_r |q'_r - q_r| <= 2 grid_tol (q = pi K, q' = pi K') and
        |E'(pi) - E(pi)| = |sum_r P~(r) (q'_r - q_r)(q'_r + q_r - 2 P~(r))|
        <= eps := 4 grid_tol max_r P~(r), uniformly in pi; hence the grid
        solution is 2 eps-optimal for the exact objective, and since
        lam H is lam-strongly concave in the l1 norm (Pinsker), it lies
        within l1 distance 2 sqrt(eps / lam) of the exact solution: any
        metric 0 <= F <= 1 moves by at most sqrt(eps / lam) (rigorous but
        loose; the tests check the 2 eps objective gap).

    Returns
    -------
    MESResult

    Notes
    -----
    *Per-user item counts* (sampling-lab; model of :func:`mle_fit`). The
    squared distance compares the pooled sampled-rank distribution P~(r) with
    its model q(r) = (1/M) sum_u sum_{R <= N_u} pi_R P(r | R; N_u, n) =
    sum_R pi_R Kbar(r | R), linear in pi with the pooled kernel
    Kbar(r | R) = (1/M) sum_u P(r | R; N_u, n) 1[R <= N_u]; the solver is
    unchanged. Equal N_u give exactly the result of the int. A bootstrap
    replicate rebuilds Kbar (O(groups x N x k)).

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.

    Examples
    --------
    >>> r = [1, 1, 2, 3, 3, 5]
    >>> res = mes_fit(r, 30, 5)
    >>> res.converged, res.pmf.shape, round(float(res.pmf.sum()), 12)
    (True, (30,), 1.0)
    >>> bool(abs(res.objective - mes_objective(res.pmf, r, 30, 5)) < 1e-12)
    True
    """
    r, N, n = _ranks_items(sampled_ranks, N, n)
    scheme = check_scheme(scheme)
    eta, lam = _mes_lambda(eta, form, n)
    if solver not in ("auto", "fast", "cvxpy"):
        raise ValueError(f"solver must be 'auto', 'fast' or 'cvxpy'; got {solver!r}")
    tol = check_float(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    grid = em_grid(N, n, scheme, grid_tol) if isinstance(N, int) else None
    size = None
    if grid is not None:
        c = _rank_counts(r, n)
        cols = np.flatnonzero(c > 0)
        Kb, p, size = np.ascontiguousarray(grid[1][:, cols]), c[cols] / c.sum(), grid[0].size
    elif isinstance(N, int):
        c = _rank_counts(r, n)
        Kb, cb = _block(N, n, c, scheme)
        p = cb / c.sum()
    else:
        Kb, cb = _pooled_block(r, N, n, scheme, _check_n_items_tol(n_items_tol))
        p = cb / cb.sum()
    if solver in ("auto", "fast"):
        pi, it, trace, gap, res, converged, _ = _mes_dual_newton(Kb, p, lam, tol, max_iter, size)
        msg = (f"MES fast solver did not converge: duality gap {gap:.3g}, optimality residual "
               f"{res:.3g} after {it} Newton steps (tol={tol:g} relative, lam={lam:g})")
        if not converged and solver == "fast":
            raise RuntimeError(msg + "; try solver='cvxpy' (or 'auto') or a larger eta")
        if not converged:
            warnings.warn(msg + "; using the cvxpy reference solver", ConvergenceWarning,
                          stacklevel=3)
            solver = "cvxpy"
        name = "fast"
    if solver == "cvxpy":
        pi, it, name, converged = _mes_cvxpy(Kb, p, lam, cvxpy_solver, size)
        name = f"cvxpy:{name}"
        gap = float("nan")
        res = float("nan")
        trace = None
    E, H = _mes_parts(pi, Kb, p, size)
    obj = lam * H - E
    if trace is None:
        trace = np.array([obj])
    if grid is not None:
        pi = grid[0].expand(pi)
    return MESResult(
        pmf=pi, objective=float(obj), entropy=H, distance=E, lam=lam, eta=eta, form=form,
        solver=name, n_iter=int(it), objective_trace=trace, gap=gap, kkt_residual=res,
        converged=bool(converged),
    )


def mes(sampled_ranks, N, n, eta=None, *, form="tors", solver="auto", scheme="binomial",
        tol=1e-13, max_iter=200, cvxpy_solver=None, n_items_tol=DEFAULT_N_ITEMS_TOL, grid_tol=None):
    """MES estimate of the rank distribution (TORS24 eq 36 / AAAI21 eq 26).

    Same parameters as :func:`mes_fit`; returns the length-N probability vector.

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.

    Examples
    --------
    >>> pi = mes([1, 2, 2, 4], N=25, n=4, eta=0.01)
    >>> pi.shape, bool(pi.min() > 0)
    ((25,), True)
    """
    return mes_fit(
        sampled_ranks, N, n, eta, form=form, solver=solver, scheme=scheme, tol=tol,
        max_iter=max_iter, cvxpy_solver=cvxpy_solver, n_items_tol=n_items_tol, grid_tol=grid_tol,
    ).pmf
