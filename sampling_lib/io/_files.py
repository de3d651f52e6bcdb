"""Text and CSV files: one-line errors naming the file and line (the readers' shared helpers)."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .._validation import show_value

__all__ = ["read_table", "file_error", "text_lines", "float_field"]


def read_table(table, what="table"):
    """A DataFrame as is, or a CSV file (TSV when the name ends in .tsv/.tab) read into one.

    Errors name the file and what it should hold (``what``): missing file,
    empty file, unparsable CSV.

    Examples
    --------
    >>> read_table(pd.DataFrame({"user": [1]})).shape
    (1, 1)
    """
    if isinstance(table, pd.DataFrame):
        return table
    path = os.fspath(table)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        sep = "\t" if path.endswith((".tsv", ".tab")) else ","
        return pd.read_csv(path, sep=sep)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file is empty: {path}") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[0]
        raise ValueError(f"{what} file {path} is not a valid CSV: {msg}") from None



def file_error(path, lineno, msg):
    """The one-line error of a bad file: ``<path>, line <k>: <what is wrong>``."""
    where = f"{path}, line {lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def text_lines(path, what):
    """(line number, stripped line) of a text file, skipping blank lines; one-line errors."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{what} file {path} is a folder, not a file")
    try:
        with open(path, encoding="utf-8") as fh:
            rows = [(k, line.strip()) for k, line in enumerate(fh, start=1) if line.strip()]
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} file {path} is not UTF-8 text (byte {exc.start})") from None
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

