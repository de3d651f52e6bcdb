"""The one EM engine: mixing weights of a finite mixture, for one fit or a batch of fits.

Every EM of the library runs here: the MLE, weighted MLE and adaptive MLE of
the rank distribution (AAAI21 eqs 18-23, TORS24 eqs 31-34 and 43, Appendix H
eqs 60-62), on the exact kernel, the compressed rank grid or per-user item
counts; their bootstrap replicates ("max_iter EM steps from init" rerun on all
replicates at once); the priors of BV_MLE / MN_MLE; the popularity estimators;
:func:`mixture_em` for any likelihood matrix; and the batched fits of the
simulation studies.

The problem. Observation cells k (a sampled rank, or a (sample size, rank)
pair, ...) carry weights c_k >= 0 (user counts, possibly weighted), and
component g (a global rank R, a grid bin, ...) gives cell k the probability
L[g, k]. EM maximizes sum_k c_k log q_k, q = pi L, over distributions pi by

    pi_g <- pi_g g_g,   g_g = (1/W) sum_k c_k L[g, k] / q_k,   W = sum_k c_k      (AAAI21 eq 21)

The likelihood arrives as **blocks** (operator, weights): an operator is an
(N_b, k) array of kernel columns (rows beyond N_b are 0: users with N_b
candidates) or a :class:`TruncatedOp` (cells with their own support 1..N_u
sharing kernel values, see :func:`em_operators`); the weights have shape (k,)
for one fit or (B, k) for B fits sharing the operators (bootstrap replicates,
the repeats of a study). The engine always works on (B, N) rows: one fit is a
batch of one, so there is one E-step, one SQUAREM safeguard and one stopping
rule.

Modes:

* ``tol=None``: exactly ``max_iter`` plain EM steps from ``init`` (the
  papers' protocol: the authors' code runs 100 steps from the uniform
  distribution);
* ``tol`` given: iterate until the certified gap max_g g_g - 1 <= tol (the
  gap bounds the per-weight log-likelihood suboptimality), plain EM or
  SQUAREM (Varadhan and Roland 2008, scheme S3) with a monotonicity
  safeguard: an extrapolated cycle is kept only if it is at least as good as
  two plain EM steps.

Rows are independent: a row stops when it meets its own criterion, and a row
whose distribution gives probability 0 to a cell it observes is marked
invalid without affecting the others.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 18-23.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 31-34, 43, 60-62.
.. [SQUAREM] Varadhan, Roland. Simple and globally convergent methods for
   accelerating the convergence of any EM algorithm. Scand. J. Stat. 35 (2008).
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass

import numpy as np

from .._arrays import unique_ints
from .._validation import check_float, check_int, check_pmf
from ..exceptions import ConvergenceWarning
from ..kernels import kernel_columns, kernel_groups, n_items_bins
from ._results import EMResult

__all__ = ["mixture_em", "em_core_batch"]


# ----------------------------------------------------------------------------
# operators: the likelihood columns of the blocks
# ----------------------------------------------------------------------------
_TRUNC_ELEMS = 1 << 22          # batch x rows x columns elements per truncated-operator chunk


class TruncatedOp:
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
        self.distinct = unique_ints(self.flat).size == self.flat.size

    def _chunks(self, B):
        step = max(1, _TRUNC_ELEMS // max(1, self.rows * self.k))
        return [(a, min(B, a + step)) for a in range(0, B, step)]

    def q(self, pi):
        """P(cell | pi) for a batch of distributions (B, >= rows): (B, cells)."""
        out = np.empty((pi.shape[0], self.flat.size))
        for a, b in self._chunks(pi.shape[0]):
            P = pi[a:b, : self.rows, None] * self.K
            np.cumsum(P, axis=1, out=P)
            out[a:b] = P.reshape(b - a, -1)[:, self.flat]
        return out

    def back(self, v, g):
        """g[:, :rows] += sum_c v[:, c] (column of cell c), for a batch v (B, cells)."""
        for a, b in self._chunks(v.shape[0]):
            S = np.zeros((b - a, self.rows * self.k))
            if self.distinct:
                S[:, self.flat] = v[a:b]
            else:
                np.add.at(S, (slice(None), self.flat), v[a:b])
            S = S.reshape(b - a, self.rows, self.k)[:, ::-1].cumsum(axis=1)[:, ::-1]
            g[a:b, : self.rows] += np.einsum("brk,rk->br", S, self.K)


class RowBlockOp:
    """Kernel columns whose entries outside rows start..start + K.shape[0] - 1 are negligible.

    ``q(pi) = pi[:, start:stop] @ K`` and ``back`` adds ``v @ K^T`` to those rows only: the
    columns' bands (:func:`_row_blocks`), so an E-step reads the band, not the zero-padded block.
    """

    def __init__(self, K, start):
        self.K = K
        self.start = int(start)
        self.stop = self.start + K.shape[0]

    def q(self, pi):
        """P(cell | pi) for a batch of distributions (B, >= stop): (B, cells)."""
        return pi[:, self.start:self.stop] @ self.K

    def back(self, v, g):
        """g[:, start:stop] += v @ K^T."""
        g[:, self.start:self.stop] += v @ self.K.T


#: Entries below this fraction of their column's largest are left out of :class:`RowBlockOp` bands.
#: A cell's probability then moves by at most this fraction of its column's peak (hypergeometric and
#: binomial columns fall off faster than geometrically, so the band is barely wider than at 1e-17).
BAND_TOL = 1e-30
#: Columns per band block of :func:`_row_blocks` (at least; the last block takes the rest).
_BAND_COLS = 128


def _row_blocks(K, cells):
    """The columns of a zero-padded block K (rows, cols) as :class:`RowBlockOp` bands.

    Each column's band is its rows with entries >= :data:`BAND_TOL` times the column's largest;
    columns sorted by the band's first row are cut into blocks of :data:`_BAND_COLS`, each stored on
    the union of its columns' bands. On a stand-in of NCF's MovieLens-1M file (4,677 cells, 3,686 rows)
    the bands hold 43% of the block, so an E-step reads about half as much.
    """
    big = K >= BAND_TOL * K.max(axis=0, keepdims=True)
    first = np.argmax(big, axis=0)
    last = K.shape[0] - np.argmax(big[::-1], axis=0)
    order = np.argsort(first, kind="stable")
    out = []
    for a in range(0, order.size, _BAND_COLS):
        j = order[a:a + _BAND_COLS] if order.size - a >= 2 * _BAND_COLS else order[a:]
        r0, r1 = int(first[j].min()), int(last[j].max())
        out.append((RowBlockOp(np.ascontiguousarray(K[r0:r1, j]), r0), cells[j]))
        if j.size > _BAND_COLS:
            break
    return out


def op_array(op):
    """The kernel array an operator holds (a plain block is its own array)."""
    return op if isinstance(op, np.ndarray) else op.K


def op_q(op, pi):
    """P(cell | pi) of an operator's cells for distributions ``pi`` (B, N): (B, k)."""
    if isinstance(op, np.ndarray):
        return pi[:, : op.shape[0]] @ op if op.shape[0] != pi.shape[1] else pi @ op
    return op.q(pi)


