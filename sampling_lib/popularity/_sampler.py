"""The popularity sampler: n - 1 negatives per user drawn with probabilities q_j (eq (1)).

``sample_popularity_negatives`` draws each user's negatives from the
candidates in proportion to their weights (with replacement, RecBole popN, or
without, aprec-style successive sampling) and returns the scores-table rows
with the logged draw probabilities q; ``draw_items`` and ``draw_block_size``
are shared with the simulations of :mod:`sampling_lib.popularity._truth`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_int
from ..io import id_text
from ._weights import candidate_totals, exclusion_matrix, show_value, weights_array

__all__ = [
    "sample_popularity_negatives",
    "draw_items",
    "draw_block_size",
]


# ----------------------------------------------------------------------------
# sampler
# ----------------------------------------------------------------------------
def draw_block_size(N, per_row=1):
    return int(max(1, min(4096, (1 << 22) // max(N * per_row, 1))))


def draw_items(Wb, k, replace, rng):
    """k draws per row of the nonnegative weight matrix Wb (B, N): item positions (B, k).

    With replacement: inverse CDF of each row's cumulative weights (exact;
    an item of weight 0 is never returned). Without replacement: successive
    sampling by the Gumbel top-k trick (Kool, van Hoof, Welling 2019), the
    law of numpy's ``choice(replace=False, p)``.
    """
    B, N = Wb.shape
    if replace:
        cum = np.cumsum(Wb, axis=1)
        last = N - 1 - np.argmax(Wb[:, ::-1] > 0, axis=1)     # last item of positive weight
        u = rng.random((B, k))
        idx = np.empty((B, k), dtype=np.int64)
        for b in range(B):
            idx[b] = np.searchsorted(cum[b], u[b] * cum[b, -1], side="right")
        return np.minimum(idx, last[:, None])
    with np.errstate(divide="ignore"):
        keys = np.log(Wb) + rng.gumbel(size=Wb.shape)
    keys[Wb <= 0] = -np.inf
    if k < N:
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    else:
        top = np.broadcast_to(np.arange(N), (B, N)).copy()
    order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def sample_popularity_negatives(users, item_weights, n, *, held_out=None, exclude=None, replace=True,
                                rng=None):
    """Fixed popularity-sampled negatives: n - 1 per user, each with its probability q.

    Every user draws n - 1 negatives from its candidates (items with weight
    > 0, not in the user's ``exclude`` set, not its held-out item) with
    probabilities q_j = w_j / sum of the candidates' weights (module
    docstring, eq 1). With ``replace=True`` (default, RecBole ``popN``) the
    draws are i.i.d. and the estimators of this module apply; with
    ``replace=False`` they are distinct (successive sampling, as numpy's
    ``choice(replace=False, p=q)``), which the estimators reject.

    Parameters
    ----------
    users : array_like
        User ids (unique).
    item_weights : Series, dict, DataFrame (item, weight) or array
        See :func:`check_item_weights`; e.g. :func:`popularity_weights`.
    n : int
        Sample-set size: n - 1 negatives per user.
    held_out : array_like, optional, keyword-only
        Held-out item of each user (aligned with ``users``); never drawn. It
        must have a weight (0 is allowed).
    exclude : DataFrame (user, item) or dict {user: items}, optional, keyword-only
        Items a user never draws (its history). RecBole general models
        exclude the history; sequential models (``repeatable``) do not.
    replace : bool, keyword-only
    rng : None, int or Generator, keyword-only

    Returns
    -------
    pandas.DataFrame
        Columns ``user, item, q, n_candidates, replace``: n - 1 rows per user
        in draw order; ``q`` is the draw probability (eq 1) and
        ``n_candidates`` = N_u - 1, the number of items the user draws from.

    Examples
    --------
    >>> from sampling_lib.popularity import popularity_weights
    >>> w = popularity_weights([0, 0, 0, 1, 2, 2, 3], 1.0)
    >>> neg = sample_popularity_negatives(["a", "b"], w, 4, held_out=[0, 3], rng=0)
    >>> neg.groupby("user").size().tolist(), bool((neg.q > 0).all())
    ([3, 3], True)
    >>> neg.n_candidates.unique().tolist()          # a draws from items 1-3, b from 0-2
    [3]
    >>> bool(neg[neg.user == "a"].item.isin([1, 2, 3]).all())   # never the held-out item 0
    True
    """
    w, item_index = weights_array(item_weights)
    N = w.size
    n = check_int(n, "n", low=2)
    users = pd.Index(pd.Series(users).to_numpy())
    if users.size == 0:
        raise ValueError("users must be non-empty")
    if pd.Index(id_text(users)).has_duplicates:
        raise ValueError(f"users must be unique; "
                         f"{show_value(users[pd.Index(id_text(users)).duplicated()][0])} repeats")
    hp = None
    if held_out is not None:
        ho = np.asarray(held_out)
        if ho.shape != (users.size,):
            raise ValueError(f"held_out must have one item per user ({users.size}); got shape {ho.shape}")
        hp = pd.Index(id_text(item_index)).get_indexer(id_text(ho))
        if np.any(hp < 0):
            raise ValueError(f"item_weights has no weight for held-out item {show_value(ho[np.flatnonzero(hp < 0)[0]])}")
    E = exclusion_matrix(users, exclude, item_index, hp)
    total, n_cand = candidate_totals(w, E)
    k = n - 1
    need = 1 if replace else k
    if np.any(n_cand < need):
        i = int(np.argmin(n_cand))
        raise ValueError(f"user {show_value(users[i])} has only {n_cand[i]} candidate negatives (positive weight, "
                         f"not excluded); n-1={k} distinct draws need {need}")
    rng = np.random.default_rng(rng)
    bs = draw_block_size(N)
    out_items, out_q = [], []
    for s in range(0, users.size, bs):
        e = min(s + bs, users.size)
        Wb = np.tile(w, (e - s, 1))
        blk = E[s:e]
        Wb[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = 0.0
        idx = draw_items(Wb, k, bool(replace), rng)
        out_items.append(idx)
        out_q.append(np.take_along_axis(Wb, idx, axis=1) / total[s:e, None])
    idx = np.concatenate(out_items)
    return pd.DataFrame({
        "user": np.repeat(users.to_numpy(), k),
        "item": item_index.to_numpy()[idx.ravel()],
        "q": np.concatenate(out_q).ravel(),
        "n_candidates": np.repeat(n_cand, k),
        "replace": bool(replace),
    })
