"""The stratified kernel: a proxy's head scored exactly, a uniformly sampled tail.

User u has N_u candidates: its held-out item and C_u = N_u - 1 negatives. A
cheap proxy orders the negatives; its top m_u negatives (the *head*) are all
scored by the costly model, so x_u, the number of head negatives scored at or
above the held-out item (pessimistic ties), is known exactly. Of the other
T_u = C_u - m_u negatives (the *tail*) s_u are drawn uniformly without
replacement, and r_u = 1 + (number of sampled tail items scored at or above
the held-out item). The global rank is R_u = 1 + x_u + Y_u with Y_u the tail
items above the held-out item, so given R the tail sample's count is
hypergeometric (:mod:`sampling_lib.proxy`; KDD20 Sec 2.2 applied to the tail):

    P(r | R; N, m, x, s) = Hyp(r - 1; population T, successes R - 1 - x, draws s),
                           x + 1 <= R <= x + T + 1, and 0 otherwise,

i.e. the hypergeometric kernel P(r' | R'; N', n') of :func:`sampling_lib.kernels.hypergeometric`
at R' = R - x, N' = T + 1, n' = s + 1. s = 0 (no tail sample, r = 1) gives the
support indicator, T = 0 (the head holds every negative) the point mass at
R = x + 1. The head is defined on the negatives, never on the held-out item,
so the law does not depend on where the proxy ranks the held-out item.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, Sec 2.2.
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments.
   CIKM 2006 (evaluation from a judged head and a sampled remainder).
"""
from __future__ import annotations

import numpy as np

from .._validation import check_int
from ._laws import LOG_FACTORIAL_MAX, log_factorials, log_comb

__all__ = ["check_strata", "next_tail_size", "strata_kernel", "strata_ladder_law", "tail_ladder_sizes"]

#: Entries per block of :func:`strata_kernel` (its int64 and float temporaries stay near 32 MB).
_BLOCK = 1 << 20


def _int_array(a, name):
    x = np.asarray(a)
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {x.shape}")
    if x.dtype == bool or not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must hold integers; got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.floating):
        if not np.all(np.isfinite(x)) or not np.all(x == np.round(x)):
            bad = x[~np.isfinite(x) | (x != np.round(x))][0]
            raise ValueError(f"{name} must hold whole numbers; got {bad}")
    return x.astype(np.int64)


def _first_bad(ok, name, text, values):
    """Raise ValueError naming ``name`` at the first False of ``ok`` (user index and values)."""
    if not np.all(ok):
        i = int(np.flatnonzero(~ok)[0])
        shown = ", ".join(f"{k}={int(v[i])}" for k, v in values.items())
        raise ValueError(f"{name} must {text}; got {shown} (entry {i})")


def check_strata(n_items, heads, above, tail_sizes, ranks, counts=None):
    """Validated stratified cells (or users) as int64 arrays (and float counts).

    Each entry (N_u, m_u, x_u, s_u, r_u) must satisfy N_u >= 2,
    0 <= m_u <= N_u - 1 (the head holds negatives only), 0 <= x_u <= m_u,
    0 <= s_u <= T_u = N_u - 1 - m_u and 1 <= r_u <= s_u + 1; ``counts`` (one
    per entry) must be >= 0. Scalars broadcast to the length of the arrays.

    Returns
    -------
    tuple of ndarray
        (n_items, heads, above, tail_sizes, ranks) as int64, and the counts as
        float when given.

    Examples
    --------
    >>> check_strata(100, [10, 10], [0, 3], 20, [1, 4])[2].tolist()
    [0, 3]
    >>> check_strata(100, 10, 11, 20, 1)
    Traceback (most recent call last):
    ...
    ValueError: above must lie in 0..heads; got above=11, heads=10 (entry 0)
    """
    names = ("n_items", "heads", "above", "tail_sizes", "ranks")
    arrs = [_int_array(a, nm) for a, nm in zip((n_items, heads, above, tail_sizes, ranks), names)]
    if counts is not None:
        c = np.asarray(counts, dtype=float)
        arrs.append(c.reshape(1) if c.ndim == 0 else c)
    sizes = {a.size for a in arrs if a.size != 1}
    if len(sizes) > 1:
        shapes = ", ".join(f"{nm} {a.shape}" for nm, a in zip(names + ("counts",), arrs))
        raise ValueError(f"n_items, heads, above, tail_sizes, ranks{' and counts' if counts is not None else ''} "
                         f"must have one entry per user (or be scalars); got lengths {shapes}")
    size = sizes.pop() if sizes else 1
    arrs = [np.broadcast_to(a, (size,)).copy() for a in arrs]
    N, m, x, s, r = arrs[:5]
    if size == 0:
        raise ValueError("n_items must not be empty")
    _first_bad(N >= 2, "n_items", "be >= 2 (the held-out item and at least one negative)", {"n_items": N})
    _first_bad(m >= 0, "heads", "be >= 0", {"heads": m})
    _first_bad(m <= N - 1, "heads", "lie in 0..n_items - 1 (the negatives)", {"heads": m, "n_items": N})
    _first_bad(x >= 0, "above", "be >= 0", {"above": x})
    _first_bad(x <= m, "above", "lie in 0..heads", {"above": x, "heads": m})
    T = N - 1 - m
    _first_bad(s >= 0, "tail_sizes", "be >= 0", {"tail_sizes": s})
    _first_bad(s <= T, "tail_sizes", "lie in 0..n_items - 1 - heads (the tail)",
               {"tail_sizes": s, "n_items": N, "heads": m})
    _first_bad(r >= 1, "ranks", "be >= 1", {"ranks": r})
    _first_bad(r <= s + 1, "ranks", "lie in 1..tail_sizes + 1", {"ranks": r, "tail_sizes": s})
    if counts is not None:
        c = arrs[5]
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            i = int(np.flatnonzero(~np.isfinite(c) | (c < 0))[0])
            raise ValueError(f"counts must be finite and >= 0; got {c[i]} (entry {i})")
        return N, m, x, s, r, c
    return N, m, x, s, r