def op_back(op, v, g):
    """g += the gradient contributions sum_c v[:, c] (kernel column of cell c), in place."""
    if isinstance(op, np.ndarray):
        g[:, : op.shape[0]] += v @ op.T
        return
    op.back(v, g)


#: The last operators of :func:`em_operators` are kept for the next call on the same cells (a fit and
#: its bootstrap) when they hold at most this many bytes.
OPS_CACHE_BYTES = 256 << 20
_OPS_CACHE = {}


def em_operators(n_items, sizes, ranks, scheme="binomial", *, tol=0.0):
    """EM operators of a table of cells (N_u, n_u, r): a list of (operator, cell indices).

    Groups of :func:`sampling_lib.kernels.kernel_groups`; a group whose cells
    all have the group's N (always when ``tol`` is 0) is a plain block of
    kernel columns with N_b rows (rows beyond are 0); a binned group is a
    :class:`TruncatedOp` that keeps every cell's own support 1..N_u. Many
    plain groups are concatenated into one zero-padded block when the padding
    at most doubles the memory (one matrix product instead of a Python loop),
    stored as the bands of its columns (:class:`RowBlockOp`, a few dozen products).
    The operators of the last call (read-only) are returned again for the same
    cells, scheme and tolerance (a fit and then its bootstrap build the same
    kernels), up to :data:`OPS_CACHE_BYTES`.
    """
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (n_items, sizes, ranks)]
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(a.tobytes())
        h.update(b"|")
    key = (scheme, float(tol), h.digest())
    if key in _OPS_CACHE:
        return _OPS_CACHE[key]
    ops = _build_operators(*arrays, scheme, tol)
    _OPS_CACHE.clear()
    if sum(op_array(op).nbytes for op, _ in ops) <= OPS_CACHE_BYTES:
        for op, idx in ops:
            op_array(op).setflags(write=False)
            idx.setflags(write=False)
        _OPS_CACHE[key] = ops
    return ops


