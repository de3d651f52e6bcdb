"""Diagnostics of the mapping functions f(k) (KDD20 Secs 3-4; notebook 02).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "beta_map_accuracy",
    "beta_map_steps",
    "beta_map_differences",
    "beta_map_monotonicity",
    "max_position_difference",
]


# ----------------------------------------------------------------------------
# mapping functions f(k) (KDD20 Secs 3-4, notebook 02)
# ----------------------------------------------------------------------------
def beta_map_accuracy(N, n, a_values):
    """The Beta map f(k; a) three ways, per a: log space, literal recurrence, exact.

    For each a: ``f(1;a), f(2;a)``, ``f(n;a)`` by the literal recurrence (KDD20
    eq 16) and in log space (both should equal N, KDD20 Lemma 3.1), and the
    largest relative error over k of the log-space map and of the recurrence
    against the 50-digit reference (:func:`sampling_lib.mapping.beta` with
    ``method="exact"``).

    Returns
    -------
    pandas.DataFrame
        Columns ``a, f(1;a), f(2;a), f(n;a) recurrence, f(n;a) log-space,
        max rel err log-space vs exact, max rel err recurrence vs exact``.

    References
    ----------
    KDD20 eqs 15-16, Lemma 3.1.

    Examples
    --------
    >>> d = beta_map_accuracy(500, 20, [0.5, 1.0])
    >>> bool((d["max rel err log-space vs exact"] < 1e-12).all())
    True
    """
    from ..mapping import beta

    rows = []
    for a in np.asarray(a_values, dtype=float):
        f_log, f_rec, f_ex = (beta(N, n, a, method=m) for m in ("logcdf", "recurrence", "exact"))
        rows.append({"a": a, "f(1;a)": f_log[0], "f(2;a)": f_log[1],
                     "f(n;a) recurrence": f_rec[-1], "f(n;a) log-space": f_log[-1],
                     "max rel err log-space vs exact": np.max(np.abs(f_log / f_ex - 1)),
                     "max rel err recurrence vs exact": np.max(np.abs(f_rec / f_ex - 1))})
    return pd.DataFrame(rows)


def beta_map_steps(N, n, a_values):
    """The approximate linearity of the Beta map (KDD20 Sec 3.3), per a and k = 2..n.

    ``step`` = (f(k;a) - f(k-1;a)) / ((N-1)/n), and ``ratio_error`` =
    |y_k / y_{k-1} - (1 + (a-1)/(k-1))| with y_k = (f(k;a)-1)^a - (f(k-1;a)-1)^a
    (y_1 = (f(1;a)-1)^a), the identity of KDD20 Sec 3.3.

    Returns
    -------
    pandas.DataFrame
        Columns ``a, k, step, ratio_error``.

    References
    ----------
    KDD20 Sec 3.3.

    Examples
    --------
    >>> d = beta_map_steps(3706, 100, [0.5])
    >>> bool(d.ratio_error.max() < 1e-10), bool(abs(d.step[d.k >= 5] - 1).max() < 0.01)
    (True, True)
    """
    from ..mapping import beta

    k = np.arange(2, n + 1)
    rows = []
    for a in np.asarray(a_values, dtype=float):
        f = beta(N, n, a)
        y = np.diff(np.concatenate(([0.0], (f - 1.0) ** a)))
        rows.append(pd.DataFrame({"a": a, "k": k, "step": np.diff(f) / ((N - 1) / n),
                                  "ratio_error": np.abs(y[1:] / y[:-1] - (1 + (a - 1) / (k - 1)))}))
    return pd.concat(rows, ignore_index=True)


def beta_map_differences(N, n, a_values, a_ref):
    """``f(k;a) - f(k;a_ref)`` for each a (KDD20 Fig 5, Remedy 2), log space and exact.

    Returns
    -------
    summary : pandas.DataFrame
        Per a: ``max_abs`` (max over k of |f(k;a) - f(k;a_ref)|, log-space map),
        ``max_abs_exact`` (the same with the exact reference), ``at_k``.
    curves : pandas.DataFrame
        Columns ``a, k, difference`` (log-space map).

    References
    ----------
    KDD20 Fig 5, Remedy 2.

    Examples
    --------
    >>> s, c = beta_map_differences(3706, 100, [0.3, 0.34], 0.3)
    >>> s.max_abs.tolist()[0], len(c)
    (0.0, 200)
    """
    from ..mapping import beta

    f0, f0x = beta(N, n, a_ref), beta(N, n, a_ref, method="exact")
    rows, curves = [], []
    for a in np.asarray(a_values, dtype=float):
        d = beta(N, n, a) - f0
        dx = beta(N, n, a, method="exact") - f0x
        rows.append({"a": a, "max_abs": np.abs(d).max(), "max_abs_exact": np.abs(dx).max(),
                     "at_k": int(np.argmax(np.abs(d)) + 1)})
        curves.append(pd.DataFrame({"a": a, "k": np.arange(1, n + 1), "difference": d}))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def beta_map_monotonicity(N_values, n_values, a_values):
    """Monotonicity of f(k; a) in a over a grid of (N, n) (KDD20 Remedy 3).

    For every N and n <= N: :func:`sampling_lib.mapping.monotonicity_violation`
    in the increasing direction and in the direction printed in the paper.

    Returns
    -------
    pandas.DataFrame
        Columns ``N, n, pairs, violation (increasing), violation / N,
        smallest margin k<n (increasing), violation (printed inequality),
        at (a, b, k)``.

    References
    ----------
    KDD20 Remedy 3.

    Examples
    --------
    >>> d = beta_map_monotonicity([100], [2, 10], [0.5, 1.0, 2.0])
    >>> bool((d["violation / N"] <= 1e-12).all()), bool((d["violation (printed inequality)"] > 0).all())
    (True, True)
    """
    from ..mapping import monotonicity_violation

    rows = []
    for N in N_values:
        for n in n_values:
            if n > N:
                continue
            v = monotonicity_violation(N, n, a_values, "increasing")
            w = monotonicity_violation(N, n, a_values, "decreasing")
            rows.append({"N": N, "n": n, "pairs": v["n_pairs"], "violation (increasing)": v["max_violation"],
                         "violation / N": v["max_violation"] / N,
                         "smallest margin k<n (increasing)": v["min_margin"],
                         "violation (printed inequality)": w["max_violation"],
                         "at (a, b, k)": (round(w["a"], 3), round(w["b"], 3), w["k"])})
    return pd.DataFrame(rows)


def max_position_difference(maps):
    """Largest difference between mapping functions, over k and pairs (KDD20 Remedy 2).

    Parameters
    ----------
    maps : mapping name -> f (length n) or sequence of f

    Returns
    -------
    pandas.DataFrame
        One row per pair: ``map_1, map_2, max_difference`` (max over k of
        |f_1(k) - f_2(k)|, in global rank positions), ``at_k``.

    Examples
    --------
    >>> max_position_difference({"a": [1.0, 5.0], "b": [1.0, 7.5]}).max_difference.tolist()
    [2.5]
    """
    import itertools

    items = list(maps.items()) if isinstance(maps, dict) else list(enumerate(maps))
    rows = []
    for (n1, f1), (n2, f2) in itertools.combinations(items, 2):
        d = np.abs(np.asarray(f1, dtype=float) - np.asarray(f2, dtype=float))
        rows.append({"map_1": n1, "map_2": n2, "max_difference": d.max(), "at_k": int(d.argmax() + 1)})
    return pd.DataFrame(rows)
