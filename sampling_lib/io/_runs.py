"""TREC and ranx runs and qrels -> per-user ranks of the held-out item."""
from __future__ import annotations

import os

import warnings

import numpy as np
import pandas as pd

from .._validation import check_columns, check_int, show_value
from ..ranking import TIE_RULES
from ._files import check_encoding, check_path, file_error, float_field, id_text, not_utf8, text_lines

__all__ = ["read_trec_run", "read_trec_qrels", "read_ranx_json", "ranks_from_run", "CANDIDATES",
           "RUN_FORMATS"]


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
    return _trec_run(path, name).drop(columns="line")


def _trec_run(path, name=None):
    """:func:`read_trec_run` plus the ``line`` of each row (for the errors of :func:`ranks_from_run`)."""
    path = os.fspath(path)
    users, items, scores, tags, lines = [], [], [], [], []
    seen = {}
    for k, line in text_lines(path, "run"):
        f = line.split()
        if len(f) != 6:
            raise file_error(path, k, f"a TREC run line has 6 fields 'query Q0 doc rank score "
                                      f"tag'; got {len(f)}: {show_value(line)}")
        key = (f[5] if name is None else name, f[0], f[2])
        if key in seen:
            raise file_error(path, k, f"document {show_value(f[2])} of query {show_value(f[0])} "
                                      f"is listed twice (also line {seen[key]})")
        seen[key] = k
        users.append(f[0])
        items.append(f[2])
        scores.append(float_field(f[4], path, k, "the score (field 5)"))
        tags.append(f[5] if name is None else str(name))
        lines.append(k)
    out = pd.DataFrame({"user": users, "item": items, "score": scores, "model": tags, "line": lines})
    out.attrs["sampling_lib.run_file"] = path
    return out


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
    for k, line in text_lines(path, "qrels"):
        f = line.split()
        if len(f) != 4:
            raise file_error(path, k, f"a TREC qrels line has 4 fields 'query iteration doc "
                                       f"relevance'; got {len(f)}: {show_value(line)}")
        try:
            r = int(f[3])
        except ValueError:
            raise file_error(path, k, f"relevance (field 4) must be an integer; got "
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
    check_path(path, what)
    check_encoding(path, what)

    def no_repeats(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) < len(keys):
            k = next(k for k in keys if keys.count(k) > 1)
            raise _Repeated(k)
        return dict(pairs)

    try:
        with open(path, encoding="utf-8-sig") as fh:
            d = json.load(fh, object_pairs_hook=no_repeats)
    except json.JSONDecodeError as exc:
        raise file_error(path, exc.lineno, f"not valid JSON ({exc.msg}): a ranx {what} file is the JSON "
                                           f"that ranx's {what.capitalize()}.save('x.json') writes") from None
    except UnicodeDecodeError:
        raise not_utf8(path, what) from None
    except RecursionError:
        raise ValueError(f"{what} file {path} nests too deeply to be a ranx {what}") from None
    except _Repeated as exc:
        raise ValueError(f"{what} file {path}: the key {show_value(exc.args[0])} appears twice in one "
                         "mapping (JSON keeps only the last value)") from None
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


class _Repeated(Exception):
    """A key repeated in one JSON object."""


#: File formats of a run given by path: TREC lines or ranx's JSON (:func:`ranks_from_run`, ``file_format``).
RUN_FORMATS = ("trec", "ranx")


def _run_table(run, name=None, file_format=None):
    """A run (TREC/ranx file, DataFrame, dict or ranx.Run-like) as ``user, item, score, model[, line]``.

    The table's ``attrs["sampling_lib.run_file"]`` names the file it was read from.
    """
    if isinstance(run, pd.DataFrame):
        check_columns(run, ["user", "item", "score"], "the run table")
        t = run.copy()
        if "model" not in t.columns or name is not None:
            t["model"] = "run" if name is None else str(name)
        t = t[["user", "item", "score", "model"]]
        dup = pd.DataFrame({"m": id_text(t["model"]), "u": id_text(t["user"]),
                            "i": id_text(t["item"])}).duplicated()
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise ValueError(f"the run table lists item {show_value(t['item'].iloc[i])} of user "
                             f"{show_value(t['user'].iloc[i])} twice for model "
                             f"{show_value(t['model'].iloc[i])} (row {i + 1})")
        return t
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
    fmt = file_format if file_format is not None else ("ranx" if path.lower().endswith(".json") else "trec")
    if fmt == "ranx":
        nm = name if name is not None else os.path.splitext(os.path.basename(path))[0]
        t = _run_table(read_ranx_json(path, "run"), nm)
        t.attrs["sampling_lib.run_file"] = path
        return t
    return _trec_run(path, name=name)


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


def ranks_from_run(run, qrels, *, candidates="sampled", ties="pessimistic", name=None, n=None,
                   file_format=None, rng=None):
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
        ``Run.name``, the JSON file's stem, or "run". Two runs (files) with
        the same name are an error: their lines would be merged into one model.
    n : int, optional, keyword-only
        With ``candidates="sampled"``: the sample size every user's list must
        have; a user listing another number of items is an error naming the
        user, the file and the user's first line. Without ``n`` the sizes may
        vary by user (adaptive or two-stage designs).
    file_format : {"trec", "ranx"}, optional, keyword-only
        How run files are read; default by name (``.json``: ranx, otherwise
        TREC). Given, a file whose content is not of that format is an error.
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
        from the user's list, a user of the qrels missing from the run, two
        runs with one name, a list of another size than ``n``, or a bad file
        (naming the file and line). Users of the run without a relevant item
        are left out with a warning.

    Examples
    --------
    >>> run = {"u1": {"a": 0.9, "b": 0.5, "c": 0.1}, "u2": {"d": 0.2, "e": 0.7, "f": 0.7}}
    >>> qrels = {"u1": {"b": 1}, "u2": {"f": 1}}
    >>> ranks_from_run(run, qrels)
      user model  rank  sample_size
    0   u1   run     2            3
    1   u2   run     2            3
    """
    from ..ranking import apply_ties

    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {CANDIDATES}; got {show_value(candidates)}")
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {show_value(ties)}")
    if file_format is not None and file_format not in RUN_FORMATS:
        raise ValueError(f"file_format must be one of {RUN_FORMATS}; got {show_value(file_format)}")
    if n is not None:
        if candidates != "sampled":
            raise ValueError("n (the sample size) applies to candidates='sampled' only; a full ranking "
                             "lists all N_u candidates of each user")
        n = check_int(n, "n", low=2)
    runs = list(run) if isinstance(run, (list, tuple)) else [run]
    if not runs:
        raise ValueError("run must name at least one run")
    if name is not None and len(runs) > 1:
        raise ValueError("name= needs a single run (several runs are named by their tags/files)")
    tables = [_run_table(r, name, file_format) for r in runs]
    owner = {}                                      # model -> the run it came from
    for k, t in enumerate(tables):
        src = t.attrs.get("sampling_lib.run_file", f"run #{k + 1}")
        for m in pd.unique(t["model"].astype(str)):
            if m in owner:
                raise ValueError(f"{owner[m]} and {src} both hold the run {show_value(m)} (TREC: the tag, "
                                 "field 6; ranx: the file's name): each model needs its own name, or "
                                 "their lines would merge into one model")
            owner[m] = src
    R = pd.concat(tables, ignore_index=True)
    if "line" not in R.columns:
        R["line"] = np.nan
    R["model"] = R["model"].astype(str)
    R["user"] = id_text(R["user"])
    R["item"] = id_text(R["item"])
    Q = _qrels_table(qrels)
    Q = Q.assign(user=id_text(Q["user"]), item=id_text(Q["item"]))
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
        extra = pd.unique(g.loc[~g["user"].isin(held.index), "user"])
        if extra.size:
            warnings.warn(f"run {show_value(model)} ({owner[model]}) lists {extra.size} user(s) without a "
                          f"relevant item in the qrels, e.g. {show_value(extra[0])}: left out, as "
                          "trec_eval and ranx do", UserWarning, stacklevel=2)
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
        if n is not None and (size != n).any():
            u = size.index[np.flatnonzero((size != n).to_numpy())[0]]
            first = g.loc[g["user"] == u, "line"].min()
            where = owner[model] + ("" if pd.isna(first) else f", line {int(first)}")
            raise ValueError(f"user {show_value(u)} of run {show_value(model)} lists {int(size[u])} items "
                             f"({where}), not the sample size n={n} (--sample-size); omit n to use "
                             "each user's own size")
        users = held.index
        r = apply_ties(gt.reindex(users).to_numpy(np.int64), eq.reindex(users).to_numpy(np.int64),
                       ties, rng)
        col = "sample_size" if candidates == "sampled" else "n_items"
        out.append(pd.DataFrame({"user": users, "model": str(model), "rank": r.astype(np.int64),
                                 col: size.reindex(users).to_numpy(np.int64)}))
    return pd.concat(out, ignore_index=True)

