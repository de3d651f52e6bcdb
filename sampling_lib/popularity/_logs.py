"""Logs of a popularity-sampled evaluation and the popularity input of ``estimate`` / ``compare``.

A :class:`PopularityLog` holds one model's sampled ranks and, optionally, the
logged draws (their q and whether they beat the held-out item); it is built
from score arrays (``popularity_log``) or from a scores table
(``popularity_logs_from_table``), put in a canonical order
(``canonical_order``), checked (``check_draws``) and recognised as input of
:func:`sampling_lib.correct.estimate` (``is_popularity_input``, ``as_logs``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace

import numpy as np
import pandas as pd
from scipy import sparse

from .._validation import check_columns
from ..io import check_scores_and_labels, id_text, read_table, row_location, table_name
from ..ranking import check_score_arrays
from ._weights import candidate_totals, check_item_weights, exclusion_matrix, show_value

__all__ = [
    "WITHOUT_REPLACEMENT",
    "PopularityLog",
    "canonical_order",
    "check_ties",
    "ranked_above",
    "popularity_log",
    "popularity_logs_from_table",
    "check_draws",
    "is_popularity_input",
    "as_logs",
]

_TIES = ("pessimistic", "optimistic")
WITHOUT_REPLACEMENT = (
    "popularity-sampled negatives drawn without replacement (aprec-style successive sampling) "
    "are not supported: their inclusion probabilities are not (n-1) q_j and the number of "
    "negatives above the held-out item is not Binomial(n-1, Q_u); draw them with replacement "
    "(RecBole popN does)"
)


# ----------------------------------------------------------------------------
# logs of a popularity-sampled evaluation
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PopularityLog:
    """One model's popularity-sampled evaluation: sampled ranks and (optionally) the logged draws.

    Attributes
    ----------
    x : ndarray of int, shape (M,)
        X_u = r_u - 1, the sampled negatives ranked above the held-out item
        (tie rule applied).
    sizes : ndarray of int, shape (M,)
        n_u, the sample-set size (held-out item + n_u - 1 negatives).
    n_candidates : ndarray of int, shape (M,)
        N_u - 1, the number of candidates the user's negatives are drawn
        from (the global rank R_u lies in 1..N_u).
    draw_user : ndarray of int, shape (D,), or None
        User index (0..M-1) of each logged negative; None without logs.
    draw_q : ndarray, shape (D,), or None
        Its probability q_j (eq 1).
    draw_above : ndarray of bool, shape (D,), or None
        Whether it is ranked above the held-out item.
    draw_position : ndarray of int, shape (D,), or None
        Number of the user's other negatives ranked above it (score
        descending, equal scores in log order), in 0..n_u - 2.
    users : ndarray or None
        User ids.
    item_weights : ndarray or None
        Weights over item positions (for :func:`sampling_lib.estimators.popularity_bounds`).
    excluded : scipy.sparse.csr_matrix or None
        Users x items: history and held-out item (for :func:`sampling_lib.estimators.popularity_bounds`).
    """

    x: np.ndarray
    sizes: np.ndarray
    n_candidates: np.ndarray
    draw_user: np.ndarray | None = None
    draw_q: np.ndarray | None = None
    draw_above: np.ndarray | None = None
    draw_position: np.ndarray | None = None
    users: np.ndarray | None = None
    item_weights: np.ndarray | None = field(default=None, repr=False)
    excluded: object = field(default=None, repr=False)

    @property
    def M(self) -> int:
        """Number of users."""
        return int(self.x.size)

    @property
    def N_u(self) -> np.ndarray:
        """N_u = n_candidates + 1: the largest possible global rank of each user."""
        return self.n_candidates + 1

    @property
    def N(self) -> int:
        """max_u N_u: the length of the rank distributions."""
        return int(self.n_candidates.max()) + 1

    @property
    def has_draws(self) -> bool:
        return self.draw_q is not None

    @property
    def sampled_ranks(self) -> np.ndarray:
        """r_u = X_u + 1."""
        return self.x + 1


def canonical_order(log):
    """``log`` with its users in an order that does not depend on the order they were given in.

    The bootstrap of the popularity estimators resamples users, and the same
    seed draws the same multinomial weights for user positions 0..M-1; with
    users in input order, the interval moved when the rows of a scores table
    were shuffled. Users are sorted by id when the log has ids,
    then by their data (X_u, n_u, N_u and sums over their logged draws), so
    that a permutation of the users gives the same log and the same interval.
    The draws follow their users, in their logged order.
    """
    if not isinstance(log, PopularityLog):
        raise TypeError(f"log must be a PopularityLog; got {type(log).__name__}")
    keys = [log.n_candidates, log.sizes, log.x]
    if log.has_draws:
        M, du, q, above = log.M, log.draw_user, log.draw_q, log.draw_above
        keys = [np.bincount(du, weights=q * (1 + log.draw_position), minlength=M),
                np.bincount(du, weights=np.where(above, q, 0.0), minlength=M),
                np.bincount(du, weights=np.log(q), minlength=M)] + keys
    if log.users is not None:
        keys.append(pd.factorize(np.asarray(log.users), sort=True)[0])
    order = np.lexsort(keys)                # the last key is the primary one
    if np.array_equal(order, np.arange(order.size)):
        return log
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    changes = dict(x=log.x[order], sizes=log.sizes[order], n_candidates=log.n_candidates[order],
                   users=None if log.users is None else np.asarray(log.users)[order],
                   excluded=None if log.excluded is None else sparse.csr_matrix(log.excluded)[order])
    if log.has_draws:
        d = np.argsort(rank[log.draw_user], kind="stable")
        changes.update(draw_user=rank[log.draw_user][d], draw_q=log.draw_q[d], draw_above=log.draw_above[d],
                       draw_position=log.draw_position[d])
    return dataclass_replace(log, **changes)


def check_ties(ties):
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES} for popularity-sampled negatives (the HT estimator "
                         f"needs a fixed rule); got {ties!r}")
    return ties


def ranked_above(neg, pos, ties):
    return (neg >= pos) if ties == "pessimistic" else (neg > pos)


def _positions(neg):
    """Per row, the number of other valid entries ranked above each entry (score desc, ties by column)."""
    B, k = neg.shape
    key = np.where(np.isnan(neg), np.inf, -neg)
    order = np.argsort(key, axis=1, kind="stable")
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.broadcast_to(np.arange(k), (B, k)), axis=1)
    return pos


def popularity_log(pos_scores, neg_scores, neg_q, n_candidates, *, ties="pessimistic", users=None,
                   item_weights=None, excluded=None):
    """A :class:`PopularityLog` from the scores and probabilities of the sampled items.

    Parameters
    ----------
    pos_scores : array_like, shape (M,)
        Score of each user's held-out item.
    neg_scores : array_like, shape (M, k)
        Scores of the user's logged negatives in draw order (NaN pads users
        with fewer negatives).
    neg_q : array_like, shape (M, k)
        Their draw probabilities q_j (eq 1), > 0 where the score is not NaN.
    n_candidates : array_like of int, shape (M,)
        N_u - 1, the number of items each user draws from.
    ties : {"pessimistic", "optimistic"}, keyword-only
        A negative with a score equal to the held-out item's counts as above
        ("pessimistic", the library's default) or below.
    users, item_weights, excluded : optional, keyword-only
        Stored in the log (:func:`sampling_lib.estimators.popularity_bounds` needs the last two).

    Examples
    --------
    >>> log = popularity_log([0.5, 0.9], [[0.7, 0.1, 0.6], [0.2, 0.95, 0.1]],
    ...                      [[0.1, 0.5, 0.4], [0.2, 0.05, 0.2]], [9, 9])
    >>> log.x.tolist(), log.draw_position.tolist()
    ([2, 1], [0, 2, 1, 1, 0, 2])
    """
    ties = check_ties(ties)
    pos, neg, valid = check_score_arrays(pos_scores, neg_scores)
    q = np.asarray(neg_q, dtype=float)
    if q.shape != neg.shape:
        raise ValueError(f"neg_q must have the shape of neg_scores {neg.shape}; got {q.shape}")
    qv = q[valid]
    if not np.all(np.isfinite(qv)) or np.any(qv < np.finfo(float).tiny) or np.any(qv > 1):
        raise ValueError(f"neg_q must lie in (0, 1] and be a normal float (at least {np.finfo(float).tiny:g}, "
                         f"so that 1/q is finite) for every logged negative; got min {np.nanmin(qv):g} "
                         f"and max {np.nanmax(qv):g}")
    nc = np.asarray(n_candidates)
    if nc.shape != pos.shape or not np.all(nc == np.round(nc)) or np.any(nc < 1):
        raise ValueError(f"n_candidates must be integers >= 1, one per user; got shape {nc.shape}")
    nc = nc.astype(np.int64)
    with np.errstate(invalid="ignore"):
        above = ranked_above(neg, pos[:, None], ties) & valid
    position = _positions(neg)
    rows = np.nonzero(valid)
    return PopularityLog(
        x=above.sum(axis=1).astype(np.int64),
        sizes=(1 + valid.sum(axis=1)).astype(np.int64),
        n_candidates=nc,
        draw_user=rows[0].astype(np.int64),
        draw_q=q[rows],
        draw_above=above[rows],
        draw_position=position[rows].astype(np.int64),
        users=None if users is None else np.asarray(users),
        item_weights=None if item_weights is None else np.asarray(item_weights, float),
        excluded=excluded,
    )


def popularity_logs_from_table(table, item_weights=None, *, exclude=None, ties="pessimistic",
                               user_col="user", item_col="item", score_col="score", label_col="label",
                               model_col="model", q_col="q", n_candidates_col="n_candidates",
                               replace_col="replace"):
    """Popularity logs, one per model, from a long scores table.

    One row per (user, sampled item[, model]): ``user, item, score, label``
    (label 1 = held-out item, 0 = a sampled negative; a negative drawn twice
    appears twice), optional ``model``. The draw probabilities come from a
    ``q`` column (as written by :func:`sample_popularity_negatives`, with
    ``n_candidates``) or are computed from ``item_weights`` and the user's
    ``exclude`` set (eq 1); with weights, the logs also carry what
    :func:`sampling_lib.estimators.popularity_bounds` needs.

    Raises
    ------
    ValueError
        Bad weights (negative, missing items, all zero: :func:`check_item_weights`),
        a sampled negative with weight 0 or in the user's excluded items, a
        ``replace`` column with False (without replacement is not supported),
        or the rules of the scores table.

    Returns
    -------
    dict {model: PopularityLog}
        Every model's log lists the same users in the same order when the
        models share their users (checked by :func:`sampling_lib.compare`).

    Examples
    --------
    >>> df = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2], "item": [0, 1, 2, 1, 0, 2],
    ...                    "label": [1, 0, 0, 1, 0, 0], "score": [0.5, 0.9, 0.1, 0.2, 0.3, 0.1]})
    >>> log = popularity_logs_from_table(df, {0: 1.0, 1: 2.0, 2: 1.0})["model"]
    >>> log.x.tolist(), log.draw_q.round(3).tolist(), log.n_candidates.tolist()
    ([1, 1], [0.667, 0.333, 0.5, 0.5], [2, 2])
    """
    ties = check_ties(ties)
    df = read_table(table, "scores")
    check_columns(df, [user_col, item_col, score_col, label_col], table_name(df, "scores"))
    if len(df) == 0:
        raise ValueError("the scores table has no rows")

    def at(i):
        return row_location(df, i)

    for c in [user_col, item_col] + ([model_col] if model_col in df.columns else []):
        blank = df[c].isna() | (df[c].astype(str).str.strip() == "")
        if blank.any():
            i = int(np.flatnonzero(blank.to_numpy())[0])
            raise ValueError(f"column {c!r} of the scores table is blank in {at(i)}")
    score, label = check_scores_and_labels(df, score_col, label_col, at)
    if replace_col in df.columns:
        # the negatives' rows say how they were drawn (the held-out rows may be empty)
        rep = df[replace_col].to_numpy()[label.to_numpy() == 0]
        rep = pd.Series(rep).dropna().astype(str).str.strip().str.lower()
        if rep.isin(["false", "0", "0.0", "no"]).any():
            raise ValueError(WITHOUT_REPLACEMENT)
    model = id_text(df[model_col]) if model_col in df.columns else np.full(len(df), "model", dtype=object)
    work = pd.DataFrame({"model": model, "user": id_text(df[user_col]), "item": id_text(df[item_col]),
                         "score": score.to_numpy(float), "label": label.to_numpy(),
                         "row": np.arange(len(df))})
    groups = work.groupby(["model", "user"], sort=False)
    npos = groups["label"].agg(["sum", "size"])
    first = groups["row"].min()
    if (npos["sum"] != 1).any():
        (m, u), v = next((k, int(v)) for k, v in npos["sum"].items() if v != 1)
        raise ValueError(f"each (user, model) needs exactly one held-out row ({label_col}=1); "
                         f"user {show_value(u)} of model {show_value(m)} has {v} (first row: {at(first[(m, u)])})")
    if (npos["size"] < 2).any():
        (m, u) = next(k for k, v in npos["size"].items() if v < 2)
        raise ValueError(f"user {show_value(u)} of model {show_value(m)} has no negatives ({at(first[(m, u)])})")
    has_q = q_col in df.columns
    users_all = pd.Index(pd.unique(work["user"]))
    w_arr = E = item_index = None
    if item_weights is not None:
        wser = check_item_weights(item_weights, work["item"].to_numpy())
        w_arr, item_index = wser.to_numpy(float), pd.Index(id_text(wser.index))
        pos_rows = work[work.label == 1].drop_duplicates("user")
        hp = item_index.get_indexer(pos_rows.set_index("user")["item"].reindex(users_all).to_numpy())
        E = exclusion_matrix(users_all, exclude, item_index, hp)
        total, n_cand = candidate_totals(w_arr, E)
        neg = work[work.label == 0]
        upos = users_all.get_indexer(neg["user"])
        ipos = item_index.get_indexer(neg["item"])
        if np.any(w_arr[ipos] <= 0):
            i = int(np.flatnonzero(w_arr[ipos] <= 0)[0])
            raise ValueError(f"sampled negative {show_value(neg['item'].iloc[i])} of user {show_value(neg['user'].iloc[i])} has "
                             f"weight 0 in item_weights: it cannot have been drawn ({at(neg['row'].iloc[i])})")
        hit = np.asarray(E[upos, ipos]).ravel() > 0
        if hit.any():
            i = int(np.flatnonzero(hit)[0])
            raise ValueError(f"sampled negative {show_value(neg['item'].iloc[i])} of user {show_value(neg['user'].iloc[i])} is "
                             f"in the user's excluded items (history or held-out item; {at(neg['row'].iloc[i])})")
        if not has_q:
            work.loc[neg.index, "q"] = w_arr[ipos] / total[upos]
        if n_candidates_col not in df.columns:
            work["n_candidates"] = n_cand[users_all.get_indexer(work["user"])]
    elif not has_q:
        raise ValueError(f"the scores table has no {q_col!r} column: give item_weights (and the excluded "
                         f"items) to compute each negative's draw probability")
    if has_q:
        work["q"] = pd.to_numeric(df[q_col], errors="coerce").to_numpy(float)
        qn = work.loc[work.label == 0, ["q", "row"]]
        bad = ~(np.isfinite(qn["q"]) & (qn["q"] >= np.finfo(float).tiny) & (qn["q"] <= 1))
        if bad.any():
            i = int(qn["row"].iloc[int(np.flatnonzero(bad.to_numpy())[0])])
            raise ValueError(f"column {q_col!r} must hold each negative's draw probability, a normal float in "
                             f"(0, 1] (at least {np.finfo(float).tiny:g}, so that 1/q is finite); got "
                             f"{show_value(df[q_col].iloc[i])} in {at(i)}")
    if n_candidates_col in df.columns:
        # one value per (model, user), on its negatives' rows (the held-out row may be empty)
        nc = pd.Series(pd.to_numeric(df[n_candidates_col], errors="coerce").to_numpy(float))
        per = nc.groupby([work["model"].to_numpy(), work["user"].to_numpy()], sort=False).agg(["min", "max"])
        bad = per["min"].isna() | (per["min"] != per["max"]) | (per["min"] < 1) | (per["min"] != np.round(per["min"]))
        if bad.any():
            m, u = per.index[np.flatnonzero(bad.to_numpy())[0]]
            raise ValueError(f"column {n_candidates_col!r} must hold one integer >= 1 per user; user "
                             f"{show_value(u)} of model {show_value(m)} has {per.loc[(m, u)].tolist()} "
                             f"(first row: {at(first[(m, u)])})")
        work["n_candidates"] = per["min"].reindex(pd.MultiIndex.from_arrays([work["model"], work["user"]])
                                                  ).to_numpy()
    elif "n_candidates" not in work.columns:
        raise ValueError(f"the scores table has no {n_candidates_col!r} column: give item_weights (and the "
                         f"excluded items) to count each user's candidates")
    _check_draws_fit(work, first, at)
    out = {}
    for m, g in work.groupby("model", sort=False):
        g = g.sort_values("row", kind="stable")
        users = pd.Index(pd.unique(g["user"]))
        pos = g[g.label == 1].set_index("user").reindex(users)
        neg = g[g.label == 0]
        col = neg.groupby("user", sort=False).cumcount().to_numpy()
        row = users.get_indexer(neg["user"])
        k = int(col.max()) + 1
        S = np.full((users.size, k), np.nan)
        Qm = np.full((users.size, k), np.nan)
        S[row, col] = neg["score"].to_numpy()
        Qm[row, col] = neg["q"].to_numpy()
        nc = pos["n_candidates"].to_numpy()
        exc = None if E is None else E[users_all.get_indexer(users)]
        out[str(m)] = popularity_log(pos["score"].to_numpy(float), S, Qm, nc, ties=ties,
                                     users=users.to_numpy(), item_weights=w_arr, excluded=exc)
    return out


def _check_draws_fit(work, first, at):
    """The logged negatives of a user must fit its stated candidates: count and probability mass.

    A user's distinct drawn items are distinct candidates, so there are at
    most n_candidates of them, and their probabilities q_j (eq 1) are those of
    distinct candidates, so they sum to at most 1.
    """
    neg = work[work.label == 0].drop_duplicates(["model", "user", "item"])
    g = neg.groupby(["model", "user"], sort=False)
    distinct = g.size()
    stated = g["n_candidates"].first()
    over = distinct > stated
    if over.any():
        m, u = distinct.index[np.flatnonzero(over.to_numpy())[0]]
        raise ValueError(f"user {show_value(u)} of model {show_value(m)} has {int(distinct[(m, u)])} distinct sampled "
                         f"negatives but n_candidates = {int(stated[(m, u)])} (the items it draws from): the "
                         f"table is inconsistent (first row: {at(first[(m, u)])})")
    mass = g["q"].sum()
    heavy = mass > 1 + 1e-6
    if heavy.any():
        m, u = mass.index[np.flatnonzero(heavy.to_numpy())[0]]
        raise ValueError(f"the draw probabilities q of the distinct negatives of user {show_value(u)} of model "
                         f"{show_value(m)} sum to {mass[(m, u)]:.6g} > 1: they cannot be the probabilities of "
                         f"distinct candidates (first row: {at(first[(m, u)])})")


def check_draws(log, what):
    if not isinstance(log, PopularityLog):
        raise TypeError(f"log must be a PopularityLog; got {type(log).__name__}")
    if not log.has_draws:
        raise ValueError(f"{what} needs the logged negatives (their q and whether they beat the held-out "
                         "item); this log has only the sampled ranks")


# ----------------------------------------------------------------------------
# popularity input of sampling_lib.estimate / compare
# ----------------------------------------------------------------------------
def is_popularity_input(data):
    """Whether ``data`` is a popularity-sampled evaluation that needs no item weights.

    True for a :class:`PopularityLog`, a non-empty dict of them, or a scores
    DataFrame with ``item, label`` and the logged draw probabilities ``q``
    (as written by :func:`sample_popularity_negatives`). This is how
    :func:`sampling_lib.correct.estimate` and :func:`~sampling_lib.correct.compare`
    decide that the input is popularity-sampled (estimators ``pop_mle``, ``ht``, ``uniform``)
    when no ``item_weights`` are given.

    Examples
    --------
    >>> is_popularity_input(np.array([1, 5, 2]))
    False
    >>> is_popularity_input(pd.DataFrame({"user": [1], "item": [3], "label": [0], "score": [0.1], "q": [0.2]}))
    True
    """
    if isinstance(data, PopularityLog):
        return True
    if isinstance(data, dict) and data and all(isinstance(v, PopularityLog) for v in data.values()):
        return True
    return isinstance(data, pd.DataFrame) and {"q", "label", "item"} <= set(data.columns)


def as_logs(data, item_weights=None, exclude=None, ties="pessimistic"):
    """{model: PopularityLog} from a log, a dict of logs, or a scores table (DataFrame or path)."""
    if isinstance(data, PopularityLog):
        return {"model": data}
    if isinstance(data, dict):
        bad = [k for k, v in data.items() if not isinstance(v, PopularityLog)]
        if bad:
            raise TypeError(f"a dict of logs must map model names to PopularityLog; {bad[0]!r} does not")
        return {str(k): v for k, v in data.items()}
    return popularity_logs_from_table(data, item_weights, exclude=exclude, ties=ties)
