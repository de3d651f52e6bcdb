"""Readers: per-user sampled ranks from tables of ranks or of scores.

* :func:`read_table` -- a DataFrame or a CSV/TSV path, with one-line errors;
* :func:`ranks_from_table` -- a ranks table ``user, rank[, sample_size][, model]``;
* :func:`ranks_from_score_table` -- a long scores table ``user, score, label[, model]``
  (the layout of a ``uni100`` evaluation), ranked with a tie rule of
  :mod:`sampling_lib.ranking`;
* :class:`SampledRanks` -- what both return: per-user ranks (and sample sizes) per model;
* :func:`counts_table` -- the sufficient statistic (users per (model, n_items,
  sample_size, rank) cell) of a ranks or counts file, CSV or partitioned Parquet
  (read with dask.dataframe without loading it whole);
* the files evaluation frameworks write: :func:`read_trec_run` /
  :func:`read_trec_qrels` / :func:`read_ranx_json` and :func:`ranks_from_run`
  (TREC runs and ranx runs, sampled or full rankings);
  :func:`read_ncf_negatives` (NCF ``*.test.negative``),
  :func:`read_elliot_negatives` (Elliot's negatives TSV), :func:`read_negatives`
  (this project's fixed negatives file) and :func:`ranks_from_negatives`
  (a candidates table + a scores function or file -> sampled ranks).

Every reader reports a bad file in one line naming the file (and the line of
a text file). The conventions of the frameworks (n, N, sampling scheme, ties,
duplicates) are tabulated in the README, section "Conventions of evaluation
frameworks".

The outputs feed :func:`sampling_lib.correct.estimate` and
:func:`~sampling_lib.correct.compare`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validation import check_columns, check_int, check_int_column, show_value
from .ranking import TIE_RULES, apply_ties

__all__ = ["SampledRanks", "read_table", "ranks_from_table", "ranks_from_score_table",
           "read_trec_run", "read_trec_qrels", "read_ranx_json", "ranks_from_run", "CANDIDATES",
           "read_ncf_negatives", "read_elliot_negatives", "read_negatives", "ranks_from_negatives",
           "DUPLICATES", "counts_table"]


@dataclass(frozen=True)
class SampledRanks:
    """Per-user sampled ranks of one or more models (output of the adapters).

    Attributes
    ----------
    ranks : pandas.DataFrame
        Index: user; one column per model; sampled ranks (nullable Int64: a
        user missing for a model is <NA>).
    sample_sizes : pandas.DataFrame or None
        Same shape: per-user sample sizes n_u (None when not given).
    n_items : pandas.DataFrame or None
        Same shape: per-user candidate counts N_u (column ``n_items`` of the
        ranks table; None when not given).
    """

    ranks: pd.DataFrame
    sample_sizes: pd.DataFrame | None
    n_items: pd.DataFrame | None = None

    @property
    def models(self) -> list:
        return [str(c) for c in self.ranks.columns]

    def for_model(self, model):
        """(sampled_ranks, sample_sizes or None) of one model, users with a rank only."""
        if model not in self.ranks.columns:
            raise ValueError(f"model must be one of {self.models}; got {show_value(model)}")
        col = self.ranks[model]
        keep = col.notna().to_numpy()
        r = col.to_numpy()[keep].astype(np.int64)
        if self.sample_sizes is None:
            return r, None
        return r, self.sample_sizes[model].to_numpy()[keep].astype(np.int64)

    def items_for_model(self, model):
        """Per-user candidate counts N_u of one model (users with a rank only), or None."""
        if model not in self.ranks.columns:
            raise ValueError(f"model must be one of {self.models}; got {model!r}")
        if self.n_items is None:
            return None
        keep = self.ranks[model].notna().to_numpy()
        return self.n_items[model].to_numpy()[keep].astype(np.int64)


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


def _check_not_blank(df, cols, what):
    """A blank id cell is an error (pandas would read it as NaN and str() it into a model 'nan')."""
    for c in cols:
        v = df[c]
        blank = v.isna() | (v.astype(str).str.strip() == "")
        if blank.any():
            i = int(np.flatnonzero(blank.to_numpy())[0])
            raise ValueError(f"column {c!r} of the {what} table is blank in row {i + 1}")


def ranks_from_table(table, *, user_col="user", rank_col="rank", size_col="sample_size",
                     model_col="model", n=None, items_col="n_items", N=None):
    """Per-user sampled ranks from a table (DataFrame or CSV/TSV path).

    Columns: ``user``, ``rank`` (sampled rank, 1 = best), optional
    ``sample_size`` (per-user n_u), optional ``n_items`` (per-user number of
    candidates N_u, e.g. items - |history_u|) and optional ``model`` (one row
    per user and model). Without a model column all rows are one model named
    "model".

    Parameters
    ----------
    table : DataFrame or path
    user_col, rank_col, size_col, model_col, items_col : str, keyword-only
        Column names.
    n : int, optional, keyword-only
        Common sample size: ranks must lie in 1..n (checked here).
    N : int, optional, keyword-only
        Common number of items: must agree with the ``n_items`` column when
        both are given.

    Returns
    -------
    SampledRanks

    Examples
    --------
    >>> df = pd.DataFrame({"user": [1, 2, 1, 2], "model": ["A", "A", "B", "B"],
    ...                    "rank": [1, 5, 3, 2]})
    >>> s = ranks_from_table(df, n=10)
    >>> s.models, s.for_model("B")[0].tolist()
    (['A', 'B'], [3, 2])
    """
    df = read_table(table, "ranks")
    check_columns(df, [user_col, rank_col], "the ranks table")
    if len(df) == 0:
        raise ValueError("the ranks table has no rows")
    _check_not_blank(df, [user_col] + ([model_col] if model_col in df.columns else []), "ranks")
    work = pd.DataFrame({"user": df[user_col].to_numpy(),
                         "rank": check_int_column(df[rank_col], rank_col).to_numpy()})
    work["model"] = df[model_col].astype(str).to_numpy() if model_col in df.columns else "model"
    has_size = size_col in df.columns
    if has_size:
        work["size"] = check_int_column(df[size_col], size_col).to_numpy()
        if (work["size"] < 2).any():
            raise ValueError(f"column {size_col!r} must be >= 2; got min {work['size'].min()}")
    has_items = items_col in df.columns
    if has_items:
        work["items"] = check_int_column(df[items_col], items_col).to_numpy()
        if (work["items"] < 2).any():
            raise ValueError(f"column {items_col!r} must be >= 2; got min {work['items'].min()}")
        if N is not None and (work["items"] != check_int(N, "N", low=2)).any():
            raise ValueError(f"--n-items N={N} disagrees with column {items_col!r} (values "
                             f"{np.unique(work['items'])[:5].tolist()}...)")
        nu = work["size"] if has_size else (n if n is not None else None)
        if nu is not None and (work["items"] < nu).any():
            i = int(np.flatnonzero((work["items"] < nu).to_numpy())[0])
            raise ValueError(f"column {items_col!r} must be >= the sample size; row {i + 1} has "
                             f"{items_col} {work['items'].iloc[i]}")
    if (work["rank"] < 1).any():
        raise ValueError(f"column {rank_col!r} must hold ranks >= 1; got min {work['rank'].min()}")
    if n is not None:
        n = check_int(n, "n", low=2)
        if has_size and (work["size"] != n).any():
            raise ValueError(f"--sample-size n={n} disagrees with column {size_col!r}")
        if (work["rank"] > n).any():
            raise ValueError(f"sampled ranks must lie in 1..n={n}; got max {work['rank'].max()}")
    if has_size and (work["rank"] > work["size"]).any():
        i = int(np.flatnonzero((work["rank"] > work["size"]).to_numpy())[0])
        raise ValueError(f"sampled ranks must lie in 1..sample_size; row {i + 1} has rank "
                         f"{work['rank'].iloc[i]} > sample_size {work['size'].iloc[i]}")
    dup = work.duplicated(["user", "model"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise ValueError(f"each (user, model) must appear once; user {show_value(work['user'].iloc[i])} "
                         f"of model {show_value(work['model'].iloc[i])} repeats (row {i + 1})")
    order = list(dict.fromkeys(work["model"]))
    users = list(dict.fromkeys(work["user"]))
    R = work.pivot(index="user", columns="model", values="rank").reindex(index=users, columns=order)
    S = None
    if has_size:
        S = work.pivot(index="user", columns="model", values="size").reindex(index=users, columns=order)
        S = S.astype("Int64")
    NI = None
    if has_items:
        NI = work.pivot(index="user", columns="model", values="items").reindex(index=users, columns=order)
        NI = NI.astype("Int64")
    return SampledRanks(R.astype("Int64"), S, NI)


def ranks_from_score_table(table, *, user_col="user", score_col="score", label_col="label",
                           model_col="model", ties="pessimistic", rng=None):
    """Sampled ranks from a long table of scores (the layout of a ``uni100`` evaluation).

    One row per (user, item[, model]) of the sample set: ``user``, ``score``,
    ``label`` (1 for the held-out item, 0 for a sampled negative), optional
    ``model``. Each (user, model) group must hold exactly one label-1 row; its
    sample size n_u is the group's size. Ties as :func:`ranks_from_scores`.

    Returns
    -------
    SampledRanks
        With ``sample_sizes`` filled in.

    Examples
    --------
    >>> df = pd.DataFrame({"user": [7, 7, 7, 8, 8, 8], "label": [1, 0, 0, 1, 0, 0],
    ...                    "score": [0.3, 0.9, 0.1, 0.5, 0.5, 0.2]})
    >>> s = ranks_from_score_table(df)
    >>> s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()
    ([2, 2], [3, 3])
    """
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {show_value(ties)}")
    df = read_table(table, "scores")
    check_columns(df, [user_col, score_col, label_col], "the scores table")
    if len(df) == 0:
        raise ValueError("the scores table has no rows")
    _check_not_blank(df, [user_col] + ([model_col] if model_col in df.columns else []), "scores")
    score = pd.to_numeric(df[score_col], errors="coerce")
    if score.isna().any() or not np.all(np.isfinite(score)):
        i = int(np.flatnonzero((score.isna() | ~np.isfinite(score)).to_numpy())[0])
        raise ValueError(f"column {score_col!r} must hold finite numbers; got "
                         f"{show_value(df[score_col].iloc[i])} in row {i + 1}")
    label = check_int_column(df[label_col], label_col)
    if not label.isin([0, 1]).all():
        raise ValueError(f"column {label_col!r} must be 0 (negative) or 1 (held-out item)")
    w = pd.DataFrame({"user": df[user_col].to_numpy(), "score": score.to_numpy(float),
                      "label": label.to_numpy(),
                      "model": df[model_col].astype(str).to_numpy() if model_col in df.columns
                      else "model"})
    g = w.groupby(["model", "user"], sort=False)
    npos = g["label"].sum()
    if (npos != 1).any():
        (m, u), v = next((k, v) for k, v in npos.items() if v != 1)
        raise ValueError(f"each (user, model) needs exactly one held-out row ({label_col}=1); "
                         f"user {show_value(u)} of model {show_value(m)} has {v}")
    size = g.size()
    if (size < 2).any():
        (m, u) = next(k for k, v in size.items() if v < 2)
        raise ValueError(f"user {show_value(u)} of model {show_value(m)} has no negatives")
    pos = w[w.label == 1].set_index(["model", "user"])["score"]
    neg = w[w.label == 0].join(pos.rename("pos"), on=["model", "user"])
    neg = neg.assign(gt=(neg.score > neg.pos).astype(np.int64),
                     eq=(neg.score == neg.pos).astype(np.int64))
    g2 = neg.groupby(["model", "user"], sort=False)[["gt", "eq"]].sum()
    gt = g2["gt"].reindex(size.index).fillna(0).astype(np.int64).to_numpy()
    eq = g2["eq"].reindex(size.index).fillna(0).astype(np.int64).to_numpy()
    r = apply_ties(gt, eq, ties, np.random.default_rng(rng))
    out = pd.DataFrame({"model": size.index.get_level_values(0),
                        "user": size.index.get_level_values(1),
                        "rank": np.asarray(r), "sample_size": size.to_numpy()})
    return ranks_from_table(out)


# ----------------------------------------------------------------------------
# readers of the files evaluation frameworks write (issue 14 item 3)
# ----------------------------------------------------------------------------
def _file_error(path, lineno, msg):
    """The one-line error of a bad file: ``<path>, line <k>: <what is wrong>``."""
    where = f"{path}, line {lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def _lines(path, what):
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


def _float_field(text, path, lineno, name):
    try:
        v = float(text)
    except ValueError:
        raise _file_error(path, lineno, f"{name} must be a number; got {show_value(text)}") from None
    if not np.isfinite(v):
        raise _file_error(path, lineno, f"{name} must be finite; got {show_value(text)}")
    return v


def read_trec_run(path, *, name=None):
    """A TREC run file (trec_eval / ranx format) as a table ``user, item, score, model``.

    One line per (query, document): ``query Q0 doc rank score tag`` separated
    by white space. In recommendation the query is the user and the document
    an item. The ``rank`` field is ignored (trec_eval also ranks by score);
    ``tag`` names the run and becomes the ``model`` column unless ``name`` is
    given.

    Parameters
    ----------
    path : str or path-like
    name : str, optional, keyword-only
        Model name for every line (replaces the tag).

    Returns
    -------
    pandas.DataFrame
        Columns ``user, item, score, model`` (ids as strings, as in the file).

    Raises
    ------
    ValueError
        One line naming the file and line: wrong number of fields, a score that
        is not a finite number, a (query, doc) pair listed twice.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.trec"
    >>> _ = p.write_text("u1 Q0 i9 1 0.9 bpr\\nu1 Q0 i3 2 0.5 bpr\\n")
    >>> read_trec_run(p)
      user item  score model
    0   u1   i9    0.9   bpr
    1   u1   i3    0.5   bpr
    """
    path = os.fspath(path)
    users, items, scores, tags = [], [], [], []
    seen = {}
    for k, line in _lines(path, "run"):
        f = line.split()
        if len(f) != 6:
            raise _file_error(path, k, f"a TREC run line has 6 fields 'query Q0 doc rank score "
                                       f"tag'; got {len(f)}: {show_value(line)}")
        key = (f[5] if name is None else name, f[0], f[2])
        if key in seen:
            raise _file_error(path, k, f"document {show_value(f[2])} of query {show_value(f[0])} "
                                       f"is listed twice (also line {seen[key]})")
        seen[key] = k
        users.append(f[0])
        items.append(f[2])
        scores.append(_float_field(f[4], path, k, "the score (field 5)"))
        tags.append(f[5] if name is None else str(name))
    return pd.DataFrame({"user": users, "item": items, "score": scores, "model": tags})


def read_trec_qrels(path):
    """A TREC qrels file as a table ``user, item, relevance``.

    One line per judged (query, document): ``query iteration doc relevance``
    (the iteration field, usually 0, is ignored). Relevance must be an
    integer; items with relevance > 0 are the user's held-out items.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
    >>> _ = p.write_text("u1 0 i3 1\\nu2 0 i7 1\\n")
    >>> read_trec_qrels(p).to_dict("list")
    {'user': ['u1', 'u2'], 'item': ['i3', 'i7'], 'relevance': [1, 1]}
    """
    path = os.fspath(path)
    users, items, rel = [], [], []
    for k, line in _lines(path, "qrels"):
        f = line.split()
        if len(f) != 4:
            raise _file_error(path, k, f"a TREC qrels line has 4 fields 'query iteration doc "
                                       f"relevance'; got {len(f)}: {show_value(line)}")
        try:
            r = int(f[3])
        except ValueError:
            raise _file_error(path, k, f"relevance (field 4) must be an integer; got "
                                       f"{show_value(f[3])}") from None
        users.append(f[0])
        items.append(f[2])
        rel.append(r)
    return pd.DataFrame({"user": users, "item": items, "relevance": rel})


def read_ranx_json(path, what="run"):
    """A ranx ``Run`` or ``Qrels`` saved as JSON (``Run.save("run.json")``): ``{query: {doc: value}}``.

    ranx writes ``to_dict()`` of the object: a mapping from query id to a
    mapping from document id to score (Run) or to integer relevance (Qrels).
    The run's name is not stored in the JSON file.

    Returns
    -------
    dict
        ``{user: {item: value}}`` with string ids, float values (run) or int
        values (qrels).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.json"
    >>> _ = p.write_text(json.dumps({"u1": {"i9": 0.9, "i3": 0.5}}))
    >>> read_ranx_json(p)
    {'u1': {'i9': 0.9, 'i3': 0.5}}
    """
    import json

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except json.JSONDecodeError as exc:
        raise _file_error(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} file {path} is not UTF-8 text (byte {exc.start})") from None
    return _check_nested(d, f"{what} file {path}", what)


def _check_nested(d, where, what):
    """``{query: {doc: number}}`` with string ids; one-line error naming the bad entry."""
    if not isinstance(d, dict) or not d:
        raise ValueError(f"{where} must map query ids to {{doc id: value}}; got "
                         f"{type(d).__name__ if not isinstance(d, dict) else 'an empty mapping'}")
    out = {}
    for q, docs in d.items():
        if not isinstance(docs, dict):
            raise ValueError(f"{where}: query {show_value(q)} must map doc ids to values; got "
                             f"{type(docs).__name__}")
        row = {}
        for doc, v in docs.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v):
                raise ValueError(f"{where}: query {show_value(q)}, doc {show_value(doc)}: the "
                                 f"{'score' if what == 'run' else 'relevance'} must be a finite "
                                 f"number; got {show_value(v)}")
            if what == "qrels" and float(v) != int(v):
                raise ValueError(f"{where}: query {show_value(q)}, doc {show_value(doc)}: the "
                                 f"relevance must be an integer; got {show_value(v)}")
            row[str(doc)] = int(v) if what == "qrels" else float(v)
        out[str(q)] = row
    return out


def _run_table(run, name=None):
    """A run (TREC/ranx file, DataFrame, dict or ranx.Run-like) as ``user, item, score, model``."""
    if isinstance(run, pd.DataFrame):
        check_columns(run, ["user", "item", "score"], "the run table")
        t = run.copy()
        if "model" not in t.columns or name is not None:
            t["model"] = "run" if name is None else str(name)
        return t[["user", "item", "score", "model"]]
    if hasattr(run, "to_dict") and not isinstance(run, dict):          # ranx.Run
        nm = name if name is not None else (getattr(run, "name", None) or "run")
        return _run_table(_check_nested(dict(run.to_dict()), "the run object", "run"), nm)
    if isinstance(run, dict):
        d = _check_nested(run, "the run mapping", "run")
        rows = [(q, doc, s) for q, docs in d.items() for doc, s in docs.items()]
        t = pd.DataFrame(rows, columns=["user", "item", "score"])
        t["model"] = "run" if name is None else str(name)
        return t
    path = os.fspath(run)
    if path.lower().endswith(".json"):
        nm = name if name is not None else os.path.splitext(os.path.basename(path))[0]
        return _run_table(read_ranx_json(path, "run"), nm)
    return read_trec_run(path, name=name)


def _qrels_table(qrels):
    """Qrels (TREC/ranx file, DataFrame, dict or ranx.Qrels-like) as ``user, item, relevance``."""
    if isinstance(qrels, pd.DataFrame):
        check_columns(qrels, ["user", "item"], "the qrels table")
        t = qrels.copy()
        if "relevance" not in t.columns:
            t["relevance"] = 1
        return t[["user", "item", "relevance"]]
    if hasattr(qrels, "to_dict") and not isinstance(qrels, dict):      # ranx.Qrels
        qrels = dict(qrels.to_dict())
    if isinstance(qrels, dict):
        d = _check_nested(qrels, "the qrels mapping", "qrels")
        return pd.DataFrame([(q, doc, r) for q, docs in d.items() for doc, r in docs.items()],
                            columns=["user", "item", "relevance"])
    path = os.fspath(qrels)
    if path.lower().endswith(".json"):
        return _qrels_table(read_ranx_json(path, "qrels"))
    return read_trec_qrels(path)


#: How :func:`ranks_from_run` reads a run: the listed items are a sample set, or all candidates.
CANDIDATES = ("sampled", "full")


def ranks_from_run(run, qrels, *, candidates="sampled", ties="pessimistic", name=None, rng=None):
    """Per-user ranks of the held-out item from a run and its qrels (TREC, ranx).

    Each user (query) must have exactly one relevant item (qrels relevance >
    0): the held-out item of a leave-one-out evaluation. Its rank is computed
    from the scores of the user's listed items with the tie rule ``ties``
    (:func:`sampling_lib.ranking.apply_ties`; the rank field of a TREC file is
    ignored, as trec_eval does, which breaks ties by document id instead).

    Whether the ranks are *sampled* or *global* is not guessed from the file:
    it is the ``candidates`` parameter.

    * ``"sampled"`` (default): the run ranks a sampled candidate set per user
      (the held-out item plus its negatives, e.g. a ``uni100`` evaluation
      exported as a run). The rank is the sampled rank r_u and the user's
      sample size n_u is the number of listed items; this table is the input
      of :func:`ranks_from_table` / :func:`sampling_lib.correct.estimate`.
    * ``"full"``: the run ranks every candidate item of the user (a full
      ranking). The rank is the global rank R_u and ``n_items`` (N_u) is the
      number of listed items. A run cut at a depth (e.g. the top 100) is not a
      full ranking: a held-out item missing from a user's list is an error.

    Parameters
    ----------
    run : path, DataFrame, dict, ranx.Run, or a list of these
        A TREC run file, a ranx JSON file (name ends in ``.json``), a table
        ``user, item, score[, model]``, a mapping ``{user: {item: score}}`` or
        any object with ``to_dict()`` giving that mapping (``ranx.Run``; its
        ``name`` becomes the model). A list holds several models' runs.
    qrels : path, DataFrame, dict or ranx.Qrels
        TREC qrels file, ranx JSON, table ``user, item[, relevance]``,
        ``{user: {item: relevance}}`` or ``ranx.Qrels``.
    candidates : {"sampled", "full"}, keyword-only
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
    name : str, optional, keyword-only
        Model name (a single run only); default the TREC tag, the ranx
        ``Run.name``, the JSON file's stem, or "run".
    rng : None, int or Generator, keyword-only
        For ``ties="random"``.

    Returns
    -------
    pandas.DataFrame
        ``user, model, rank, sample_size`` (sampled) or ``user, model, rank,
        n_items`` (full); users in qrels order. Users of the run without a
        relevant item are left out (as trec_eval and ranx do).

    Raises
    ------
    ValueError
        A user with no or several relevant items, a relevant item missing
        from the user's list, a user of the qrels missing from the run, or a
        bad file (naming the file and line).

    Examples
    --------
    >>> run = {"u1": {"a": 0.9, "b": 0.5, "c": 0.1}, "u2": {"d": 0.2, "e": 0.7, "f": 0.7}}
    >>> qrels = {"u1": {"b": 1}, "u2": {"f": 1}}
    >>> ranks_from_run(run, qrels)
      user model  rank  sample_size
    0   u1   run     2            3
    1   u2   run     2            3
    """
    from .ranking import apply_ties

    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {CANDIDATES}; got {show_value(candidates)}")
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {show_value(ties)}")
    runs = list(run) if isinstance(run, (list, tuple)) else [run]
    if not runs:
        raise ValueError("run must name at least one run")
    if name is not None and len(runs) > 1:
        raise ValueError("name= needs a single run (several runs are named by their tags/files)")
    R = pd.concat([_run_table(r, name) for r in runs], ignore_index=True)
    R["user"] = R["user"].astype(str)
    R["item"] = R["item"].astype(str)
    Q = _qrels_table(qrels)
    Q = Q.assign(user=Q["user"].astype(str), item=Q["item"].astype(str))
    Q = Q[pd.to_numeric(Q["relevance"], errors="coerce") > 0]
    if Q.empty:
        raise ValueError("qrels hold no relevant item (relevance > 0)")
    nrel = Q.groupby("user", sort=False).size()
    if (nrel > 1).any():
        u = nrel.index[np.flatnonzero(nrel.to_numpy() > 1)[0]]
        raise ValueError(f"each user needs exactly one relevant item (leave-one-out); user "
                         f"{show_value(u)} has {int(nrel[u])} in the qrels")
    held = Q.drop_duplicates("user").set_index("user")["item"]
    rng = np.random.default_rng(rng)
    out = []
    for model, g in R.groupby("model", sort=False):
        g = g[g["user"].isin(held.index)]
        missing = held.index.difference(pd.Index(g["user"].unique()))
        if missing.size:
            raise ValueError(f"run {show_value(model)} has no list for user "
                             f"{show_value(missing[0])} of the qrels ({missing.size} users missing)")
        g = g.assign(pos=g["user"].map(held))
        is_pos = (g["item"] == g["pos"]).to_numpy()
        has = pd.Series(is_pos).groupby(g["user"].to_numpy(), sort=False).any()
        if not has.all():
            u = has.index[np.flatnonzero(~has.to_numpy())[0]]
            how = ("a truncated ranking is not a full one" if candidates == "full"
                   else "the sample set must contain it")
            raise ValueError(f"run {show_value(model)}: the relevant item {show_value(held[u])} of "
                             f"user {show_value(u)} is not in the user's list ({how})")
        pos_score = g.loc[is_pos].set_index("user")["score"]
        s = g["score"].to_numpy(float)
        ps = g["user"].map(pos_score).to_numpy(float)
        gt = pd.Series(s > ps).groupby(g["user"].to_numpy(), sort=False).sum()
        eq = pd.Series((s == ps) & ~is_pos).groupby(g["user"].to_numpy(), sort=False).sum()
        size = g.groupby("user", sort=False).size()
        users = held.index
        r = apply_ties(gt.reindex(users).to_numpy(np.int64), eq.reindex(users).to_numpy(np.int64),
                       ties, rng)
        col = "sample_size" if candidates == "sampled" else "n_items"
        out.append(pd.DataFrame({"user": users, "model": str(model), "rank": r.astype(np.int64),
                                 col: size.reindex(users).to_numpy(np.int64)}))
    return pd.concat(out, ignore_index=True)


# ----------------------------------------------------------------------------
# fixed negatives files (NCF, Elliot, sampling-lab) + scores -> sampled ranks
# ----------------------------------------------------------------------------
def _parse_pair(text, path, lineno):
    """``(user,item)`` / ``(user,)`` / ``user`` -> (user, item or None), ids as strings."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")"):
        parts = [p.strip().strip("'\"") for p in t[1:-1].split(",")]
        parts = [p for p in parts if p != ""]
        if len(parts) == 2:
            return parts[0], parts[1]
        if len(parts) == 1:
            return parts[0], None
        raise _file_error(path, lineno, f"the first field must be '(user,item)' or '(user,)'; got "
                                        f"{show_value(text)}")
    if "(" in t or ")" in t or "," in t:
        raise _file_error(path, lineno, f"the first field must be '(user,item)', '(user,)' or a user "
                                        f"id; got {show_value(text)}")
    return t, None


