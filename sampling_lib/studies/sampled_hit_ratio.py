"""The sampled hit ratio and the Sampling Theorem (KDD20 Sec 2; notebook 01).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import check_int
from ..sampling import sample_ranks

__all__ = [
    "simulate_shr",
    "shr_moments",
    "shr_tail_frequencies",
    "expected_shr_gaps",
]


# ----------------------------------------------------------------------------
# the sampled hit ratio and the Sampling Theorem (KDD20 Sec 2, notebook 01)
# ----------------------------------------------------------------------------
def simulate_shr(global_ranks, N, n, ks, repeats, *, scheme="binomial", rng=None):
    """Sampled hit ratios of repeated item samplings of the same users (KDD20 eq 3).

    Each repeat draws every user's sampled rank from its fixed global rank
    (:func:`sampling_lib.sampling.sample_ranks`) and records
    ``SHR@k = mean_u 1{r_u <= k}`` for every k in ``ks``.

    Returns
    -------
    ndarray, shape (repeats, len(ks))

    References
    ----------
    KDD20 eq 3, Sec 2.2.

    Examples
    --------
    >>> simulate_shr([1, 1, 50], 50, 10, [1, 10], 2, rng=0).tolist()
    [[0.6666666666666666, 1.0], [0.6666666666666666, 1.0]]
    """
    ks = np.atleast_1d(np.asarray(ks))
    repeats = check_int(repeats, "repeats", low=1)
    rng = np.random.default_rng(rng)
    out = np.empty((repeats, ks.size))
    for i in range(repeats):
        r = sample_ranks(global_ranks, N, n, scheme=scheme, rng=rng)
        out[i] = (r[:, None] <= ks[None, :]).mean(axis=0)
    return out


def shr_moments(global_ranks, N, n, ks, repeats, *, schemes=("binomial", "hypergeometric"), rng=None):
    """Exact mean and variance of SHR@k (KDD20 eqs 4-5) next to Monte Carlo.

    For every model (``global_ranks`` maps a model to its users' global
    ranks), scheme and k: the formulas of :func:`sampling_lib.kernels.shr_mean_var`
    on the users' empirical rank distribution, and the mean and sample
    variance of ``repeats`` simulated SHR@k (:func:`simulate_shr`), with the
    z-scores of their differences (SE of the mean ``sqrt(Var/repeats)``, SE of
    the sample variance ``Var sqrt(2/(repeats-1))``, normal approximation).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, scheme, k, E_formula, E_mc, Var_formula, Var_mc,
        z_mean, z_var``.

    References
    ----------
    KDD20 eqs 4-5.

    Examples
    --------
    >>> d = shr_moments({"a": np.array([1, 5, 20])}, 20, 5, [1, 2], 50, rng=0)
    >>> d.shape, list(d.columns[:4])
    ((4, 9), ['model', 'scheme', 'k', 'E_formula'])
    """
    from ..kernels import shr_mean_var
    from ..rankdist import empirical_pmf

    ks = np.atleast_1d(np.asarray(ks))
    rows = []
    for name, R in global_ranks.items():
        W = empirical_pmf(R, N)
        for scheme in schemes:
            mean, var = shr_mean_var(W, n, ks, len(R), scheme)
            shr = simulate_shr(R, N, n, ks, repeats, scheme=scheme, rng=rng)
            rows.append(pd.DataFrame({"model": name, "scheme": scheme, "k": ks.astype(int),
                                      "E_formula": mean, "E_mc": shr.mean(axis=0),
                                      "Var_formula": var, "Var_mc": shr.var(axis=0, ddof=1)}))
    d = pd.concat(rows, ignore_index=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        d["z_mean"] = (d.E_mc - d.E_formula) / np.sqrt(d.Var_formula / repeats)
        d["z_var"] = (d.Var_mc - d.Var_formula) / (d.Var_formula * np.sqrt(2 / (repeats - 1)))
    return d


def shr_tail_frequencies(global_ranks, N, n, ks, repeats, t, *, t_in_sd=(1.0, 2.0),
                         scheme="binomial", rng=None):
    """Simulated ``Pr(|SHR@k - E[SHR@k]| >= t)`` against Hoeffding and the normal tail.

    The deviations of ``repeats`` simulated SHR@k (:func:`simulate_shr`) from
    the exact mean are compared at the absolute deviation ``t`` and at
    ``t_in_sd`` multiples of the exact sd (KDD20 eq 5) with the Hoeffding bound
    ``2 exp(-2 M t^2)`` (:func:`sampling_lib.kernels.shr_hoeffding_bound`), the
    normal approximation ``2 Phi(-t / sd)``, and the exact Clopper-Pearson
    99.9% lower limit of the observed frequency.

    Returns
    -------
    pandas.DataFrame
        Columns ``k, t, t_in_sd, observed, cp_lower999, hoeffding, normal``.

    References
    ----------
    KDD20 Sec 2.4 (Hoeffding), eq 5.

    Examples
    --------
    >>> d = shr_tail_frequencies(np.arange(1, 101), 100, 10, [1], 200, 0.05, rng=0)
    >>> d[["k", "t_in_sd"]].round(2).values.tolist()[0][0], len(d)
    (1.0, 3)
    """
    from scipy import stats

    from ..kernels import shr_hoeffding_bound, shr_mean_var
    from ..rankdist import empirical_pmf

    R = np.asarray(global_ranks)
    ks = np.atleast_1d(np.asarray(ks))
    mean, var = shr_mean_var(empirical_pmf(R, N), n, ks, R.size, scheme)
    dev = np.abs(simulate_shr(R, N, n, ks, repeats, scheme=scheme, rng=rng) - mean)
    rows = []
    for j, k in enumerate(ks):
        sd = math.sqrt(var[j])
        for tt in (t, *(c * sd for c in t_in_sd)):
            hits = int((dev[:, j] >= tt).sum())
            rows.append(dict(k=int(k), t=tt, t_in_sd=tt / sd, observed=hits / repeats,
                             cp_lower999=stats.beta.ppf(0.001, hits, repeats - hits + 1) if hits else 0.0,
                             hoeffding=shr_hoeffding_bound(R.size, tt), normal=2 * stats.norm.sf(tt / sd)))
    return pd.DataFrame(rows)


def expected_shr_gaps(pairs, n_values, schemes=("binomial", "hypergeometric")):
    """Differences of the expected sampled curves of pairs of models (KDD20 Thm 2.1).

    For every pair ``(pmf1, pmf2)`` of global rank distributions, sample-set
    size n and scheme: ``d_k = E[SHR1@k] - E[SHR2@k]`` for k = 1..n
    (:func:`sampling_lib.kernels.expected_shr_curve`, exact). The Sampling
    Theorem says ``d_k >= 0`` for all k when pmf1 dominates pmf2.

    Returns
    -------
    pandas.DataFrame
        One row per (pair, n, scheme): ``min_gap, max_gap, k_at_min, k_at_max``,
        ``min_gap_k_lt_n`` (k = n left out: E[SHR@n] = 1 for every model),
        ``share_k_strict`` (fraction of k < n with d_k > 1e-12) and ``flips``
        (d changes sign over k beyond rounding: some d_k > 1e-12 and some < -1e-12).

    References
    ----------
    KDD20 Thm 2.1.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> m = synthetic_models(300)
    >>> g = expected_shr_gaps([(m["beta_a0.25"], m["beta_a0.50"])], [10, 50])
    >>> bool((g.min_gap >= -1e-12).all()), bool(g.flips.any())
    (True, False)
    """
    from ..kernels import expected_shr_curve

    rows = []
    for i, (p1, p2) in enumerate(pairs):
        for n in n_values:
            for scheme in schemes:
                d = expected_shr_curve(p1, n, scheme) - expected_shr_curve(p2, n, scheme)
                rows.append(dict(pair=i, n=int(n), scheme=scheme, min_gap=d.min(), max_gap=d.max(),
                                 k_at_min=int(d.argmin()) + 1, k_at_max=int(d.argmax()) + 1,
                                 min_gap_k_lt_n=d[:-1].min(), share_k_strict=float(np.mean(d[:-1] > 1e-12)),
                                 flips=bool(d.max() > 1e-12 and d.min() < -1e-12)))
    return pd.DataFrame(rows)
