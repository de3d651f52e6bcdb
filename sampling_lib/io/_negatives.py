"""Fixed negatives files (NCF, Elliot, sampling-lab) + scores -> sampled ranks."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd

from .._arrays import unique_ints
from .._validation import check_columns, check_int, check_int_column, show_value
from ._files import (LINES, PARTS, SOURCE, STAGES, file_error, id_text, read_table, row_location, source_at,
                     table_lines, table_name, table_source, text_lines)
from ._tables import _score_table_ranks, ranks_from_score_table

__all__ = ["read_ncf_negatives", "read_elliot_negatives", "read_negatives", "ranks_from_negatives",
           "DUPLICATES", "id_table", "negatives_lines", "popularity_table", "POPULARITY_NEGATIVE_COLUMNS"]


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
        raise file_error(path, lineno, f"the first field must be '(user,item)' or '(user,)'; got "
                                        f"{show_value(text)}")
    if "(" in t or ")" in t or "," in t:
        raise file_error(path, lineno, f"the first field must be '(user,item)', '(user,)' or a user "
                                        f"id; got {show_value(text)}")
    return t, None


def negatives_lines(path, what, listed_held_out="error"):
    """Lines ``<pair> <tab> neg <tab> neg ...`` -> long table user, item, label, line.

    ``listed_held_out``: a line whose held-out item is also among its
    negatives is an error ("error") or read as NCF evaluates it ("drop": the
    item is removed from the negatives; one warning counts the users).
    """
    path = os.fspath(path)
    users, items, labels, lines = [], [], [], []
    seen = {}
    dropped = []                                  # (line, user, negatives left) of "drop"
    rows = text_lines(path, what)
    for k, line in rows:
        f = line.split("\t") if "\t" in line else line.split()
        u, it = _parse_pair(f[0], path, k)
        negs = [x.strip() for x in f[1:] if x.strip()]
        if not negs:
            raise file_error(path, k, f"user {show_value(u)} has no negative items")
        if u in seen:
            raise file_error(path, k, f"user {show_value(u)} is listed twice (also line {seen[u]})")
        seen[u] = k
        if it is not None and it in negs:
            if listed_held_out == "error":
                raise file_error(path, k, f"the held-out item {show_value(it)} of user {show_value(u)} is "
                                          "also listed as a negative")
            negs = [x for x in negs if x != it]
            dropped.append((k, u, len(negs)))
            if not negs:
                raise file_error(path, k, f"user {show_value(u)} has no negative items besides its "
                                          f"held-out item {show_value(it)}")
        if it is not None:
            users.append(u)
            items.append(it)
            labels.append(1)
            lines.append(k)
        users += [u] * len(negs)
        items += negs
        labels += [0] * len(negs)
        lines += [k] * len(negs)
    if dropped:
        left = sorted({d[2] + 1 for d in dropped})
        sizes = f"n_u = {left[0]}" if len(left) == 1 else f"n_u in {left[0]}..{left[-1]}"
        warnings.warn(f"{path}: {len(dropped)} of {len(seen)} users list their held-out item among their "
                      f"negatives (first: user {show_value(dropped[0][1])}, line {dropped[0][0]}); read as "
                      f"NCF's evaluate.py scores each item once: dropped from their negatives ({sizes})",
                      UserWarning, stacklevel=3)
    out = pd.DataFrame({"user": users, "item": items, "label": labels, "line": lines})
    out.attrs[SOURCE] = path
    return out


def id_table(table, cols, what):
    """The id columns of a user table as text (:func:`id_text`); a blank id is an error naming the row."""
    df = read_table(table, what)
    check_columns(df, list(cols), table_name(df, what))
    ids = {}
    for c in cols:
        v = df[c]
        ids[c] = id_text(v)
        blank = v.isna().to_numpy() | (ids[c] == "")
        if blank.any():
            i = int(np.flatnonzero(blank)[0])
            raise ValueError(f"column {c!r} of the {what} table is blank in {row_location(df, i)}")
    return df, pd.DataFrame(ids)


def _add_held_out(t, held_out, path):
    """Add label-1 rows from a ``user, item`` table of held-out items (users without one: error)."""
    if held_out is None:
        if not (t["label"] == 1).any():
            raise ValueError(f"{path} does not name the held-out items (lines start with '(user,)' "
                             "or a user id): pass held_out= (a user,item table)")
        return t
    hdf, h = id_table(held_out, ("user", "item"), "held-out")
    if h["user"].duplicated().any():
        i = int(np.flatnonzero(h["user"].duplicated().to_numpy())[0])
        raise ValueError(f"the held-out table must list one item per user; user {show_value(h['user'].iloc[i])} "
                         f"repeats ({row_location(hdf, i)})")
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
    out = out.sort_values(["_o", "_l"], kind="stable").drop(columns=["_o", "_l"]).reset_index(drop=True)
    out.attrs[SOURCE] = t.attrs.get(SOURCE)
    return out


def read_ncf_negatives(path):
    """NCF's ``*.test.negative`` file as a candidates table ``user, item, label, line``.

    The format of He et al.'s NCF code (``Dataset.load_negative_file``) and of
    the many repositories that reuse its data: one line per test user,
    ``(user,item)`` followed by the sampled negatives, tab-separated (99 per
    line in the published files). ``item`` is the held-out item (label 1),
    the negatives have label 0, ``line`` is the line of the file. Duplicated
    negatives are kept (see :func:`ranks_from_negatives`, ``duplicates``).

    NCF drew each user's negatives excluding only its training items, so
    the held-out (test) item can be among them: 156 of the 6,040 lines of
    NCF's published ``ml-1m.test.negative`` do this. NCF's ``evaluate.py``
    scores the candidates through a dict (each item once), so such a user is
    ranked among its held-out item and its *other* negatives. Such a line
    is read the same way: the held-out item is dropped from its negatives
    (n_u = 99 instead of 100 in that file), with one warning counting the
    users.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ml-1m.test.negative"
    >>> _ = p.write_text("(0,25)\\t3\\t7\\t7\\n(1,133)\\t5\\t9\\t2\\n")
    >>> t = read_ncf_negatives(p)
    >>> t[t.user == "0"].to_dict("list")
    {'user': ['0', '0', '0', '0'], 'item': ['25', '3', '7', '7'], 'label': [1, 0, 0, 0], 'line': [1, 1, 1, 1]}
    """
    t = negatives_lines(path, "NCF negatives", listed_held_out="drop")
    lacking = t.groupby("user", sort=False)["label"].sum()
    if (lacking == 0).any():
        u = lacking.index[np.flatnonzero(lacking.to_numpy() == 0)[0]]
        k = int(t.loc[t["user"] == u, "line"].iloc[0])
        raise file_error(os.fspath(path), k, f"an NCF negatives line starts with '(user,item)'; user "
                                             f"{show_value(u)} has no held-out item")
    return t


def read_elliot_negatives(path, held_out=None):
    """Elliot's negatives TSV as a candidates table ``user, item, label, line``.

    Elliot (``negative_sampling: strategy: fixed``, and the file its
    ``random`` strategy saves) writes one line per user: a tuple
    ``(user_id, item_test_id)`` -- or ``(user_id,)`` in the files Elliot
    itself saves -- then the negative item ids, tab-separated. When the
    tuple does not carry the held-out item, pass ``held_out`` (a ``user,
    item`` table or CSV path). Elliot draws negatives outside the user's
    training and test items, so a held-out item listed among the negatives
    is an error. ``line`` is the line of the file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "negatives.tsv"
    >>> _ = p.write_text("(1,)\\t10\\t11\\n(2,)\\t12\\t13\\n")
    >>> t = read_elliot_negatives(p, held_out=pd.DataFrame({"user": [1, 2], "item": [5, 6]}))
    >>> t.drop(columns="line").to_dict("list")
    {'user': ['1', '1', '1', '2', '2', '2'], 'item': ['5', '10', '11', '6', '12', '13'], 'label': [1, 0, 0, 1, 0, 0]}
    """
    t = negatives_lines(path, "Elliot negatives")
    return _add_held_out(t, held_out, os.fspath(path))


def read_negatives(path, held_out):
    """The project's fixed negatives file (:func:`sampling_lib.sampling.sample_negatives`).

    A CSV ``user, item`` with the n - 1 negatives of each user (what
    ``sampling-lib negatives`` writes), plus the held-out items ``held_out``
    (a ``user, item`` table or CSV path: the users file given to
    ``sampling-lib negatives``). Returns the candidates table ``user, item,
    label`` (+ ``line``, the line of the file, when ``path`` is a file).

    Popularity-sampled negatives (a ``q`` column, as ``sampling-lib
    negatives --item-weights`` writes) are refused: their sampled ranks alone
    do not give the metric, their estimators need each negative's ``q``
    (:func:`popularity_table`). Any other column than ``user, item`` is
    refused too: nothing of the file goes unread.

    Examples
    --------
    >>> from sampling_lib.sampling import sample_negatives
    >>> neg = sample_negatives(["a", "b"], N=50, n=4, held_out=[3, 7], rng=0)
    >>> t = read_negatives(neg, pd.DataFrame({"user": ["a", "b"], "item": [3, 7]}))
    >>> t.groupby("user").label.agg(["size", "sum"]).to_dict("list")
    {'size': [4, 4], 'sum': [1, 1]}
    """
    return _negatives_table(path, held_out)


#: The columns ``sampling-lib negatives --item-weights`` writes with each popularity-sampled negative: its draw
#: probability q, the user's number of candidates, and whether the draws were with replacement.
POPULARITY_NEGATIVE_COLUMNS = ("q", "n_candidates", "replace")


def _negatives_table(path, held_out, keep=()):
    """:func:`read_negatives`, keeping the columns ``keep`` on the negatives' rows (empty on the held-out's)."""
    where = "the negatives table" if isinstance(path, pd.DataFrame) else os.fspath(path)
    df, ids = id_table(path, ("user", "item"), "negatives")
    extra = [c for c in df.columns if c not in ("user", "item", *keep)]
    if extra:
        if "q" in extra:
            raise ValueError(f"{where} holds popularity-sampled negatives (column q): their ranks alone do not "
                             "give the metric; estimate them with their q (estimate/compare --scores, "
                             "io.popularity_table)")
        raise ValueError(f"{where} holds the columns user, item (one row per negative); column(s) {extra} are "
                         "not read")
    lines = table_lines(df)
    t = pd.DataFrame({"user": ids["user"].to_numpy(), "item": ids["item"].to_numpy(), "label": 0,
                      "line": np.arange(1, len(df) + 1) if lines is None else lines})
    for c in keep:
        t[c] = df[c].to_numpy()
    out = _add_held_out(t, held_out, where)
    if lines is None:
        return out.drop(columns="line")
    out.attrs[SOURCE] = where
    return out


def popularity_table(negatives, held_out, scores):
    """A popularity-sampled negatives file with its scores, as the long scores table of the popularity estimators.

    ``sampling-lib negatives --item-weights`` (RecBole ``popN``) writes each
    user's negatives with their draw probabilities: ``user, item, q,
    n_candidates, replace``. Scored by the framework, the file, the held-out
    items and the scores make the table that
    :func:`sampling_lib.popularity.popularity_logs_from_table` and
    ``estimate(table, None)`` read: one row per candidate and model, ``user,
    item, label, score, model`` with ``q, n_candidates, replace`` on the
    negatives' rows (AP25 eq 1; notebook 11).

    Parameters
    ----------
    negatives : path or DataFrame
        ``user, item, q[, n_candidates][, replace]``: one row per drawn
        negative (a negative drawn twice, twice).
    held_out : path or DataFrame
        ``user, item``: each user's held-out item.
    scores : path, DataFrame or callable
        ``user, item, score[, model]``: a score of every candidate pair (as
        for :func:`ranks_from_negatives`; a pair drawn twice may be listed
        twice with the same score).

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> from sampling_lib.popularity import popularity_weights, sample_popularity_negatives
    >>> w = popularity_weights([0, 0, 0, 1, 2, 2, 3], 1.0)
    >>> neg = sample_popularity_negatives(["a", "b"], w, 4, held_out=[0, 3], rng=0)
    >>> t = popularity_table(neg, pd.DataFrame({"user": ["a", "b"], "item": [0, 3]}),
    ...                      lambda users, items: [float(i) for i in items])
    >>> t.groupby("user").label.agg(["size", "sum"]).to_dict("list")
    {'size': [4, 4], 'sum': [1, 1]}
    """
    df = read_table(negatives, "negatives")
    check_columns(df, ["user", "item", "q"], table_name(df, "negatives"))
    cand = _negatives_table(df, held_out, keep=[c for c in POPULARITY_NEGATIVE_COLUMNS if c in df.columns])
    out = _scores_lookup(scores, cand)
    if "n_items" in out.columns:
        raise ValueError("the scores table's n_items column does not apply to popularity-sampled negatives: "
                         "each user's candidates come from the negatives' n_candidates column")
    # the built table's rows name the negatives file's lines in errors (a held-out row: its user's first
    # line); the file's own SOURCE would have them re-read as rows of a CSV that this table is not
    src, lines = table_source(df), out["line"].to_numpy() if "line" in out.columns else None
    out = out.drop(columns=[c for c in ("line",) if c in out.columns])
    out.attrs = {} if src is None or lines is None else {LINES: (src, lines)}
    return out


#: How repeated negatives of one user are treated by :func:`ranks_from_negatives`.
DUPLICATES = ("count", "collapse")


def _joint_codes(a, b):
    """Integer codes of two text id columns over the ids of both, and their number: each column factorized
    as it is (no Python string per row), then its few distinct ids matched."""
    ca, ua = pd.factorize(a, sort=False)
    cb, ub = pd.factorize(b, sort=False)
    ua, ub = pd.Index(np.asarray(ua, dtype=object)), pd.Index(np.asarray(ub, dtype=object))
    both = ua.append(ub).unique()
    return (both.get_indexer(ua)[ca].astype(np.int64), both.get_indexer(ub)[cb].astype(np.int64), len(both))


def pair_key(t):
    """The (user, item) pairs of one table as one int64 key per row (each column factorized as it is: no
    Python string per row); equal pairs, equal keys."""
    uc, _ = pd.factorize(t["user"])
    ic, iu = pd.factorize(t["item"])
    return uc.astype(np.int64) * max(len(iu), 1) + ic


def _pair_keys(a, b):
    """The (user, item) pairs of two tables as one int64 key each, over the ids of both (:func:`_joint_codes`):
    equal pairs, equal keys."""
    ua, ub, _ = _joint_codes(a["user"], b["user"])
    ia, ib, n_i = _joint_codes(a["item"], b["item"])
    return ua * max(n_i, 1) + ia, ub * max(n_i, 1) + ib


def _scores_lookup(scores, cand, where=lambda r: ""):
    """Scores of the candidate rows: from a callable or a ``user, item, score[, model][, n_items]`` table
    (``where(r)``: where candidate row r was read, for the error of an unscored candidate)."""
    if callable(scores):
        v = np.asarray(scores(cand["user"].to_numpy(), cand["item"].to_numpy()), dtype=float)
        if v.shape != (len(cand),):
            raise ValueError(f"the scores function must return one score per (user, item) pair "
                             f"({len(cand)}); got shape {v.shape}")
        return cand.assign(score=v, model="model")
    df = read_table(scores, "scores")
    check_columns(df, ["user", "item", "score"], table_name(df, "scores"))
    extra = [c for c in df.columns if c not in ("user", "item", "score", "model", "n_items")]
    if extra:
        raise ValueError(f"the scores table holds user, item, score[, model][, n_items]; column(s) "
                         f"{extra} are not read")
    ids = ("user", "item") + (("model",) if "model" in df.columns else ())
    df, idt = id_table(df, ids, "scores")
    at = lambda i: row_location(df, i)  # noqa: E731
    sc = pd.DataFrame({"user": idt["user"], "item": idt["item"],
                       "score": pd.to_numeric(df["score"], errors="coerce").to_numpy(),
                       "model": idt["model"] if "model" in df.columns else "model"})
    if "n_items" in df.columns:
        sc["n_items"] = check_int_column(df["n_items"], "n_items", at).to_numpy()
    bad = sc["score"].isna() | ~np.isfinite(sc["score"].astype(float))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"column 'score' of the scores table must hold finite numbers; got "
                         f"{show_value(df['score'].iloc[i])} in {at(i)}")
    # (user, item) pairs as one int64 key each (factorized over candidates and scores together): duplicate
    # checks and lookups on integers instead of text (seconds at 10^6-10^7 rows)
    ckey, skey = _pair_keys(cand, sc)
    mcode, models = pd.factorize(sc["model"], sort=False)
    models = np.asarray(models, dtype=object)
    mkey = pd.Series(skey * len(models) + mcode)          # (pair, model)
    orig = np.arange(len(sc))
    if mkey.duplicated().any():
        # a pair scored again with the same score is no conflict: several files (one per stage), or one file
        # with a row per candidate row when the negatives were drawn with replacement (a repeated item)
        again = pd.DataFrame({"k": mkey, "s": sc["score"].to_numpy(float)}).duplicated().to_numpy()
        if again.any():
            keep = ~again
            sc, skey, mcode, orig = sc[keep].reset_index(drop=True), skey[keep], mcode[keep], orig[keep]
            mkey = pd.Series(mkey.to_numpy()[keep])
        dup = mkey.duplicated(keep=False).to_numpy()
        if dup.any():
            i, j = np.flatnonzero(dup)[:2]
            agree = "the scores files must agree where they overlap" if df.attrs.get(PARTS) else "one score per pair"
            raise ValueError(f"(user, item) = ({show_value(sc['user'].iloc[i])}, {show_value(sc['item'].iloc[i])}) "
                             f"of model {show_value(sc['model'].iloc[i])} has two different scores "
                             f"({at(orig[i])}, {at(orig[j])}): {agree}")
    cset = pd.Index(unique_ints(ckey))
    unused = ~pd.Index(skey).isin(cset)
    if unused.any():
        i = int(np.flatnonzero(unused)[0])
        warnings.warn(f"{int(unused.sum())} rows of the scores table score no candidate of the negatives file(s) "
                      f"(e.g. user {show_value(sc['user'].iloc[i])}, item {show_value(sc['item'].iloc[i])}, "
                      f"{at(orig[i])}): not used. A stage's negatives file left out?", UserWarning, stacklevel=3)
    out = []
    extra_cols = [c for c in sc.columns if c not in ("user", "item", "model")]
    for j, m in enumerate(models):
        rows = np.flatnonzero(mcode == j)
        pos = pd.Index(skey[rows]).get_indexer(ckey)
        if (pos < 0).any():
            r = int(np.flatnonzero(pos < 0)[0])
            n_miss = int((~cset.isin(skey[rows])).sum())
            raise ValueError(f"the scores table has no score of model {show_value(m)} for user "
                             f"{show_value(cand['user'].iloc[r])}, item {show_value(cand['item'].iloc[r])}"
                             f"{where(r)} ({n_miss} candidate pairs unscored)")
        t = cand.reset_index(drop=True).copy()
        for c in extra_cols:
            t[c] = sc[c].to_numpy()[rows[pos]]
        t["model"] = m
        out.append(t)
    return pd.concat(out, ignore_index=True)


def ranks_from_negatives(candidates, scores, *, duplicates="count", ties="pessimistic", n=None, rng=None):
    """Sampled ranks from a fixed candidates table and the models' scores.

    Parameters
    ----------
    candidates : DataFrame
        ``user, item, label`` (label 1 = the held-out item, 0 = a sampled
        negative), as returned by :func:`read_ncf_negatives`,
        :func:`read_elliot_negatives` or :func:`read_negatives` (their
        ``line`` column names the file's line in errors).
    scores : callable or DataFrame or path
        ``scores(users, items) -> array`` (one model), or a table (CSV/TSV)
        ``user, item, score[, model][, n_items]`` holding a score for every
        candidate pair (ids are compared as text). ``n_items`` is the user's
        number of candidates N_u (the same on all its rows); the result then
        carries the per-user N_u.
    duplicates : {"count", "collapse"}, keyword-only
        A negative listed twice for a user. ``"count"`` (default) keeps every
        draw: n_u = 1 + the number of listed negatives, and for negatives drawn
        uniformly *with* replacement the binomial kernel (``scheme="binomial"``)
        is exact. ``"collapse"`` keeps distinct items only (what RecBole's and
        NCF's own sampled metrics do): n_u = 1 + the number of distinct
        negatives; given that number, the distinct items are a uniformly random
        subset, so ``scheme="hypergeometric"`` with the per-user n_u is exact.
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
    n : int, optional, keyword-only
        The sample size every user must have (after ``duplicates``): a user
        with another number of candidates is an error naming the user and its
        line of the file. Without ``n`` the sizes may vary by user.
    rng : None, int or Generator, keyword-only

    Returns
    -------
    SampledRanks
        Per-user sampled ranks and sample sizes (and N_u with an ``n_items``
        column of the scores), one column per model. Candidates of several
        stages (a ``stage`` column, as :func:`read_stages` returns) also give
        each user's rank within the first stage's set (``first_ranks``), which
        pairs several models' first stages for :func:`sampling_lib.design.plan`
        when it re-plans on the merged ranks. Not with ``ties="random"``: the
        first stage's ties would be drawn apart from the merged set's, and the
        two ranks would not nest.

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
    cand = pd.DataFrame({"user": id_text(candidates["user"]), "item": id_text(candidates["item"]),
                         "label": check_int_column(candidates["label"], "label").to_numpy()})
    staged = "stage" in candidates.columns and int(candidates["stage"].max()) > 1
    if staged:
        cand["stage"] = check_int_column(candidates["stage"], "stage").to_numpy()
    if duplicates == "collapse":
        cand = cand.drop_duplicates(["user", "item"])
    if n is not None:
        n = check_int(n, "n", low=2)
        size = cand.groupby("user", sort=False).size()
        if (size != n).any():
            u = size.index[np.flatnonzero((size != n).to_numpy())[0]]
            src = candidates.attrs.get(SOURCE)
            where = ""
            if "line" in candidates.columns:
                k = int(candidates.loc[id_text(candidates["user"]) == u, "line"].min())
                where = f" ({src}, line {k})" if src else f" (line {k})"
            raise ValueError(f"user {show_value(u)}{where} has {int(size[u])} candidates (its held-out item "
                             f"and {int(size[u]) - 1} {'' if duplicates == 'count' else 'distinct '}negatives), "
                             f"not the sample size n={n} (--sample-size); omit n to use each user's own size")
    def where(r):
        """Where candidate row r (of ``cand``) was read: " (<file>, line <k>)", or "" without lines."""
        if "line" not in candidates.columns:
            return ""
        pos = int(cand.index[r])
        line, names = int(candidates["line"].iloc[pos]), candidates.attrs.get(STAGES)
        src = (names[int(candidates["stage"].iloc[pos]) - 1] if names and "stage" in candidates.columns
               else table_source(candidates))
        return f" ({source_at(src, line)})"

    table = _scores_lookup(scores, cand, where)
    table.attrs = {}        # a table built here: its errors name its rows, not the negatives file's records
    if not staged:
        return ranks_from_score_table(table, ties=ties, rng=rng)
    first = table.pop("stage").to_numpy() == 1
    return _score_table_ranks(table, user_col="user", score_col="score", label_col="label", model_col="model",
                              items_col="n_items", ties=ties, n=None, rng=rng,
                              first=None if ties == "random" else first)
