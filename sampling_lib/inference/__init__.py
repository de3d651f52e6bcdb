"""Confidence intervals, tests and model comparisons on a sample of users.

The inference half of TORS24 Section 7 (the planning half, sample sizes and
Hoeffding, is :mod:`sampling_lib.user_sampling`), in the papers' notation and
scipy's vocabulary (``confidence_level``, ``alternative``; ``alpha`` is the
significance level, i.e. the family-wise error rate, of a test):

==============================  ===============================================
critical value                  :func:`z_critical`
CI of one proportion            :func:`proportion_confint`       (Wald, eq 46)
CI of a difference              :func:`diff_confint`             (TORS24 eq 51)
two-sample z-test               :func:`two_proportion_ztest`     (TORS24 eq 49-50)
t-tests for AP / NDCG values    :func:`ttest_paired`, :func:`ttest_unpaired`
p-values and decisions          :func:`pvalue_from_z`, :func:`adjust_pvalues`,
                                :func:`decide` (the one helper behind
                                :func:`compare_models` and
                                :func:`sampling_lib.correct.compare`)
many models                     :func:`n_comparisons`, :func:`compare_models`
==============================  ===============================================

Decisions where the paper is loose (each is tested):

* ``z_{alpha/2}`` is the exact normal quantile (1.959964 for 95%), not 1.96.
* Bonferroni over the comparisons of a ``family``: ``"all-pairs"`` ->
  n(n-1)/2, ``"vs-best"`` -> n-1 (each model against one reference model).
  The n-1 count is valid only when that reference is fixed before looking at
  the sample. When the "best" model is picked from the same sample,
  Bonferroni over n-1 comparisons does **not** control the family-wise error
  (notebook 06 measures about 0.09 at alpha = 0.05 for 5 equal models): the
  comparisons against a data-selected best are a subset of all pairs, so
  :func:`compare_models` adjusts them over all n(n-1)/2 pairs.
* The z statistic of eq 49 uses the pooled proportion (the null hypothesis
  p1 = p2); the CI of eq 51 uses the unpooled (Wald) standard error, as printed.
  For unequal sample sizes eq 49 generalizes to
  ``sqrt(pbar qbar (1/m1 + 1/m2))`` (equal to ``sqrt(2 pbar qbar / m)`` when
  m1 = m2 = m).
* Optional finite-population correction ``population=M`` (m of M users drawn
  without replacement): the variance is multiplied by (M - m)/(M - 1)
  (:func:`finite_population_factor`). The paper ignores it (M >> m).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Section 7, eqs 45-52, Tables 8-9.
.. [Holm79] S. Holm. A simple sequentially rejective multiple test procedure.
   Scand. J. Statist. 6 (1979), 65-70.
.. [Cochran77] W. G. Cochran. Sampling Techniques, 3rd ed., 1977, Sec 4.4.
"""

from ._bootstrap import bootstrap_pairwise_rows, percentile_interval, percentile_pvalue
from ._multiple import ADJUSTMENTS, adjust_pvalues, compare_models, decide
from ._proportions import (ALTERNATIVES, FAMILIES, check_alternative, check_family, diff_confint,
                           finite_population_factor, n_comparisons, proportion_confint, pvalue_from_z, z_critical)
from ._tests import TTestResult, ZTestResult, ttest_paired, ttest_unpaired, two_proportion_ztest, ztest_arrays

__all__ = [
    "ALTERNATIVES",
    "percentile_interval",
    "percentile_pvalue",
    "bootstrap_pairwise_rows",
    "FAMILIES",
    "ADJUSTMENTS",
    "check_alternative",
    "check_family",
    "finite_population_factor",
    "pvalue_from_z",
    "z_critical",
    "n_comparisons",
    "proportion_confint",
    "diff_confint",
    "ZTestResult",
    "two_proportion_ztest",
    "ztest_arrays",
    "TTestResult",
    "ttest_paired",
    "ttest_unpaired",
    "adjust_pvalues",
    "decide",
    "compare_models",
]

