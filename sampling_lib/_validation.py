"""Input validation shared by every module.

Every check raises ``ValueError`` (bad value) or ``TypeError`` (bad type) with a
message that names the parameter, states the allowed range and repeats the bad
value, e.g. ``"sampled_ranks must lie in 1..n=100; got max 101"``.
"""
from __future__ import annotations

import numbers
import os

import numpy as np

from .exceptions import ConvergenceWarning

__all__ = [
    "ConvergenceWarning",
    "check_N_n",
    "check_n_items",
    "check_ranks",
    "check_pmf",
    "check_int",
    "check_float",
    "check_probability",
    "check_scheme",
    "SCHEMES",
    "check_cutoffs",
    "scalar_or_array",
    "check_N_m",
    "check_confidence_level",
    "check_read_columns",
    "check_columns",
    "check_int_column",
    "show_value",
    "max_array_bytes",
    "check_array_size",
]

SCHEMES = ("binomial", "hypergeometric")


#: Longest value (in characters) repeated in an error message; longer ones are cut.
SHOW_LIMIT = 60


def show_value(x, limit=SHOW_LIMIT) -> str:
    """A value as an error message shows it: no numpy repr, long text cut.

    NumPy scalars are shown as the Python value (``2.5``, not
    ``np.float64(2.5)``); a text longer than ``limit`` characters is cut and
    says how long it was.

    Examples
    --------
    >>> show_value(np.float64(2.5)), show_value("abc"), show_value(np.int64(7))
    ('2.5', "'abc'", '7')
    >>> show_value("x" * 1000)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' (1000 characters)"
    """
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, (str, bytes)) and len(x) > limit:
        head = repr(x[:limit])
        return f"{head[:-1]}...{head[-1]} ({len(x)} characters)"
    text = repr(x)
    if len(text) > limit + 20:
        return f"{text[:limit]}... ({len(text)} characters)"
    return text


def check_int(x, name, low=None, high=None) -> int:
    """Return ``x`` as a Python int, checking type and the closed range [low, high]."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Integral, np.integer)):
        if isinstance(x, (float, np.floating)) and np.isfinite(x) and float(x).is_integer():
            x = int(x)
        else:
            raise TypeError(f"{name} must be an integer; got {show_value(x)}")
    x = int(x)
    if low is not None and x < low:
        raise ValueError(f"{name} must be >= {low}; got {x}")
    if high is not None and x > high:
        raise ValueError(f"{name} must be <= {high}; got {x}")
    return x


def check_float(x, name, low=None, high=None, low_open=False, high_open=False) -> float:
    """Return ``x`` as a finite float inside the given (half-)open or closed range."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number; got {show_value(x)}")
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite; got {x}")
    lo_br = "(" if low_open else "["
    hi_br = ")" if high_open else "]"
    rng_txt = f"{lo_br}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_br}"
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name} must lie in {rng_txt}; got {x}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ValueError(f"{name} must lie in {rng_txt}; got {x}")
    return x


def check_probability(p, name) -> float:
    """Return ``p`` as a float in [0, 1]."""
    return check_float(p, name, 0.0, 1.0)


def check_N_n(N, n) -> tuple[int, int]:
    """Check the item count N >= 2 and the sample-set size 2 <= n <= N.

    n counts the held-out item plus the n-1 sampled items (KDD20 Sec 2.1.2).
    """
    N = check_int(N, "N", low=2)
    n = check_int(n, "n", low=2)
    if n > N:
        raise ValueError(f"n must lie in 2..N={N}; got n={n}")
    return N, n


