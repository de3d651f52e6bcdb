"""The pooled kernel of MES with per-user item counts N_u (the kernel of the pooled sampled-rank law).

With per-user N_u the MES (:func:`sampling_lib.estimators.mes_fit`; AAAI21 eqs 24-27, TORS24 eqs
35-36) fits q(r) = sum_R pi_R Kbar(r | R), Kbar the users' average kernel. Built here for the fit
(:mod:`sampling_lib.estimators._mes`) and for its bootstrap (:mod:`sampling_lib.estimators._mes_pooled`).

References
----------
AAAI21 eqs 24-27 and TORS24 eqs 35-36, as in :mod:`sampling_lib.estimators._mes`.
"""
from __future__ import annotations

import numpy as np

from ..kernels import kernel_columns, kernels_ascending, n_items_bins
from ._em import rank_histogram

__all__ = ["pooled_block", "bin_kernels", "POOLED_CACHE_BYTES"]


def pooled_block(r, Nu, n, scheme, tol):
    """(pooled kernel columns, counts) of per-user item counts N_u (MES).

    Kbar(r | R) = (1/M) sum_u P(r | R; N_u, n) 1[R <= N_u]: the kernel of the
    pooled sampled-rank distribution, q(r) = (1/M) sum_u sum_{R <= N_u} pi_R
    P(r | R; N_u, n) = sum_R pi_R Kbar(r | R). Users of a bin of N_u
    (:func:`sampling_lib.kernels.n_items_bins`) share the kernel values of
    its N_b; each keeps its own support (the fraction of the bin's users
    with N_u >= R multiplies row R).
    """
    c = rank_histogram(r, n)
    cols = np.flatnonzero(c > 0) + 1
    vals, cnt_u = np.unique(Nu, return_counts=True)
    key = (vals.tobytes(), cnt_u.tobytes(), int(n), scheme, float(tol))
    if _POOLED.get("key") == key:
        return _POOLED["Kbar"][:, cols - 1], c[cols - 1]
    full = int(Nu.max()) * n * 8 <= POOLED_CACHE_BYTES
    kc = np.arange(1, n + 1) if full else cols       # every column when it is kept for the next model
    M = Nu.size
    reps = n_items_bins(Nu, n, tol, scheme)
    Kbar = np.zeros((int(Nu.max()), kc.size))
    for b, Kb in bin_kernels(np.unique(reps), n, kc, scheme):
        cnt = np.bincount(Nu[reps == b], minlength=b + 1)[1:]
        frac = cnt[::-1].cumsum()[::-1] / M            # share of users with N_u >= R, R = 1..b
        Kbar[:b] += Kb * frac[:, None]
    if not full:
        return Kbar, c[cols - 1]
    Kbar.setflags(write=False)
    _POOLED.clear()
    _POOLED.update(key=key, Kbar=Kbar)
    return Kbar[:, cols - 1], c[cols - 1]


#: The pooled kernel over every sampled rank of the last per-user-N MES fit (:func:`pooled_block`),
#: kept while at most this size: an evaluation's next model, its bootstrap's cell weights and the MES
#: prior of BV_MES / MN_MES pool the same users' N_u.
POOLED_CACHE_BYTES = 64 << 20
_POOLED = {}


def bin_kernels(ub, n, cols, scheme):
    """Yield ``(N_b, P(cols | R; N_b, n))`` (N_b, k) for the bins' item counts ``ub``, increasing."""
    if scheme == "hypergeometric" and ub.size > 2:
        # many N_b: whole kernels stepped from one N_b to the next by exact ratios (5e-15 relative;
        # 2,295 N_b of NCF's ml-1m range in about 6 s instead of 28 s column by column)
        if cols.size == n:
            return kernels_ascending(ub, n, scheme)
        return ((b, K[:, cols - 1]) for b, K in kernels_ascending(ub, n, scheme))
    return ((int(b), kernel_columns(int(b), n, cols, scheme, cache=ub.size <= 2)) for b in ub)
