"""Text and CSV files: one-line errors naming the file and line (the readers' shared helpers).

Every reader of :mod:`sampling_lib.io` reads its files through :func:`read_table`
(CSV/TSV) or :func:`text_lines` (TREC, NCF, Elliot lines), so that all of them

* read UTF-8 and drop a UTF-8 byte-order mark (BOM) at the start of the file
  (Excel and Windows tools write one; left in place it becomes part of the
  first user id or column name);
* refuse UTF-16/UTF-32 and other non-UTF-8 files with one line naming the file
  and the first line that is not UTF-8;
* read the id columns ``user``, ``item`` and ``model`` as text, exactly as
  written: ``1``, ``01`` and ``1.0`` are three ids, one junk row does not turn
  a numeric id column into text (so ids of several files compare equal as
  text, see :func:`id_text`), and ``NA`` or ``null`` are ids, not blanks;
* report a bad cell as ``<file>, line <k>`` (:func:`row_location`).
"""
from __future__ import annotations

import codecs
import csv
import os
import re
import warnings

import numpy as np
import pandas as pd

from .._validation import show_value

__all__ = ["ID_COLUMNS", "SOURCE", "PARTS", "STAGES", "LINES", "read_table", "concat_tables", "row_location",
           "table_lines", "table_source", "table_name", "source_at", "id_text", "file_error", "text_lines",
           "float_field", "check_path", "check_encoding", "not_utf8"]

#: Columns holding ids: read as text from files, compared as text across the files of one call.
ID_COLUMNS = ("user", "item", "model")

