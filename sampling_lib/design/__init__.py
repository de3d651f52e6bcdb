"""Planning a sampled evaluation: designs, their cost, and the precision they buy.

Below resolution (K < w = (N - 1)/(n - 1)) a single sampled set cannot place
the held-out item inside the first sampled bin, and every top-K estimate is an
extrapolation. A *nested design* adds items to the sets of the users who need
them, decided from the ranks seen so far:

* ``single`` -- every user gets a set of n items (held-out item included);
* ``threshold`` -- a first stage of n items, then ``n2`` more items for the
  users whose first-stage rank is <= ``threshold`` (a second stage);
* ``ladder`` -- adaptive sampling (TORS24 Algorithm 1): start at n, double
  the set while the held-out item is ranked first, up to ``n_max`` (or grow
  it by another factor, ``Design.growth``);
* ``full_subset`` -- a random ``fraction`` of the users ranked in full, the
  others at n.

The likelihood of such a design is the per-user kernel at the final (n_u,
r_u) (:func:`sampling_lib.estimators.logspline_fit`, Notes), so the default
estimator takes the merged ranks directly. :func:`predict` gives, for a prior
P(R) (fitted to a pilot), the expected scoring cost and the variance of the
default estimator by the delta method (the influence function of the
posterior-mean estimate with the penalized log-spline prior refitted); the
*precision ratio* is the predicted interval width over full ranking's own
(sqrt of Var(T_hat) / (Var_P(F) / M)). :func:`plan` scores a family of
candidate designs and picks the cheapest that meets a target.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 6 (Algorithm 1, eq 44: cost).
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2 (the kernels).
.. [vdV98] van der Vaart. Asymptotic Statistics (1998), ch. 5 and 20 (M-estimators,
   the delta method and influence functions).
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
.. [Hoeffding63] Hoeffding. Probability inequalities for sums of bounded random variables.
   JASA 58(301), 1963 (Thm 4: sampling without replacement keeps the with-replacement bounds; Bernstein's
   inequality, eq 2.13 there).
"""
from ._cost import first_rungs, later_stages, shared_cost
from ._law import (_cost, _count_cdf, _count_pmf, _hypergeom_cdf, _log_survive, design_law,  # noqa: F401
                   resolution_width)
from ._plan import PlanResult, candidate_designs, choose_design, judged_column, plan
from ._predict import RATIO_PREDICTION_SD, assurance_margin, predict
from ._strata import (StrataPlan, describe_strata, head_candidates, pilot_size, plan_strata, predict_strata,
                      smaller_head_cells, tail_candidates, head_rungs, head_ladder_cost,
                      head_climb_top, head_climb_pays)
from ..sampling import Design  # noqa: F401  (the designs this package plans; defined with the samplers)

__all__ = ["design_law", "predict", "plan", "PlanResult", "candidate_designs", "choose_design", "judged_column",
           "assurance_margin", "RATIO_PREDICTION_SD", "resolution_width", "shared_cost", "later_stages",
           "first_rungs", "predict_strata", "plan_strata", "StrataPlan", "tail_candidates", "pilot_size",
           "describe_strata", "head_candidates", "smaller_head_cells", "head_rungs", "head_ladder_cost",
           "head_climb_top", "head_climb_pays"]
