"""sampling-lab: exact, verified item-sampling evaluation of recommender systems.

The top level holds the practitioner API and the submodules; everything else
is reached through its module (``sampling_lib.kernels.binomial``,
``sampling_lib.user_sampling.sample_size_proportion``, ...).

Practitioner API
----------------
* :func:`estimate`, :func:`compare` -- corrected global metrics (and model
  differences) with bootstrap confidence intervals from sampled ranks;
* :class:`RankCounts`, :func:`rank_counts`, :func:`bootstrap_counts` -- the
  sufficient statistic and its bootstrap;
* :func:`get_estimator`, :data:`METHODS`, :data:`DEFAULT_METHOD` -- the
  estimator registry;
* :func:`ranks_from_table`, :func:`ranks_from_score_table`,
  :func:`read_table`, :class:`SampledRanks` -- readers (:mod:`sampling_lib.io`);
* :func:`ranks_from_scores`, :data:`TIE_RULES` -- ranks from scores
  (:mod:`sampling_lib.ranking`);
* :class:`ConvergenceWarning` (:mod:`sampling_lib.exceptions`).

Submodules are imported on first access (PEP 562), so ``import sampling_lib``
stays light (no statsmodels, papermill, joblib).
"""
import importlib as _importlib

__version__ = "0.1.0"

from . import correct, estimators, exceptions, io, ranking  # noqa: E402
from .correct import __all__ as _correct_all  # noqa: E402
from .correct import *  # noqa: E402,F401,F403
from .estimators import DEFAULT_METHOD, METHODS, get_estimator  # noqa: E402
from .exceptions import ConvergenceWarning  # noqa: E402
from .io import SampledRanks, ranks_from_score_table, ranks_from_table, read_table  # noqa: E402,F401

# the framework readers (TREC/ranx runs, NCF/Elliot negatives) stay in sampling_lib.io
_io_all = ["SampledRanks", "read_table", "ranks_from_table", "ranks_from_score_table"]
from .ranking import TIE_RULES, ranks_from_scores  # noqa: E402

#: The submodules (one idea each; see ../shared/DESIGN.md).
SUBMODULES = (
    "metrics", "kernels", "sampling", "mapping", "rankdist", "estimators", "correct", "ranking",
    "io", "user_sampling", "inference", "random_baseline", "data", "recommenders", "experiments",
    "studies", "testing", "reporting", "exceptions", "cli", "popularity",
)

__all__ = (["__version__"] + list(SUBMODULES) + _correct_all + _io_all
           + ["get_estimator", "METHODS", "DEFAULT_METHOD", "ranks_from_scores", "TIE_RULES",
              "ConvergenceWarning"])


def __getattr__(name):
    if name in SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