def _build_operators(n_items, sizes, ranks, scheme, tol):
    """The operators of :func:`em_operators`, built."""
    _check_kernel_memory(n_items, sizes, ranks, scheme, tol)
    groups = kernel_groups(n_items, sizes, ranks, scheme, tol=tol)
    plain = [g for g in groups if g.exact]
    ops = [(TruncatedOp(g.K, g.col, g.end), g.cells) for g in groups if not g.exact]
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
            return _row_blocks(K, np.concatenate([g.cells for g in plain])) + ops
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


def rank_histogram(sampled_ranks, n):
    """Counts of the sampled ranks 1..n (float, length n)."""
    return np.bincount(sampled_ranks - 1, minlength=n).astype(float)


def observed_block(N, n, counts, scheme):
    """The EM block (kernel columns, weights) of one (N, n) restricted to ranks with positive weight."""
    cols = np.flatnonzero(counts > 0) + 1
    return kernel_columns(N, n, cols, scheme), np.asarray(counts, dtype=float)[cols - 1]


# ----------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------
def check_em_options(tol, max_iter, accelerate):
    """Checked (tol, max_iter, accelerate) of an EM estimator (``tol`` None or > 0)."""
    tol = None if tol is None else check_float(tol, "tol", low=0.0, low_open=True)
    # max_iter = 0 would return the starting point as the estimate: at least one step
    max_iter = check_int(max_iter, "max_iter", low=1)
    if accelerate not in (None, "squarem"):
        raise ValueError(f"accelerate must be None or 'squarem'; got {accelerate!r}")
    if accelerate is not None and tol is None:
        raise ValueError(
            "accelerate='squarem' needs a tolerance tol: with tol=None the estimator is "
            "defined by a fixed number of plain EM iterations"
        )
    return tol, max_iter, accelerate


def check_init(init, N):
    """The starting distribution (length N; default uniform), copied."""
    if init is None:
        return np.full(N, 1.0 / N)
    return check_pmf(init, N, name="init").copy()


def _rowdot(a, b):
    """Row-wise dot products of (B, k) arrays, each one BLAS dot (as ``a[i] @ b[i]``): a fit's
    numbers do not depend on how many other fits share its batch."""
    return np.matmul(a[:, None, :], b[:, :, None])[:, 0, 0]


def _estep(pi, blocks, W):
    """Log-likelihood, normalized gradient g = (1/W) dl/dpi and validity, per row.

    ``pi`` (B, N), blocks of (operator, weights (B, k)), W (B,). A row whose
    distribution gives probability 0 to a cell it observes (weight > 0) is
    invalid (ll = -inf); cells of weight 0 do not count, so one operator
    serves rows that observe different cells (bootstrap replicates). The EM
    map is pi -> pi * g (AAAI21 eq 21 / 23, TORS24 eq 34 / 62).
    """
    ll = np.zeros(pi.shape[0])
    g = np.zeros_like(pi)
    ok = np.ones(pi.shape[0], dtype=bool)
    for op, C in blocks:
        q = op_q(op, pi)
        obs = C > 0.0
        bad = (q <= 0.0) & obs
        ok &= ~bad.any(axis=1)
        safe = np.where(obs & ~bad, q, 1.0)
        ll += _rowdot(C, np.log(safe))
        op_back(op, np.where(obs, C / safe, 0.0), g)
    ll[~ok] = -np.inf
    g /= W[:, None]
    return ll, g, ok


