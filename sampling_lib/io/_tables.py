"""Ranks and scores tables -> :class:`SampledRanks` (per-user sampled ranks per model)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import check_columns, check_int, check_int_column, show_value
from ..ranking import TIE_RULES, apply_ties
from ._files import read_table

__all__ = ["SampledRanks", "ranks_from_table", "ranks_from_score_table"]


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

