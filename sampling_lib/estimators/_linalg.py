"""Linear-algebra helpers shared by the estimator families (below all of them: no import circles).

Batched Gram matrices sum_j P[b, j] k_j k_j^T of kernel rows k_j, used by the
batched BV / MN replicates on the compressed rank grid (TORS24 eqs 9-10, 42)
and by the batched MES dual Newton method (AAAI21 eqs 24-27).
"""
from __future__ import annotations

import numpy as np

__all__ = ["OUTER_MAX", "batched_gram", "grid_outer", "sym_from_triu"]

#: Largest (G, n(n+1)/2) outer-product table (2^25 entries, 256 MB); beyond, one Gram at a time.
OUTER_MAX = 1 << 25


def batched_gram(P, Kg, outer=None):
    """sum_j P[b, j] k_j k_j^T for every row b of P (B, G): shape (B, n, n).

    One matrix product with the table of the rows' outer products when it is
    small enough (:func:`grid_outer`), else one (n, G) x (G, n) product per row.

    Examples
    --------
    >>> Kg = np.array([[1.0, 0.0], [0.5, 0.5]])
    >>> batched_gram(np.array([[1.0, 2.0]]), Kg)[0].tolist()
    [[1.5, 0.5], [0.5, 0.5]]
    """
    n = Kg.shape[1]
    if outer is None and Kg.shape[0] * n * (n + 1) // 2 > OUTER_MAX:
        return np.stack([(Kg.T * p) @ Kg for p in P])
    return sym_from_triu(P @ (grid_outer(Kg) if outer is None else outer), n)


def grid_outer(Kg):
    """Upper-triangle outer products of the rows of Kg, (G, n(n+1)/2), row by row."""
    n = Kg.shape[1]
    return np.concatenate([Kg[:, i:i + 1] * Kg[:, i:] for i in range(n)], axis=1)


def sym_from_triu(tri, n):
    """(B, n, n) symmetric matrices from their upper triangles (B, n(n+1)/2), row by row."""
    G = np.zeros((tri.shape[0], n, n))
    a = 0
    for i in range(n):
        G[:, i, i:] = tri[:, a:a + n - i]
        G[:, i + 1:, i] = tri[:, a + 1:a + n - i]
        a += n - i
    return G