def _em_update(pi, g):
    """One EM step pi -> pi * g, renormalized (exact in exact arithmetic; removes drift)."""
    pi = pi * g
    pi /= pi.sum(axis=-1, keepdims=True)
    return pi


@dataclass
class EMRows:
    """The engine's output for B fits: arrays, one row per fit (see :func:`em_rows`)."""

    pmf: np.ndarray          # (B, N)
    loglik: np.ndarray       # (B,)
    n_iter: np.ndarray       # (B,)
    n_estep: np.ndarray      # (B,)
    gap: np.ndarray          # (B,)
    traces: list | None      # B lists of log-likelihoods (or None)


def em_rows(blocks, N, init=None, *, tol=None, max_iter=100, accelerate=None, trace=True):
    """EM (or monotone SQUAREM) on blocks whose weights have shape (B, k): the one EM loop.

    Parameters
    ----------
    blocks : list of (operator, weights)
        Operators as :func:`op_q` takes them; weights (B, k), finite, >= 0,
        every row with a positive total.
    N : int
        Number of mixture components (rows of the distributions).
    init : array_like, shape (N,), optional
        Starting distribution shared by the rows (default uniform). Zero
        entries stay zero; the gap is then taken on the support of ``init``.
    tol, max_iter, accelerate
        Module docstring; checked by :func:`check_em_options`.
    trace : bool
        Keep every row's log-likelihood trace.

    Returns
    -------
    EMRows
    """
    tol, max_iter, accelerate = check_em_options(tol, max_iter, accelerate)
    B = blocks[0][1].shape[0]
    W = sum(C.sum(axis=1) for _, C in blocks)
    pi0 = check_init(init, N)
    pi = np.broadcast_to(pi0, (B, N)).copy()
    ll, g, ok = _estep(pi, blocks, W)
    if not ok.all():
        raise ValueError(
            "init gives probability 0 to an observed sampled rank; "
            "use an init with positive mass on more global ranks"
        )
    # zero weights of init stay zero: the problem solved is the MLE over
    # distributions supported on supp(init), and the gap is taken there
    supp = None if np.all(pi0 > 0.0) else pi0 > 0.0

    def gaps(g):
        return (g if supp is None else g[:, supp]).max(axis=1) - 1.0

    traces = [[float(v)] for v in ll] if trace else None
    n_estep = np.ones(B, dtype=np.int64)
    n_iter = np.zeros(B, dtype=np.int64)
    gap = gaps(g)
    everyone = np.arange(B)
    while True:
        run = n_iter < max_iter
        if tol is not None:
            run &= gap > tol
        A = everyone if run.all() else np.flatnonzero(run)
        if A.size == 0:
            break
        n_iter[A] += 1
        sub = A.size < B

        def rows_of(rows):
            return [(op, C[rows]) for op, C in blocks]

        bA, WA = (rows_of(A), W[A]) if sub else (blocks, W)
        if accelerate is None:
            pA = _em_update(pi[A] if sub else pi, g[A] if sub else g)
            lA, gA, _ = _estep(pA, bA, WA)
            n_estep[A] += 1
        else:
            # SQUAREM (scheme S3) with a monotonicity safeguard: the extrapolated
            # cycle is accepted only if it is at least as good as two plain EM
            # steps, otherwise the two EM steps are kept.
            p0 = pi[A]
            p1 = _em_update(p0, g[A])
            l1, g1, _ = _estep(p1, bA, WA)
            p2 = _em_update(p1, g1)
            l2, g2, _ = _estep(p2, bA, WA)
            n_estep[A] += 2
            pA, lA, gA = p2, l2, g2
            r = p1 - p0
            v = p2 - p1 - r
            vv = _rowdot(v, v)
            ext = vv > 0.0
            alpha = np.full(A.size, -1.0)
            alpha[ext] = np.minimum(-np.sqrt(_rowdot(r[ext], r[ext]) / vv[ext]), -1.0)
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
                rowsX = A[X]
                le, ge, oke = _estep(pe, rows_of(rowsX), W[rowsX])
                n_estep[rowsX] += 1
                Y = np.flatnonzero(oke)
                if Y.size:
                    pn = _em_update(pe[Y], ge[Y])
                    rowsY = rowsX[Y]
                    ln, gn, okn = _estep(pn, rows_of(rowsY), W[rowsY])
                    n_estep[rowsY] += 1
                    acc = okn & (ln >= l2[X[Y]])
                    rows = X[Y][acc]
                    pA[rows], lA[rows], gA[rows] = pn[acc], ln[acc], gn[acc]
        if sub:
            pi[A], ll[A], g[A] = pA, lA, gA
            gap[A] = gaps(gA)
        else:
            pi, ll, g = pA, lA, gA
            gap = gaps(gA)
        if traces is not None:
            for j, a in enumerate(A):
                traces[a].append(float(lA[j]))
    return EMRows(pi, ll, n_iter, n_estep, gap, traces)