def strata_kernel(R, n_items, heads, above, tail_sizes, ranks, *, log=False):
    """P(r_c | R; N_c, m_c, x_c, s_c) for global ranks R (rows) and cells c (columns).

    The stratified law of :mod:`sampling_lib.kernels._strata`: with T = N - 1 - m
    tail negatives of which G = R - 1 - x rank above the held-out item,

        P(r | R) = C(G, r - 1) C(T - G, s - r + 1) / C(T, s),

    and 0 where R < x + 1 or R > x + T + 1 (or where the count r - 1 is
    impossible). Computed in log space from a table of log k! (T up to
    :data:`LOG_FACTORIAL_MAX`; log-Beta functions beyond), vectorized over
    ranks and cells in blocks.

    Parameters
    ----------
    R : array_like of int >= 1
        Global ranks (e.g. the representative ranks of a compressed grid).
    n_items, heads, above, tail_sizes, ranks : array_like of int, shape (C,)
        The cells (scalars broadcast): N_c candidates (held-out item
        included), m_c head negatives, x_c of them above the held-out item,
        s_c tail negatives sampled, sampled tail rank r_c in 1..s_c + 1
        (:func:`check_strata`).
    log : bool, default False, keyword-only
        Return log-probabilities (-inf off the support).

    Returns
    -------
    ndarray, shape (len(R), C)

    References
    ----------
    KDD20 Sec 2.2 (the hypergeometric kernel), applied to the tail.

    Examples
    --------
    >>> from sampling_lib.kernels import hypergeometric
    >>> K = strata_kernel(np.arange(1, 13), 12, 4, 2, 3, 2)     # T = 7 tail negatives, 3 sampled
    >>> bool(np.allclose(K[2:10, 0], hypergeometric(8, 4)[:, 1])), K[[0, 1, 10, 11], 0].tolist()
    (True, [0.0, 0.0, 0.0, 0.0])
    >>> strata_kernel([1, 2, 3], 5, 4, 1, 0, 1).ravel().tolist()    # head = every negative: R = x + 1
    [0.0, 1.0, 0.0]
    """
    N, m, x, s, r = check_strata(n_items, heads, above, tail_sizes, ranks)
    Rv = _int_array(R, "R")
    if Rv.size and Rv.min() < 1:
        raise ValueError(f"R must hold global ranks >= 1; got min {int(Rv.min())}")
    T = N - 1 - m
    k = r - 1                      # sampled tail items above the held-out item
    out = np.empty((Rv.size, N.size))
    if out.size == 0:
        return out
    Tmax = int(T.max())
    table = Tmax <= LOG_FACTORIAL_MAX
    lf = log_factorials(max(Tmax, 1)) if table else None
    # per-cell constant: log C(T, s) and the parts of log C(G, k) C(T - G, s - k) free of G
    if table:
        const = -(lf[T] - lf[s] - lf[T - s]) - lf[k] - lf[s - k]
    step = max(1, _BLOCK // max(Rv.size, 1))
    for a in range(0, N.size, step):
        b = min(a + step, N.size)
        G = Rv[:, None] - 1 - x[None, a:b]                 # tail items above, (len(R), cells)
        Tb, kb, sb = T[None, a:b], k[None, a:b], s[None, a:b]
        ok = (G >= kb) & (Tb - G >= sb - kb)               # implies 0 <= G <= T
        if table:
            Gc = np.where(ok, G, kb)                       # any index inside the table off the support
            L = (lf[Gc] - lf[Gc - kb] + lf[Tb - Gc] - lf[Tb - Gc - sb + kb]) + const[None, a:b]
        else:
            with np.errstate(invalid="ignore"):
                L = log_comb(G, kb) + log_comb(Tb - G, sb - kb) - log_comb(Tb, sb)
        L = np.where(ok, L, -np.inf)
        out[:, a:b] = L if log else np.exp(L)
    return out


def next_tail_size(tail_sizes, tail_n_max, tails):
    """The tail ladder's next sample: double, capped at ``tail_n_max`` and the T tail items (elementwise)."""
    return np.minimum(np.minimum(2 * np.asarray(tail_sizes), tail_n_max), tails)


def tail_ladder_sizes(tails, tail_n, tail_n_max):
    """The tail ladder's sample sizes s_1 < s_2 < ... for a user with ``tails`` tail negatives: s_1 =
    min(tail_n, T), then doubled, capped at min(tail_n_max, T) (:class:`sampling_lib.stratarun.StrataRun`).

    Examples
    --------
    >>> tail_ladder_sizes(100, 5, 40), tail_ladder_sizes(30, 5, 40), tail_ladder_sizes(3, 5, 40)
    ([5, 10, 20, 40], [5, 10, 20, 30], [3])
    """
    T, s = int(tails), min(int(tail_n), int(tails))
    top = min(int(tail_n_max), T)
    sizes = [s]
    while 0 < s < top:
        s = int(next_tail_size(s, tail_n_max, T))
        sizes.append(s)
    return sizes


def strata_ladder_law(R, n_items, head, above, tail_n, tail_n_max):
    """P(final tail cell (s, r) | R) of the ladder within the tail, for one user's (N, m, x).

    The tail ladder (:class:`sampling_lib.stratarun.StrataRun`, TORS24 Algorithm 1 within the tail) draws
    s_1 tail negatives, and while none of them ranks above the held-out item (r = 1) doubles its
    sample, up to min(``tail_n_max``, T); the samples are nested prefixes of one uniform order of the
    tail. The final cell (s_j, r) has

        P(s_j, r | R) = P(r | R; s_j) g_j(r),   g_1 = 1,   g_j(r) = C(s_j - r + 1, s_{j-1}) / C(s_j, s_{j-1}),

    for r >= 2, or r = 1 at the last size only: the s_{j-1}-prefix of the s_j-sample must hold none of its
    r - 1 items above, and given the s_j-sample that event has the probability g_j(r), whatever R (the
    sample is uniform, and the positions of its items above within it do not depend on R). So the
    design's likelihood in R is the stratified kernel at the final cell alone (ignorability, as for the
    uniform ladder: TORS24 Sec 6), which is what :func:`sampling_lib.estimators.strata_estimate` uses.

    Parameters
    ----------
    R : array_like of int >= 1
        Global ranks (rows).
    n_items, head, above : int
        N (the held-out item included), the head's m negatives and x of them above the held-out item.
    tail_n, tail_n_max : int
        The first tail sample and the largest.

    Returns
    -------
    sizes, ranks : ndarray of int64, shape (C,)
        The final cells (s, r).
    P : ndarray, shape (len(R), C)
        Their probabilities; each row sums to 1 for R in x + 1..x + T + 1 (0 elsewhere).

    Examples
    --------
    >>> s, r, P = strata_ladder_law([3, 8], 40, 10, 1, 4, 16)
    >>> sorted(set(s.tolist())), bool(np.allclose(P.sum(axis=1), 1.0))
    ([4, 8, 16], True)
    """
    parts = list(strata_ladder_blocks(R, n_items, head, above, tail_n, tail_n_max, block=None))
    return tuple(np.concatenate([p[k] for p in parts], axis=-1) for k in range(3))


def strata_ladder_blocks(R, n_items, head, above, tail_n, tail_n_max, *, block=4096):
    """:func:`strata_ladder_law` in blocks of at most ``block`` final cells (None: one block per ladder size):
    yields (sizes, ranks, P) for consecutive cells, so that a caller summing over the cells never holds the
    len(R) x (cells) law at once (a tail ladder to s_max has about 2 s_max cells).

    Examples
    --------
    >>> whole = strata_ladder_law([3, 8], 40, 10, 1, 4, 16)[2]
    >>> parts = [P for _, _, P in strata_ladder_blocks([3, 8], 40, 10, 1, 4, 16, block=5)]
    >>> bool(np.allclose(np.concatenate(parts, axis=1), whole)), max(P.shape[1] for P in parts)
    (True, 5)
    """
    T = int(n_items) - 1 - int(head)
    sizes = tail_ladder_sizes(T, tail_n, tail_n_max)
    block = None if block is None else check_int(block, "block", low=1)
    for j, s in enumerate(sizes):
        last = j == len(sizes) - 1
        r_all = np.arange(1 if last else 2, s + 2)
        step = r_all.size if block is None else block
        for a in range(0, r_all.size, step):
            r = r_all[a:a + step]
            if j == 0:
                gj = np.ones(r.size)
            else:
                p = sizes[j - 1]           # C(s - r + 1, p) / C(s, p) in log space (0 where s - r + 1 < p)
                with np.errstate(invalid="ignore"):
                    lg = log_comb(s - r + 1.0, float(p)) - log_comb(float(s), float(p))
                gj = np.exp(lg)
            K = strata_kernel(R, int(n_items), int(head), int(above), np.full(r.size, s, np.int64),
                              r.astype(np.int64))
            yield np.full(r.size, s, np.int64), r.astype(np.int64), K * gj[None, :]