def check_n_items(N, size=None, name="N", low=2):
    """The item count: an int (one catalogue) or per-user counts N_u (int64 array).

    ``N`` may be an int or a 1-D array of whole numbers >= ``low`` (of length
    ``size`` when given). An array whose entries are all equal is returned as
    that int, so "the same N for every user" takes exactly the int code path.

    Examples
    --------
    >>> check_n_items(100), check_n_items([50, 50, 50], 3)
    (100, 50)
    >>> check_n_items([50, 60], 2).tolist()
    [50, 60]
    """
    if np.ndim(N) == 0:
        return check_int(N, name, low=low)
    a = np.asarray(N)
    if a.ndim != 1:
        raise ValueError(f"{name} must be an int or a 1-D array of per-user item counts; "
                         f"got shape {a.shape}")
    if size is not None and a.size != size:
        raise ValueError(f"{name} must be an int or one item count per user ({size}); "
                         f"got length {a.size}")
    a = check_ranks(a, np.iinfo(np.int64).max, name=name, upper_name="max")
    if a.min() < low:
        raise ValueError(f"{name} must be >= {low}; got min {a.min()}")
    u = np.unique(a)
    return int(u[0]) if u.size == 1 else a


def check_scheme(scheme) -> str:
    """Return a valid sampling scheme name."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {show_value(scheme)}")
    return scheme


def check_ranks(ranks, upper, name="ranks", upper_name="N") -> np.ndarray:
    """Return 1-based ranks as a 1-D int64 array, checking they lie in 1..upper.

    Accepts integer arrays and float arrays holding whole numbers; rejects empty
    input, NaN/inf, fractional values and values outside 1..upper.
    """
    upper = check_int(upper, upper_name, low=1)
    a = np.asarray(ranks)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"{name} must hold integers; got dtype {a.dtype}")
    if np.issubdtype(a.dtype, np.floating):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite; got {int(np.sum(~np.isfinite(a)))} NaN/inf values")
        if not np.all(a == np.round(a)):
            bad = a[a != np.round(a)][0]
            raise ValueError(f"{name} must be integers; got non-integer value {bad}")
    lo, hi = a.min(), a.max()
    if lo < 1 or hi > upper:
        raise ValueError(
            f"{name} must lie in 1..{upper_name}={upper}; got min {lo:g} and max {hi:g}"
        )
    return a.astype(np.int64, copy=False)


def check_pmf(pmf, N=None, name="pmf", atol=1e-8) -> np.ndarray:
    """Return a probability vector as float64, checking it is finite, >= 0 and sums to 1."""
    p = np.asarray(pmf, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array; got shape {p.shape}")
    if N is not None and p.size != N:
        raise ValueError(f"{name} must have length N={N}; got {p.size}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name} must be finite; got NaN/inf entries")
    if np.any(p < 0):
        raise ValueError(f"{name} must be nonnegative; got min {p.min():g}")
    s = p.sum()
    if abs(s - 1.0) > atol:
        raise ValueError(f"{name} must sum to 1 (within {atol:g}); got sum {s:.12g}")
    return p


def check_cutoffs(k, upper=None, upper_name="N"):
    """Return (k as 1-D int64 array, was_scalar). k must be whole numbers >= 1 (<= upper)."""
    a = np.asarray(k)
    scalar = a.ndim == 0
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"k must hold integers; got {k!r}")
    a = a.reshape(-1)
    if a.size == 0:
        raise ValueError("k must not be empty")
    if np.issubdtype(a.dtype, np.floating):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise ValueError(f"k must hold whole numbers; got {k!r}")
    if np.ndim(k) > 1:
        raise ValueError(f"k must be a scalar or 1-D; got shape {np.shape(k)}")
    lo, hi = a.min(), a.max()
    if lo < 1 or (upper is not None and hi > upper):
        rng_txt = f"1..{upper_name}={upper}" if upper is not None else ">= 1"
        raise ValueError(f"k must lie in {rng_txt}; got min {lo:g} and max {hi:g}")
    return a.astype(np.int64), scalar


def scalar_or_array(x, scalar):
    """``x[0]`` as a float when the input was a scalar, else the array ``x``."""
    return float(x[0]) if scalar else x


def check_N_m(N, m):
    """Check the item count N >= 1 and the relevant-item count 0 <= m <= N."""
    N = check_int(N, "N", low=1)
    m = check_int(m, "m", low=0)
    if m > N:
        raise ValueError(f"m must lie in 0..N={N}; got m={m}")
    return N, m


def check_confidence_level(x, name="confidence_level") -> float:
    """Return a confidence level (or a two-sided probability) in the open interval (0, 1)."""
    return check_float(x, name, 0.0, 1.0, low_open=True, high_open=True)


def check_columns(df, cols, what):
    """Raise ValueError naming the missing columns of the table ``what``."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} must have column(s) {missing}; found columns {list(df.columns)}")


