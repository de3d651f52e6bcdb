"""Estimators of global top-K metrics from sampled ranks, and their registry.

Every estimator takes sampled ranks (1-based ints in 1..n), N and n and returns a
length-N vector ``w`` such that the estimate of any metric F is ``w @ F(1..N)``.

- the registry (``_registry``): :func:`get_estimator` (name + options -> a
  configured callable), :data:`METHODS`, :data:`DEFAULT_METHOD`,
  :class:`EstimatorSpec` / :func:`register` (one registration per estimator);
- rank-distribution estimators (``_distribution``): ``w`` is a probability vector
  P(R), R = 1..N (AAAI21 eqs 18-27, TORS24 Sec 4 and 6.2);
- linear metric estimators (``_linear``): ``w`` is a weight vector that may have
  negative entries (TORS24 eqs 7-10, 28, 37-42);
- the log-spline empirical-Bayes estimator (``_logspline``, the default): ``w``
  is the users' average posterior over R under a smooth fitted prior.
"""
from . import _distribution, _linear, _logspline, _registry
from ._distribution import *  # noqa: F401,F403  (mle, wmle, mes, adaptive_mle: AAAI21 eqs 18-27, TORS24 eqs 31-36, 43, 60-62)
from ._linear import *  # noqa: F401,F403  (bv, cls, mn, ...: TORS24 eqs 7-10, 28, 42)
from ._logspline import *  # noqa: F401,F403  (logspline: empirical Bayes, Efron 2016 g-modeling)
from ._registry import *  # noqa: F401,F403  (get_estimator, METHODS, ...)

__all__ = _registry.__all__ + _distribution.__all__ + _linear.__all__ + _logspline.__all__
