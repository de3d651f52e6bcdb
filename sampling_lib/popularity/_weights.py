"""Item weights and each user's candidate set for popularity-sampled negatives.

The weights w_j (``popularity_weights``, ``check_item_weights``,
``read_item_weights``), the per-user exclusion matrix of the items a user
cannot draw (history and held-out item) and the candidate totals W_u and
N_u - 1 of eq (1) of :mod:`sampling_lib.popularity`, shared by the sampler,
the logs and the ground truth.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import sparse

from .._validation import check_float, check_int
from ..io import id_text, read_table, row_location, table_source

__all__ = [
    "popularity_weights",
    "check_item_weights",
    "read_item_weights",
    "show_value",
    "weights_array",
    "exclusion_matrix",
    "candidate_totals",
]


# ----------------------------------------------------------------------------
# item weights
# ----------------------------------------------------------------------------
def popularity_weights(interactions, weight_exponent=None, *, n_items=None, items=None, alpha=None):
    """Item weights w_j = c_j^weight_exponent from interaction counts c_j.

    Parameters
    ----------
    interactions : array_like of item ids, DataFrame with an ``item`` column, or sparse matrix
        One entry per interaction (a user x item matrix counts its nonzeros
        per column). RecBole ``popN`` counts the interactions of all phases
        (train + valid + test); pass all of them to reproduce it.
    weight_exponent : float >= 0, default 1
        Exponent (RecBole's ``alpha``); 0 gives every listed item weight 1
        (uniform sampling).
    n_items : int, optional, keyword-only
        With integer ids 0..n_items-1: list every item, including those
        without interactions (weight 0 for weight_exponent > 0).
    items : array_like, optional, keyword-only
        Item ids to list even without an interaction (weight 0 for
        weight_exponent > 0: an item nobody interacted with is never drawn),
        e.g. the held-out items and negatives of a scores table. Ids are
        compared as text (:func:`sampling_lib.io.id_text`).
    alpha : float, optional, keyword-only
        Deprecated name of ``weight_exponent`` (DeprecationWarning; removed
        in the next release).

    Returns
    -------
    pandas.Series
        Weight per item id (index sorted, then the ``items`` without an
        interaction), name ``"weight"``.

    Examples
    --------
    >>> popularity_weights([0, 0, 0, 0, 2], 0.5, n_items=4).tolist()
    [2.0, 0.0, 1.0, 0.0]
    >>> popularity_weights(["a", "a", "b"], items=["a", "c"]).to_dict()
    {'a': 2.0, 'b': 1.0, 'c': 0.0}
    """
    if alpha is not None:
        warnings.warn("popularity_weights(alpha=...) is deprecated: the exponent is named weight_exponent "
                      "(alpha will be removed in the next release)", DeprecationWarning, stacklevel=2)
        if weight_exponent is not None:
            raise TypeError("give weight_exponent or its deprecated name alpha, not both")
        weight_exponent = alpha
    weight_exponent = check_float(1.0 if weight_exponent is None else weight_exponent, "weight_exponent",
                                  low=0.0)
    if sparse.issparse(interactions):
        X = sparse.csr_matrix(interactions)
        counts = pd.Series(np.diff(X.tocsc().indptr).astype(float))
        if n_items is not None and check_int(n_items, "n_items", low=1) != X.shape[1]:
            raise ValueError(f"n_items must equal the matrix's {X.shape[1]} columns; got {n_items}")
    else:
        if isinstance(interactions, pd.DataFrame):
            if "item" not in interactions.columns:
                raise ValueError(f"interactions must have an 'item' column; found {list(interactions.columns)}")
            ids = interactions["item"]
            blank = ids.isna() | (ids.astype(str).str.strip() == "")
            if blank.any():
                i = int(np.flatnonzero(blank.to_numpy())[0])
                raise ValueError(f"column 'item' of the interactions table is blank in "
                                 f"{row_location(interactions, i)}")
            ids = ids.to_numpy()
        else:
            ids = np.asarray(interactions).ravel()
        counts = pd.Series(ids).value_counts().sort_index().astype(float)
        if n_items is not None:
            n_items = check_int(n_items, "n_items", low=1)
            idx = pd.Index(counts.index)
            if not (np.issubdtype(idx.dtype, np.integer) and (idx.size == 0 or (idx.min() >= 0
                                                                                and idx.max() < n_items))):
                raise ValueError(f"with n_items={n_items} the item ids must be integers in 0..{n_items - 1}")
            counts = counts.reindex(np.arange(n_items), fill_value=0.0)
    if items is not None:
        have = pd.Index(id_text(counts.index))
        extra = pd.unique(np.asarray(list(items), dtype=object))
        extra = extra[~pd.Index(id_text(extra)).isin(have)]
        if extra.size:
            add = pd.Series(0.0, index=pd.Index(extra))
            counts = pd.concat([counts, add]) if len(counts) else add
    w = np.power(counts.to_numpy(float), weight_exponent)
    out = pd.Series(w, index=counts.index, name="weight")
    out.index.name = "item"
    return check_item_weights(out)


def check_item_weights(item_weights, items=None, *, name="item_weights"):
    """Validate item weights; returns them as a float Series indexed by item id.

    Accepts a Series (index = item ids), a dict, a DataFrame with columns
    ``item, weight`` or a 1-D array (ids 0..len-1). Every weight must be a
    finite number >= 0, not all zero, each item listed once (ids compared as
    text, :func:`sampling_lib.io.id_text`: 1 and "1" are one item), and
    every id in ``items`` (e.g. the items of a scores table) must have a
    weight. A positive weight so small against the total that an item's
    draw probability q_j = w_j / sum(w) is not a normal float (below
    2.2e-308; its inverse 1/q_j, the Horvitz-Thompson weight, would
    overflow) is an error naming the item: such an item is never drawn in
    practice, so give it weight 0.

    Raises
    ------
    ValueError
        One message naming ``name``, the rule and the offending item.

    Examples
    --------
    >>> check_item_weights({"a": 2, "b": 0}).tolist()
    [2.0, 0.0]
    >>> check_item_weights([1.0, -2.0])
    Traceback (most recent call last):
    ...
    ValueError: item_weights must be >= 0; got -2 for item 1
    """
    src = table_source(item_weights) if isinstance(item_weights, pd.DataFrame) else None
    try:
        return _check_item_weights(item_weights, items, name)
    except ValueError as exc:
        if src is None or str(exc).startswith(src):
            raise
        raise ValueError(f"{src}: {exc}") from None


def _check_item_weights(item_weights, items, name):
    w = item_weights
    where = None
    if isinstance(w, pd.DataFrame):
        missing = [c for c in ("item", "weight") if c not in w.columns]
        if missing:
            raise ValueError(f"{name} must have columns ['item', 'weight']; found {list(w.columns)}")
        where = w
        ids = w["item"]
        blank = ids.isna() | (ids.astype(str).str.strip() == "")
        if blank.any():
            i = int(np.flatnonzero(blank.to_numpy())[0])
            raise ValueError(f"{name}: column 'item' is blank in {row_location(w, i)}")
        w = pd.Series(w["weight"].to_numpy(), index=pd.Index(w["item"].to_numpy(), name="item"))
    elif isinstance(w, dict):
        w = pd.Series(w, dtype=object)
    elif not isinstance(w, pd.Series):
        a = np.asarray(w)
        if a.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional; got shape {a.shape}")
        w = pd.Series(a)
    if len(w) == 0:
        raise ValueError(f"{name} must not be empty")
    keys = pd.Index(id_text(w.index))
    if keys.has_duplicates:
        i = int(np.flatnonzero(keys.duplicated())[0])
        at = "" if where is None else f" ({row_location(where, i)})"
        raise ValueError(f"{name} must list each item once; item {show_value(w.index[i])} repeats{at}")
    v = pd.to_numeric(w, errors="coerce").astype(float)
    bad = ~np.isfinite(v.to_numpy())
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        at = "" if where is None else f" ({row_location(where, i)})"
        cell = w.iloc[i]
        shown = "blank" if isinstance(cell, str) and not cell.strip() else show_value(cell)
        raise ValueError(f"{name} must be finite numbers; got {shown} for item {show_value(w.index[i])}{at}")
    neg = v.to_numpy() < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise ValueError(f"{name} must be >= 0; got {v.iloc[i]:g} for item {show_value(w.index[i])}")
    if not (v.to_numpy() > 0).any():
        raise ValueError(f"{name} must have a positive sum; all {len(v)} weights are 0")
    with np.errstate(over="ignore"):
        total = float(v.sum())
    if not np.isfinite(total):
        raise ValueError(f"{name} must have a finite sum; these weights overflow (max {v.max():g}): rescale "
                         "them (only their ratios matter)")
    tiny = np.finfo(float).tiny
    small = (v.to_numpy() > 0) & (v.to_numpy() / total < tiny)
    if small.any():
        i = int(np.flatnonzero(small)[0])
        raise ValueError(f"{name}: item {show_value(w.index[i])} has weight {v.iloc[i]:g}, so its draw probability "
                         f"q_j = w_j / sum(w) = {v.iloc[i] / total:g} is not a normal float (smallest "
                         f"{tiny:g}) and 1/q_j, its Horvitz-Thompson weight, overflows; such an item is "
                         "never drawn in practice: give it weight 0")
    if items is not None:
        need = pd.Index(pd.unique(id_text(np.asarray(items, dtype=object))))
        absent = need.difference(keys)
        if absent.size:
            raise ValueError(f"{name} has no weight for {absent.size} item(s) of the scores table, "
                             f"e.g. {[show_value(a) for a in absent[:5]]} (ids compared as text; items "
                             "without interactions: popularity_weights(..., items=...) gives them weight 0)")
    out = pd.Series(v.to_numpy(float), index=w.index, name="weight")
    out.index.name = "item"
    return out


def read_item_weights(path, *, items=None):
    """Read an item-weights file (CSV/TSV with columns ``item, weight``) and validate it.

    Examples
    --------
    >>> read_item_weights(pd.DataFrame({"item": [3, 5], "weight": [1.0, 4.0]})).to_dict()
    {3: 1.0, 5: 4.0}
    """
    return check_item_weights(read_table(path, "item weights"), items)


def show_value(x):
    """repr of a value with numpy scalars shown as Python ones (for error messages)."""
    return repr(x.item() if isinstance(x, np.generic) else x)


def weights_array(item_weights, n_items=None):
    """(weights as float array over item positions, item ids Index)."""
    w = check_item_weights(item_weights)
    if n_items is not None and len(w) != n_items:
        raise ValueError(f"item_weights must have one weight per item ({n_items}); got {len(w)}")
    return w.to_numpy(float), pd.Index(w.index)


def exclusion_matrix(users, exclude, item_index, held_out_pos=None):
    """CSR (users x items) of the items each user cannot draw (history and held-out item)."""
    M, N = len(users), len(item_index)
    rows, cols = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    if exclude is not None:
        if sparse.issparse(exclude):
            X = sparse.csr_matrix(exclude)
            if X.shape != (M, N):
                raise ValueError(f"exclude must have shape (users, items) = {(M, N)}; got {X.shape}")
            X = X.tocoo()
            keep = X.data != 0
            rows.append(X.row[keep].astype(np.int64))
            cols.append(X.col[keep].astype(np.int64))
        else:
            what = "the exclude table"
            if isinstance(exclude, pd.DataFrame):
                missing = [c for c in ("user", "item") if c not in exclude.columns]
                if missing:
                    raise ValueError(f"the exclude table must have columns ['user', 'item']; "
                                     f"found {list(exclude.columns)}")
                src = table_source(exclude)
                what = what if src is None else f"the exclude table {src}"
                for c in ("user", "item"):
                    blank = exclude[c].isna() | (exclude[c].astype(str).str.strip() == "")
                    if blank.any():
                        i = int(np.flatnonzero(blank.to_numpy())[0])
                        raise ValueError(f"column {c!r} of the exclude table is blank in "
                                         f"{row_location(exclude, i)}")
                eu, ei = exclude["user"].to_numpy(), exclude["item"].to_numpy()
            else:
                pairs = [(u, i) for u, its in dict(exclude).items() for i in its]
                eu = np.array([p[0] for p in pairs], dtype=object)
                ei = np.array([p[1] for p in pairs], dtype=object)
            upos = pd.Index(id_text(users)).get_indexer(id_text(eu))
            ipos = pd.Index(id_text(item_index)).get_indexer(id_text(ei))
            _report_unmatched(what, eu, ei, upos, ipos)
            ok = (upos >= 0) & (ipos >= 0)   # other users, and items without a weight (never candidates)
            rows.append(upos[ok].astype(np.int64))
            cols.append(ipos[ok].astype(np.int64))
    if held_out_pos is not None:
        hp = np.asarray(held_out_pos, dtype=np.int64)
        rows.append(np.arange(M, dtype=np.int64)[hp >= 0])
        cols.append(hp[hp >= 0])
    r, c = np.concatenate(rows), np.concatenate(cols)
    E = sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(M, N))
    E.sum_duplicates()
    E.data[:] = 1.0
    return E


def _report_unmatched(what, eu, ei, upos, ipos):
    """Exclusions whose user or item matches nothing: an error when none matches, else one warning.

    Ids are compared as text (:func:`sampling_lib.io.id_text`). Rows of users
    without scores (e.g. training users who are not test users) and items
    without a weight (never drawn) are legitimately unused, but a table none
    of whose users (or items) matches is an id mismatch, and is refused.
    """
    if len(eu) == 0:
        return
    nu = upos < 0
    if nu.all():
        raise ValueError(f"none of the {len(eu)} rows of {what} names a user of the evaluation (e.g. user "
                         f"{show_value(eu[0])}); ids are compared as text: check the user ids")
    ni = (ipos < 0) & ~nu
    if ni[~nu].all():
        raise ValueError(f"none of the {int((~nu).sum())} rows of {what} of the evaluation's users names an "
                         f"item with a weight (e.g. item {show_value(ei[np.flatnonzero(~nu)[0]])}); ids are "
                         "compared as text: check the item ids")
    if nu.any() or ni.any():
        parts = []
        if nu.any():
            parts.append(f"{int(nu.sum())} name a user not in the evaluation "
                         f"(e.g. {show_value(eu[np.flatnonzero(nu)[0]])})")
        if ni.any():
            parts.append(f"{int(ni.sum())} an item without a weight, never drawn "
                         f"(e.g. {show_value(ei[np.flatnonzero(ni)[0]])})")
        warnings.warn(f"{int((nu | ni).sum())} of the {len(eu)} rows of {what} exclude nothing: "
                      f"{' and '.join(parts)} (ids compared as text)", UserWarning, stacklevel=4)


def candidate_totals(w, E):
    """Per user: total candidate weight W_u and candidate count N_u - 1."""
    pos = (w > 0).astype(float)
    total = w.sum() - E @ w
    count = pos.sum() - E @ pos
    return np.asarray(total, float).ravel(), np.rint(np.asarray(count, float).ravel()).astype(np.int64)