def check_read_columns(df, read, where, holds):
    """Raise ValueError when the table has a column outside ``read``: a misspelt optional column would be
    ignored. ``where`` names the table, ``holds`` says what it holds (the message: ``<where>: column(s) [...]
    are not read; <holds> (select those columns, or name them with the *_col arguments)``)."""
    unread = [str(c) for c in df.columns if c not in read]
    if unread:
        raise ValueError(f"{where}: column(s) {unread} are not read; {holds} (select those columns, or name them "
                         "with the *_col arguments)")


def check_int_column(s, name, where=None):
    """A table column as int64, naming the first bad cell (row is 1-based).

    A cell is bad when it is blank, not a whole number, or outside the int64
    range; the message repeats the cell as written in the file (cut when
    long), never a converted value such as -9223372036854775808. ``where``
    (optional) maps the 0-based row to the text naming it, e.g. a file and
    its line (:func:`sampling_lib.io.row_location`); default ``"row <i+1>"``.
    """
    import pandas as pd

    v = pd.to_numeric(s, errors="coerce")
    f = v.astype(float)
    bad = v.isna() | ~np.isfinite(f) | (f != np.round(f)) | (f.abs() >= 2.0**63)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        cell = s.iloc[i]
        what = "blank" if (cell is None or (isinstance(cell, float) and np.isnan(cell))
                           or (isinstance(cell, str) and not cell.strip())) else show_value(cell)
        loc = f"row {i + 1}" if where is None else where(i)
        raise ValueError(f"column {name!r} must hold integers (at most 2**63-1); got {what} in {loc}")
    return v.astype(np.int64)


def max_array_bytes() -> int:
    """Largest array (bytes) the library allocates: 2 GiB, or ``SAMPLING_LIB_MAX_ARRAY_BYTES``.

    Checked by :func:`check_array_size` before every array whose size grows
    with N (the N x n sampling kernel, the metric values F(1..N)), so that an
    impossible request fails at once with its size instead of being killed by
    the operating system.
    """
    env = os.environ.get("SAMPLING_LIB_MAX_ARRAY_BYTES")
    if env is None or not env.strip():
        return 2 * 1024**3
    try:
        return int(float(env))
    except ValueError:
        raise ValueError(f"SAMPLING_LIB_MAX_ARRAY_BYTES must be a number of bytes; got "
                         f"{show_value(env)}") from None


def _gib(nbytes):
    return f"{nbytes / 1024**3:.2f} GiB"


def check_array_size(shape, what, itemsize=8):
    """Refuse up front (:class:`~sampling_lib.exceptions.MemoryLimitError`) an array over the limit.

    ``shape`` is the array's shape (or element count); ``what`` names it in
    the message, which states the size, the limit and how to raise it.

    Examples
    --------
    >>> check_array_size((1000, 100), "the kernel")
    >>> check_array_size((10**9, 100), "the N x n kernel (N=1000000000, n=100)")
    Traceback (most recent call last):
    ...
    sampling_lib.exceptions.MemoryLimitError: the N x n kernel (N=1000000000, n=100) would need 745.06 GiB, over the limit of 2.00 GiB per array (set SAMPLING_LIB_MAX_ARRAY_BYTES to change it)
    """
    from .exceptions import MemoryLimitError

    n = 1
    for d in np.atleast_1d(shape):
        n *= int(d)
    nbytes = n * int(itemsize)
    limit = max_array_bytes()
    if nbytes > limit:
        raise MemoryLimitError(f"{what} would need {_gib(nbytes)}, over the limit of {_gib(limit)} "
                               "per array (set SAMPLING_LIB_MAX_ARRAY_BYTES to change it)")