def em_results(rows, tol, max_iter, accelerate, *, stacklevel):
    """One :class:`EMResult` per row of :class:`EMRows`, with a ConvergenceWarning for every fit
    that was asked for a tolerance and did not reach it within ``max_iter`` (``stacklevel`` 1
    points the warning at the caller of this function, 2 at its caller's caller, ...)."""
    out = []
    for b in range(rows.pmf.shape[0]):
        gap, ll = float(rows.gap[b]), float(rows.loglik[b])
        converged = tol is not None and gap <= tol
        if tol is not None and not converged:
            advice = "use accelerate='squarem'" if accelerate is None else "loosen tol"
            warnings.warn(
                f"EM stopped after max_iter={max_iter} iterations with gap={gap:.3g} > tol={tol:g} "
                f"(log-likelihood {ll:.10g}); increase max_iter or {advice}",
                ConvergenceWarning, stacklevel=stacklevel + 1)
        out.append(EMResult(pmf=rows.pmf[b].copy() if rows.pmf.shape[0] > 1 else rows.pmf[0],
                            loglik=ll, loglik_trace=np.asarray(rows.traces[b]),
                            n_iter=int(rows.n_iter[b]), n_estep=int(rows.n_estep[b]), gap=gap,
                            converged=bool(converged), tol=tol,
                            method="em" if accelerate is None else "squarem"))
    return out


def em_fit(blocks, N, init=None, tol=None, max_iter=100, accelerate=None, *, stacklevel=2):
    """One fit: blocks with weights of shape (k,); returns its :class:`EMResult`.

    A ConvergenceWarning points at the caller of this function's caller
    (``stacklevel=2``, e.g. the user's call of ``mle_fit``), one frame further
    up for every unit more.
    """
    rows = em_rows([(op, np.asarray(c, dtype=float)[None, :]) for op, c in blocks], N, init, tol=tol,
                   max_iter=max_iter, accelerate=accelerate)
    tol, max_iter, accelerate = check_em_options(tol, max_iter, accelerate)
    return em_results(rows, tol, max_iter, accelerate, stacklevel=stacklevel + 1)[0]


def em_fixed_iterations(blocks, init, n_iter):
    """``n_iter`` plain EM steps from ``init`` for B weight vectors (blocks' weights (B, k)): (B, N).

    The estimator "``max_iter`` EM steps from ``init``" (the papers' protocol)
    rerun on bootstrap replicates; :func:`em_rows` with ``tol=None``.
    """
    init = np.asarray(init, dtype=float)
    return em_rows(blocks, init.size, init, tol=None, max_iter=n_iter, trace=False).pmf


#: The smallest normal float32: single-precision E-steps floor q there before dividing the weights by it.
TINY32 = np.float32(np.finfo(np.float32).tiny)