def _negatives_lines(path, what):
    """Lines ``<pair> <tab> neg <tab> neg ...`` -> long table user, item, label (+ line)."""
    path = os.fspath(path)
    users, items, labels, lines = [], [], [], []
    seen = {}
    for k, line in _lines(path, what):
        f = line.split("\t") if "\t" in line else line.split()
        u, it = _parse_pair(f[0], path, k)
        negs = [x.strip() for x in f[1:] if x.strip()]
        if not negs:
            raise _file_error(path, k, f"user {show_value(u)} has no negative items")
        if u in seen:
            raise _file_error(path, k, f"user {show_value(u)} is listed twice (also line {seen[u]})")
        seen[u] = k
        if it is not None and it in negs:
            raise _file_error(path, k, f"the held-out item {show_value(it)} of user {show_value(u)} is "
                                       "also listed as a negative")
        if it is not None:
            users.append(u)
            items.append(it)
            labels.append(1)
            lines.append(k)
        users += [u] * len(negs)
        items += negs
        labels += [0] * len(negs)
        lines += [k] * len(negs)
    return pd.DataFrame({"user": users, "item": items, "label": labels, "line": lines})


def _add_held_out(t, held_out, path):
    """Add label-1 rows from a ``user, item`` table of held-out items (users without one: error)."""
    if held_out is None:
        if not (t["label"] == 1).any():
            raise ValueError(f"{path} does not name the held-out items (lines start with '(user,)' "
                             "or a user id): pass held_out= (a user,item table)")
        return t
    h = read_table(held_out, "held-out")
    check_columns(h, ["user", "item"], "the held-out table")
    h = pd.DataFrame({"user": h["user"].astype(str), "item": h["item"].astype(str)})
    if h["user"].duplicated().any():
        u = h["user"][h["user"].duplicated()].iloc[0]
        raise ValueError(f"the held-out table must list one item per user; user {show_value(u)} repeats")
    have = t.loc[t["label"] == 1, ["user", "item"]]
    if len(have):
        both = have.merge(h, on="user", suffixes=("", "_h"))
        bad = both[both["item"] != both["item_h"]]
        if len(bad):
            raise ValueError(f"user {show_value(bad['user'].iloc[0])}: the held-out item in {path} "
                             f"({show_value(bad['item'].iloc[0])}) differs from the held-out table "
                             f"({show_value(bad['item_h'].iloc[0])})")
    users = pd.Index(t["user"].unique())
    lacking = users.difference(pd.Index(have["user"]))
    add = h[h["user"].isin(lacking)]
    missing = lacking.difference(pd.Index(add["user"]))
    if missing.size:
        raise ValueError(f"user {show_value(missing[0])} of {path} has no held-out item in the "
                         f"held-out table ({missing.size} users)")
    clash = t[(t["label"] == 0)].merge(add, on=["user", "item"])
    if len(clash):
        raise ValueError(f"{path}, line {int(clash['line'].iloc[0])}: the held-out item "
                         f"{show_value(clash['item'].iloc[0])} of user {show_value(clash['user'].iloc[0])} "
                         "is also listed as a negative")
    first_line = t.groupby("user", sort=False)["line"].min()
    add = add.assign(label=1, line=add["user"].map(first_line).to_numpy())
    out = pd.concat([add, t], ignore_index=True)
    order = pd.Series(np.arange(users.size), index=users)
    out = out.assign(_o=out["user"].map(order), _l=-out["label"])
    return out.sort_values(["_o", "_l"], kind="stable").drop(columns=["_o", "_l"]).reset_index(drop=True)


