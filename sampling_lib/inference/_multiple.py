"""Multiple comparisons: adjusted p-values, decisions and ``compare_models``.

``adjust_pvalues`` (Bonferroni, Holm's step-down), ``decide`` (the one helper
turning p-values into decisions, behind :func:`compare_models` and
:func:`sampling_lib.correct.compare`) and ``compare_models``, which tests every
pair of models (or every model against a reference) on per-user values at
family-wise level alpha.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from .._validation import check_float
from ._proportions import check_alternative, check_family, interval_from_se, z_critical
from ._tests import check_values, ttest_paired, ttest_unpaired, two_proportion_ztest

__all__ = [
    "ADJUSTMENTS",
    "adjust_pvalues",
    "decide",
    "compare_models",
]

ADJUSTMENTS = ("none", "bonferroni", "holm")


def _check_alpha(alpha):
    """Significance level (family-wise error rate) of a test, in (0, 1)."""
    return check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)


# ----------------------------------------------------------------------------
# multiple comparisons
# ----------------------------------------------------------------------------
def adjust_pvalues(pvalues, adjust="bonferroni", alpha=0.05):
    """Family-wise adjusted p-values and rejections (Bonferroni or Holm).

    Vectorized: a 2-D array holds one family per row (the adjustment runs
    along the last axis). Rejections are made as statsmodels ``multipletests``
    makes them (``p <= alpha / k`` for Bonferroni; the Holm step-down
    ``p_(i) <= alpha / (k - i + 1)`` until the first failure); adjusted
    p-values are ``min(1, k p)`` and, for Holm, the running maximum of
    ``(k - i + 1) p_(i)`` over the sorted p-values.

    Parameters
    ----------
    pvalues : array_like, shape (k,) or (families, k)
    adjust : {'none', 'bonferroni', 'holm'}
    alpha : float in (0, 1)
        Family-wise error rate.

    Returns
    -------
    reject : ndarray of bool
    pvalues_adjusted : ndarray

    References
    ----------
    TORS24 Sec 7.2 (Bonferroni); Holm (1979), Scand. J. Statist. 6:65-70.

    Examples
    --------
    >>> reject, padj = adjust_pvalues([0.01, 0.02, 0.04], "holm")
    >>> reject.tolist(), padj.round(2).tolist()
    ([True, True, True], [0.03, 0.04, 0.04])
    """
    pv = np.asarray(pvalues, dtype=float)
    if pv.ndim not in (1, 2) or pv.size == 0 or np.any(~(pv >= 0)) or np.any(pv > 1):
        raise ValueError(f"pvalues must be a non-empty 1-D or 2-D array in [0, 1]; got {pvalues!r}")
    alpha = _check_alpha(alpha)
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust must be one of {ADJUSTMENTS}; got {adjust!r}")
    k = pv.shape[-1]
    if adjust == "none":
        return pv <= alpha, pv.copy()
    if adjust == "bonferroni":
        return pv <= alpha / k, np.minimum(pv * k, 1.0)
    order = np.argsort(pv, axis=-1, kind="stable")
    ps = np.take_along_axis(pv, order, axis=-1)
    steps = np.arange(k, 0, -1)                                 # k - i + 1 for i = 1..k
    ok = np.cumprod(ps <= alpha / steps, axis=-1).astype(bool)  # step-down: stop at the first failure
    adj = np.minimum(np.maximum.accumulate(ps * steps, axis=-1), 1.0)
    reject, padj = np.empty_like(ok), np.empty_like(adj)
    np.put_along_axis(reject, order, ok, axis=-1)
    np.put_along_axis(padj, order, adj, axis=-1)
    return reject, padj


def decide(pvalues, differences, model_a, model_b, *, adjust="holm", alpha=0.05):
    """Adjusted p-values, rejections and decisions for one family of comparisons.

    The one helper behind :func:`compare_models` and
    :func:`sampling_lib.correct.compare`: the p-values of the family are
    adjusted (:func:`adjust_pvalues`; a NaN p-value, from a comparison without
    any variation, counts as 1) and every comparison gets a decision,
    ``"A > B"`` or ``"A < B"`` (by the sign of ``differences``) when it is
    rejected, else ``"no significant difference"``.

    Parameters
    ----------
    pvalues, differences : array_like, shape (k,)
    model_a, model_b : sequence of str, length k
    adjust : {'none', 'bonferroni', 'holm'}, keyword-only
    alpha : float in (0, 1), keyword-only
        Family-wise error rate.

    Returns
    -------
    dict
        ``pvalue_adjusted`` (ndarray), ``reject`` (ndarray of bool) and
        ``decision`` (list of str).

    References
    ----------
    TORS24 Sec 7.2.

    Examples
    --------
    >>> d = decide([0.001, 0.3], [0.2, -0.1], ["A", "A"], ["B", "C"], adjust="bonferroni")
    >>> d["decision"]
    ['A > B', 'no significant difference']
    """
    pv = np.asarray(pvalues, dtype=float)
    diff = np.asarray(differences, dtype=float)
    if pv.ndim != 1 or diff.shape != pv.shape or len(model_a) != pv.size or len(model_b) != pv.size:
        raise ValueError(f"pvalues, differences, model_a and model_b must have the same length; got "
                         f"{pv.size}, {diff.size}, {len(model_a)}, {len(model_b)}")
    reject, padj = adjust_pvalues(np.where(np.isnan(pv), 1.0, pv), adjust, alpha)
    decision = [("no significant difference" if not rj else f"{a} > {b}" if d > 0 else f"{a} < {b}")
                for rj, d, a, b in zip(reject, diff, model_a, model_b)]
    return dict(pvalue_adjusted=padj, reject=reject, decision=decision)


def _as_value_dict(per_user_values):
    if isinstance(per_user_values, pd.DataFrame):
        d = {str(c): per_user_values[c].to_numpy(dtype=float) for c in per_user_values.columns}
    elif isinstance(per_user_values, dict):
        d = {str(k): np.asarray(v, dtype=float) for k, v in per_user_values.items()}
    else:
        raise TypeError("per_user_values must be a dict {model: values} or a DataFrame "
                        f"with one column per model; got {type(per_user_values).__name__}")
    if len(d) < 2:
        raise ValueError(f"per_user_values must hold at least 2 models; got {len(d)}")
    for k, v in d.items():
        check_values(v, f"per_user_values[{k!r}]")
    return d


def compare_models(per_user_values, alpha=0.05, adjust=("bonferroni", "holm"),
                   paired=True, *, family="all-pairs", reference=None,
                   alternative="two-sided", test="t"):
    """Which models differ, at family-wise level alpha, on a sample of users.

    Runs one test per comparison of the ``family`` and adjusts the p-values with
    each ``adjust`` method (TORS24 Sec 7.2: "if we consider multiple comparisons at the
    same time, Bonferroni inequality again has to be used").

    Parameters
    ----------
    per_user_values : dict {model: 1-D array} or DataFrame (one column per model)
        Per-user metric values (AP@K, NDCG@K, or 0/1 Recall@K hits). Columns of a
        DataFrame (or equal-length arrays) are the same users when ``paired``.
    alpha : float in (0, 1)
        Family-wise error rate.
    adjust : str or sequence of {'none', 'bonferroni', 'holm'}
        Multiple-comparison adjustment(s) (:func:`adjust_pvalues`).
    paired : bool
        True: :func:`ttest_paired` (same users for all models); False:
        :func:`ttest_unpaired` (Welch) or, with ``test='z'``, eq 49.
    family : {'all-pairs', 'vs-best'}, keyword-only
        All n(n-1)/2 pairs (model_a before model_b in input order), or every model
        against one model (model_a): the ``reference`` if given, else the model
        with the highest mean. A reference fixed in advance gives a family of
        n-1 comparisons. A best model picked from the same data does not: its
        comparisons are then tested and adjusted as part of all n(n-1)/2 pairs
        (Bonferroni or Holm over all pairs, rows of the best kept), which keeps
        the family-wise error <= alpha; ``n_comparisons`` reports the size of
        the family adjusted over.
    reference : str, optional, keyword-only
        Model fixed in advance for ``family='vs-best'``.
    alternative : {'two-sided', 'less', 'greater'}, keyword-only
        About mean_a - mean_b.
    test : {'t', 'z'}, keyword-only
        't' for t-tests; 'z' for the two-proportion z-test of eq 49 (0/1 values,
        unpaired only).

    Returns
    -------
    pandas.DataFrame
        One row per (adjustment, comparison), columns ``adjust, family, model_a,
        model_b, n_a, n_b, mean_a, mean_b, difference, statistic, pvalue,
        pvalue_adjusted, reject, ci_low, ci_high, ci_level, n_comparisons, alpha,
        test, decision``. ``ci_*`` is the interval of mean_a - mean_b at the
        Bonferroni level ``1 - alpha/k`` (simultaneous over the family; also
        given on Holm rows) or ``1 - alpha`` for ``'none'``.

    References
    ----------
    TORS24 Sec 7.2, eqs 49-51.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> vals = {"A": rng.random(500), "B": rng.random(500) * 0.8, "C": rng.random(500)}
    >>> out = compare_models(vals, adjust="bonferroni")
    >>> print(out[["model_a", "model_b", "reject", "decision"]].to_string(index=False))
    model_a model_b  reject                  decision
          A       B    True                     A > B
          A       C   False no significant difference
          B       C    True                     B < C
    """
    values = _as_value_dict(per_user_values)
    alpha = _check_alpha(alpha)
    adjustments = (adjust,) if isinstance(adjust, str) else tuple(adjust)
    if not adjustments:
        raise ValueError(f"adjust must name at least one of {ADJUSTMENTS}")
    for adj in adjustments:
        if adj not in ADJUSTMENTS:
            raise ValueError(f"adjust must be one of {ADJUSTMENTS}; got {adj!r}")
    family = check_family(family)
    alternative = check_alternative(alternative)
    if test not in ("t", "z"):
        raise ValueError(f"test must be 't' or 'z'; got {test!r}")
    names = list(values)
    if paired:
        sizes = {k: v.size for k, v in values.items()}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"paired=True needs the same users for every model; got sizes {sizes}")
        if test == "z":
            raise ValueError("test='z' (eq 49) assumes independent samples; use paired=False "
                             "or test='t' for paired 0/1 values")
    if test == "z":
        for k, v in values.items():
            if not np.all((v == 0) | (v == 1)):
                raise ValueError(f"test='z' needs 0/1 values (Recall@K hits); "
                                 f"per_user_values[{k!r}] has other values")
    means = {k: float(v.mean()) for k, v in values.items()}
    if reference is not None:
        if family != "vs-best":
            raise ValueError("reference is only used with family='vs-best'")
        if str(reference) not in values:
            raise ValueError(f"reference must be one of {names}; got {reference!r}")
        reference = str(reference)
    keep = None
    if family == "vs-best" and reference is not None:
        pairs = [(reference, k) for k in names if k != reference]
    elif family == "vs-best":
        # data-selected best: adjust over all pairs, report the best's rows
        best = max(names, key=lambda k: means[k])
        pairs = [(best, k) for k in names if k != best]
        pairs += [(a, b) for a, b in itertools.combinations(names, 2) if best not in (a, b)]
        keep = len(names) - 1
    else:
        pairs = list(itertools.combinations(names, 2))
    k_cmp = len(pairs)

    rows = []
    for a, b in pairs:
        x, y = values[a], values[b]
        if test == "z":
            res = two_proportion_ztest(int(x.sum()), x.size, int(y.sum()), y.size,
                                       alternative=alternative)
            est = res.estimate
            se = math.sqrt(res.proportion1 * (1 - res.proportion1) / x.size
                           + res.proportion2 * (1 - res.proportion2) / y.size)
            crit = lambda conf, alt: z_critical(conf, alt)  # noqa: E731
        else:
            res = ttest_paired(x, y, alternative=alternative) if paired else \
                ttest_unpaired(x, y, alternative=alternative)
            est, se, df = res.estimate, res.standard_error, res.df
            crit = lambda conf, alt, df=df: float(  # noqa: E731
                stats.t.isf((1 - conf) / 2 if alt == "two-sided" else 1 - conf, df))
        rows.append(dict(model_a=a, model_b=b, n_a=x.size, n_b=y.size, mean_a=means[a],
                         mean_b=means[b], difference=est, statistic=res.statistic,
                         pvalue=res.pvalue, _se=se, _crit=crit))
    pv = np.array([r["pvalue"] for r in rows])
    out = []
    for adj in adjustments:
        # identical values (zero variance of the differences) give NaN in scipy: no evidence
        dec = decide(pv, [r["difference"] for r in rows], [r["model_a"] for r in rows],
                     [r["model_b"] for r in rows], adjust=adj, alpha=alpha)
        level = 1 - alpha if adj == "none" else 1 - alpha / k_cmp
        for i, r in enumerate(rows[:keep]):
            c = r["_crit"](level, alternative)
            lo, hi = interval_from_se(np.float64(r["difference"]), r["_se"], c, c, alternative)
            out.append(dict(adjust=adj, family=family,
                            **{k: v for k, v in r.items() if not k.startswith("_")},
                            pvalue_adjusted=float(dec["pvalue_adjusted"][i]),
                            reject=bool(dec["reject"][i]), ci_low=float(lo), ci_high=float(hi),
                            ci_level=level, n_comparisons=k_cmp, alpha=alpha, test=test,
                            decision=dec["decision"][i]))
    return pd.DataFrame(out)
