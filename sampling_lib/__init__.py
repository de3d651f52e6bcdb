"""sampling-lab: exact, verified item-sampling evaluation of recommender systems.

The top level holds the practitioner API and the submodules; everything else
is reached through its module (``sampling_lib.kernels.binomial``,
``sampling_lib.user_sampling.sample_size_proportion``, ...).

Practitioner API
----------------
* :func:`evaluate` -- a planned sampled evaluation with your own scoring
  function, in one call (global metrics at about full ranking's precision);
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

Submodules and the names above are imported on first access (PEP 562), so
``import sampling_lib`` stays light (no scipy, statsmodels, papermill, joblib).
"""
import importlib as _importlib

__version__ = "0.1.0"

SUBMODULES = (
    "metrics", "kernels", "counts", "sampling", "mapping", "rankdist", "estimators", "correct", "ranking",
    "io", "user_sampling", "inference", "random_baseline", "data", "recommenders", "experiments",
    "studies", "testing", "reporting", "exceptions", "cli", "popularity", "plotting", "evaluation", "cascade",
)

#: The practitioner API at the top level: name -> the submodule that defines it. Resolved on first
#: access like the submodules (PEP 562): ``import sampling_lib`` (and so every report-runner process,
#: worker and notebook kernel that imports ``sampling_lib.reporting``) does not pay for the
#: estimators and scipy until they are used. ``correct``'s names are its ``__all__`` (a test checks it).
_API = {
    **{n: "counts" for n in ("RankCounts", "rank_counts", "counts_from_frame", "bootstrap_counts")},
    **{n: "correct" for n in ("estimate", "compare")},
    **{n: "evaluation" for n in ("evaluate", "EvaluationResult")},
    **{n: "io" for n in ("SampledRanks", "read_table", "ranks_from_table", "ranks_from_score_table")},
    **{n: "estimators" for n in ("get_estimator", "METHODS", "DEFAULT_METHOD")},
    **{n: "ranking" for n in ("ranks_from_scores", "TIE_RULES")},
    "ConvergenceWarning": "exceptions",
}

__all__ = ["__version__"] + list(SUBMODULES) + list(_API)


def __getattr__(name):
    if name in SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _API:
        value = getattr(_importlib.import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value      # resolved once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