def read_ncf_negatives(path):
    """NCF's ``*.test.negative`` file as a candidates table ``user, item, label``.

    The format of He et al.'s NCF code (``Dataset.load_negative_file``) and of
    the many repositories that reuse its data: one line per test user,
    ``(user,item)`` followed by the sampled negatives, tab-separated (99 per
    line in the published files). ``item`` is the held-out item (label 1),
    the negatives have label 0. Duplicated negatives are kept (see
    :func:`ranks_from_negatives`, ``duplicates``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ml-1m.test.negative"
    >>> _ = p.write_text("(0,25)\\t3\\t7\\t7\\n(1,133)\\t5\\t9\\t2\\n")
    >>> t = read_ncf_negatives(p)
    >>> t[t.user == "0"].to_dict("list")
    {'user': ['0', '0', '0', '0'], 'item': ['25', '3', '7', '7'], 'label': [1, 0, 0, 0]}
    """
    t = _negatives_lines(path, "NCF negatives")
    lacking = t.groupby("user", sort=False)["label"].sum()
    if (lacking == 0).any():
        u = lacking.index[np.flatnonzero(lacking.to_numpy() == 0)[0]]
        k = int(t.loc[t["user"] == u, "line"].iloc[0])
        raise _file_error(os.fspath(path), k, f"an NCF negatives line starts with '(user,item)'; user "
                                              f"{show_value(u)} has no held-out item")
    return t.drop(columns="line")