SOURCE = "sampling_lib.source"          # DataFrame.attrs key: the file a table was read from
PARTS = "sampling_lib.parts"            # DataFrame.attrs key of concat_tables: [(source, first row), ...]
STAGES = "sampling_lib.stages"          # DataFrame.attrs key of read_stages: how errors name each stage's input
LINES = "sampling_lib.lines"            # DataFrame.attrs key of a table built from a file's rows: (file, line per row)
_UTF16_32 = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
             (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def file_error(path, lineno, msg):
    """The one-line error of a bad file: ``<path>, line <k>: <what is wrong>``."""
    where = f"{path}, line {lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def check_encoding(path, what):
    """Refuse a UTF-16/32 file (recognised by its byte-order mark) with a one-line error."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    for bom, name in _UTF16_32:
        if head.startswith(bom):
            raise ValueError(f"{what} file {path} is {name} text (it starts with a {name} byte-order "
                             f"mark); sampling-lib reads UTF-8: convert it, e.g. iconv -f {name} -t UTF-8")


def not_utf8(path, what):
    """The error of a file that is not UTF-8, naming the first line that does not decode."""
    dec = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as fh:
        for k, raw in enumerate(fh, start=1):
            try:
                dec.decode(raw)
            except UnicodeDecodeError as exc:
                return file_error(path, k, f"{what} file is not UTF-8 text (byte {exc.start + 1} of the "
                                           "line); save it as UTF-8")
    return ValueError(f"{what} file {path} is not UTF-8 text; save it as UTF-8")


def check_path(path, what):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{what} file {path} is a folder, not a file")


def _csv_records(path, sep):
    """(first line of the record, fields) of every non-blank CSV record, header included."""
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as fh:
        reader = csv.reader(fh, delimiter=sep)
        start = 1
        for rec in reader:
            if rec and any(f.strip() for f in rec):
                yield start, rec
            start = reader.line_num + 1


def read_table(table, what="table"):
    """A DataFrame as is, or a CSV file (TSV when the name ends in .tsv/.tab) read into one.

    A file is read as UTF-8 (a leading byte-order mark is dropped), with the
    id columns ``user``, ``item`` and ``model`` as text exactly as written
    (``01`` stays ``01``; ``NA`` is an id) and no other cell turned into a
    missing value but an empty one. A line with more fields than the header
    is an error (pandas would drop the extra fields or take the first one as
    the row's index). The table remembers its file, so that the readers name
    ``<file>, line <k>`` in their errors (:func:`row_location`).

    Errors name the file and what it should hold (``what``): missing file,
    empty file, not UTF-8 (with the line), unparsable CSV.

    Examples
    --------
    >>> read_table(pd.DataFrame({"user": [1]})).shape
    (1, 1)
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ranks.csv"
    >>> _ = p.write_text("user,model,rank\\n01,1.0,3\\nNA,1,2\\n")
    >>> read_table(p).to_dict("list")
    {'user': ['01', 'NA'], 'model': ['1.0', '1'], 'rank': [3, 2]}
    """
    if isinstance(table, pd.DataFrame):
        return table
    path = os.fspath(table)
    check_path(path, what)
    check_encoding(path, what)
    sep = "\t" if path.endswith((".tsv", ".tab")) else ","
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            df = pd.read_csv(path, sep=sep, encoding="utf-8-sig", dtype={c: str for c in ID_COLUMNS},
                             keep_default_na=False, index_col=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file is empty: {path}") from None
    except UnicodeDecodeError:
        raise not_utf8(path, what) from None
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{what} file {path} is not a valid CSV: {msg}") from None
    if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
        raise _too_many_fields(path, what, sep)
    bad = [c for c in df.columns if str(c).startswith("Unnamed: ") or str(c).strip() == ""]
    if bad or pd.Index(df.columns).has_duplicates:
        header = next(_csv_records(path, sep), (1, []))[1]
        raise file_error(path, 1, f"the header of the {what} file must name each column once; got "
                                  f"{show_value(header)}")
    df.attrs[SOURCE] = (path, sep)
    return df


def _too_many_fields(path, what, sep):
    header = None
    for k, rec in _csv_records(path, sep):
        if header is None:
            header = rec
        elif len(rec) > len(header):
            return file_error(path, k, f"the {what} file's line has {len(rec)} fields, its header "
                                       f"{len(header)} ({show_value(','.join(header))})")
    return ValueError(f"{what} file {path}: a line has more fields than the header")


def table_source(table):
    """The file a table was read from by :func:`read_table`, or None (a DataFrame given as is)."""
    src = table.attrs.get(SOURCE) if isinstance(table, pd.DataFrame) else None
    return src if src is None or isinstance(src, str) else src[0]      # a str: a candidates table's file


def source_at(name, line):
    """``<file>, line <k>``, or ``<table>, row <k>`` for a stage given as a DataFrame (:func:`stage_file_name`
    names it ``the stage-k negatives table``); ``line <k>`` alone without a name."""
    if name is None:
        return f"line {int(line)}"
    return f"{name}, {'row' if str(name).startswith('the stage-') else 'line'} {int(line)}"


def table_name(table, what):
    """How errors name a table: ``"the <what> file <path>"`` when read from a file, else ``"the <what> table"``."""
    src = table_source(table)
    return f"the {what} table" if src is None else f"the {what} file {src}"


def row_location(table, i):
    """Where row ``i`` (0-based) of a table is: ``"<file>, line <k>"`` for a file, else ``"row <i+1>"``.

    The line is found by re-reading the file (only when an error is
    reported), so it is exact also after blank lines and quoted line breaks.

    Examples
    --------
    >>> row_location(pd.DataFrame({"user": [1, 2]}), 1)
    'row 2'
    """
    built = table.attrs.get(LINES) if isinstance(table, pd.DataFrame) else None
    if built is not None and len(built[1]) == len(table):      # e.g. io.popularity_table: its file's lines
        return f"{built[0]}, line {int(built[1][int(i)])}"
    parts = table.attrs.get(PARTS) if isinstance(table, pd.DataFrame) else None
    if parts:                                # concat_tables: the part holding row i
        starts = [p[1] for p in parts]
        j = int(np.searchsorted(starts, int(i), side="right")) - 1
        src, i = parts[j][0], int(i) - starts[j]
    else:
        src = table.attrs.get(SOURCE) if isinstance(table, pd.DataFrame) else None
    if src is None or isinstance(src, str):  # a str: a candidates table built from that file, not its records
        return f"row {int(i) + 1}"
    for j, (k, _) in enumerate(_csv_records(*src)):
        if j == int(i) + 1:                  # record 0 is the header
            return f"{src[0]}, line {k}"
    return f"{src[0]}, row {int(i) + 1}"


def concat_tables(tables, what="table"):
    """Several tables (DataFrames or CSV paths, :func:`read_table`) as one, rows in order.

    The columns must be the same in every table. The result remembers where
    each part came from, so :func:`row_location` still names ``<file>, line
    <k>`` for any row (e.g. the scores of a first and a second stage of a
    nested design, written by two runs of a framework).

    Examples
    --------
    >>> t = concat_tables([pd.DataFrame({"user": [1]}), pd.DataFrame({"user": [2, 3]})])
    >>> t.user.tolist(), row_location(t, 2)
    ([1, 2, 3], 'row 2')
    """
    tables = list(tables)
    paths = [(i, os.fspath(t)) for i, t in enumerate(tables) if isinstance(t, (str, os.PathLike))]
    for a, (i, p) in enumerate(paths):
        for j, q in paths[a + 1:]:
            try:
                same = os.path.realpath(p) == os.path.realpath(q) or os.path.samefile(p, q)
            except OSError:
                same = False
            if same:
                raise ValueError(f"the {what} file {q} is given twice (files {i + 1} and {j + 1}): give each file "
                                 "once")
    dfs = [read_table(t, what) for t in tables]
    if not dfs:
        raise ValueError(f"no {what} given")
    if len(dfs) == 1:
        return dfs[0]
    cols = list(dfs[0].columns)
    for d in dfs[1:]:
        if sorted(map(str, d.columns)) != sorted(map(str, cols)):
            where = table_source(d) or f"the {what} table"
            raise ValueError(f"{where}: the {what} files must have the same columns; got {list(d.columns)} and "
                             f"{cols} ({table_source(dfs[0]) or 'the first'})")
    starts = np.cumsum([0] + [len(d) for d in dfs[:-1]]).tolist()
    out = pd.concat([d[cols] for d in dfs], ignore_index=True)
    out.attrs = {PARTS: [(d.attrs.get(SOURCE), s) for d, s in zip(dfs, starts)]}
    return out


def table_lines(table):
    """The file line of every row of a table read by :func:`read_table` (int64 array), or None."""
    src = table.attrs.get(SOURCE) if isinstance(table, pd.DataFrame) else None
    if src is None:
        return None
    with open(src[0], "rb") as fh:
        data = fh.read().rstrip()
    # the usual file: no quotes and no blank line (one of spaces or separators only): row i is on line i + 2
    # (a CSV reader in Python takes seconds at 10^6 rows)
    if b'"' not in data and re.search(rb"(?m)^[ \t\r" + re.escape(src[1].encode()) + rb"]*$", data) is None:
        if data.count(b"\n") == len(table):
            return np.arange(2, len(table) + 2, dtype=np.int64)
    k = np.fromiter((k for k, _ in _csv_records(*src)), dtype=np.int64)[1:]
    return k if k.size == len(table) else None


#: id columns longer than this are factorized before their ids become text (:func:`id_text`)
_SHARED_TEXT_MIN = 4096


def id_text(values):
    """Ids as text, the one form in which the ids of every file of a call are compared.

    Text stays as written (surrounding white space removed); integers become
    their decimal digits; whole floats (an integer id column that pandas
    turned into floats) become their integer digits, other floats their
    ``repr``. So the user ``12`` of a DataFrame matches the user ``"12"`` of a
    CSV file, while the texts ``"01"``, ``"1"`` and ``"1.0"`` stay three ids.

    Examples
    --------
    >>> id_text([1, "01", " 1.0", 2.0, np.int64(7)]).tolist()
    ['1', '01', '1.0', '2', '7']

    A long column of repeated ids (a scores table: every candidate of every
    user) is factorized first: each distinct id is converted once, and the
    result points to those texts (8 bytes a row instead of a string object
    each; 4.6 x 10^6 score rows of a Last.fm ladder: ~0.6 GB less).
    """
    if isinstance(values, (pd.Series, pd.Index, np.ndarray)) and values.ndim == 1 and len(values) > _SHARED_TEXT_MIN:
        codes, uniq = pd.factorize(values)
        if len(uniq) <= len(values) // 2 and codes.min() >= 0:          # repeats, no missing value
            return id_text(np.asarray(uniq))[codes]
    if isinstance(values, (pd.Series, pd.Index)):
        a = values.to_numpy()
    elif isinstance(values, np.ndarray):
        a = values
    else:                                   # a list: numpy would turn 2.0 into the text '2.0'
        a = np.empty(len(values), dtype=object)
        a[:] = list(values)
    if a.dtype.kind in "iu":
        return a.astype(str).astype(object)
    if a.dtype.kind == "f":
        return np.array([_float_id(v) for v in a.tolist()], dtype=object)
    if a.ndim == 1 and pd.api.types.infer_dtype(a, skipna=False) == "string":   # the usual case: fast
        s = pd.Series(a, dtype="str")
        stripped = s.str.strip()
        if not (stripped != s).any():
            return a if a.dtype == object else a.astype(object)
        return stripped.to_numpy(dtype=object)
    out = np.empty(a.shape, dtype=object)
    for k, v in enumerate(a.tolist()):
        if isinstance(v, float):
            out[k] = _float_id(v)
        elif isinstance(v, (bool, np.bool_)):
            out[k] = str(v)
        else:
            out[k] = str(v).strip()
    return out


def _float_id(v):
    return str(int(v)) if np.isfinite(v) and float(v).is_integer() else repr(v)


def text_lines(path, what):
    """(line number, stripped line) of a UTF-8 text file, skipping blank lines; one-line errors.

    A UTF-8 byte-order mark at the start is dropped; a UTF-16/32 file or a
    line that is not UTF-8 is an error naming the file (and the line).
    """
    path = os.fspath(path)
    check_path(path, what)
    check_encoding(path, what)
    try:
        with open(path, encoding="utf-8-sig") as fh:
            rows = [(k, line.strip()) for k, line in enumerate(fh, start=1) if line.strip()]
    except UnicodeDecodeError:
        raise not_utf8(path, what) from None
    if not rows:
        raise ValueError(f"{what} file is empty: {path}")
    return rows


def float_field(text, path, lineno, name):
    try:
        v = float(text)
    except ValueError:
        raise file_error(path, lineno, f"{name} must be a number; got {show_value(text)}") from None
    if not np.isfinite(v):
        raise file_error(path, lineno, f"{name} must be finite; got {show_value(text)}")
    return v