def em_fixed_iterations_single(blocks, init, n_iter):
    """:func:`em_fixed_iterations` in single precision, or None where an operator is not a plain block
    or :class:`RowBlockOp` (those are copied to float32 here).

    For checks against a surrogate at a tolerance of hundredths of a bootstrap standard deviation:
    rounding moves a fit by about 1e-6 of its masses, and an E-step reads half the bytes (on the
    ml-1m stand-in's 2,295 kernels, 21 ms against 45 ms for 4 fits).
    """
    ops = []
    for op, C in blocks:
        if isinstance(op, np.ndarray):
            ops.append((op.astype(np.float32), C.astype(np.float32)))
        elif isinstance(op, RowBlockOp):
            ops.append((RowBlockOp(op.K.astype(np.float32), op.start), C.astype(np.float32)))
        else:
            return None
    init = np.asarray(init, dtype=np.float32)
    pi = np.tile(init, (blocks[0][1].shape[0], 1))
    for _ in range(n_iter):
        g = np.zeros_like(pi)
        for op, C in ops:
            # cells a row does not observe have weight 0, hence 0 (q floored at the smallest normal float)
            op_back(op, C / np.maximum(op_q(op, pi), TINY32), g)
        pi = _em_update(pi, g)
    return pi.astype(float)


def em_core_batch(K, C, init=None, tol=None, max_iter=100, accelerate=None):
    """:func:`sampling_lib.estimators.mle_fit`'s EM for B weight vectors at once: a list of B EMResults.

    The same iteration as the single fit (the one engine of this module), one
    (B, N) x (N, k) matrix product per step for all rows still running
    instead of B vector products: for many small fits (the samples of a
    simulation study) the per-step overhead is paid once per step. A row
    that reaches ``max_iter`` before ``tol`` warns like the single fit.

    Parameters
    ----------
    K : ndarray, shape (N, k)
        Kernel columns P(r | R) of the cells (e.g. :func:`sampling_lib.kernels.kernel`).
    C : array_like, shape (B, k)
        Weights (counts of sampled ranks, or weighted counts) of the cells, one row per fit.
    init, tol, max_iter, accelerate
        As :func:`sampling_lib.estimators.mle_fit` (``init`` of shape (N,), shared by the rows).

    Returns
    -------
    list of EMResult

    References
    ----------
    AAAI21 eqs 18-23; TORS24 eqs 31-34; [SQUAREM].

    Examples
    --------
    >>> from sampling_lib.kernels import kernel
    >>> from sampling_lib.estimators import mle
    >>> C = np.array([[5.0, 3.0, 2.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    >>> fits = em_core_batch(kernel(50, 5), C)
    >>> r = np.repeat(np.arange(1, 6), C[0].astype(int))
    >>> bool(np.allclose(fits[0].pmf, mle(r, 50, 5), rtol=1e-12, atol=0))
    True
    """
    tol, max_iter, accelerate = check_em_options(tol, max_iter, accelerate)
    K = np.asarray(K, dtype=float)
    C = np.atleast_2d(np.asarray(C, dtype=float))
    if K.ndim != 2 or C.ndim != 2 or C.shape[1] != K.shape[1]:
        raise ValueError(f"C must have shape (B, k) with k = K.shape[1] = {K.shape[1]}; got {C.shape}")
    if not (np.all(np.isfinite(C)) and np.all(C >= 0.0) and np.all(C.sum(axis=1) > 0.0)):
        raise ValueError("C must hold finite weights >= 0 with a positive sum in every row")
    rows = em_rows([(K, C)], K.shape[0], init, tol=tol, max_iter=max_iter, accelerate=accelerate)
    return em_results(rows, tol, max_iter, accelerate, stacklevel=2)


def mixture_em(likelihood, weights, *, tol=None, max_iter=100, init=None, accelerate=None):
    """EM for the mixing weights of a mixture with a given likelihood matrix.

    The EM of :func:`sampling_lib.estimators.mle_fit` for any kernel: maximizes
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
        As :func:`sampling_lib.estimators.mle_fit` (default: exactly 100 EM
        steps from the uniform distribution, the papers' protocol); ``init``
        has shape (G,).

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
    >>> from sampling_lib.estimators import mle
    >>> r = np.array([1, 1, 2, 3, 5])
    >>> L = binomial(20, 5)[:, r - 1]                      # P(r_u | R) for R = 1..20
    >>> res = mixture_em(L, np.ones(r.size))
    >>> bool(np.allclose(res.pmf, mle(r, 20, 5)))          # the same EM as the MLE
    True
    """
    tol, max_iter, accelerate = check_em_options(tol, max_iter, accelerate)
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
    return em_fit([(L[:, keep], c[keep])], L.shape[0], init, tol, max_iter, accelerate)