def read_elliot_negatives(path, held_out=None):
    """Elliot's negatives TSV as a candidates table ``user, item, label``.

    Elliot (``negative_sampling: strategy: fixed``, and the file its
    ``random`` strategy saves) writes one line per user: a tuple
    ``(user_id, item_test_id)`` -- or ``(user_id,)`` in the files Elliot
    itself saves -- then the negative item ids, tab-separated. When the
    tuple does not carry the held-out item, pass ``held_out`` (a ``user,
    item`` table or CSV path).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "negatives.tsv"
    >>> _ = p.write_text("(1,)\\t10\\t11\\n(2,)\\t12\\t13\\n")
    >>> t = read_elliot_negatives(p, held_out=pd.DataFrame({"user": [1, 2], "item": [5, 6]}))
    >>> t.to_dict("list")
    {'user': ['1', '1', '1', '2', '2', '2'], 'item': ['5', '10', '11', '6', '12', '13'], 'label': [1, 0, 0, 1, 0, 0]}
    """
    t = _negatives_lines(path, "Elliot negatives")
    return _add_held_out(t, held_out, os.fspath(path)).drop(columns="line")


def read_negatives(path, held_out):
    """The project's fixed negatives file (:func:`sampling_lib.sampling.sample_negatives`).

    A CSV ``user, item`` with the n - 1 negatives of each user (what
    ``sampling-lib negatives`` writes), plus the held-out items ``held_out``
    (a ``user, item`` table or CSV path: the users file given to
    ``sampling-lib negatives``). Returns the candidates table ``user, item,
    label``.

    Examples
    --------
    >>> from sampling_lib.sampling import sample_negatives
    >>> neg = sample_negatives(["a", "b"], N=50, n=4, held_out=[3, 7], rng=0)
    >>> t = read_negatives(neg, pd.DataFrame({"user": ["a", "b"], "item": [3, 7]}))
    >>> t.groupby("user").label.agg(["size", "sum"]).to_dict("list")
    {'size': [4, 4], 'sum': [1, 1]}
    """
    where = "the negatives table" if isinstance(path, pd.DataFrame) else os.fspath(path)
    df = read_table(path, "negatives")
    check_columns(df, ["user", "item"], "the negatives file")
    if df["user"].isna().any() or df["item"].isna().any():
        col = "user" if df["user"].isna().any() else "item"
        i = int(np.flatnonzero(df[col].isna().to_numpy())[0])
        raise ValueError(f"{where}: column {col!r} is blank in row {i + 1}")
    t = pd.DataFrame({"user": df["user"].astype(str).to_numpy(), "item": df["item"].astype(str).to_numpy(),
                      "label": 0, "line": np.arange(2, len(df) + 2)})
    return _add_held_out(t, held_out, where).drop(columns="line")


