"""Public exceptions and warnings of sampling-lab.

* :class:`ConvergenceWarning` -- an iterative solver (EM with a tolerance, the
  fast MES solver before its cvxpy fallback) stopped before meeting its stated
  tolerance (statsmodels' and scikit-learn's name for the same thing);
* :class:`ClaimsFailed` -- a notebook's claims ledger holds a failed claim
  (raised by :meth:`sampling_lib.reporting.ClaimLedger.finalize`);
* :class:`EstimatorOptionError` -- :func:`sampling_lib.estimators.get_estimator`
  was given an option the estimator does not take.

Examples
--------
>>> import warnings
>>> from sampling_lib.exceptions import ConvergenceWarning
>>> issubclass(ConvergenceWarning, UserWarning)
True
"""
__all__ = ["ConvergenceWarning", "ClaimsFailed", "EstimatorOptionError"]


class ConvergenceWarning(UserWarning):
    """An iterative solver stopped before meeting its stated tolerance."""


class EstimatorOptionError(TypeError):
    """An estimator was given an option it does not take (names the bad and the allowed keys)."""


def __getattr__(name):
    # ClaimsFailed lives with the claims ledger; imported on first use so that
    # importing this module (done by every numerical module) stays cheap.
    if name == "ClaimsFailed":
        from .reporting import ClaimsFailed

        return ClaimsFailed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
