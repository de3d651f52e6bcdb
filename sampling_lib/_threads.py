"""One BLAS thread where the work is small-matrix bound: :func:`estimate`, :func:`compare` and the CLI;
and :func:`map_parts`, the estimators' two-thread map over parts of their work.

The estimators multiply many small matrices (a kernel of a few hundred
columns by a few thousand bootstrap rows, Newton steps on a few dozen spline
coefficients). A multi-threaded BLAS gains nothing on such products when the
machine is idle and loses a lot when it is not: its threads spin while
waiting for each other and fight the other jobs for the cores. Measured on
the 2-core reference machine (``benchmarks/bench_threads.py``, table in
``benchmarks/README.md``): ``sampling-lib estimate`` and ``compare`` on 2
models x 2,000 users took the same time idle with one thread or two, and
4-5 times less with one thread while another process kept both cores busy
(6.0 s against 25.1 s for ``estimate``, medians of 3 runs).

So :func:`sampling_lib.correct.estimate`, :func:`sampling_lib.correct.compare`
and the ``sampling-lib`` command run with BLAS limited to one thread
(threadpoolctl, for the duration of the call; the process's setting is
restored afterwards) -- unless the user has said how many threads BLAS
should use: an environment variable of :data:`USER_THREAD_VARIABLES`
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ...)
that is set, to any value, wins, and nothing is changed.
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager, nullcontext

__all__ = ["USER_THREAD_VARIABLES", "user_thread_setting", "blas_threads_limited", "one_blas_thread",
           "map_parts"]

#: environment variables through which a user sets the number of BLAS / OpenMP threads
#: (OpenBLAS, OpenMP, MKL, BLIS, Apple Accelerate, GotoBLAS); any of them set means "leave BLAS alone"
USER_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                         "VECLIB_MAXIMUM_THREADS", "GOTO_NUM_THREADS")


def user_thread_setting(environ=None):
    """The user's explicit BLAS thread setting, as ``"NAME=value"``, or None when there is none.

    Examples
    --------
    >>> user_thread_setting({"OMP_NUM_THREADS": "4", "HOME": "/root"})
    'OMP_NUM_THREADS=4'
    >>> user_thread_setting({}) is None
    True
    """
    environ = os.environ if environ is None else environ
    for name in USER_THREAD_VARIABLES:
        if environ.get(name, "").strip():
            return f"{name}={environ[name].strip()}"
    return None


@contextmanager
def blas_threads_limited():
    """Context: BLAS limited to one thread inside, unless the user set a thread count (then no change).

    Nested uses are cheap (about a millisecond each: threadpoolctl looks up
    the loaded BLAS libraries).
    """
    if user_thread_setting() is not None:
        limiter = nullcontext()
    else:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(limits=1, user_api="blas")
    with limiter:
        yield


def one_blas_thread(func):
    """Decorator: run ``func`` inside :func:`blas_threads_limited` (docstring and signature kept)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with blas_threads_limited():
            return func(*args, **kwargs)

    return wrapper


def map_parts(func, parts, name="sampling-lib-parts"):
    """``[func(part) for part in parts]``, the parts on their own threads (at most 2, the machine's cores).

    For work whose products and solves run in BLAS / LAPACK, which release the GIL (the per-user-N
    estimators' passes over groups of N_u or over nodes). One part runs on the calling thread.

    Examples
    --------
    >>> map_parts(sum, [[1, 2], [3, 4]])
    [3, 7]
    """
    parts = list(parts)
    if len(parts) <= 1:
        return [func(p) for p in parts]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix=name) as pool:
        return list(pool.map(func, parts))
