"""The registered estimators: adapters from each estimator's fit to the registry's calling convention,
their registrations, and the lists of their names.

Each :class:`~sampling_lib.estimators._registry.EstimatorSpec` below names an estimator, its fit
``fit(sampled_ranks, N, n, *, scheme, **options) -> w``, the options it takes and how its bootstrap
replicates are computed (the registry's module docstring). Importing :mod:`sampling_lib.estimators`
imports this module, so every estimator is registered before any is looked up.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling.
   AAAI 2021, eqs 18-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, eqs 7-10, 31-36, 42-43.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_int
from ..kernels import DEFAULT_GRID_TOL, em_grid
from . import _logspline, _logspline_boot, _popularity
from ._cls import cls, cls_fit, cls_groups_state, cls_replicates
from ._linear import bv, bv_sampled_metric, linear_on_grid, mn, mn_sampled_metric, sampled_pmf
from ._mes import mes
from ._mes_pooled import mes_replicates
from ._mle import adaptive_mle, mle, wmle, wmle_weights
from ._registry import EstimatorSpec, estimator_spec, register, registered

__all__ = ["METHODS", "POPULARITY_METHODS", "PERUSER_METHODS"]

_EM_OPTIONS = ("tol", "max_iter", "init", "accelerate", "n_items_tol")
_GRID = ("grid_tol",)



def _fit_mle(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return mle(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_wmle(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return wmle(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _wmle_em_weights(n, *, weight="ndcg", C=10, **_):
    return wmle_weights(n, weight, C)


def _fit_adaptive(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    sizes = np.full(np.size(r), n) if np.ndim(n) == 0 else n
    return adaptive_mle(r, sizes, N, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_mes(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return mes(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_mes_state(r, N, n, *, scheme, **o):
    return _fit_mes(r, N, n, scheme=scheme, **o), None


def _fit_cls(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return cls(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_cls_state(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, prior=None, max_rank=None):
    fit = cls_fit(r, N, n, prior, max_rank=max_rank, scheme=scheme, grid_tol=grid_tol)
    return fit.weights, fit




def _fit_cls_groups(groups, ranks, counts, n, F, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return cls_groups_state(groups, ranks, counts, n, F, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_bv(r, N, n, *, scheme, gamma=0.01, prior=None, grid_tol=None):
    grid = em_grid(N, n, scheme, grid_tol) if np.ndim(N) == 0 and prior is not None else None
    if grid is not None:
        return linear_on_grid("bv", sampled_pmf(r, n), prior, *grid, gamma=gamma)
    return bv(r, N, n, gamma, prior, scheme=scheme)


def _fit_bv_fitted(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return _fit_bv(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _fit_mn_fitted(r, N, n, *, scheme, grid_tol=DEFAULT_GRID_TOL, **o):
    return _fit_mn(r, N, n, scheme=scheme, grid_tol=grid_tol, **o)


def _bv_x(F, N, n, prior, *, M, scheme, gamma=0.01, grid_tol=None):
    return bv_sampled_metric(F, N, n, gamma, prior, scheme=scheme)


def _fit_mn(r, N, n, *, scheme, M=None, prior=None, grid_tol=None):
    grid = em_grid(N, n, scheme, grid_tol) if np.ndim(N) == 0 and prior is not None else None
    if grid is not None:
        return linear_on_grid("mn", sampled_pmf(r, n), prior, *grid,
                              M=np.size(r) if M is None else check_int(M, "M", low=1))
    return mn(r, N, n, prior, M, scheme=scheme)


def _mn_x(F, N, n, prior, *, M, scheme, grid_tol=None):
    return mn_sampled_metric(F, N, n, prior, M, scheme=scheme)


def _register_fitted_prior(kind, fit, option, sampled_metric, references):
    """``{kind}_mle`` and ``{kind}_mes``: BV or MN with the MLE's or the MES's fit as their prior."""
    for prior in ("mle", "mes"):
        register(EstimatorSpec(f"{kind}_{prior}", fit, (option,) + _GRID, "linear", prior=prior,
                               sampled_metric=sampled_metric, linear_kind=kind,
                               summary=f"{kind.upper()} with the {prior.upper()} as prior", references=references))


register(EstimatorSpec("mle", _fit_mle, _EM_OPTIONS + _GRID, "em", warm_start_option="init", varying_items=True,
                       summary="maximum likelihood of P(R) by EM (100 steps from uniform)",
                       references="AAAI21 eqs 18-21; TORS24 eqs 31-34"))
register(EstimatorSpec("wmle", _fit_wmle, _EM_OPTIONS + ("weight", "C") + _GRID, "em",
                       em_weights=_wmle_em_weights, warm_start_option="init", varying_items=True,
                       summary="weighted maximum likelihood of P(R) by EM",
                       references="AAAI21 eqs 22-23"))
register(EstimatorSpec("mes", _fit_mes, ("eta", "form", "solver", "tol", "max_iter", "cvxpy_solver",
                                        "n_items_tol") + _GRID,
                       "batched", fit_state=_fit_mes_state, replicates=mes_replicates, varying_items=True, summary="maximal entropy with squared distribution distance",
                       references="AAAI21 eqs 24-27; TORS24 eqs 35-36"))
register(EstimatorSpec("bv", _fit_bv, ("gamma", "prior"), "linear", sampled_metric=_bv_x, linear_kind="bv",
                       summary="Krichene-Rendle bias-variance estimator (uniform prior)",
                       references="KR20; TORS24 eqs 8-10"))
_register_fitted_prior("bv", _fit_bv_fitted, "gamma", _bv_x, "TORS24 eqs 8-10, Sec 8.1.5")
register(EstimatorSpec("mn", _fit_mn, ("M", "prior"), "linear", sampled_metric=_mn_x, linear_kind="mn",
                       summary="multinomial estimator (uniform prior)", references="TORS24 eq 42"))
_register_fitted_prior("mn", _fit_mn_fitted, "M", _mn_x, "TORS24 eq 42, Sec 8.1.5")
register(EstimatorSpec("cls", _fit_cls, ("prior", "max_rank") + _GRID, "batched", horizon_option="max_rank",
                       fit_state=_fit_cls_state, replicates=cls_replicates, fit_groups=_fit_cls_groups,
                       summary="Krichene-Rendle constrained least squares, P(R) form",
                       references="KR20; TORS24 eq 7"))
register(EstimatorSpec("adaptive_mle", _fit_adaptive, _EM_OPTIONS + _GRID, "em", warm_start_option="init",
                       varying_sizes=True, varying_items=True,
                       summary="MLE by EM for users with different sample sizes",
                       references="TORS24 Sec 6.2, eq 43, Appendix H"))



register(EstimatorSpec("logspline", _logspline.fit_weights, ("penalty", "knot_spacing", "exact_ranks"),
                       "batched", fit_state=_logspline.fit_state, replicates=_logspline_boot.counts_replicates,
                       alternatives=_logspline.alternatives, fit_cells=_logspline.counts_fit_state,
                       draw_cells=_logspline_boot.coarse_draw_cells, cell_influence=_logspline_boot.fit_influence,
                       varying_items=True, varying_sizes=True, full_ranking=True,
                       summary="empirical Bayes: smooth log-spline prior on log R, posterior mean "
                               f"(default; interval over penalties x/÷ {_logspline.SENSITIVITY_FACTOR:g})",
                       references="Efron (2016) g-modeling; AAAI21 eq 18; notebook 10"))

_POP_OPTIONS = ("tol", "max_iter", "grid_size")
for _name, _summary in (("pop_mle", "popularity-sampled negatives: EM with the rank-mass curve learnt from the logs"),
                        ("ht", "popularity-sampled negatives: Horvitz-Thompson plug-in of each user's rank"),
                        ("uniform", "popularity-sampled negatives treated as uniform (biased; for comparison)")):
    register(EstimatorSpec(_name, _popularity.registry_fit(_name), _POP_OPTIONS, "batched", input="popularity",
                           fit_state=_popularity.registry_fit(_name), replicates=_popularity.registry_replicates,
                           bounds=_popularity.registry_bounds, summary=_summary,
                           references="sampling_lib.popularity eqs 1-5; AAAI21 eqs 18-21; Horvitz-Thompson (1952)"))

#: Registered estimators of sampled ranks among uniform negatives (``input="ranks"``), in registration order.
METHODS = registered("ranks")
#: Registered estimators of popularity-sampled negatives (``input="popularity"``).
POPULARITY_METHODS = registered("popularity")
#: Registered estimators with a per-user likelihood in N_u (``spec.varying_items``); the
#: others accept per-user N too, fitted per group of N_u (``Estimator._groups``).
PERUSER_METHODS = tuple(k for k in METHODS if estimator_spec(k).varying_items)
