"""Shared test fixtures and paths."""
import os
from pathlib import Path

# Notebook kernels started by the tests inherit this: single-threaded BLAS avoids
# oversubscribing the 2-core machine (same default as the report runner).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# The test processes skip rfc3987_syntax as the report runner's processes do
# (sampling_lib.reporting.processes.skip_iri_parser: jsonschema would build an IRI parser nbformat never uses,
# ~3 s per process; issue 18). Importing sampling_lib.reporting imports neither nbformat nor jsonschema.
from sampling_lib.reporting.processes import skip_iri_parser  # noqa: E402

skip_iri_parser()

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property tests draw the same examples on every run (CI must not fail on a draw no one has seen);
# HYPOTHESIS_PROFILE=explore searches afresh (new random examples, hypothesis' example database).
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
ML100K = REPO.parent / "shared" / "data" / "ml-100k" / "u.data"


@pytest.fixture
def ml100k_path():
    """Path to MovieLens 100K u.data; the test is skipped when the file is absent."""
    if not ML100K.exists():
        pytest.skip(f"MovieLens 100K not found at {ML100K}")
    return ML100K


@pytest.fixture(scope="session")
def notebook_kernel():
    """One notebook kernel per test process, figures on matplotlib's Agg backend, for the notebooks' smoke runs
    (``execute_notebook(..., kernel=notebook_kernel)``: the namespace is cleared before each notebook). A fresh
    kernel costs about 4 s before the first cell; ``make reports`` gives each notebook its own."""
    from sampling_lib.reporting.notebook import shared_kernel

    with shared_kernel(env={**os.environ, "MPLBACKEND": "agg"}) as km:
        yield km


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (make test-slow): assertions kept out of the quick suite")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` are skipped unless ``--runslow``: the quick suite (``make test``) stays under 4
    minutes on 2 cores, and every assertion stays runnable (``make test-slow``)."""
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow (make test-slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``-n N`` with the default ``--dist load``: longest tests first, shared fixtures kept together
    (tests/_schedule.py; issue 18). Other ``--dist`` modes are left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from _schedule import LongestFirstScheduling

    return LongestFirstScheduling(config, log)
