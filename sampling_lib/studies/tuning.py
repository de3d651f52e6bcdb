"""Leave-one-dataset-out: the default's tuning chosen on data sets the choice never saw.

The default estimator (``logspline``) has three tuning choices: the penalty
(``DEFAULT_PENALTY``), the spline basis (``DEFAULT_KNOT_SPACING``, knots equally
spaced in log R) and the alternatives of its interval (the penalty divided and
multiplied by ``SENSITIVITY_FACTOR``). Each is chosen here by
leave-one-dataset-out: for every data-set family F of the panel, the choice is
made on the other families only and its error (or coverage) is reported on F.

Criteria, fixed before the measurement:

* point estimate (penalty, knot spacing): the geometric mean, over the
  training families and the two metrics (Recall@1..K, NDCG@1..K), of the
  ratio of the candidate's mean relative error to the best published
  estimator's on the same draws -- scale-free, so a data set with large errors
  (a catalogue of 40,000 items at n = 20) does not outweigh the others
  (:func:`leave_one_dataset_out`);
* interval (the factor): the smallest factor whose pooled coverage of the
  training families' intervals reaches the nominal level (the widest, if none
  does) (:func:`choose_factor`).

References
----------
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
.. [HTF09] Hastie, Tibshirani, Friedman. The Elements of Statistical Learning (2009),
   Sec 7.10 (cross-validation; a choice scored on data it never saw).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import check_int, check_ranks, check_scheme
from ..experiments import seed_sequence
from .panel import PUBLISHED_METHODS, accuracy_panel, evaluation_draws
from .panel_data import dataset_family

__all__ = [
    "PENALTIES",
    "KNOT_SPACINGS",
    "FACTORS",
    "logspline_label",
    "logspline_candidates",
    "tuning_panel",
    "family_errors",
    "leave_one_dataset_out",
    "held_out_comparison",
    "penalty_intervals",
    "union_intervals",
    "choose_factor",
]

#: The penalties tried (second-difference weight; it scales with knot_spacing^3).
PENALTIES = (3.0, 10.0, 30.0, 70.0, 200.0, 700.0, 3000.0)
#: The knot spacings tried (in log R).
KNOT_SPACINGS = (0.25, 0.4, 0.7)
#: The factors of the interval's alternatives tried (1: the fitted penalty alone).
FACTORS = (1.0, 3.0, 10.0, 30.0)


def logspline_label(penalty, knot_spacing):
    """The estimator label of one tuning, e.g. ``"logspline(penalty=70, knot_spacing=0.4)"``."""
    return f"logspline(penalty={penalty:g}, knot_spacing={knot_spacing:g})"


def logspline_candidates(penalties=PENALTIES, knot_spacings=KNOT_SPACINGS):
    """``(label, estimator)`` pairs of the log-spline at every (penalty, knot spacing)."""
    from ..estimators import get_estimator

    return [(logspline_label(p, s), get_estimator("logspline", penalty=float(p), knot_spacing=float(s)))
            for s in knot_spacings for p in penalties]


def tuning_panel(populations, penalties=PENALTIES, knot_spacings=KNOT_SPACINGS, **panel_options):
    """:func:`~sampling_lib.studies.accuracy_panel` of every log-spline tuning (no references).

    With the same ``rng``, ``sample_sizes``, ``user_counts`` and ``draws`` as a
    panel of the published estimators, the draws are the same (the seeds
    depend on the populations' labels, n and M only), so the two tables can be
    concatenated and compared draw by draw.
    """
    panel_options = {**panel_options, "references": ()}
    return accuracy_panel(populations, logspline_candidates(penalties, knot_spacings), **panel_options)


def family_errors(panel, metrics=("recall", "ndcg")):
    """Mean relative error (%) per data-set family, estimator and metric.

    Each evaluation (population, n, M, draw) is averaged over K first; the
    family's error is the mean over its evaluations
    (:func:`sampling_lib.studies.dataset_family` groups the catalogues of the
    same users).

    Returns
    -------
    pandas.DataFrame
        Columns ``family, estimator, metric, error, evaluations, failures``
        (evaluations without an estimate, left out of the mean).
    """
    df = panel[panel.metric.isin(metrics)]
    g = df.groupby(["dataset", "model", "n", "M", "draw", "estimator", "metric"])
    per = pd.concat([g["rel_error"].mean(), g["estimate"].apply(lambda e: bool(e.isna().all())).rename("failed")],
                    axis=1).reset_index()
    per["family"] = per.dataset.map(dataset_family)
    out = per.groupby(["family", "estimator", "metric"]).agg(error=("rel_error", "mean"),
                                                             evaluations=("rel_error", "size"),
                                                             failures=("failed", "sum")).reset_index()
    out["error"] *= 100.0
    return out


def _ratios(errors, candidates, published):
    """log(error / best published error) per (family, metric, candidate)."""
    e = errors.pivot_table(index=["family", "metric"], columns="estimator", values="error")
    pub = [m for m in published if m in e.columns]
    if not pub:
        raise ValueError(f"the panel holds none of the published estimators {list(published)}")
    missing = [c for c in candidates if c not in e.columns]
    if missing:
        raise ValueError(f"candidates not in the panel: {missing}")
    best = e[pub].min(axis=1)
    return np.log(e[list(candidates)].div(best, axis=0))


def leave_one_dataset_out(errors, candidates, *, published=PUBLISHED_METHODS):
    """The candidate chosen without each family, and its error on it.

    For every family F, the candidate with the smallest geometric-mean ratio
    (error / best published error), over the other families and the metrics,
    is chosen; the table reports that choice and the ratio on F. The choice on
    all families is the row ``held_out = "(none)"``.

    Parameters
    ----------
    errors : pandas.DataFrame
        :func:`family_errors` of a panel holding the candidates and the
        published estimators (same draws).
    candidates : sequence of str
        Estimator labels to choose from (e.g. :func:`logspline_label` of a grid).
    published : sequence of str
        The reference estimators of the ratio.

    Returns
    -------
    pandas.DataFrame
        One row per held-out family: ``held_out, chosen, train_ratio`` (the
        criterion on the training families, as a ratio), ``held_out_ratio``
        (geometric mean over the metrics on the held-out family; NaN for the
        all-families row).

    Examples
    --------
    >>> e = pd.DataFrame({"family": ["a"] * 4 + ["b"] * 4, "metric": ["recall"] * 8,
    ...                   "estimator": ["x", "y", "mle", "bv"] * 2,
    ...                   "error": [5., 9., 10., 12., 20., 8., 10., 11.], "evaluations": 1})
    >>> leave_one_dataset_out(e, ["x", "y"])[["held_out", "chosen"]].values.tolist()
    [['a', 'y'], ['b', 'x'], ['(none)', 'y']]
    """
    lr = _ratios(errors, candidates, published)
    fams = list(dict.fromkeys(lr.index.get_level_values("family")))
    rows = []
    for held in fams + ["(none)"]:
        train = lr[lr.index.get_level_values("family") != held]
        crit = train.mean(axis=0)
        chosen = crit.idxmin()
        test = lr[lr.index.get_level_values("family") == held]
        rows.append({"held_out": held, "chosen": chosen, "train_ratio": float(np.exp(crit[chosen])),
                     "held_out_ratio": float(np.exp(test[chosen].mean())) if len(test) else np.nan})
    return pd.DataFrame(rows)


def held_out_comparison(errors, lodo, *, default, published=PUBLISHED_METHODS,
                        references=("split-half oracle", "realized oracle")):
    """Per held-out family and metric: the LODO choice against every published estimator.

    Parameters
    ----------
    errors : pandas.DataFrame
        :func:`family_errors` of the panels (candidates, the default, the
        published estimators and the references on the same draws).
    lodo : pandas.DataFrame
        :func:`leave_one_dataset_out`.
    default : str
        The label of the default as shipped (e.g. ``"logspline"``).

    Returns
    -------
    pandas.DataFrame
        One row per (family, metric): ``lodo_choice``, ``lodo_error`` (the error
        of the tuning chosen without the family), ``default_error``,
        ``best_published`` (name), ``best_published_error``, ``wins`` (lodo
        error below the best published), every published estimator's error and
        the references' errors (in %).
    """
    e = errors.pivot_table(index=["family", "metric"], columns="estimator", values="error")
    pub = [m for m in published if m in e.columns]
    rows = []
    for (fam, metric), row in e.iterrows():
        sel = lodo[lodo.held_out == fam]
        if sel.empty:
            continue
        choice = sel.chosen.iloc[0]
        best = row[pub].idxmin()
        out = {"family": fam, "metric": metric, "lodo_choice": choice, "lodo_error": row[choice],
               "default_error": row.get(default, np.nan), "best_published": best,
               "best_published_error": row[best], "wins": bool(row[choice] < row[best])}
        out.update({m: row[m] for m in pub})
        out.update({r: row[r] for r in references if r in row.index})
        rows.append(out)
    return pd.DataFrame(rows)


def penalty_intervals(populations, penalties, *, knot_spacing=None, metrics=("recall@10", "ndcg@10"),
                      sample_sizes=(20, 100, 500), user_counts=(300, None), draws=3, n_boot=200,
                      confidence_level=0.95, scheme="binomial", rng=0, progress=False):
    """The log-spline's percentile bootstrap interval at each penalty, on the same bootstrap draws.

    For every evaluation (drawn as in :func:`~sampling_lib.studies.interval_coverage`,
    same seeds) the log-spline is fitted at every penalty of ``penalties`` and
    its replicates are computed on one common set of multinomial resamples of
    the users (the batched refit of :func:`sampling_lib.correct.estimate`), so
    :func:`union_intervals` can form the default's interval for any factor
    whose alternatives are in ``penalties``. Full ranking's own interval
    (:func:`~sampling_lib.studies.full_ranking_interval`) is recorded for the
    precision ratio.

    Returns
    -------
    pandas.DataFrame
        ``dataset, model, N, n, M, draw, penalty, metric, K, truth, estimate,
        lo, hi, full_low, full_high, below_resolution`` (estimates and
        replicates clipped into the metric's range, as ``estimate`` does).
    """
    from ..counts import rank_counts
    from ..estimators import DEFAULT_KNOT_SPACING, get_estimator
    from ..metrics import metric_matrix, parse_metrics
    from .panel import full_ranking_interval

    scheme = check_scheme(scheme)
    draws = check_int(draws, "draws", low=1)
    n_boot = check_int(n_boot, "n_boot", low=2)
    spacing = DEFAULT_KNOT_SPACING if knot_spacing is None else float(knot_spacing)
    parsed = parse_metrics(metrics)
    root = seed_sequence(rng)
    a = 0.5 * (1.0 - confidence_level)
    rows = []
    for (dataset, model), (R, N) in populations.items():
        t0 = time.perf_counter()
        R = check_ranks(R, N, name=f"ranks of {dataset}/{model}")
        F = metric_matrix(parsed, min(N, max(K for _, _, K in parsed)))
        hiF = F.max(axis=0)
        Fz = np.vstack([F, np.zeros((1, F.shape[1]))])      # rank H + 1 stands for every rank beyond H
        for n, Mv, d, g, Ru, r in evaluation_draws(root, dataset, model, R, N, sample_sizes, user_counts, draws,
                                                   scheme, 1):
            truth = Fz[np.minimum(Ru, F.shape[0] + 1) - 1].mean(axis=0)
            f_lo, f_hi = full_ranking_interval(Ru, F, n_boot=n_boot, rng=g,
                                               confidence_level=confidence_level)
            counts = rank_counts(r, n)
            Cb = g.multinomial(Mv, counts.counts / Mv, size=n_boot)
            for p in penalties:
                est = get_estimator("logspline", penalty=float(p), knot_spacing=spacing, scheme=scheme)
                fit = est.fit_counts(counts, N, F, alternatives=False)
                e = np.clip(fit.estimate, 0.0, hiF)
                reps = np.clip(fit.replicates(Cb), 0.0, hiF)
                lo, hi = np.quantile(reps, a, axis=0), np.quantile(reps, 1.0 - a, axis=0)
                for j, (name, _, K) in enumerate(parsed):
                    rows.append({"dataset": dataset, "model": model, "N": N, "n": n, "M": Mv,
                                 "draw": d, "penalty": float(p), "metric": f"{name}@{K}", "K": K,
                                 "truth": truth[j], "estimate": e[j], "lo": lo[j], "hi": hi[j],
                                 "full_low": f_lo[j], "full_high": f_hi[j],
                                 "below_resolution": bool(K < (N - 1) / (n - 1))})
        if progress:
            print(f"  {dataset}/{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)


def union_intervals(intervals, penalty, factor):
    """The default's interval at ``penalty`` with alternatives ``penalty`` / and x ``factor``.

    Below resolution (``K < (N - 1)/(n - 1)``) the union of the three
    percentile intervals and of the three point estimates; a resolved metric
    keeps the fitted penalty's own percentile interval, as
    :func:`sampling_lib.correct.estimate` does ("What the interval covers").
    ``factor = 1`` is the fitted penalty's interval alone.

    Returns
    -------
    pandas.DataFrame
        One row per evaluation and metric: the keys, ``truth, estimate, ci_low,
        ci_high, covered, rel_width, precision_ratio, factor``.
    """
    keys = ["dataset", "model", "N", "n", "M", "draw", "metric", "K"]
    ps = [penalty] if factor == 1 else [penalty / factor, penalty, penalty * factor]
    have = set(np.round(intervals.penalty.unique(), 9))
    missing = [p for p in ps if round(p, 9) not in have]
    if missing:
        raise ValueError(f"penalty_intervals lacks the penalties {missing} for penalty {penalty:g} x/÷ {factor:g}")
    sub = intervals[np.isin(np.round(intervals.penalty, 9), np.round(ps, 9))]
    g = sub.groupby(keys)
    out = g.agg(truth=("truth", "first"), full_low=("full_low", "first"), full_high=("full_high", "first"),
                below_resolution=("below_resolution", "first"),
                lo=("lo", "min"), hi=("hi", "max"), e_lo=("estimate", "min"), e_hi=("estimate", "max"))
    centre = sub[np.isclose(sub.penalty, penalty)].set_index(keys)
    out["estimate"] = centre["estimate"]
    below = out.below_resolution.astype(bool)
    out["ci_low"] = np.where(below, np.minimum(out.lo, out.e_lo), centre["lo"].reindex(out.index))
    out["ci_high"] = np.where(below, np.maximum(out.hi, out.e_hi), centre["hi"].reindex(out.index))
    out["covered"] = (out.ci_low <= out.truth) & (out.truth <= out.ci_high)
    width = out.ci_high - out.ci_low
    out["rel_width"] = np.where(out.truth > 0, width / out.truth, np.nan)
    fw = out.full_high - out.full_low
    out["precision_ratio"] = np.where(fw > 0, width / fw, np.nan)
    out["factor"] = float(factor)
    return out.drop(columns=["lo", "hi", "e_lo", "e_hi"]).reset_index()


def choose_factor(intervals, penalty, factors=FACTORS, *, confidence_level=0.95):
    """Leave-one-dataset-out choice of the interval's factor, and its coverage on the held-out family.

    For every family, the smallest factor whose pooled coverage on the other
    families' intervals is at least ``confidence_level`` (the widest factor
    if none is) is chosen; the row reports its coverage, the smallest coverage
    over the family's models and the median precision ratio on the held-out
    family. The row ``held_out = "(none)"`` is the choice on all families (its coverage: on all of
    them, in sample).

    Returns
    -------
    (choice, per_factor) : pandas.DataFrame, pandas.DataFrame
        ``choice``: ``held_out, factor, train_coverage, coverage,
        min_model_coverage, intervals, median_precision_ratio, median_rel_width``;
        ``per_factor``: every factor's ``coverage``, ``median_precision_ratio``
        and ``median_rel_width`` per family.
    """
    tabs = pd.concat([union_intervals(intervals, penalty, f) for f in factors], ignore_index=True)
    tabs["family"] = tabs.dataset.map(dataset_family)
    per_factor = tabs.groupby(["family", "factor"]).agg(
        coverage=("covered", "mean"), intervals=("covered", "size"),
        median_precision_ratio=("precision_ratio", "median"),
        median_rel_width=("rel_width", "median")).reset_index()
    fams = list(dict.fromkeys(tabs.family))
    rows = []
    for held in fams + ["(none)"]:
        train = tabs[tabs.family != held]
        cov = train.groupby("factor")["covered"].mean().reindex([float(f) for f in factors])
        ok = cov[cov >= confidence_level]
        f = float(ok.index.min()) if len(ok) else float(max(factors))   # none reaches it (or no training data)
        test = tabs[((tabs.family == held) | (held == "(none)")) & (tabs.factor == f)]
        rows.append({"held_out": held, "factor": f, "train_coverage": float(cov[f]),
                     "coverage": float(test.covered.mean()) if len(test) else np.nan,
                     "min_model_coverage": (float(test.groupby(["dataset", "model"]).covered.mean().min())
                                            if len(test) else np.nan),
                     "intervals": int(len(test)),
                     "median_precision_ratio": float(test.precision_ratio.median()) if len(test) else np.nan,
                     "median_rel_width": float(test.rel_width.median()) if len(test) else np.nan})
    return pd.DataFrame(rows), per_factor
