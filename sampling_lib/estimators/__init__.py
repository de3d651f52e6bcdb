"""Estimators of global top-K metrics from sampled ranks, and their registry.

Every estimator takes sampled ranks (1-based ints in 1..n), N and n and returns a
length-N vector ``w`` such that the estimate of any metric F is ``w @ F(1..N)``.

- the registry (``_registry``): :func:`get_estimator` (name + options -> a
  configured callable), :data:`METHODS`, :data:`DEFAULT_METHOD`,
  :class:`EstimatorSpec` / :func:`register` (one registration per estimator);
  bootstrap replicates of a fitted estimator (``_bootstrap``: :class:`FittedEstimator`);
- the one EM engine (``_em``): :func:`mixture_em`, :func:`em_core_batch`;
- rank-distribution estimators: ``w`` is a probability vector P(R), R = 1..N --
  MLE, WMLE, adaptive MLE (``_mle``; AAAI21 eqs 18-23, TORS24 eqs 31-34, 43) and
  MES (``_mes``; AAAI21 eqs 24-27, TORS24 eqs 35-36), results in ``_results``;
- linear metric estimators (``_linear``): ``w`` is a weight vector that may have
  negative entries (BV, MN, CLS; TORS24 eqs 7-10, 28, 37-42);
- the log-spline empirical-Bayes estimator (``_logspline``, the default): ``w``
  is the users' average posterior over R under a smooth fitted prior (Efron 2016);
  on a stratified evaluation (a proxy's head scored exactly, a sampled tail) one
  prior per group of head counts (``_logspline_strata``: :func:`strata_estimate`);
- popularity-sampled negatives (``_popularity``): Horvitz-Thompson, the
  rank-mass curve and ``pop_mle`` / ``ht`` / ``uniform`` (registered with
  ``input="popularity"``).

Rules (DESIGN.md): a family module imports kernels, counts, ``_em``,
``_linalg`` and ``_results``, and nothing private of another family module; the
registry imports the families; no module imports the registry but the package.
"""
from ._bootstrap import FittedEstimator, weights_head
from ._em import em_core_batch, mixture_em
from ._cls import CLSFit, cls, cls_fit
from ._linear import (MSEBound, bv, bv_from_pmf, bv_rank_pmf, bv_sampled_metric, exact_mse, linear_on_grid,
                      linear_on_grid_batch, mn, mn_from_pmf, mn_sampled_metric, mn_sampled_metric_lstsq, mse_bound,
                      multinomial_linear_var, sampled_pmf)
from ._logspline import (DEFAULT_KNOT_SPACING, DEFAULT_PENALTY, GRID_N_MAX, SENSITIVITY_FACTOR, GridWeights,
                         LogsplineResult, logspline, logspline_cells_fit, logspline_fit, logspline_sensitivity,
                         sensitivity_penalties, spline_grid)
from ._logspline_newton import penalty_matrix, prior_masses
from ._logspline_strata import (DEFAULT_MIN_GROUP_USERS, STRATA_METHOD, StrataFit, StrataGroup, logspline_strata_fit,
                                strata_estimate, strata_groups)
from ._strata_pooling import PoolingCheck, strata_pooling_check
from ._logspline_boot import COARSE_DRAW_MAX_SHARE, cell_metric, logspline_bootstrap, logspline_cells_replicates, logspline_replicates
from ._mes import mes, mes_fit, mes_objective
from ._mle import (adaptive_mle, adaptive_mle_fit, mixture_loglik, mle, mle_fit, wmle, wmle_fit,
                   wmle_weights)
from ._popularity import (PopularityFit, horvitz_thompson, popularity_bounds, popularity_fit,
                          rank_mass_curve)
from ._registry import (BOOTSTRAP_KINDS, DEFAULT_METHOD, INPUTS, Estimator, EstimatorSpec, build_estimators,
                        estimator_spec, fit_estimators, get_estimator, register)
from ._methods import METHODS, PERUSER_METHODS, POPULARITY_METHODS      # registers every estimator
from ._results import EMResult, MESResult

__all__ = [
    # registry and bootstrap
    "METHODS",
    "POPULARITY_METHODS",
    "PERUSER_METHODS",
    "DEFAULT_METHOD",
    "BOOTSTRAP_KINDS",
    "INPUTS",
    "EstimatorSpec",
    "Estimator",
    "register",
    "get_estimator",
    "estimator_spec",
    "build_estimators",
    "fit_estimators",
    "FittedEstimator",
    "weights_head",
    # the EM engine and results
    "mixture_em",
    "em_core_batch",
    "EMResult",
    "MESResult",
    # rank-distribution estimators
    "mle",
    "mle_fit",
    "wmle",
    "wmle_fit",
    "wmle_weights",
    "adaptive_mle",
    "adaptive_mle_fit",
    "mixture_loglik",
    "mes",
    "mes_fit",
    "mes_objective",
    # linear metric estimators
    "bv",
    "bv_from_pmf",
    "bv_rank_pmf",
    "bv_sampled_metric",
    "cls",
    "cls_fit",
    "CLSFit",
    "mn",
    "mn_from_pmf",
    "mn_sampled_metric",
    "mn_sampled_metric_lstsq",
    "MSEBound",
    "mse_bound",
    "exact_mse",
    "multinomial_linear_var",
    "sampled_pmf",
    "linear_on_grid",
    "linear_on_grid_batch",
    # the default
    "LogsplineResult",
    "GridWeights",
    "logspline_fit",
    "logspline",
    "DEFAULT_PENALTY",
    "DEFAULT_KNOT_SPACING",
    "logspline_bootstrap",
    "logspline_replicates",
    "logspline_sensitivity",
    "SENSITIVITY_FACTOR",
    "logspline_cells_fit",
    "logspline_cells_replicates",
    # the default on a stratified evaluation (a proxy's head scored exactly, a sampled tail)
    "logspline_strata_fit",
    "strata_estimate",
    "strata_groups",
    "strata_pooling_check",
    "StrataFit",
    "StrataGroup",
    "PoolingCheck",
    "DEFAULT_MIN_GROUP_USERS",
    "STRATA_METHOD",
    # the log-spline prior's surface for the planner (sampling_lib.design) and other callers
    "GRID_N_MAX",
    "spline_grid",
    "penalty_matrix",
    "prior_masses",
    "cell_metric",
    "sensitivity_penalties",
    "COARSE_DRAW_MAX_SHARE",
    # popularity-sampled negatives
    "horvitz_thompson",
    "rank_mass_curve",
    "PopularityFit",
    "popularity_fit",
    "popularity_bounds",
]
