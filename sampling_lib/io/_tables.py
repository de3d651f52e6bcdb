"""Ranks and scores tables -> :class:`SampledRanks` (per-user sampled ranks per model)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import check_columns, check_int, check_int_column, check_read_columns, show_value
from ..ranking import TIE_RULES, apply_ties
from ._files import read_table, row_location, table_name, table_source

__all__ = ["SampledRanks", "ranks_from_table", "ranks_from_score_table", "TABLE_LAYOUTS", "table_layout",
           "check_scores_and_labels"]

#: The documented layouts of a table of sampled results: (required columns, optional columns).
#: A table given to ``sampling-lib estimate`` / ``compare`` must match exactly one of them
#: (:func:`table_layout`); ``popularity`` is the scores table of popularity-sampled negatives
#: (:func:`sampling_lib.popularity.popularity_logs_from_table`).
TABLE_LAYOUTS = {
    "ranks": (("user", "rank"), ("model", "sample_size", "n_items", "first_rank", "scheme")),
    "counts": (("rank", "count"), ("model", "sample_size", "n_items")),
    "scores": (("user", "score", "label"), ("model", "item", "n_items")),
    "popularity": (("user", "item", "score", "label"), ("model", "q", "n_candidates", "replace")),
    "cascade": (("user", "score", "label", "stratum"), ("model", "item", "n_items")),
    "cascade ranks": (("user", "head", "head_rank"), ("tail_size", "tail_rank", "model", "n_items")),
}


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
    first_ranks : pandas.DataFrame or None
        Same shape: for the merged ranks of a nested design, each user's rank
        within the first stage's set (column ``first_rank``). It tells
        :func:`sampling_lib.design.plan` how several models' first stages
        pair up. The estimators do not use it: given the merged (n_u, r_u),
        the earlier ranks carry no information about R (the nested design's
        likelihood, :func:`sampling_lib.design.design_law`). None when not
        given.
    scheme : {"binomial", "hypergeometric"} or None
        How the negatives were drawn, when the input records it (the
        ``scheme`` column that ``sampling-lib ranks --scheme`` writes): with
        replacement (binomial) or distinct items (hypergeometric). The
        estimators' kernel follows it (:func:`sampling_lib.correct.estimate`,
        ``scheme``). None when the input does not say.
    """

    ranks: pd.DataFrame
    sample_sizes: pd.DataFrame | None
    n_items: pd.DataFrame | None = None
    first_ranks: pd.DataFrame | None = None
    scheme: str | None = None

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

    def with_n_items(self, table):
        """A copy with per-user candidate counts N_u read from a table ``user, n_items[, model]``.

        Without a ``model`` column a user's N_u applies to every model. Ids
        are compared as text (:func:`sampling_lib.io.id_text`); every user
        with a rank needs an N_u (an error names the first one without), and
        N_u must be at least the user's sample size. Users of the table
        without a rank are not used.

        Examples
        --------
        >>> s = ranks_from_table(pd.DataFrame({"user": [1, 2], "rank": [3, 1], "sample_size": [10, 10]}))
        >>> s.with_n_items(pd.DataFrame({"user": ["1", "2", "3"], "n_items": [50, 60, 70]})
        ...                ).items_for_model("model").tolist()
        [50, 60]
        """
        from ._files import id_text

        if self.n_items is not None:
            raise ValueError("these ranks already carry per-user n_items (an n_items column): give N_u once")
        df = read_table(table, "n_items")
        check_columns(df, ["user", "n_items"], table_name(df, "n_items"))
        extra = [c for c in df.columns if c not in ("user", "n_items", "model")]
        if extra:
            raise ValueError(f"the n_items table holds user, n_items[, model]; column(s) {extra} are not read")
        at = _where(df)
        _check_not_blank(df, ["user"] + (["model"] if "model" in df.columns else []), "n_items")
        items = check_int_column(df["n_items"], "n_items", at).to_numpy()
        if (items < 2).any():
            i = int(np.flatnonzero(items < 2)[0])
            raise ValueError(f"column 'n_items' must be >= 2; got {items[i]} in {at(i)}")
        key = pd.DataFrame({"user": id_text(df["user"])})
        if "model" in df.columns:
            key["model"] = id_text(df["model"])
        dup = key.duplicated()
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise ValueError(f"the n_items table lists user {show_value(key['user'].iloc[i])} twice"
                             f"{' for one model' if 'model' in key else ''} ({at(i)})")
        lookup = pd.Series(items, index=pd.MultiIndex.from_frame(key) if "model" in key else
                           pd.Index(key["user"]))
        users = id_text(self.ranks.index)
        cols = {}
        for m in self.ranks.columns:
            if "model" in key:                 # the lookup's levels are (user, model)
                want = pd.MultiIndex.from_arrays([users, np.full(len(users), id_text([m])[0], dtype=object)])
            else:
                want = pd.Index(users)
            got = lookup.reindex(want).to_numpy(dtype=float)
            has_rank = self.ranks[m].notna().to_numpy()
            missing = has_rank & np.isnan(got)
            if missing.any():
                u = self.ranks.index[np.flatnonzero(missing)[0]]
                raise ValueError(f"the n_items table has no n_items for user {show_value(u)}"
                                 f"{f' of model {show_value(m)}' if 'model' in key else ''} "
                                 f"({int(missing.sum())} users without)")
            if self.sample_sizes is not None:
                n_u = self.sample_sizes[m].to_numpy(dtype=float)
                small = has_rank & (got < n_u)
                if small.any():
                    k = int(np.flatnonzero(small)[0])
                    raise ValueError(f"user {show_value(self.ranks.index[k])} has n_items {int(got[k])} in "
                                     f"the n_items table, fewer than its sample size {int(n_u[k])}")
            cols[m] = pd.array(np.where(has_rank, got, np.nan), dtype="Float64").astype("Int64")
        NI = pd.DataFrame(cols, index=self.ranks.index)
        return SampledRanks(self.ranks, self.sample_sizes, NI, self.first_ranks, self.scheme)

    def items_for_model(self, model):
        """Per-user candidate counts N_u of one model (users with a rank only), or None."""
        return self._aligned(self.n_items, model)

    def first_for_model(self, model):
        """Per-user ranks within the first stage's set of one model (users with a rank only), or None."""
        return self._aligned(self.first_ranks, model)

    def _aligned(self, frame, model):
        if model not in self.ranks.columns:
            raise ValueError(f"model must be one of {self.models}; got {model!r}")
        if frame is None:
            return None
        keep = self.ranks[model].notna().to_numpy()
        return frame[model].to_numpy()[keep].astype(np.int64)