#: How repeated negatives of one user are treated by :func:`ranks_from_negatives`.
DUPLICATES = ("count", "collapse")


def _scores_lookup(scores, cand):
    """Scores of the candidate rows: from a callable or a ``user, item, score[, model]`` table."""
    if callable(scores):
        v = np.asarray(scores(cand["user"].to_numpy(), cand["item"].to_numpy()), dtype=float)
        if v.shape != (len(cand),):
            raise ValueError(f"the scores function must return one score per (user, item) pair "
                             f"({len(cand)}); got shape {v.shape}")
        return pd.DataFrame({"user": cand["user"], "item": cand["item"], "label": cand["label"],
                             "score": v, "model": "model"})
    df = read_table(scores, "scores")
    check_columns(df, ["user", "item", "score"], "the scores table")
    sc = pd.DataFrame({"user": df["user"].astype(str), "item": df["item"].astype(str),
                       "score": pd.to_numeric(df["score"], errors="coerce"),
                       "model": df["model"].astype(str) if "model" in df.columns else "model"})
    if "model" in df.columns and df["model"].isna().any():
        i = int(np.flatnonzero(df["model"].isna().to_numpy())[0])
        raise ValueError(f"the scores table has a blank model in row {i + 1}")
    bad = sc["score"].isna() | ~np.isfinite(sc["score"].astype(float))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"column 'score' of the scores table must hold finite numbers; got "
                         f"{show_value(df['score'].iloc[i])} in row {i + 1}")
    if sc.duplicated(["model", "user", "item"]).any():
        i = int(np.flatnonzero(sc.duplicated(["model", "user", "item"]).to_numpy())[0])
        raise ValueError(f"the scores table lists (user, item) = ({show_value(sc['user'].iloc[i])}, "
                         f"{show_value(sc['item'].iloc[i])}) twice for one model (row {i + 1})")
    out = []
    pairs = cand[["user", "item"]].drop_duplicates()
    for m, g in sc.groupby("model", sort=False):
        j = cand.merge(g, on=["user", "item"], how="left")
        if j["score"].isna().any():
            r = j[j["score"].isna()].iloc[0]
            n_miss = int(pairs.merge(g, on=["user", "item"], how="left")["score"].isna().sum())
            raise ValueError(f"the scores table has no score of model {show_value(m)} for user "
                             f"{show_value(r['user'])}, item {show_value(r['item'])} "
                             f"({n_miss} candidate pairs unscored)")
        out.append(j)
    return pd.concat(out, ignore_index=True)


