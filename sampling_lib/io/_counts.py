"""Counts tables: users per (model, n_items, sample_size, rank) cell, from CSV or partitioned Parquet."""
from __future__ import annotations

import os

import pandas as pd

from ._files import read_table

__all__ = ["counts_table", "is_parquet"]

_CELL_KEYS = ("model", "n_items", "sample_size", "rank")


def is_parquet(path):
    p = os.fspath(path)
    return p.endswith((".parquet", ".pq")) or (os.path.isdir(p) and any(
        f.endswith((".parquet", ".pq")) for _, _, fs in os.walk(p) for f in fs))


def counts_table(table, *, what="ranks"):
    """The counts table of a per-user ranks file or of a counts file, aggregated.

    ``table`` is a DataFrame, a CSV/TSV path, or a Parquet file or directory
    of Parquet files (e.g. a partitioned data set written by Spark). Parquet
    is read with :mod:`dask.dataframe` and aggregated partition by partition
    (one ``groupby`` over the cell columns), so memory is bounded by a
    partition plus the number of cells, not by the number of users.

    Rows are per-user ranks (columns ``rank`` [+ ``sample_size``,
    ``n_items``, ``model``]; each row counts 1) or cells of a counts table
    (same columns + ``count``; counts of equal cells are added). This is the
    one ``GROUP BY`` of :func:`sampling_lib.correct.counts_from_frame`.

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
        if "rank" not in df.columns:
            raise ValueError(f"the {what} table must have a 'rank' column; found columns "
                             f"{list(df.columns)}")
        keys = [c for c in _CELL_KEYS if c in df.columns]
        if "count" in df.columns:
            return df.groupby(keys, sort=True, as_index=False, dropna=False)["count"].sum()
        return df.groupby(keys, sort=True, dropna=False).size().rename("count").reset_index()
    path = os.fspath(table)
    try:
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - dask[dataframe] + pyarrow are dependencies
        raise ImportError("reading Parquet needs dask.dataframe and pyarrow") from exc
    try:
        ddf = dd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - one line for any unreadable file
        raise ValueError(f"{what} file {path} is not a readable Parquet data set: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    cols = list(ddf.columns)
    if "rank" not in cols:
        raise ValueError(f"the {what} Parquet data set must have a 'rank' column; found columns {cols}")
    keys = [c for c in _CELL_KEYS if c in cols]
    ddf = ddf[keys + (["count"] if "count" in cols else [])]
    if "count" in cols:
        out = ddf.groupby(keys, dropna=False).sum()
    else:
        out = ddf.assign(count=1).groupby(keys, dropna=False)["count"].sum()
    res = out.compute()
    res = (res.rename("count") if isinstance(res, pd.Series) else res["count"]).reset_index()
    return res.sort_values(keys, kind="stable").reset_index(drop=True)
