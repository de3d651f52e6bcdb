"""Implicit-feedback data: loaders, leave-one-out split and a synthetic generator.

The pipeline of the suite starts here (see DESIGN.md)::

    ratings file / synthetic generator -> Ratings -> leave_one_out -> LeaveOneOutSplit
        -> recommenders (sampling_lib.recommenders) -> global ranks R_u in 1..N

Every interaction is treated as a positive (implicit feedback): rating values are
read and validated but not used. User and item ids are re-indexed to 0..M-1 and
0..N-1 in the sorted order of the original ids (numeric order when every id is an
integer, string order otherwise); the original ids are kept in
``Ratings.user_ids`` / ``Ratings.item_ids``.

Supported file formats (detected from the file content, not only its name):

``udata``
    MovieLens 100K ``u.data``: ``user<TAB>item<TAB>rating<TAB>timestamp``, no header.
``dat``
    MovieLens 1M/10M ``ratings.dat``: ``user::item::rating::timestamp``, no header.
``csv``
    comma separated (MovieLens 20M/25M ``ratings.csv`` with the header
    ``userId,movieId,rating,timestamp`` or any CSV). With a header, the user, item
    and (optional) timestamp columns are recognised by name (``userId``/``user_id``/
    ``user``/``uid``..., ``movieId``/``itemId``/``item``/``iid``..., ``timestamp``/
    ``time``/``ts``; numbers, or date-time strings such as ISO 8601, read as seconds since
    the epoch); without a header the columns are positional:
    2 columns = user,item; 3 = user,item,timestamp; 4 or more = user,item,rating,
    timestamp (the MovieLens layout). A tab- or semicolon-separated file follows the
    same rules (a headerless tab file with 4 columns is ``udata``).

References
----------
KDD20 Sec 2.1 (leave-one-out: one held-out relevant item per user; M users, N items)
and Table 4 (dataset statistics). Harper & Konstan (2015), The MovieLens Datasets.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = [
    "Ratings",
    "LeaveOneOutSplit",
    "load_ratings",
    "leave_one_out",
    "filter_items",
    "synthetic_ratings",
    "dataset_statistics",
    "project_root",
    "resolve_path",
]

_USER_NAMES = ("userid", "user_id", "user", "uid", "users", "user-id", "customer_id", "customerid", "reviewerid")
_ITEM_NAMES = ("movieid", "movie_id", "itemid", "item_id", "item", "iid", "items", "movie",
               "productid", "product_id", "asin", "bookid", "book_id", "isbn", "trackid", "track_id",
               "artistid", "artist_id", "artist", "songid", "song_id", "track", "song")
_TIME_NAMES = ("timestamp", "time", "ts", "datetime", "date", "unixreviewtime")
_RATING_NAMES = ("rating", "ratings", "score", "stars", "value", "book-rating", "overall", "weight",
                 "count", "playcount", "plays")


@dataclass(frozen=True)
class Ratings:
    """Implicit-feedback interactions with contiguous integer ids.

    Attributes
    ----------
    users, items : ndarray of int64, shape (nnz,)
        Re-indexed ids in 0..n_users-1 and 0..n_items-1, one entry per distinct
        (user, item) pair, in file order of their first occurrence.
    timestamps : ndarray of float64 or None
        Interaction time (earliest one for a duplicated pair); None if the source
        has no timestamp column.
    order : ndarray of int64
        0-based position of the interaction in the source (file row), used to break
        timestamp ties deterministically.
    n_users, n_items : int
    user_ids, item_ids : ndarray
        Original ids; ``user_ids[k]`` is the id of re-indexed user k.
    source : str
        File path or a description of the generator.
    fmt : str
        ``"udata"``, ``"dat"``, ``"csv"`` or ``"synthetic"``.
    n_duplicates : int
        Number of repeated (user, item) rows dropped (implicit feedback keeps one).
    """

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray | None
    order: np.ndarray
    n_users: int
    n_items: int
    user_ids: np.ndarray
    item_ids: np.ndarray
    source: str = ""
    fmt: str = ""
    n_duplicates: int = 0

    @property
    def n_interactions(self) -> int:
        return int(self.users.size)

    def to_csr(self) -> sp.csr_matrix:
        """Binary user x item matrix (float32 ones) of all interactions."""
        return _binary_csr(self.users, self.items, self.n_users, self.n_items)


@dataclass(frozen=True)
class LeaveOneOutSplit:
    """Result of :func:`leave_one_out`.

    Attributes
    ----------
    train : scipy.sparse.csr_matrix, shape (n_users, n_items), float32 ones
        Training interactions of the kept users (row k = kept user k).
    test_items : ndarray of int64, shape (n_users,)
        The held-out item of each kept user (never in that user's training row).
    n_users, n_items : int
        M (kept users) and N (all items of the source, including items seen only in
        the test set or only by dropped users: every item is a ranking candidate).
    user_ids, item_ids : ndarray
        Original ids of the kept users and of all items.
    summary : dict
        ``n_users_total``, ``n_users_kept``, ``n_users_dropped`` (fewer than
        ``min_interactions`` interactions), ``n_interactions``, ``n_train``,
        ``n_test``, ``n_items``, ``n_timestamp_ties`` (users whose latest timestamp
        is shared by several interactions, broken by file order).
    """

    train: sp.csr_matrix
    test_items: np.ndarray
    n_users: int
    n_items: int
    user_ids: np.ndarray
    item_ids: np.ndarray
    summary: dict = field(default_factory=dict)


def _binary_csr(users, items, n_users, n_items) -> sp.csr_matrix:
    data = np.ones(len(users), dtype=np.float32)
    m = sp.csr_matrix((data, (np.asarray(users), np.asarray(items))), shape=(n_users, n_items))
    m.sum_duplicates()
    m.data[:] = 1.0
    m.sort_indices()
    return m


# --------------------------------------------------------------------------- loading
def _sniff(path: Path, head: list[str]) -> tuple[str, str, bool]:
    """Return (fmt, sep, has_header) from the first non-empty lines."""
    lines = [ln for ln in head if ln.strip()]
    if not lines:
        raise ValueError(f"{path}: file is empty (no interactions)")
    first = lines[0]
    if "::" in first:
        sep = "::"
        fmt = "dat"
    elif "\t" in first:
        sep = "\t"
        fmt = "udata"
    elif "," in first:
        sep = ","
        fmt = "csv"
    elif ";" in first:
        sep = ";"
        fmt = "csv"
    else:
        raise ValueError(
            f"{path}: line 1: cannot detect the format (expected fields separated by "
            f"'::', a tab, ',' or ';'); got {first.strip()[:80]!r}"
        )

    def split(line):
        return [f.strip().strip('"').strip("'") for f in line.rstrip("\r\n").split(sep)]

    fields = split(first)
    known = _USER_NAMES + _ITEM_NAMES + _TIME_NAMES + _RATING_NAMES
    has_header = any(f.lower() in known for f in fields)
    if not has_header and len(lines) > 1:
        # a non-numeric first-line field above a numeric second-line field is a header
        second = split(lines[1])
        has_header = any(not _is_number(a) and _is_number(b) for a, b in zip(fields, second))
    if fmt == "udata" and (has_header or len(fields) != 4):
        fmt = "csv"  # a generic tab-separated table
    return fmt, sep, has_header


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _pick(names: list[str], candidates: tuple[str, ...]) -> int | None:
    low = [n.strip().lower() for n in names]
    for c in candidates:
        if c in low:
            return low.index(c)
    return None


def _line_error(path, line_no, msg):
    return ValueError(f"{path}: line {line_no}: {msg}")


def _roles(path, df, has_header, fmt):
    """Column positions (user, item, rating or None, timestamp or None)."""
    ncol = df.shape[1]
    if has_header:
        names = [str(c) for c in df.columns]
        ucol = _pick(names, _USER_NAMES)
        icol = _pick(names, _ITEM_NAMES)
        tcol = _pick(names, _TIME_NAMES)
        rcol = _pick(names, _RATING_NAMES)
        if ucol is None or icol is None:
            raise ValueError(
                f"{path}: line 1: header {names} has no recognisable "
                f"{'user' if ucol is None else 'item'} column (known names: user: "
                f"{', '.join(_USER_NAMES[:4])}...; item: {', '.join(_ITEM_NAMES[:6])}...)")
    else:
        if ncol < 2:
            raise _line_error(path, 1, f"expected at least 2 fields (user, item), saw {ncol}")
        ucol, icol = 0, 1
        rcol = tcol = None
        if ncol == 3:
            tcol = 2
        elif ncol >= 4:
            rcol, tcol = 2, 3
    if fmt in ("udata", "dat") and ncol != 4:
        raise _line_error(path, 1, f"expected 4 fields (user, item, rating, timestamp), saw {ncol}")
    return ucol, icol, rcol, tcol


def _fast_numeric(path, text, sep, has_header, fmt):
    """Parse a well-formed file with integer ids and numeric columns in one C pass.

    Returns None whenever anything is unusual (parse error, missing values, non-integer
    ids, non-numeric rating/timestamp); the caller then runs the validating parser, which
    finds and reports the offending line.
    """
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, header=0 if has_header else None,
                         engine="c", skipinitialspace=True)
        ucol, icol, rcol, tcol = _roles(path, df, has_header, fmt)
    except Exception:  # noqa: BLE001 - any problem: use the validating parser
        return None
    if df.shape[0] == 0:
        return None
    cols = [df.iloc[:, j] for j in (ucol, icol)]
    if any(c.dtype.kind != "i" for c in cols):
        return None
    for j in (rcol, tcol):
        if j is not None and (df.iloc[:, j].dtype.kind not in "iuf" or df.iloc[:, j].isna().any()
                              or not np.all(np.isfinite(df.iloc[:, j].to_numpy(dtype=float)))):
            return None
    ts = df.iloc[:, tcol].to_numpy(dtype=float) if tcol is not None else None
    return cols[0].to_numpy(np.int64), cols[1].to_numpy(np.int64), ts


def project_root() -> Path | None:
    """The project's folder (``pyproject.toml``, ``notebooks/`` and ``sampling_lib/``), or None.

    The folder holding this package when it is a source checkout (``make setup``'s
    editable install, or ``PYTHONPATH``); otherwise (an installed wheel) the
    working directory or its nearest parent that is such a folder.
    """
    def is_root(d):
        return (d / "pyproject.toml").is_file() and (d / "notebooks").is_dir() and (d / "sampling_lib").is_dir()

    here = Path(__file__).resolve().parent.parent
    if is_root(here):
        return here
    cwd = Path.cwd().resolve()
    return next((d for d in (cwd, *cwd.parents) if is_root(d)), None)


def resolve_path(path, *, what: str = "path") -> Path:
    """A relative data path read the same way from any working directory.

    Notebooks run from different folders: ``sampling-lib run`` and JupyterLab from
    ``notebooks/``, plain ``papermill notebooks/NN.ipynb out.ipynb`` from wherever it
    is started (usually the repository root). A relative path is therefore looked up
    against the project root (:func:`project_root`) *and* the working directory:
    ``"../shared/data/ml-100k/u.data"`` names the same file from the repository root
    and from ``notebooks/``. Exactly one existing file or folder must answer.

    Parameters
    ----------
    path : str or Path
        Absolute (returned as it is, if it exists) or relative.
    what : str
        The parameter's name, for the messages (e.g. ``"data_path"``).

    Returns
    -------
    pathlib.Path
        The existing path (absolute when ``path`` was relative).

    Raises
    ------
    FileNotFoundError
        When no candidate exists; the message names every place looked in.
    ValueError
        When the project root and the working directory hold *different*
        files of that name (give an absolute path).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> resolve_path(d) == Path(d)
    True
    >>> resolve_path(os.path.join(d, "missing.csv"), what="data_path")
    Traceback (most recent call last):
    ...
    FileNotFoundError: data_path not found: .../missing.csv
    """
    path = Path(path).expanduser()
    if path.is_absolute():
        if not path.exists():
            raise FileNotFoundError(f"{what} not found: {path}")
        return path
    root = project_root()
    candidates = ([(root / path).resolve()] if root is not None else []) + [(Path.cwd() / path).resolve()]
    found = list(dict.fromkeys(c for c in candidates if c.exists()))
    if not found:
        places = " or ".join(str(c) for c in dict.fromkeys(candidates))
        raise FileNotFoundError(f"{what} {str(path)!r} not found: looked for {places} (a relative {what} is "
                                "read against the project root and the working directory)")
    if len(found) > 1:
        raise ValueError(f"{what} {str(path)!r} is ambiguous: both {found[0]} (project root) and {found[1]} "
                         "(working directory) exist; give an absolute path")
    return found[0]


def load_ratings(path, *, fmt: str = "auto") -> Ratings:
    """Read a ratings file as implicit feedback (every row is a positive).

    Parameters
    ----------
    path : str or Path
        MovieLens ``u.data`` / ``ratings.dat`` / ``ratings.csv`` or any CSV with
        user, item and optional timestamp columns (see the module docstring).
        A relative path is read against the project root and the working
        directory (:func:`resolve_path`), so a notebook finds the same file
        whichever folder it runs from.
    fmt : {"auto", "udata", "dat", "csv"}
        ``"auto"`` (default) detects the format from the first line of the file.

    Returns
    -------
    Ratings
        Re-indexed interactions; a (user, item) pair that occurs several times is
        kept once with its earliest timestamp (``n_duplicates`` counts the drops).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        For a malformed file; the message names the file and the 1-based line
        (e.g. ``"u.data: line 3: expected 4 fields, saw 5"``).

    References
    ----------
    KDD20 Sec 2.1, Table 4; Harper & Konstan (2015) for the MovieLens formats.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "u.data")
    >>> _ = open(p, "w").write("1\\t10\\t5\\t100\\n1\\t20\\t3\\t200\\n2\\t10\\t4\\t150\\n")
    >>> r = load_ratings(p)
    >>> r.fmt, r.n_users, r.n_items, r.items.tolist()
    ('udata', 2, 2, [0, 1, 0])
    """
    source = str(path)
    path = resolve_path(path, what="ratings file")
    if fmt not in ("auto", "udata", "dat", "csv"):
        raise ValueError(f"fmt must be one of 'auto', 'udata', 'dat', 'csv'; got {fmt!r}")
    text = path.read_text(encoding="utf-8", errors="replace")
    head = text.splitlines()[:5]
    sniffed, sep, has_header = _sniff(path, head)
    if fmt == "auto":
        fmt = sniffed
    elif fmt == "dat":
        sep = "::"
    elif fmt == "udata":
        sep, has_header = "\t", False
    if sep == "::":
        text = text.replace("::", "\t")
        sep = "\t"
    fast = _fast_numeric(path, text, sep, has_header, fmt)
    if fast is not None:
        u, i, ts = fast
        user_ids, users = np.unique(u, return_inverse=True)
        item_ids, items = np.unique(i, return_inverse=True)
        return _dedupe(users.ravel().astype(np.int64), items.ravel().astype(np.int64), ts,
                       np.arange(u.size, dtype=np.int64), user_ids, item_ids, source, fmt)
    try:
        df = pd.read_csv(
            io.StringIO(text), sep=sep, header=0 if has_header else None, dtype=str,
            skip_blank_lines=False, engine="c", keep_default_na=False, na_values=[""],
            skipinitialspace=True,
        )
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+), saw (\d+)", str(exc))
        exp = re.search(r"Expected (\d+) fields", str(exc))
        if m:
            raise _line_error(path, int(m.group(1)),
                              f"expected {exp.group(1) if exp else '?'} fields, saw {m.group(2)}") from None
        raise ValueError(f"{path}: cannot parse: {exc}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: file is empty (no interactions)") from None
    header_lines = 1 if has_header else 0
    ucol, icol, rcol, tcol = _roles(path, df, has_header, fmt)

    blank = df.isna().all(axis=1).to_numpy()
    line_no = np.arange(df.shape[0]) + 1 + header_lines
    keep = ~blank
    df = df.loc[keep]
    line_no = line_no[keep]
    if df.shape[0] == 0:
        raise ValueError(f"{path}: file has no interactions")

    def col(j, what, numeric):
        s = df.iloc[:, j]
        miss = s.isna().to_numpy()
        if miss.any():
            k = int(np.flatnonzero(miss)[0])
            raise _line_error(path, int(line_no[k]), f"missing {what}")
        s = s.str.strip()
        if not numeric:
            return s.to_numpy()
        v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(v)
        if bad.any() and what == "timestamp" and bad.all():
            # date-time strings (e.g. ISO 8601): seconds since the epoch
            dt = pd.to_datetime(s, errors="coerce", utc=True, format="mixed")
            v = (dt - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
            bad = ~np.isfinite(v)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise _line_error(path, int(line_no[k]), f"{what} is not a number: {s.iloc[k]!r}")
        return v

    users_raw = col(ucol, "user id", False)
    items_raw = col(icol, "item id", False)
    if rcol is not None:
        col(rcol, "rating", True)  # validated, unused (implicit feedback)
    ts = col(tcol, "timestamp", True) if tcol is not None else None
    if fmt in ("udata", "dat"):
        for raw, what in ((users_raw, "user id"), (items_raw, "item id")):
            ok = pd.Series(raw).str.fullmatch(r"[+-]?\d+").to_numpy()
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                raise _line_error(path, int(line_no[k]), f"{what} is not an integer: {raw[k]!r}")
    user_ids, users = _reindex(users_raw)
    item_ids, items = _reindex(items_raw)
    order = line_no - 1 - header_lines
    return _dedupe(users, items, ts, order.astype(np.int64), user_ids, item_ids, source, fmt)


def _reindex(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = pd.Series(raw)
    if s.str.fullmatch(r"[+-]?\d+").all():
        vals = s.astype(np.int64).to_numpy()
    else:
        vals = s.to_numpy(dtype=object)
    ids, inv = np.unique(vals, return_inverse=True)
    return ids, inv.astype(np.int64).ravel()


def _dedupe(users, items, ts, order, user_ids, item_ids, source, fmt) -> Ratings:
    n_items = int(len(item_ids))
    key = users * n_items + items
    if ts is not None:
        perm = np.lexsort((order, ts, key))  # earliest (then first in file) per pair
    else:
        perm = np.lexsort((order, key))
    first = np.ones(perm.size, dtype=bool)
    first[1:] = key[perm][1:] != key[perm][:-1]
    sel = np.sort(perm[first])  # back to file order
    n_dup = int(perm.size - sel.size)
    return Ratings(
        users=users[sel], items=items[sel],
        timestamps=None if ts is None else np.asarray(ts, dtype=float)[sel],
        order=order[sel], n_users=int(len(user_ids)), n_items=n_items,
        user_ids=user_ids, item_ids=item_ids, source=source, fmt=fmt, n_duplicates=n_dup,
    )


def filter_items(ratings: Ratings, min_users: int) -> Ratings:
    """Keep only the items with at least ``min_users`` distinct users (one pass).

    A common preprocessing of sparse catalogues (e.g. Last.fm artists listened
    to by a single user). Items are re-indexed 0..n_items-1 in the order of
    their original index; users keep their index (a user may lose all items;
    :func:`leave_one_out` drops users with too few).

    Examples
    --------
    >>> r = synthetic_ratings(50, 40, rng=0)
    >>> f = filter_items(r, 5)
    >>> bool(f.n_items <= r.n_items), bool(np.bincount(f.items).min() >= 5)
    (True, True)
    """
    from ._validation import check_int

    min_users = check_int(min_users, "min_users", low=1)
    if not isinstance(ratings, Ratings):
        raise TypeError(f"ratings must be a Ratings (from load_ratings); got {type(ratings).__name__}")
    cnt = np.bincount(ratings.items, minlength=ratings.n_items)
    keep_item = cnt >= min_users
    sel = keep_item[ratings.items]
    new = np.cumsum(keep_item) - 1
    return Ratings(
        users=ratings.users[sel], items=new[ratings.items[sel]].astype(np.int64),
        timestamps=None if ratings.timestamps is None else ratings.timestamps[sel],
        order=ratings.order[sel], n_users=ratings.n_users, n_items=int(keep_item.sum()),
        user_ids=ratings.user_ids, item_ids=np.asarray(ratings.item_ids)[keep_item],
        source=f"{ratings.source} (items with >= {min_users} users)", fmt=ratings.fmt,
        n_duplicates=ratings.n_duplicates,
    )


# --------------------------------------------------------------------------- split
def leave_one_out(ratings: Ratings, *, min_interactions: int = 2, holdout: str = "auto",
                  rng=None) -> LeaveOneOutSplit:
    """Hold out each user's latest interaction as the test item (KDD20 Sec 2.1).

    Tie rule (decision, tested): the test item is the interaction with the largest
    timestamp; among interactions sharing that timestamp, the one that comes *last
    in the source file* (largest ``Ratings.order``). Without timestamps the last
    interaction in file order is held out, unless ``holdout`` asks for a random
    one (the default for such files, see below). Users with fewer than
    ``min_interactions`` (default 2: one to train on, one to test) distinct items
    are dropped and counted in ``summary["n_users_dropped"]``; kept users are
    re-indexed 0..M-1 in the order of their original ids. All N items stay
    ranking candidates.

    Parameters
    ----------
    ratings : Ratings
        From :func:`load_ratings` or :func:`synthetic_ratings`.
    min_interactions : int, default 2
        Minimum number of distinct items a user needs to be kept (>= 2).
    holdout : {"auto", "last", "random"}, default "auto"
        Which interaction is held out. ``"last"``: the latest (timestamp, then
        file order). ``"random"``: one interaction per user chosen uniformly at
        random from ``rng`` (timestamps ignored). ``"auto"``: ``"last"`` when the
        file has timestamps, ``"random"`` when it has none (file order of
        an untimed file, e.g. HetRec Last.fm sorted by artist id, is not a time
        order, so "last in the file" would bias the test items).
    rng : None, int or numpy.random.Generator
        Randomness of ``holdout="random"``; an int seed makes the split
        reproducible (``None`` is treated as seed 0 so the split is always
        reproducible).

    Returns
    -------
    LeaveOneOutSplit
        ``summary["holdout"]`` records the rule used.

    References
    ----------
    KDD20 Sec 2.1 (leave-one-out, after Bayer et al. 2017).

    Examples
    --------
    >>> r = synthetic_ratings(50, 30, rng=0)
    >>> s = leave_one_out(r)
    >>> s.train.shape[0] == s.test_items.size == s.n_users
    True
    """
    from ._validation import check_int

    min_interactions = check_int(min_interactions, "min_interactions", low=2)
    if not isinstance(ratings, Ratings):
        raise TypeError(f"ratings must be a Ratings (from load_ratings); got {type(ratings).__name__}")
    if holdout not in ("auto", "last", "random"):
        raise ValueError(f"holdout must be 'auto', 'last' or 'random'; got {holdout!r}")
    if holdout == "auto":
        holdout = "last" if ratings.timestamps is not None else "random"
    users, items, order = ratings.users, ratings.items, ratings.order
    ts = ratings.timestamps if ratings.timestamps is not None else np.zeros(users.size)
    if holdout == "random":
        # a random key per interaction: the last one of each user after sorting is a
        # uniformly random interaction of that user
        g = np.random.default_rng(0 if rng is None else rng)
        ts = np.zeros(users.size)
        order = g.permutation(users.size)
    counts = np.bincount(users, minlength=ratings.n_users)
    kept_mask = counts >= min_interactions
    kept_users = np.flatnonzero(kept_mask)
    new_id = np.full(ratings.n_users, -1, dtype=np.int64)
    new_id[kept_users] = np.arange(kept_users.size)
    sel = kept_mask[users]
    u, it, t, o = new_id[users[sel]], items[sel], ts[sel], order[sel]
    # sort by (user, timestamp, order): the last row of each user is the test item
    perm = np.lexsort((o, t, u))
    u_s, it_s, t_s = u[perm], it[perm], t[perm]
    last = np.ones(u_s.size, dtype=bool)
    last[:-1] = u_s[1:] != u_s[:-1]
    test_pos = np.flatnonzero(last)
    test_items = it_s[test_pos]
    # users whose latest timestamp is shared by several of their interactions
    prev = test_pos - 1
    tie = (prev >= 0) & (u_s[np.maximum(prev, 0)] == u_s[test_pos]) & (t_s[np.maximum(prev, 0)] == t_s[test_pos])
    n_ties = int(tie.sum()) if (ratings.timestamps is not None and holdout == "last") else 0
    train = _binary_csr(u_s[~last], it_s[~last], kept_users.size, ratings.n_items)
    summary = {
        "n_users_total": int(ratings.n_users),
        "n_users_kept": int(kept_users.size),
        "n_users_dropped": int(ratings.n_users - kept_users.size),
        "n_interactions": int(users.size),
        "n_train": int(train.nnz),
        "n_test": int(test_items.size),
        "n_items": int(ratings.n_items),
        "n_timestamp_ties": n_ties,
        "n_duplicates": int(ratings.n_duplicates),
        "min_interactions": int(min_interactions),
        "holdout": holdout,
    }
    return LeaveOneOutSplit(
        train=train, test_items=test_items.astype(np.int64), n_users=int(kept_users.size),
        n_items=int(ratings.n_items), user_ids=ratings.user_ids[kept_users],
        item_ids=ratings.item_ids, summary=summary,
    )


# --------------------------------------------------------------------------- synthetic
def synthetic_ratings(
    n_users: int = 2000,
    n_items: int = 1000,
    *,
    n_factors: int = 8,
    mean_interactions: float = 30.0,
    popularity_skew: float = 1.0,
    signal: float = 6.0,
    block_size: int = 2048,
    rng=None,
) -> Ratings:
    """Seeded implicit-feedback data from a latent-factor model with popularity skew.

    User u picks ``k_u`` distinct items (``k_u = 2 + Poisson(mean_interactions - 2)``,
    capped at ``n_items``) without replacement with probabilities proportional to
    ``exp(signal * <p_u, q_i> + popularity_skew * b_i)``, where ``p_u, q_i ~
    N(0, I/n_factors)`` and ``b_i = -log(rank_i)`` is a Zipf popularity log-weight
    over a random item order (Gumbel top-k trick, computed in user blocks so memory
    stays O(block_size * n_items)). Timestamps are i.i.d. uniform, so the held-out
    latest item is a random one of the user's items: predictable from the rest but
    not trivially, and the global rank distribution of fitted models is skewed
    towards 1 and far from uniform, like on real data (KDD20 Fig 3).

    Parameters
    ----------
    n_users, n_items : int
        M >= 1 and N >= 2.
    n_factors : int, default 8
    mean_interactions : float, default 30
        Mean number of interactions per user (> 2).
    popularity_skew : float, default 1.0
        Exponent of the Zipf popularity (0 = no popularity effect).
    signal : float, default 6.0
        Strength of the personal (latent factor) preference.
    block_size : int, default 2048
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Ratings
        ``fmt="synthetic"``; every user has at least 2 interactions.

    References
    ----------
    KDD20 Fig 3 / Table 2 (real rank distributions are Beta(a,1)-like with a < 1);
    Gumbel-top-k sampling: Kool, van Hoof & Welling (2019).

    Examples
    --------
    >>> r = synthetic_ratings(100, 50, rng=1)
    >>> r.n_users, r.n_items, bool(r.n_interactions > 200)
    (100, 50, True)
    """
    from ._validation import check_float, check_int

    n_users = check_int(n_users, "n_users", low=1)
    n_items = check_int(n_items, "n_items", low=2)
    n_factors = check_int(n_factors, "n_factors", low=1)
    block_size = check_int(block_size, "block_size", low=1)
    mean_interactions = check_float(mean_interactions, "mean_interactions", low=2, low_open=True)
    popularity_skew = check_float(popularity_skew, "popularity_skew", low=0)
    signal = check_float(signal, "signal", low=0)
    rng = np.random.default_rng(rng)
    P = rng.standard_normal((n_users, n_factors)) / np.sqrt(n_factors)
    Q = rng.standard_normal((n_items, n_factors)) / np.sqrt(n_factors)
    pop_rank = rng.permutation(n_items) + 1
    bias = -popularity_skew * np.log(pop_rank)
    k = np.minimum(2 + rng.poisson(mean_interactions - 2, size=n_users), n_items)
    users_out, items_out, ts_out = [], [], []
    for s in range(0, n_users, block_size):
        e = min(s + block_size, n_users)
        logits = signal * (P[s:e] @ Q.T) + bias
        logits += rng.gumbel(size=logits.shape)
        kmax = int(k[s:e].max())
        if kmax < n_items:
            top = np.argpartition(-logits, kmax - 1, axis=1)[:, :kmax]
        else:
            top = np.broadcast_to(np.arange(n_items), (e - s, n_items)).copy()
        vals = np.take_along_axis(logits, top, axis=1)
        top = np.take_along_axis(top, np.argsort(-vals, axis=1, kind="stable"), axis=1)
        pos = np.arange(kmax)[None, :]
        mask = pos < k[s:e, None]
        uu = np.broadcast_to(np.arange(s, e)[:, None], top.shape)[mask]
        users_out.append(uu)
        items_out.append(top[mask])
        ts_out.append(rng.random(top.shape)[mask])
    users = np.concatenate(users_out).astype(np.int64)
    items = np.concatenate(items_out).astype(np.int64)
    ts = np.concatenate(ts_out)
    desc = (f"synthetic_ratings(n_users={n_users}, n_items={n_items}, n_factors={n_factors}, "
            f"mean_interactions={mean_interactions}, popularity_skew={popularity_skew}, "
            f"signal={signal})")
    return Ratings(
        users=users, items=items, timestamps=ts, order=np.arange(users.size, dtype=np.int64),
        n_users=n_users, n_items=n_items, user_ids=np.arange(n_users), item_ids=np.arange(n_items),
        source=desc, fmt="synthetic", n_duplicates=0,
    )


def dataset_statistics(ratings: Ratings, name: str | None = None) -> pd.DataFrame:
    """One-row table in the style of KDD20 Table 4.

    Columns: dataset, interactions, users, items, sparsity (1 - nnz / (M N)),
    mean interactions per user, duplicates dropped.

    References
    ----------
    KDD20 Table 4.

    Examples
    --------
    >>> dataset_statistics(synthetic_ratings(20, 10, rng=0), "toy").columns.tolist()[:4]
    ['dataset', 'interactions', 'users', 'items']
    """
    nnz = ratings.n_interactions
    return pd.DataFrame([{
        "dataset": name if name is not None else Path(ratings.source).name if ratings.fmt != "synthetic" else "synthetic",
        "interactions": nnz,
        "users": ratings.n_users,
        "items": ratings.n_items,
        "sparsity": 1.0 - nnz / (ratings.n_users * ratings.n_items),
        "mean_per_user": nnz / ratings.n_users,
        "duplicates_dropped": ratings.n_duplicates,
    }])