def ranks_from_negatives(candidates, scores, *, duplicates="count", ties="pessimistic", rng=None):
    """Sampled ranks from a fixed candidates table and the models' scores.

    Parameters
    ----------
    candidates : DataFrame
        ``user, item, label`` (label 1 = the held-out item, 0 = a sampled
        negative), as returned by :func:`read_ncf_negatives`,
        :func:`read_elliot_negatives` or :func:`read_negatives`.
    scores : callable or DataFrame or path
        ``scores(users, items) -> array`` (one model), or a table (CSV/TSV)
        ``user, item, score[, model]`` holding a score for every candidate
        pair (ids are compared as text).
    duplicates : {"count", "collapse"}, keyword-only
        A negative listed twice for a user. ``"count"`` (default) keeps every
        draw: n_u = 1 + the number of listed negatives, and for negatives drawn
        uniformly *with* replacement the binomial kernel (``scheme="binomial"``)
        is exact. ``"collapse"`` keeps distinct items only (what RecBole's and
        NCF's own sampled metrics do): n_u = 1 + the number of distinct
        negatives; given that number, the distinct items are a uniformly random
        subset, so ``scheme="hypergeometric"`` with the per-user n_u is exact.
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
    rng : None, int or Generator, keyword-only

    Returns
    -------
    SampledRanks
        Per-user sampled ranks and sample sizes, one column per model.

    Examples
    --------
    >>> cand = pd.DataFrame({"user": ["u", "u", "u", "u"], "item": ["h", "a", "b", "b"],
    ...                      "label": [1, 0, 0, 0]})
    >>> score = {"h": 0.5, "a": 0.9, "b": 0.7}
    >>> f = lambda users, items: [score[i] for i in items]
    >>> s = ranks_from_negatives(cand, f)
    >>> s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()
    ([4], [4])
    >>> s = ranks_from_negatives(cand, f, duplicates="collapse")
    >>> s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()
    ([3], [3])
    """
    if duplicates not in DUPLICATES:
        raise ValueError(f"duplicates must be one of {DUPLICATES}; got {show_value(duplicates)}")
    if not isinstance(candidates, pd.DataFrame):
        raise TypeError(f"candidates must be a DataFrame user, item, label (see read_ncf_negatives); "
                        f"got {type(candidates).__name__}")
    check_columns(candidates, ["user", "item", "label"], "the candidates table")
    cand = pd.DataFrame({"user": candidates["user"].astype(str), "item": candidates["item"].astype(str),
                         "label": check_int_column(candidates["label"], "label")})
    if duplicates == "collapse":
        cand = cand.drop_duplicates(["user", "item"])
    table = _scores_lookup(scores, cand)
    return ranks_from_score_table(table, ties=ties, rng=rng)


# ----------------------------------------------------------------------------
# counts tables and partitioned Parquet ranks (issue 18: scale in users)
# ----------------------------------------------------------------------------
_CELL_KEYS = ("model", "n_items", "sample_size", "rank")


def _is_parquet(path):
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
    if isinstance(table, pd.DataFrame) or not _is_parquet(table):
        df = read_table(table, what)
        if "rank" not in df.columns:
            raise ValueError(f"the {what} table must have a 'rank' column; found columns "
                             f"{list(df.columns)}")
        keys = [c for c in _CELL_KEYS if c in df.columns]
        if "count" in df.columns:
            return df.groupby(keys, sort=True, as_index=False, dropna=False)["count"].sum()
        return df.groupby(keys, sort=True, dropna=False).size().rename("count").reset_index()
    path = os.fspath(table)
    from ._extras import require

    dd = require("dask.dataframe", "reading Parquet")
    require("pyarrow", "reading Parquet")
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
