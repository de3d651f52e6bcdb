"""Names the parser shows, written out so that ``--help`` and ``--version`` import no estimator.

The registry (:mod:`sampling_lib.estimators`) builds these tuples when it is
imported, which pulls in scipy and every estimator (seconds); the command line
parses its arguments first and imports only what the chosen command needs.
``tests/test_cli_startup.py`` checks that every name here equals the library's.
"""
from __future__ import annotations

__all__ = ["METHODS", "POPULARITY_METHODS", "DEFAULT_METHOD", "STAGE_FORMATS"]

#: :data:`sampling_lib.estimators.METHODS` (estimators of sampled ranks)
METHODS = ("mle", "wmle", "mes", "bv", "bv_mle", "bv_mes", "mn", "mn_mle", "mn_mes", "cls", "adaptive_mle",
           "logspline")
#: :data:`sampling_lib.estimators.POPULARITY_METHODS` (estimators of popularity-sampled negatives)
POPULARITY_METHODS = ("pop_mle", "ht", "uniform")
#: :data:`sampling_lib.estimators.DEFAULT_METHOD`
DEFAULT_METHOD = "logspline"
#: :data:`sampling_lib.io.STAGE_FORMATS` (the negatives files a stage is read from and written to)
STAGE_FORMATS = ("negatives", "ncf", "elliot")
