"""Sampled hit ratios from real scores, exact and simulated (KDD20 App A; notebook 08).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "sampled_rank_as_global",
    "expected_shr",
    "score_sampling_summary",
]


# ----------------------------------------------------------------------------
# real data end to end (KDD20 Appendix A, TORS24 Sec 8.3, notebook 08)
# ----------------------------------------------------------------------------
def sampled_rank_as_global(sampled_ranks, N, n):
    """The naive 'estimator' behind a sampled metric: the sampled rank taken as the global rank.

    Returns the empirical distribution of r_u placed on 1..n of the N global
    ranks, so ``w @ F`` is the metric computed on the sampled ranks (the
    sampled hit ratio SHR@k for Recall, KDD20 eq 3). Same call as the
    registry's estimators (:func:`sampling_lib.experiments.run_experiment`).

    Examples
    --------
    >>> sampled_rank_as_global(np.array([1, 1, 3]), 5, 3).round(3).tolist()
    [0.667, 0.0, 0.333, 0.0, 0.0]
    """
    r = np.asarray(sampled_ranks)
    return np.bincount(r - 1, minlength=N)[:N] / r.size


def expected_shr(global_ranks, N, n, ks, scheme, *, n_candidates=None):
    """Exact mean and variance of SHR@k for fixed users (KDD20 eqs 4-5).

    ``"binomial"`` / ``"hypergeometric"``: the users' empirical rank
    distribution in :func:`sampling_lib.kernels.shr_mean_var` (pass ranks
    computed with the training items kept in place); ``"actual"``: each user's
    negatives drawn from its own ``n_candidates`` never-interacted items
    (:func:`sampling_lib.recommenders.actual_shr_mean_var`, ranks with the
    training items last).

    Returns
    -------
    mean, var : ndarray, shape (len(ks),)
    """
    from ..kernels import shr_mean_var
    from ..rankdist import empirical_pmf
    from ..recommenders import actual_shr_mean_var

    R = np.asarray(global_ranks)
    if scheme == "actual":
        return actual_shr_mean_var(R, n_candidates, n, ks)
    return shr_mean_var(empirical_pmf(R, N), n, ks, R.size, scheme)


def score_sampling_summary(shr_runs, ranks, ranks_all, N, n_candidates):
    """Simulated SHR@k from real scores next to its exact mean and variance (KDD20 App A).

    ``shr_runs`` is :func:`sampling_lib.experiments.score_sampling_experiment`'s
    table; ``ranks`` (training items last) and ``ranks_all`` (kept in place)
    are the global ranks per model; ``n_candidates`` the never-interacted items
    per user. For every (model, n, scheme, k): the mean and sd of the simulated
    SHR@k over the repeats, :func:`expected_shr` and the standard error of the
    mean ``sqrt(Var / repeats)``.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, n, scheme, k, SHR (MC mean), MC sd, E[SHR] exact,
        Var exact, se``.

    References
    ----------
    KDD20 eqs 3-6, Appendix A Tables 5-6.
    """
    rows = []
    groups = shr_runs.groupby(["model", "n", "scheme"], sort=False)
    for m, n, scheme in sorted(groups.groups, key=lambda key: (list(ranks).index(key[0]), key[1])):
        g = groups.get_group((m, n, scheme))
        mc = g.groupby("k")["shr"]
        ks = np.array(sorted(g["k"].unique()))
        R = ranks[m] if scheme == "actual" else ranks_all[m]
        E, V = expected_shr(R, N, n, ks, scheme, n_candidates=n_candidates)
        rows.append(pd.DataFrame({"model": m, "n": n, "scheme": scheme, "k": ks,
                                  "SHR (MC mean)": mc.mean().loc[ks].to_numpy(),
                                  "MC sd": mc.std(ddof=1).loc[ks].to_numpy(), "E[SHR] exact": E, "Var exact": V,
                                  "se": np.sqrt(V / g["repeat"].nunique())}))
    return pd.concat(rows, ignore_index=True)
