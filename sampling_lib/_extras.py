"""Optional dependencies: the extra of ``sampling-lab`` that brings a package, and a clear error without it.

``pip install sampling-lab`` installs the core (numpy, scipy, pandas, tqdm,
threadpoolctl): enough for :func:`sampling_lib.estimate`,
:func:`sampling_lib.compare` and the ``sampling-lib`` command. The rest of the
lab comes with extras (``pyproject.toml``)::

    pip install 'sampling-lab[plot]'       # --plot, sampling_lib.plotting (matplotlib)
    pip install 'sampling-lab[cvxpy]'      # the cvxpy MES solver and checks
    pip install 'sampling-lab[dask]'       # Parquet data sets, experiments on a Dask cluster
    pip install 'sampling-lab[notebooks]'  # the notebooks, sampling-lib run, JupyterLab
    pip install 'sampling-lab[all]'        # everything (make installs it from the lock)

A feature whose package is missing calls :func:`require`, which raises a
``ModuleNotFoundError`` naming the package and the extra, instead of a bare
"No module named ...".
"""
from __future__ import annotations

import importlib
import importlib.util

__all__ = ["EXTRA_OF", "RUNNER_MODULES", "require", "require_runner"]

#: top-level module -> the extra of ``sampling-lab`` that installs it
#: (tests/test_extras.py checks every entry against pyproject.toml)
EXTRA_OF = {
    "matplotlib": "plot",
    "cvxpy": "cvxpy",
    "dask": "dask",
    "distributed": "dask",
    "pyarrow": "dask",
    "joblib": "notebooks",
    "papermill": "notebooks",
    "nbformat": "notebooks",
    "nbconvert": "notebooks",
    "psutil": "notebooks",
    "ipykernel": "notebooks",
    "seaborn": "notebooks",
    "statsmodels": "notebooks",
}


def require(module, feature=None, *, extra=None):
    """Import ``module``; if it (or a package it needs) is missing, say which extra to install.

    Parameters
    ----------
    module : str
        Dotted module name, e.g. ``"matplotlib.figure"`` or ``"dask.dataframe"``.
    feature : str, optional
        What needs it, for the message (e.g. ``"--plot"``); default the module name.
    extra : str, optional, keyword-only
        The extra to name; default :data:`EXTRA_OF` of the top-level package.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    ModuleNotFoundError
        "FEATURE needs PACKAGE (not installed): pip install 'sampling-lab[EXTRA]'".

    Examples
    --------
    >>> require("numpy.linalg").__name__
    'numpy.linalg'
    >>> require("no_such_package_xyz", "the example", extra="plot")
    Traceback (most recent call last):
    ...
    ModuleNotFoundError: the example needs no_such_package_xyz (not installed): pip install 'sampling-lab[plot]'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        extra = extra or EXTRA_OF.get(top)
        if extra is None:      # not an optional package of ours: the plain error is the right one
            raise
        missing = exc.name or top
        raise ModuleNotFoundError(f"{feature or module} needs {missing} (not installed): "
                                  f"pip install 'sampling-lab[{extra}]'", name=exc.name) from exc


#: what the report runner (``sampling-lib run``, ``make reports``) imports besides the core
RUNNER_MODULES = ("papermill", "nbformat", "nbconvert", "ipykernel")


def require_runner():
    """Raise :func:`require`'s error when a package of the report runner is missing (extra ``notebooks``).

    Looks the packages up without importing them (the runner imports them where it needs them).
    """
    for module in RUNNER_MODULES:
        if importlib.util.find_spec(module) is None:
            require(module, "sampling-lib run (the report runner)", extra="notebooks")