def _layout_text(name):
    req, opt = TABLE_LAYOUTS[name]
    return f"{name} ({', '.join(req)}{''.join(f'[, {c}]' for c in opt)})"


def table_layout(table, *, popularity=False):
    """The documented layout a table's columns match: "ranks", "counts", "scores", "popularity", "cascade" or
    "cascade ranks".

    A layout matches when the table has its required columns and no column
    outside its required and optional ones (:data:`TABLE_LAYOUTS`). A table
    that matches none -- e.g. ``user, rank, count``, which could be read as a
    ranks table (each row one user) or as a counts table (each row ``count``
    users) -- is an error naming its columns and the layouts, never a guess.
    ``popularity=True`` (popularity-sampled negatives: item weights given)
    reads ``user, item, score, label`` as a popularity scores table, which
    otherwise is a scores table. A ``stratum`` column ("head": a retriever's top m, "tail": a random
    negative) makes a scores table a cascade's (:mod:`sampling_lib.cascade`); ``head`` and ``head_rank``
    columns make a cascade's rank table (one row per user, :data:`sampling_lib.cascade.RANK_COLUMNS`).

    Examples
    --------
    >>> table_layout(pd.DataFrame(columns=["user", "model", "rank"]))
    'ranks'
    >>> table_layout(pd.DataFrame(columns=["user", "rank", "count"]))
    Traceback (most recent call last):
    ...
    ValueError: the table's columns ['user', 'rank', 'count'] match none of the documented layouts: ranks (user, rank[, model][, sample_size][, n_items][, first_rank][, scheme]), counts (rank, count[, model][, sample_size][, n_items]), scores (user, score, label[, model][, item][, n_items]), cascade (user, score, label, stratum[, model][, item][, n_items]), cascade ranks (user, head, head_rank[, tail_size][, tail_rank][, model][, n_items]) (with 'count' and 'user' both present, a row could be one user or 'count' users)
    """
    df = read_table(table, "ranks")
    cols = [str(c) for c in df.columns]
    names = ("popularity",) if popularity else ("ranks", "counts", "scores", "popularity", "cascade", "cascade ranks")
    fits = [nm for nm in names if set(TABLE_LAYOUTS[nm][0]) <= set(cols)
            and set(cols) <= set(TABLE_LAYOUTS[nm][0]) | set(TABLE_LAYOUTS[nm][1])]
    if fits == ["scores", "popularity"] or fits == ["popularity", "scores"]:
        fits = ["scores"]
    if len(fits) == 1:
        return fits[0]
    src = table_source(df)
    where = f"{src}: the columns" if src else "the table's columns"
    hint = ""
    if {"user", "count"} <= set(cols):
        hint = " (with 'count' and 'user' both present, a row could be one user or 'count' users)"
    elif "q" in cols and not popularity:
        hint = " (a popularity scores table needs user, item, score, label and q with n_candidates)"
    shown = [_layout_text(nm) for nm in names if nm != "popularity" or popularity]
    raise ValueError(f"{where} {cols} match none of the documented layouts: {', '.join(shown)}{hint}")


