"""Counts tables: users per (model, n_items, sample_size, rank) cell, from CSV or partitioned Parquet."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd

from .._validation import check_int, check_int_column, show_value
from ._files import id_text, read_table, row_location, table_source
from ._tables import _check_first_rank

__all__ = ["counts_table", "is_parquet"]

_CELL_KEYS = ("model", "n_items", "sample_size", "rank")


#: Columns a per-user ranks table may have besides the cell keys (``first_rank``: checked, not counted)
_RANKS_EXTRA = ("user", "first_rank")


def _layout_keys(cols, where):
    """The cell-key columns of a ranks or counts table's ``cols``, after its layout checks (a column of
    neither layout is an error: nothing of the file goes unread)."""
    if "rank" not in cols:
        raise ValueError(f"the {where} must have a 'rank' column; found columns {cols}")
    if "user" in cols and "count" in cols:
        raise ValueError(f"the {where} has both 'user' and 'count' columns: a row would be one user "
                         "(a ranks table) or 'count' users (a counts table); drop one of them")
    other = [c for c in cols if c not in (*_CELL_KEYS, "count", *_RANKS_EXTRA)]
    if "first_rank" in cols and "count" in cols:
        other.append("first_rank")
    if other:
        raise ValueError(f"the {where} holds a ranks table (user, rank[, model][, sample_size][, n_items]"
                         f"[, first_rank]) or a counts table (rank, count[, model][, sample_size][, n_items]); "
                         f"column(s) {other} are not read")
    return [c for c in _CELL_KEYS if c in cols]


def is_parquet(path):
    p = os.fspath(path)
    return p.endswith((".parquet", ".pq")) or (os.path.isdir(p) and any(
        f.endswith((".parquet", ".pq")) for _, _, fs in os.walk(p) for f in fs))


_INT64_MAX = np.iinfo(np.int64).max


def _check_cells(df, keys, has_count, at, n, N, where):
    """Validate the cell columns (and count) of a counts / per-user ranks table, row by row."""
    for c in ("model",) if "model" in keys else ():
        blank = df[c].isna() | (df[c].astype(str).str.strip() == "")
        if blank.any():
            i = int(np.flatnonzero(blank.to_numpy())[0])
            raise ValueError(f"column 'model' is blank in {at(i)}")
    val = {c: check_int_column(df[c], c, at).to_numpy() for c in keys if c != "model"}
    if has_count:
        val["count"] = check_int_column(df["count"], "count", at).to_numpy()
    low = {"rank": 1, "sample_size": 2, "n_items": 2, "count": 0}
    for c, v in val.items():
        if (v < low[c]).any():
            i = int(np.flatnonzero(v < low[c])[0])
            raise ValueError(f"column {c!r} must be >= {low[c]}; got {v[i]} in {at(i)}")
    if n is not None:
        n = check_int(n, "n", low=2)
        if "sample_size" in val and (val["sample_size"] != n).any():
            i = int(np.flatnonzero(val["sample_size"] != n)[0])
            raise ValueError(f"{at(i)} has sample_size {val['sample_size'][i]}, not the sample size n={n} "
                             "(--sample-size); omit n to use each row's own size")
    if N is not None and np.ndim(N) == 0 and "n_items" in val:
        N = check_int(N, "N", low=2)
        if (val["n_items"] != N).any():
            i = int(np.flatnonzero(val["n_items"] != N)[0])
            raise ValueError(f"--n-items N={N} disagrees with column 'n_items' ({val['n_items'][i]} in "
                             f"{at(i)})")
    size = val.get("sample_size", None if n is None else np.full(len(df), n))
    if size is not None and (val["rank"] > size).any():
        i = int(np.flatnonzero(val["rank"] > size)[0])
        raise ValueError(f"sampled ranks must lie in 1..sample_size; {at(i)} has rank {val['rank'][i]} > "
                         f"sample_size {size[i]}")
    items = val.get("n_items", None if N is None or np.ndim(N) != 0 else np.full(len(df), N))
    if size is not None and items is not None and (size > items).any():
        i = int(np.flatnonzero(size > items)[0])
        raise ValueError(f"the sample size must lie in 2..n_items; {at(i)} has sample_size {size[i]} > "
                         f"n_items {items[i]}")
    return val


def _check_total(counts, models, where):
    """The users of each model must fit an int64: sum of counts <= 2**63 - 1 (exact, Python ints)."""
    c = np.asarray(counts)
    if c.size == 0 or float(c.astype(float).sum()) < 2.0**62:
        return
    for m in pd.unique(models):
        tot = sum(int(x) for x in c[models == m])
        if tot > _INT64_MAX:
            raise ValueError(f"{where}: the counts of model {show_value(m)} sum to {tot} users, more than "
                             f"2**63-1 = {_INT64_MAX}; a count table cannot hold that many users")


def counts_table(table, *, what="ranks", n=None, N=None):
    """The counts table of a per-user ranks file or of a counts file, aggregated.

    ``table`` is a DataFrame, a CSV/TSV path, or a Parquet file or directory
    of Parquet files (e.g. a partitioned data set written by Spark). Parquet
    is read with :mod:`dask.dataframe` and aggregated partition by partition
    (one ``groupby`` over the cell columns), so memory is bounded by a
    partition plus the number of cells, not by the number of users.

    Rows are per-user ranks (columns ``rank`` [+ ``user``, ``sample_size``,
    ``n_items``, ``model``]; each row counts 1; a ``user`` listed twice for
    one model is an error) or cells of a counts table (columns ``rank`` and
    ``count`` [+ ``sample_size``, ``n_items``, ``model``]; counts of equal
    cells are added). A table with both ``user`` and ``count`` is refused (a
    row would be one user or ``count`` users). Every cell is checked before
    it is counted: a blank, fractional or negative ``count`` or ``rank``, a
    blank ``model``, a rank above its sample size, a model whose counts sum
    past 2**63 - 1 users are errors naming the file and line (the column, for
    Parquet). This is the one ``GROUP BY`` of
    :func:`sampling_lib.counts.counts_from_frame`.

    Parameters
    ----------
    n, N : int, optional, keyword-only
        The sample size / number of items every row must have, when the
        table has a ``sample_size`` / ``n_items`` column (checked row by
        row, naming the line); they are not filled in here.

    Returns
    -------
    pandas.DataFrame
        Columns: the cell columns present (``model``, ``n_items``,
        ``sample_size``, ``rank``) and ``count``.

    Examples
    --------
    >>> df = pd.DataFrame({"user": [1, 2, 3], "rank": [1, 1, 4], "n_items": [90, 90, 80]})
    >>> counts_table(df).to_dict("list")
    {'n_items': [80, 90], 'rank': [4, 1], 'count': [1, 2]}
    """
    if isinstance(table, pd.DataFrame) or not is_parquet(table):
        df = read_table(table, what)
        src = table_source(df)
        where = f"{what} table" if src is None else f"{what} file {src}"
        cols = list(df.columns)
        keys = _layout_keys(cols, where)
        at = lambda i: row_location(df, i)  # noqa: E731
        val = _check_cells(df, keys, "count" in cols, at, n, N, where)
        if "first_rank" in cols:
            _check_first_rank(check_int_column(df["first_rank"], "first_rank", at).to_numpy(), val["rank"], at)
        models = id_text(df["model"]) if "model" in cols else np.full(len(df), "model", dtype=object)
        if "user" in cols:
            users = id_text(df["user"])
            blank = pd.Series(users).str.strip() == ""
            if blank.any():
                i = int(np.flatnonzero(blank.to_numpy())[0])
                raise ValueError(f"column 'user' of the {where} is blank in {at(i)}")
            dup = pd.DataFrame({"m": models, "u": users}).duplicated()
            if dup.any():
                i = int(np.flatnonzero(dup.to_numpy())[0])
                raise ValueError(f"each (user, model) must appear once; user {show_value(users[i])} of "
                                 f"model {show_value(models[i])} repeats ({at(i)})")
        if "count" in cols:
            _check_total(val["count"], models, where)
        work = pd.DataFrame({c: (df[c].to_numpy() if c == "model" else val[c]) for c in keys})
        if "count" in cols:
            work["count"] = val["count"]
            _warn_repeated_rows(work, keys, at, "counts table" if src is None else f"counts file {src}", src)
            return work.groupby(keys, sort=True, as_index=False)["count"].sum()
        return work.groupby(keys, sort=True).size().rename("count").reset_index()
    return _parquet_counts(os.fspath(table), what, n, N)


def _warn_repeated_rows(work, keys, at, where, src=None):
    """Rows of a counts table that repeat a cell are added; say so, naming the first such cell's lines (a
    table pasted twice would otherwise double every count without a word). Parquet data sets are not checked:
    their partitions may each count part of a cell."""
    dup = work.duplicated(keys, keep=False).to_numpy()
    if not dup.any():
        return
    i = int(np.flatnonzero(dup)[0])
    same = np.flatnonzero(dup & (work[keys] == work[keys].iloc[i]).all(axis=1).to_numpy())
    cell = ", ".join(f"{k} {show_value(work[k].iloc[i])}" for k in keys)
    n_cells = int(work.loc[dup, keys].drop_duplicates().shape[0])
    locs = [at(j) for j in same[:3]]
    head = f"{src}, "
    if src is not None and all(x.startswith(head) for x in locs):     # the file is named once, in front
        locs = [x[len(head):] for x in locs]
    more = " and more" if same.size > 3 else ""
    if all(x.startswith("line ") and x[5:].isdigit() for x in locs):
        locs = ["lines " + ", ".join(x[5:] for x in locs[:-1]) + f" and {locs[-1][5:]}"]
    warnings.warn(f"the {where} lists {n_cells} cell(s) on more than one row, e.g. ({cell}) in "
                  f"{' and '.join(locs)}{more}: their counts are added "
                  f"({' + '.join(str(int(work['count'].iloc[j])) for j in same[:3])}"
                  f"{' + ...' if same.size > 3 else ''} users). A counts table lists each cell once: check for "
                  "rows given twice", UserWarning, stacklevel=4)


#: The first (and last) four bytes of every Parquet file.
PARQUET_MAGIC = b"PAR1"


def _check_parquet_files(path, what):
    """A file named .parquet (or a folder's .parquet files) must be Parquet: its first bytes are PAR1. A CSV
    saved under that name got dask's generic error; this says what the file is."""
    files = [path] if not os.path.isdir(path) else sorted(
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith((".parquet", ".pq")))
    for f in files:
        try:
            with open(f, "rb") as fh:
                head = fh.read(512)
        except OSError as exc:
            raise ValueError(f"{what} file {f} cannot be read: {exc.strerror or exc}") from None
        if head[:4] == PARQUET_MAGIC:
            continue
        looks = ""
        try:
            text = head.decode("utf-8-sig")
            first = text.splitlines()[0] if text.strip() else ""
            if first and ("," in first or "\t" in first):
                looks = f" It looks like CSV text (first line {first[:60]!r}): give it a .csv name."
            elif not text.strip():
                looks = " It is empty."
        except UnicodeDecodeError:
            pass
        raise ValueError(f"{what} file {f} is not a Parquet file: a Parquet file begins with the bytes "
                         f"{PARQUET_MAGIC.decode()}, and it begins with {head[:4]!r}.{looks}")


def _parquet_counts(path, what, n, N):
    """:func:`counts_table` of a Parquet file or folder: one dask pass (two with a user column)."""
    from .._extras import require

    _check_parquet_files(path, what)

    dask = require("dask", "reading Parquet")
    dd = require("dask.dataframe", "reading Parquet")
    require("pyarrow", "reading Parquet")
    where = f"{what} Parquet data set {path}"
    try:
        ddf = dd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - one line for any unreadable file
        raise ValueError(f"{what} file {path} is not a readable Parquet data set: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    cols = list(ddf.columns)
    keys = _layout_keys(cols, where)
    has_count = "count" in cols
    try:
        d = ddf[keys + (["count"] if has_count else [])]
        if has_count:
            cf = d["count"].astype("float64")
            d = d.assign(_cf=cf, _bad=(cf.isna() | (cf < 0) | (cf != cf.round())).astype("int64"))
            out = d.groupby(keys, dropna=False).agg({"count": "sum", "_cf": "sum", "_bad": "sum"})
        else:
            out = d.assign(count=1).groupby(keys, dropna=False)["count"].sum().to_frame()
        todo = [out]
        if "first_rank" in cols:          # rows whose first_rank is not a whole number in 1..rank
            f, r = ddf["first_rank"].astype("float64"), ddf["rank"].astype("float64")
            todo.append((f.isna() | (f < 1) | (f > r) | (f != f.round())).sum())
        if "user" in cols:
            ids = ["user"] + (["model"] if "model" in cols else [])
            per = ddf[ids].assign(_one=1).groupby(ids, dropna=False)["_one"].sum(
                split_out=max(1, ddf.npartitions))
            todo += [per.max(), per[per > 1].head(1, npartitions=-1, compute=False)]
        got = dask.compute(*todo)
    except Exception as exc:  # noqa: BLE001 - e.g. a text column where numbers belong
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{where} cannot be counted: {msg}") from None
    res = got[0].reset_index()
    if has_count and (res["_bad"] > 0).any():
        raise ValueError(f"{where}: column 'count' must hold whole numbers >= 0; "
                         f"{int(res['_bad'].sum())} rows are blank, negative or fractional")
    got = list(got)
    if "first_rank" in cols:
        bad_first = int(got.pop(1))
        if bad_first:
            raise ValueError(f"{where}: column 'first_rank' (the rank within the first stage's set) must hold "
                             f"whole numbers in 1..rank (the sets are nested); {bad_first} rows do not")
    if len(got) > 1 and got[1] > 1:
        u = got[2].index[0]
        u, m = (u if isinstance(u, tuple) else (u, "model"))
        raise ValueError(f"{where}: each (user, model) must appear once; user {show_value(u)} of model "
                         f"{show_value(m)} appears {int(got[2].iloc[0])} times")
    at = lambda i: f"{path} (a cell of {int(res['count'].iloc[i])} rows)"  # noqa: E731
    _check_cells(res, keys, False, at, n, N, where)
    if has_count:
        if (res["_cf"] >= 2.0**63).any():
            m = res["model"].iloc[int(np.flatnonzero(res["_cf"] >= 2.0**63)[0])] if "model" in keys else "model"
            raise ValueError(f"{where}: the counts of model {show_value(m)} sum past 2**63-1 users")
        res = res.drop(columns=["_cf", "_bad"])
    if "model" in keys:
        res["model"] = id_text(res["model"])
    models = res["model"].to_numpy() if "model" in keys else np.full(len(res), "model", dtype=object)
    _check_total(res["count"].to_numpy(), models, where)
    return res.sort_values(keys, kind="stable").reset_index(drop=True)
