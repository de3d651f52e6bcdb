"""Public exceptions and warnings of sampling-lab.

* :class:`ConvergenceWarning` -- an iterative solver (EM with a tolerance, the
  fast MES solver before its cvxpy fallback) stopped before meeting its stated
  tolerance (statsmodels' and scikit-learn's name for the same thing);
* :class:`ClaimsFailed` -- a notebook's claims ledger holds a failed claim
  (raised by :meth:`sampling_lib.reporting.ClaimLedger.finalize`);
* :class:`EstimatorOptionError` -- :func:`sampling_lib.estimators.get_estimator`
  was given an option the estimator does not take;
* :class:`ScoringError` -- the scoring function given to :func:`sampling_lib.evaluate`
  raised, or returned something other than one finite score per pair;
* :class:`MemoryLimitError` -- an array whose size grows with N (the N x n
  kernel, the metric values) would exceed the per-array memory limit; raised
  before allocating (:func:`sampling_lib._validation.check_array_size`).

Examples
--------
>>> import warnings
>>> from sampling_lib.exceptions import ConvergenceWarning
>>> issubclass(ConvergenceWarning, UserWarning)
True
"""
__all__ = ["ConvergenceWarning", "ClaimsFailed", "EstimatorOptionError", "MemoryLimitError", "ScoringError"]


class ConvergenceWarning(UserWarning):
    """An iterative solver stopped before meeting its stated tolerance."""


class EstimatorOptionError(TypeError):
    """An estimator was given an option it does not take (names the bad and the allowed keys)."""


class MemoryLimitError(MemoryError, ValueError):
    """An array would exceed the per-array memory limit (the message names its size).

    A ``MemoryError`` (what would have happened) and a ``ValueError`` (the
    input asks for too much): raised up front, before anything is allocated.
    The limit is 2 GiB per array, or ``SAMPLING_LIB_MAX_ARRAY_BYTES``.
    """


def __getattr__(name):
    # ClaimsFailed lives with the claims ledger; imported on first use so that
    # importing this module (done by every numerical module) stays cheap.
    if name == "ClaimsFailed":
        from .reporting import ClaimsFailed

        return ClaimsFailed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ScoringError(ValueError):
    """The scoring function of :func:`sampling_lib.evaluate` raised or returned something other than one
    finite float per pair (the message names the model, the stage and the pair; the cause is chained)."""