def _check_not_blank(df, cols, what):
    """A blank id cell is an error (it would become a user or model 'nan')."""
    for c in cols:
        v = df[c]
        blank = v.isna() | (v.astype(str).str.strip() == "")
        if blank.any():
            i = int(np.flatnonzero(blank.to_numpy())[0])
            raise ValueError(f"column {c!r} of the {what} table is blank in {row_location(df, i)}")


def _where(df):
    return lambda i: row_location(df, i)


def _check_first_rank(first, rank, at, first_col="first_rank", rank_col="rank"):
    """``first_rank`` (the rank within a nested design's first stage) lies in 1..rank: the sets are nested
    (:func:`ranks_from_table`, and the counts path of :func:`sampling_lib.io.counts_table`)."""
    first, rank = np.asarray(first), np.asarray(rank)
    bad = (first < 1) | (first > rank)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"column {first_col!r} (the rank within the first stage's set) must lie in 1..{rank_col} "
                         f"(the sets are nested); {at(i)} has {first_col} {first[i]} and {rank_col} {rank[i]}")


def ranks_from_table(table, *, user_col="user", rank_col="rank", size_col="sample_size",
                     model_col="model", n=None, items_col="n_items", N=None, first_col="first_rank",
                     scheme_col="scheme"):
    """Per-user sampled ranks from a table (DataFrame or CSV/TSV path).

    Columns: ``user``, ``rank`` (sampled rank, 1 = best), optional
    ``sample_size`` (per-user n_u), optional ``n_items`` (per-user number of
    candidates N_u, e.g. items - |history_u|) and optional ``model`` (one row
    per user and model), and for the merged ranks of a nested design optional
    ``first_rank`` (the rank within the first stage's set: at most ``rank``,
    as the sets are nested; :attr:`SampledRanks.first_ranks`), and optional
    ``scheme`` (how the negatives were drawn: ``binomial`` or
    ``hypergeometric``, the same on every row; :attr:`SampledRanks.scheme`,
    which the estimators' kernel then follows). Without a
    model column all rows are one model named "model". A ``count`` column is
    refused: that is a counts table (each row ``count`` users;
    :func:`counts_table`), and reading it as ranks would count each row once.
    So is any other column: a misspelt optional one would be ignored.

    Parameters
    ----------
    table : DataFrame or path
    user_col, rank_col, size_col, model_col, items_col, first_col, scheme_col : str, keyword-only
        Column names.
    n : int, optional, keyword-only
        Common sample size: ranks must lie in 1..n and every ``sample_size``
        must equal it (a user whose candidate set has another size is an
        error naming the user and its row / file line).
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
    check_columns(df, [user_col, rank_col], table_name(df, "ranks"))
    if "count" in df.columns:
        raise ValueError("the ranks table has a 'count' column: a table of rank, count[, ...] rows is a "
                         "counts table (each row 'count' users; sampling_lib.io.counts_table), not one "
                         "row per user")
    check_read_columns(df, (user_col, rank_col, size_col, model_col, items_col, first_col, scheme_col),
                       table_name(df, "ranks"),
                       f"a ranks table holds {user_col}, {rank_col}[, {model_col}][, {size_col}][, {items_col}]"
                       f"[, {first_col}][, {scheme_col}]")
    if len(df) == 0:
        raise ValueError("the ranks table has no rows")
    at = _where(df)
    _check_not_blank(df, [user_col] + ([model_col] if model_col in df.columns else []), "ranks")
    work = pd.DataFrame({"user": df[user_col].to_numpy(),
                         "rank": check_int_column(df[rank_col], rank_col, at).to_numpy()})
    work["model"] = df[model_col].astype(str).to_numpy() if model_col in df.columns else "model"
    if n is not None:
        n = check_int(n, "n", low=2)
    has_size = size_col in df.columns
    if has_size:
        work["size"] = check_int_column(df[size_col], size_col, at).to_numpy()
        if (work["size"] < 2).any():
            i = int(np.flatnonzero((work["size"] < 2).to_numpy())[0])
            raise ValueError(f"column {size_col!r} must be >= 2; got {work['size'].iloc[i]} in {at(i)}")
        if n is not None and (work["size"] != n).any():
            i = int(np.flatnonzero((work["size"] != n).to_numpy())[0])
            raise ValueError(f"user {show_value(work['user'].iloc[i])} of model "
                             f"{show_value(work['model'].iloc[i])} has {size_col} {work['size'].iloc[i]} "
                             f"in {at(i)}, not the sample size n={n} (--sample-size); omit n to use "
                             "each user's own size")
    has_items = items_col in df.columns
    if has_items:
        work["items"] = check_int_column(df[items_col], items_col, at).to_numpy()
        if (work["items"] < 2).any():
            i = int(np.flatnonzero((work["items"] < 2).to_numpy())[0])
            raise ValueError(f"column {items_col!r} must be >= 2; got {work['items'].iloc[i]} in {at(i)}")
        if N is not None and np.ndim(N) == 0 and (work["items"] != check_int(N, "N", low=2)).any():
            i = int(np.flatnonzero((work["items"] != N).to_numpy())[0])
            raise ValueError(f"--n-items N={N} disagrees with column {items_col!r} ({items_col} "
                             f"{work['items'].iloc[i]} in {at(i)})")
        nu = work["size"] if has_size else (n if n is not None else None)
        if nu is not None and (work["items"] < nu).any():
            i = int(np.flatnonzero((work["items"] < nu).to_numpy())[0])
            raise ValueError(f"column {items_col!r} must be >= the sample size; {at(i)} has "
                             f"{items_col} {work['items'].iloc[i]}")
    if (work["rank"] < 1).any():
        i = int(np.flatnonzero((work["rank"] < 1).to_numpy())[0])
        raise ValueError(f"column {rank_col!r} must hold ranks >= 1; got {work['rank'].iloc[i]} in {at(i)}")
    if n is not None and (work["rank"] > n).any():
        i = int(np.flatnonzero((work["rank"] > n).to_numpy())[0])
        raise ValueError(f"sampled ranks must lie in 1..n={n}; got {work['rank'].iloc[i]} in {at(i)}")
    if has_size and (work["rank"] > work["size"]).any():
        i = int(np.flatnonzero((work["rank"] > work["size"]).to_numpy())[0])
        raise ValueError(f"sampled ranks must lie in 1..sample_size; {at(i)} has rank "
                         f"{work['rank'].iloc[i]} > sample_size {work['size'].iloc[i]}")
    scheme = _scheme_column(df[scheme_col], scheme_col, at) if scheme_col in df.columns else None
    has_first = first_col in df.columns
    if has_first:
        work["first"] = check_int_column(df[first_col], first_col, at).to_numpy()
        _check_first_rank(work["first"].to_numpy(), work["rank"].to_numpy(), at, first_col, rank_col)
    # one factorization per id column (order of appearance), then the wide tables by position: a pivot
    # and reindex of 10^6 text ids cost seconds
    ucode, users = pd.factorize(work["user"].to_numpy(), sort=False)
    mcode, models = pd.factorize(work["model"].to_numpy(), sort=False)
    cell = ucode.astype(np.int64) * len(models) + mcode
    dup = pd.Series(cell).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise ValueError(f"each (user, model) must appear once; user {show_value(work['user'].iloc[i])} "
                         f"of model {show_value(work['model'].iloc[i])} repeats ({at(i)})")

    def wide(values):
        cols = {}
        for j, m in enumerate(models):
            sel = mcode == j
            v = np.zeros(len(users), dtype=np.int64)
            mask = np.ones(len(users), dtype=bool)
            v[ucode[sel]] = values[sel]
            mask[ucode[sel]] = False
            cols[m] = pd.arrays.IntegerArray(v, mask)
        out = pd.DataFrame(cols, index=pd.Index(users, name="user"))
        out.columns.name = "model"
        return out

    R = wide(work["rank"].to_numpy())
    S = wide(work["size"].to_numpy()) if has_size else None
    NI = wide(work["items"].to_numpy()) if has_items else None
    FR = wide(work["first"].to_numpy()) if has_first else None
    return SampledRanks(R, S, NI, FR, scheme)


def _scheme_column(col, name, at):
    """The one scheme a ranks table's ``scheme`` column records ("binomial" or "hypergeometric" on every row),
    naming the first row that holds anything else or differs from the first row."""
    text = col.astype(str).str.strip().str.lower().to_numpy()
    bad = ~np.isin(text, ("binomial", "hypergeometric")) | col.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"column {name!r} (how the negatives were drawn) must hold binomial or hypergeometric; "
                         f"got {show_value(col.iloc[i])} in {at(i)}")
    other = text != text[0]
    if other.any():
        i = int(np.flatnonzero(other)[0])
        raise ValueError(f"column {name!r} must hold one scheme for the whole table (the estimators take one "
                         f"kernel): {at(0)} has {text[0]}, {at(i)} has {text[i]}")
    return str(text[0])


def ranks_from_score_table(table, *, user_col="user", score_col="score", label_col="label",
                           model_col="model", items_col="n_items", ties="pessimistic", n=None, rng=None):
    """Sampled ranks from a long table of scores (the layout of a ``uni100`` evaluation).

    One row per (user, item[, model]) of the sample set: ``user``, ``score``,
    ``label`` (1 for the held-out item, 0 for a sampled negative), optional
    ``model`` and optional ``n_items`` (the user's number of candidates N_u,
    the same on every row of the user). Each (user, model) group must hold
    exactly one label-1 row; its sample size n_u is the group's size. Ties as
    :func:`ranks_from_scores`. ``item`` and ``line`` columns may be present
    (not read: e.g. :func:`read_ncf_negatives`' table with a score column);
    any other column is an error (a misspelt one would be ignored).

    Parameters
    ----------
    n : int, optional, keyword-only
        The sample size every user must have: a user with another number of
        rows is an error naming the user and its first row / file line
        (without ``n``, sizes may vary by user: adaptive or two-stage designs).

    Returns
    -------
    SampledRanks
        With ``sample_sizes`` filled in (and ``n_items`` with an ``n_items`` column).

    Examples
    --------
    >>> df = pd.DataFrame({"user": [7, 7, 7, 8, 8, 8], "label": [1, 0, 0, 1, 0, 0],
    ...                    "score": [0.3, 0.9, 0.1, 0.5, 0.5, 0.2]})
    >>> s = ranks_from_score_table(df)
    >>> s.for_model("model")[0].tolist(), s.for_model("model")[1].tolist()
    ([2, 2], [3, 3])
    """
    df = read_table(table, "scores")
    check_read_columns(df, (user_col, score_col, label_col, model_col, items_col, "item", "line"),
                       table_name(df, "scores"), f"a scores table holds {user_col}, {score_col}, {label_col}"
                       f"[, {model_col}][, item][, {items_col}]")
    return _score_table_ranks(df, user_col=user_col, score_col=score_col, label_col=label_col,
                              model_col=model_col, items_col=items_col, ties=ties, n=n, rng=rng)


def _score_table_ranks(table, *, user_col, score_col, label_col, model_col, items_col, ties, n, rng, first=None):
    """:func:`ranks_from_score_table`; with ``first`` (a boolean per row: the row is in the first stage's
    set of a nested design) also each group's rank within those rows (``first_ranks``; not with random
    ties, whose two draws would not nest)."""
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {show_value(ties)}")
    if first is not None and ties == "random":
        raise ValueError("first-stage ranks need a deterministic tie rule (pessimistic or optimistic)")
    df = read_table(table, "scores")
    check_columns(df, [user_col, score_col, label_col], table_name(df, "scores"))
    if len(df) == 0:
        raise ValueError("the scores table has no rows")
    at = _where(df)
    _check_not_blank(df, [user_col] + ([model_col] if model_col in df.columns else []), "scores")
    score, label = check_scores_and_labels(df, score_col, label_col, at)
    # every (model, user) group as an integer code in order of appearance: numpy on the codes instead of
    # groupby on text ids (seconds at 10^6 rows); the columns are factorized as they are (no Python string
    # per row) and a row's ids looked up when needed. Models are compared as text: a column of mixed types
    # (object) becomes text first.
    ucode, uniq_u = pd.factorize(df[user_col], sort=False)
    model = df[model_col] if model_col in df.columns else pd.Series(np.zeros(len(df), np.int8))
    if model.dtype == object:
        model = model.astype(str)
    mcode, uniq_m = pd.factorize(model, sort=False)
    uniq_u = np.asarray(uniq_u, dtype=object)
    uniq_m = (np.asarray(uniq_m).astype(str).astype(object) if model_col in df.columns
              else np.array(["model"], dtype=object))
    grp, first_key = pd.factorize(mcode.astype(np.int64) * (int(ucode.max()) + 1) + ucode, sort=False)
    G = len(first_key)
    start = np.full(G, len(df), dtype=np.int64)
    np.minimum.at(start, grp, np.arange(len(df)))          # first row of each group
    lab = label.to_numpy()
    sc = score.to_numpy(float)
    npos = np.bincount(grp, weights=lab, minlength=G).astype(np.int64)
    size = np.bincount(grp, minlength=G)

    def who(k):
        i = int(start[k])
        return f"user {show_value(uniq_u[ucode[i]])} of model {show_value(uniq_m[mcode[i]])}", at(i)

    if (npos != 1).any():
        k = int(np.flatnonzero(npos != 1)[0])
        u, loc = who(k)
        raise ValueError(f"each (user, model) needs exactly one held-out row ({label_col}=1); {u} has "
                         f"{npos[k]} (first row: {loc})")
    if (size < 2).any():
        u, loc = who(int(np.flatnonzero(size < 2)[0]))
        raise ValueError(f"{u} has no negatives ({loc})")
    if n is not None:
        n = check_int(n, "n", low=2)
        if (size != n).any():
            k = int(np.flatnonzero(size != n)[0])
            u, loc = who(k)
            raise ValueError(f"{u} has {size[k]} candidates (the held-out item and {size[k] - 1} negatives; "
                             f"first row: {loc}), not the sample size n={n} (--sample-size); omit n to use "
                             "each user's own size")
    items = None
    if items_col in df.columns:
        it = check_int_column(df[items_col], items_col, at).to_numpy()
        lo = np.full(G, np.iinfo(np.int64).max)
        hi = np.full(G, np.iinfo(np.int64).min)
        np.minimum.at(lo, grp, it)
        np.maximum.at(hi, grp, it)
        if (lo != hi).any():
            k = int(np.flatnonzero(lo != hi)[0])
            u, loc = who(k)
            raise ValueError(f"column {items_col!r} must hold one N_u per user; {u} has {lo[k]} and {hi[k]} "
                             f"(first row: {loc})")
        items = lo
        if (items < size).any():
            k = int(np.flatnonzero(items < size)[0])
            u, loc = who(k)
            raise ValueError(f"column {items_col!r} must be >= the user's sample size; {u} has {items_col} "
                             f"{items[k]} and {size[k]} candidates ({loc})")
    pos = np.empty(G)
    pos[grp[lab == 1]] = sc[lab == 1]
    neg = lab == 0
    gt = np.bincount(grp[neg], weights=sc[neg] > pos[grp[neg]], minlength=G).astype(np.int64)
    eq = np.bincount(grp[neg], weights=sc[neg] == pos[grp[neg]], minlength=G).astype(np.int64)
    r = apply_ties(gt, eq, ties, np.random.default_rng(rng))
    out = pd.DataFrame({"model": uniq_m[mcode[start]], "user": uniq_u[ucode[start]], "rank": np.asarray(r),
                        "sample_size": size})
    if items is not None:
        out["n_items"] = items
    if first is not None:               # the same counts over the first stage's negatives only
        n1 = neg & np.asarray(first, dtype=bool)
        gt1 = np.bincount(grp[n1], weights=sc[n1] > pos[grp[n1]], minlength=G).astype(np.int64)
        eq1 = np.bincount(grp[n1], weights=sc[n1] == pos[grp[n1]], minlength=G).astype(np.int64)
        out["first_rank"] = np.asarray(apply_ties(gt1, eq1, ties, None))
    return ranks_from_table(out)


def check_scores_and_labels(df, score_col, label_col, at):
    """(scores as floats, labels as ints) of a scores table, or a ValueError naming the first bad row.

    Scores must be finite numbers; labels 0 (a negative) or 1 (the held-out item). ``at(i)`` names
    row i in messages. Shared by :func:`ranks_from_score_table` and
    :func:`sampling_lib.popularity.popularity_logs_from_table`.
    """
    score = pd.to_numeric(df[score_col], errors="coerce")
    if score.isna().any() or not np.all(np.isfinite(score)):
        i = int(np.flatnonzero((score.isna() | ~np.isfinite(score)).to_numpy())[0])
        raise ValueError(f"column {score_col!r} must hold finite numbers; got "
                         f"{show_value(df[score_col].iloc[i])} in {at(i)}")
    label = check_int_column(df[label_col], label_col, at)
    if not label.isin([0, 1]).all():
        i = int(np.flatnonzero(~label.isin([0, 1]).to_numpy())[0])
        raise ValueError(f"column {label_col!r} must be 0 (negative) or 1 (held-out item); got "
                         f"{label.iloc[i]} in {at(i)}")
    return score, label
