"""Popularity-sampled negatives: every estimator against the truth over exponents, set sizes and models.

The study of notebook 11 (its Sec 4): for each set size n, model and popularity exponent alpha, one
logged popularity-sampled evaluation (:func:`sampling_lib.popularity.simulate_popularity_log`), the
estimators of :mod:`sampling_lib.popularity` fitted on it, and the users' true metric.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, eq 6 (the uniform
   law that popularity sampling departs from).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under
   Sampling. AAAI 2021, eq 21 (the EM of ``pop_mle``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import estimators as PE
from .. import popularity as pop
from ..metrics import metric_values

__all__ = ["POPULARITY_FITS", "popularity_estimator_table"]

#: The estimators of a popularity-sampled log, in the table's column order: (column, fit kind,
#: whether it takes the exact rank-mass curve).
POPULARITY_FITS = (("uniform-pretend", "uniform", False), ("HT plug-in", "ht", False),
                   ("pop_mle", "pop_mle", False), ("pop_mle (exact curve)", "pop_mle", True))


def popularity_estimator_table(fitted, train, test_items, weights, truth, *, models, alphas, n_values, metrics,
                               curves, rng):
    """Every estimator of a popularity-sampled evaluation against the truth (notebook 11, Sec 4).

    For each n in ``n_values`` and model in ``models`` (in that order): a uniform-sampled log (the
    naive metric under uniform sampling), then for each alpha in ``alphas`` a popularity-sampled log
    with ``weights[alpha]``, fitted by the uniform-pretend reading, the Horvitz-Thompson plug-in,
    ``pop_mle`` and ``pop_mle`` with the exact rank-mass curve ``curves[(alpha, model)]``
    (:func:`sampling_lib.estimators.popularity_fit`), and the no-log bounds
    (:func:`sampling_lib.estimators.popularity_bounds`). Random draws come from ``rng`` in that order.

    Parameters
    ----------
    fitted : dict of str to model
        Fitted recommenders (``score``), keyed by model name.
    train : scipy.sparse matrix (users, items)
        Training interactions (each user's candidates are the items outside them).
    test_items : array_like of int
        Held-out item of every user.
    weights : dict of float to ndarray
        Popularity weights per exponent; ``weights[0.0]`` (uniform) is used for the naive
        uniform-sampled metric.
    truth : dict of (alpha, model) to PopularityTruth
        :func:`sampling_lib.popularity.popularity_truth` of every (alpha, model).
    models, alphas, n_values, metrics : sequences
    curves : dict of (alpha, model) to rank-mass curve
        :func:`sampling_lib.popularity.exact_rank_mass_curve` (the oracle estimator's curve).
    rng : numpy.random.Generator

    Returns
    -------
    table : DataFrame
        One row per (alpha, n, model, metric): ``truth``, the two naive metrics, one column per
        estimator of :data:`POPULARITY_FITS`, ``bound low`` and ``bound high``.
    em_traces : list of ndarray
        The EM log-likelihood traces of every fit that ran EM.
    logs : dict of (alpha, n, model) to PopularityLog
        The popularity-sampled logs.

    Examples
    --------
    >>> POPULARITY_FITS[2]
    ('pop_mle', 'pop_mle', False)
    """
    rows, em_traces, logs = [], [], {}
    N = train.shape[1]
    truth_metric = {(a, m, met): metric_values(met, N)[truth[(a, m)].ranks - 1].mean()
                    for a in alphas for m in models for met in metrics}
    for n in n_values:
        for m in models:
            log_u = pop.simulate_popularity_log(fitted[m], train, test_items, weights[0.0], n, rng=rng)
            naive_uniform = {met: metric_values(met, n)[log_u.x].mean() for met in metrics}
            for a in alphas:
                log = pop.simulate_popularity_log(fitted[m], train, test_items, weights[a], n, rng=rng)
                logs[(a, n, m)] = log
                fits = {col: PE.popularity_fit(log, kind, **({"curve": curves[(a, m)]} if exact else {}))
                        for col, kind, exact in POPULARITY_FITS}
                em_traces += [f.em.loglik_trace for f in fits.values() if f.em is not None]
                lo, hi = PE.popularity_bounds(log)
                for met in metrics:
                    F = metric_values(met, log.N)
                    rows.append({"alpha": a, "n": n, "model": m, "metric": met, "truth": truth_metric[(a, m, met)],
                                 "naive (popularity-sampled)": metric_values(met, n)[log.x].mean(),
                                 "naive (uniform-sampled)": naive_uniform[met],
                                 **{col: f.pmf @ F for col, f in fits.items()},
                                 "bound low": lo @ F, "bound high": hi @ F})
    return pd.DataFrame(rows), em_traces, logs
