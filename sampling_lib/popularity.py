"""Popularity-sampled negatives: the sampled-rank law, Horvitz-Thompson and corrected metrics.

Sequential-recommendation papers often rank each test user's held-out item
against n - 1 negatives drawn with probability proportional to item
popularity (RecBole ``popN``, the BERT4Rec / aprec protocols) instead of
uniformly. None of the seed papers (KDD20, AAAI21, TORS24, KR20) covers this
case; everything below is derived here (sampling-lab's own results) and
verified in notebook 11 and ``tests/test_popularity.py``.

Setting and notation
--------------------
User u has a held-out item i_u and a history H_u (training items). Item j has
a weight w_j >= 0 (popularity^alpha). The user's **candidates** are the items
with w_j > 0 that are neither in H_u nor the held-out item; N_u = 1 + their
number. Negatives are drawn from the candidates with probabilities

    q_j = w_j / sum_{k candidate} w_k                                   (1)

(the weights renormalised after excluding the history *and the held-out
item*). A_u is the set of candidates ranked above the held-out item by the
model (with the tie rule: "pessimistic" counts equal scores as above), so the
global rank among the candidates is R_u = 1 + |A_u|, and

    Q_u = sum_{j in A_u} q_j                                            (2)

is the q-mass above the held-out item.

**The law (with replacement).** The n - 1 draws are i.i.d. from q; each lands
in A_u with probability Q_u, independently, so the number X_u = r_u - 1 of
sampled negatives ranked above the held-out item is

    X_u ~ Binomial(n - 1, Q_u).                                         (3)

Under uniform q (alpha = 0), Q_u = (R_u - 1)/(N_u - 1) and (3) is KDD20 eq 6.
Under popularity q the sampled rank identifies Q_u, not R_u: a model that
ranks popular items high has a large Q_u for a given R_u (it looks worse than
under uniform sampling), a model that ranks niche items high looks better.

**Horvitz-Thompson (with the negatives logged).** For the draws j_1..j_{n-1},

    A_hat_u = 1/(n - 1) sum_k 1[j_k in A_u] / q_{j_k}                   (4)

has E[A_hat_u] = sum_{j in A_u} q_j / q_j = |A_u| = R_u - 1 (unbiased) and
Var[A_hat_u] = (sum_{j in A_u} 1/q_j - |A_u|^2) / (n - 1). It needs every
candidate to have q_j > 0 (items of weight 0 are not candidates: the target is
the rank among the items that can be sampled).

**What RecBole popN does** (``recbole/sampler/sampler.py``, ``Sampler`` and
``RepeatableSampler``; ``recbole/config/configurator.py``, ``eval_args``
mode ``popN``): weights are the interaction counts over train + valid + test
raised to ``alpha`` (default 1), drawn by an alias table **with replacement**;
a draw that hits one of the user's "used" items is redrawn (rejection), which
is exactly (1) with the exclusion set = the used items. For general
recommenders the used items are the user's positives of all phases up to the
evaluated one (history and held-out item excluded, as here); for sequential
models (``repeatable=True``) only the target item is excluded, i.e. the
history *can* be drawn: pass no exclusions to reproduce that. Items with no
interaction have weight 0 and are never drawn.

**Without replacement** (aprec-style ``choice(replace=False, p=q)``, i.e.
successive sampling) the inclusion probabilities are not (n - 1) q_j and have
no closed form, and X_u is not a function of Q_u alone (it depends on every
individual q_j of A_u). The sampler can draw such negatives, but the
estimators reject them with a ValueError.

**What is identifiable.** Without the logged negatives, the sampled ranks only
identify the distribution of Q_u (and, as for uniform sampling, only its
first n - 1 moments, KDD20 Sec 2.2, AAAI21 Sec 3). The map from Q_u to R_u
depends on *which* items the model puts above the held-out item and is not
identified: given Q_u, R_u - 1 lies between k_min(Q_u), the fewest candidates
whose mass reaches Q_u (most popular first), and k_max(Q_u), the most
candidates whose mass stays below Q_u (least popular first). These sharp
bounds hold for every model (:func:`mass_rank_bounds`); "pretend the sampling
was uniform" picks the curve R - 1 = Q (N_u - 1) inside them, which is right
only for models whose ranking is independent of popularity.

**With the logs: the rank-mass curve.** Order a user's candidates by score;
the fraction rho_u(Q) of candidates whose q-mass position (mass of the
candidates above them) is below Q satisfies rho_u(Q) = int_0^Q psi_u(m) dm
with psi_u = 1/((N_u - 1) q) at mass position m. A draw lands at a
Uniform(0, 1) mass position and carries psi = 1/((N_u - 1) q_j), so pooling
the logged draws of all users estimates the average curve rho(Q) (an HT
estimate, eq 4 with a moving threshold). A draw's mass position is not
observed, but the number x of the user's other n - 2 draws ranked above it is
Binomial(n - 2, m), so its posterior given x (uniform prior) is
Beta(x + 1, n - 1 - x); the curve is estimated as

    rho_hat(Q) = sum_draws psi_k BetaCDF(Q; x_k + 1, n - 1 - x_k) / sum_draws psi_k     (5)

(users weighted equally; the denominator is the HT estimate of 1). With
uniform q every psi_k = 1 and, ties among draws broken by the log order, the
x_k of a user are a permutation of 0..n - 2, so rho_hat(Q) = Q exactly.

**Corrected estimator** (``pop_mle``): the model R_u - 1 = (N_u - 1)
rho(Q_u) with the estimated curve, and X_u ~ Binomial(n - 1, Q_u). The
distribution of rho_u = (R_u - 1)/(N_u - 1) on the grid a/(N - 1),
a = 0..N - 1 (N = max N_u) is fitted by EM (the AAAI21 eqs 18-21 mixture with
the kernel Binomial(x; n - 1, G(rho)), G = rho_hat^{-1}); each user's rank
is then averaged over its posterior (which accounts for the binomial noise of
X_u) and mapped to R = 1 + round(rho (N_u - 1)). With G the identity this is
the "uniform-pretend" correction (``uniform``), which equals the library's
MLE (AAAI21 eq 21) when all N_u are equal. ``ht`` is the plug-in: the metric
of the rounded HT rank 1 + A_hat_u (eq 4), clipped to 1..N_u.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2, eq 6 (the uniform special case of (3)).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 14, 18-21 (mixture model and EM).
.. [HT52] Horvitz, Thompson. A generalization of sampling without replacement
   from a finite universe. JASA 47 (1952) (the estimator (4)).
.. [PM22] Petrov, Macdonald. A Systematic Review and Replicability Study of
   BERT4Rec for Sequential Recommendation. RecSys 2022 (popularity-sampled
   vs uniform vs full metrics).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace

import numpy as np
import pandas as pd
from scipy import sparse

from ._validation import check_columns, check_float, check_int, check_int_column
from .io import id_text, read_table, row_location, table_name, table_source

__all__ = [
    "popularity_weights",
    "check_item_weights",
    "read_item_weights",
    "sample_popularity_negatives",
    "PopularityLog",
    "popularity_log",
    "popularity_logs_from_table",
    "canonical_order",
    "PopularityTruth",
    "popularity_truth",
    "simulate_popularity_log",
    "simulate_popularity_ranks",
    "RankMassCurve",
    "exact_rank_mass_curve",
    "mass_rank_bounds",
    "user_mass_rank_bounds",
    "bernstein_tolerance",
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
        raise ValueError(f"{name} must list each item once; item {_show(w.index[i])} repeats{at}")
    v = pd.to_numeric(w, errors="coerce").astype(float)
    bad = ~np.isfinite(v.to_numpy())
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        at = "" if where is None else f" ({row_location(where, i)})"
        cell = w.iloc[i]
        shown = "blank" if isinstance(cell, str) and not cell.strip() else _show(cell)
        raise ValueError(f"{name} must be finite numbers; got {shown} for item {_show(w.index[i])}{at}")
    neg = v.to_numpy() < 0
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise ValueError(f"{name} must be >= 0; got {v.iloc[i]:g} for item {_show(w.index[i])}")
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
        raise ValueError(f"{name}: item {_show(w.index[i])} has weight {v.iloc[i]:g}, so its draw probability "
                         f"q_j = w_j / sum(w) = {v.iloc[i] / total:g} is not a normal float (smallest "
                         f"{tiny:g}) and 1/q_j, its Horvitz-Thompson weight, overflows; such an item is "
                         "never drawn in practice: give it weight 0")
    if items is not None:
        need = pd.Index(pd.unique(id_text(np.asarray(items, dtype=object))))
        absent = need.difference(keys)
        if absent.size:
            raise ValueError(f"{name} has no weight for {absent.size} item(s) of the scores table, "
                             f"e.g. {[_show(a) for a in absent[:5]]} (ids compared as text; items "
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


def _show(x):
    """repr of a value with numpy scalars shown as Python ones (for error messages)."""
    return repr(x.item() if isinstance(x, np.generic) else x)


def _weights_array(item_weights, n_items=None):
    """(weights as float array over item positions, item ids Index)."""
    w = check_item_weights(item_weights)
    if n_items is not None and len(w) != n_items:
        raise ValueError(f"item_weights must have one weight per item ({n_items}); got {len(w)}")
    return w.to_numpy(float), pd.Index(w.index)


def _exclusion_matrix(users, exclude, item_index, held_out_pos=None):
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
                         f"{_show(eu[0])}); ids are compared as text: check the user ids")
    ni = (ipos < 0) & ~nu
    if ni[~nu].all():
        raise ValueError(f"none of the {int((~nu).sum())} rows of {what} of the evaluation's users names an "
                         f"item with a weight (e.g. item {_show(ei[np.flatnonzero(~nu)[0]])}); ids are "
                         "compared as text: check the item ids")
    if nu.any() or ni.any():
        parts = []
        if nu.any():
            parts.append(f"{int(nu.sum())} name a user not in the evaluation "
                         f"(e.g. {_show(eu[np.flatnonzero(nu)[0]])})")
        if ni.any():
            parts.append(f"{int(ni.sum())} an item without a weight, never drawn "
                         f"(e.g. {_show(ei[np.flatnonzero(ni)[0]])})")
        warnings.warn(f"{int((nu | ni).sum())} of the {len(eu)} rows of {what} exclude nothing: "
                      f"{' and '.join(parts)} (ids compared as text)", UserWarning, stacklevel=4)


def _candidate_totals(w, E):
    """Per user: total candidate weight W_u and candidate count N_u - 1."""
    pos = (w > 0).astype(float)
    total = w.sum() - E @ w
    count = pos.sum() - E @ pos
    return np.asarray(total, float).ravel(), np.rint(np.asarray(count, float).ravel()).astype(np.int64)


# ----------------------------------------------------------------------------
# sampler
# ----------------------------------------------------------------------------
def _block_size(N, per_row=1):
    return int(max(1, min(4096, (1 << 22) // max(N * per_row, 1))))


def _draw(Wb, k, replace, rng):
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
    >>> w = popularity_weights([0, 0, 0, 1, 2, 2, 3], 1.0)
    >>> neg = sample_popularity_negatives(["a", "b"], w, 4, held_out=[0, 3], rng=0)
    >>> neg.groupby("user").size().tolist(), bool((neg.q > 0).all())
    ([3, 3], True)
    >>> neg.n_candidates.unique().tolist()          # a draws from items 1-3, b from 0-2
    [3]
    >>> bool(neg[neg.user == "a"].item.isin([1, 2, 3]).all())   # never the held-out item 0
    True
    """
    w, item_index = _weights_array(item_weights)
    N = w.size
    n = check_int(n, "n", low=2)
    users = pd.Index(pd.Series(users).to_numpy())
    if users.size == 0:
        raise ValueError("users must be non-empty")
    if pd.Index(id_text(users)).has_duplicates:
        raise ValueError(f"users must be unique; "
                         f"{_show(users[pd.Index(id_text(users)).duplicated()][0])} repeats")
    hp = None
    if held_out is not None:
        ho = np.asarray(held_out)
        if ho.shape != (users.size,):
            raise ValueError(f"held_out must have one item per user ({users.size}); got shape {ho.shape}")
        hp = pd.Index(id_text(item_index)).get_indexer(id_text(ho))
        if np.any(hp < 0):
            raise ValueError(f"item_weights has no weight for held-out item {_show(ho[np.flatnonzero(hp < 0)[0]])}")
    E = _exclusion_matrix(users, exclude, item_index, hp)
    total, n_cand = _candidate_totals(w, E)
    k = n - 1
    need = 1 if replace else k
    if np.any(n_cand < need):
        i = int(np.argmin(n_cand))
        raise ValueError(f"user {_show(users[i])} has only {n_cand[i]} candidate negatives (positive weight, "
                         f"not excluded); n-1={k} distinct draws need {need}")
    rng = np.random.default_rng(rng)
    bs = _block_size(N)
    out_items, out_q = [], []
    for s in range(0, users.size, bs):
        e = min(s + bs, users.size)
        Wb = np.tile(w, (e - s, 1))
        blk = E[s:e]
        Wb[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = 0.0
        idx = _draw(Wb, k, bool(replace), rng)
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
    were shuffled (issue 26). Users are sorted by id when the log has ids,
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


def _check_ties(ties):
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES} for popularity-sampled negatives (the HT estimator "
                         f"needs a fixed rule); got {ties!r}")
    return ties


def _above(neg, pos, ties):
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
    ties = _check_ties(ties)
    pos = np.asarray(pos_scores, dtype=float)
    neg = np.asarray(neg_scores, dtype=float)
    q = np.asarray(neg_q, dtype=float)
    if pos.ndim != 1 or pos.size == 0:
        raise ValueError(f"pos_scores must be a non-empty 1-D array; got shape {pos.shape}")
    if neg.ndim != 2 or neg.shape[0] != pos.size or neg.shape[1] < 1:
        raise ValueError(f"neg_scores must have shape (M, k) = ({pos.size}, >=1); got {neg.shape}")
    if q.shape != neg.shape:
        raise ValueError(f"neg_q must have the shape of neg_scores {neg.shape}; got {q.shape}")
    if not np.all(np.isfinite(pos)):
        raise ValueError("pos_scores must be finite (no NaN/inf)")
    if np.any(np.isinf(neg)):
        raise ValueError("neg_scores must not contain inf (NaN marks a missing negative)")
    valid = ~np.isnan(neg)
    if np.any(valid.sum(axis=1) < 1):
        raise ValueError("every user needs at least one negative")
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
        above = _above(neg, pos[:, None], ties) & valid
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
    ties = _check_ties(ties)
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
    score = pd.to_numeric(df[score_col], errors="coerce")
    if score.isna().any() or not np.all(np.isfinite(score)):
        i = int(np.flatnonzero((score.isna() | ~np.isfinite(score)).to_numpy())[0])
        raise ValueError(f"column {score_col!r} must hold finite numbers; got {_show(df[score_col].iloc[i])} "
                         f"in {at(i)}")
    label = check_int_column(df[label_col], label_col, at)
    if not label.isin([0, 1]).all():
        i = int(np.flatnonzero(~label.isin([0, 1]).to_numpy())[0])
        raise ValueError(f"column {label_col!r} must be 0 (negative) or 1 (held-out item); got {label.iloc[i]} "
                         f"in {at(i)}")
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
                         f"user {_show(u)} of model {_show(m)} has {v} (first row: {at(first[(m, u)])})")
    if (npos["size"] < 2).any():
        (m, u) = next(k for k, v in npos["size"].items() if v < 2)
        raise ValueError(f"user {_show(u)} of model {_show(m)} has no negatives ({at(first[(m, u)])})")
    has_q = q_col in df.columns
    users_all = pd.Index(pd.unique(work["user"]))
    w_arr = E = item_index = None
    if item_weights is not None:
        wser = check_item_weights(item_weights, work["item"].to_numpy())
        w_arr, item_index = wser.to_numpy(float), pd.Index(id_text(wser.index))
        pos_rows = work[work.label == 1].drop_duplicates("user")
        hp = item_index.get_indexer(pos_rows.set_index("user")["item"].reindex(users_all).to_numpy())
        E = _exclusion_matrix(users_all, exclude, item_index, hp)
        total, n_cand = _candidate_totals(w_arr, E)
        neg = work[work.label == 0]
        upos = users_all.get_indexer(neg["user"])
        ipos = item_index.get_indexer(neg["item"])
        if np.any(w_arr[ipos] <= 0):
            i = int(np.flatnonzero(w_arr[ipos] <= 0)[0])
            raise ValueError(f"sampled negative {_show(neg['item'].iloc[i])} of user {_show(neg['user'].iloc[i])} has "
                             f"weight 0 in item_weights: it cannot have been drawn ({at(neg['row'].iloc[i])})")
        hit = np.asarray(E[upos, ipos]).ravel() > 0
        if hit.any():
            i = int(np.flatnonzero(hit)[0])
            raise ValueError(f"sampled negative {_show(neg['item'].iloc[i])} of user {_show(neg['user'].iloc[i])} is "
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
                             f"{_show(df[q_col].iloc[i])} in {at(i)}")
    if n_candidates_col in df.columns:
        # one value per (model, user), on its negatives' rows (the held-out row may be empty)
        nc = pd.Series(pd.to_numeric(df[n_candidates_col], errors="coerce").to_numpy(float))
        per = nc.groupby([work["model"].to_numpy(), work["user"].to_numpy()], sort=False).agg(["min", "max"])
        bad = per["min"].isna() | (per["min"] != per["max"]) | (per["min"] < 1) | (per["min"] != np.round(per["min"]))
        if bad.any():
            m, u = per.index[np.flatnonzero(bad.to_numpy())[0]]
            raise ValueError(f"column {n_candidates_col!r} must hold one integer >= 1 per user; user "
                             f"{_show(u)} of model {_show(m)} has {per.loc[(m, u)].tolist()} "
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
        raise ValueError(f"user {_show(u)} of model {_show(m)} has {int(distinct[(m, u)])} distinct sampled "
                         f"negatives but n_candidates = {int(stated[(m, u)])} (the items it draws from): the "
                         f"table is inconsistent (first row: {at(first[(m, u)])})")
    mass = g["q"].sum()
    heavy = mass > 1 + 1e-6
    if heavy.any():
        m, u = mass.index[np.flatnonzero(heavy.to_numpy())[0]]
        raise ValueError(f"the draw probabilities q of the distinct negatives of user {_show(u)} of model "
                         f"{_show(m)} sum to {mass[(m, u)]:.6g} > 1: they cannot be the probabilities of "
                         f"distinct candidates (first row: {at(first[(m, u)])})")


# ----------------------------------------------------------------------------
# ground truth and simulation from real scores
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PopularityTruth:
    """Exact per-user quantities of a model under popularity sampling (from all scores).

    Attributes
    ----------
    ranks : ndarray of int
        R_u = 1 + |A_u|, the rank among the user's candidates (+ held-out item).
    mass_above : ndarray
        Q_u (eq 2).
    n_candidates : ndarray of int
        N_u - 1, the number of candidates.
    inv_q_above : ndarray
        sum_{j in A_u} 1/q_j (gives Var of the HT estimate, eq 4).
    max_inv_q_above : ndarray
        max_{j in A_u} 1/q_j (0 when A_u is empty): the largest term of eq 4
        times n - 1 (bounds a single draw's contribution).
    """

    ranks: np.ndarray
    mass_above: np.ndarray
    n_candidates: np.ndarray
    inv_q_above: np.ndarray
    max_inv_q_above: np.ndarray

    def ht_variance(self, n):
        """Var[A_hat_u] = (sum_{A_u} 1/q_j - |A_u|^2) / (n - 1) for sample size n."""
        A = self.ranks - 1.0
        return (self.inv_q_above - A * A) / (check_int(n, "n", low=2) - 1)


def _prepare_scores(scorer, train, test_items, item_weights):
    from .recommenders import check_scoring_inputs

    M, N, t, X = check_scoring_inputs(scorer, train, test_items)
    w, _ = _weights_array(item_weights, N)
    E = _exclusion_matrix(np.arange(M), X if X is not None else None, pd.RangeIndex(N), t)
    total, n_cand = _candidate_totals(w, E)
    if np.any(n_cand < 1):
        u = int(np.argmin(n_cand))
        raise ValueError(f"user {u} has no candidate negatives (positive weight, not a training item)")
    return M, N, t, w, E, total, n_cand


def _score_blocks(scorer, M, block_size):
    from .recommenders import iter_score_blocks

    return iter_score_blocks(scorer, M, block_size)


def popularity_truth(scorer, train, test_items, item_weights, *, ties="pessimistic", block_size=None):
    """R_u, Q_u, N_u and sum_{A_u} 1/q_j of every user, from the full scores.

    Parameters
    ----------
    scorer : Recommender (fitted) or array (M, N)
    train : sparse or dense (M, N) or None
        History: excluded from the candidates (None: nothing excluded but
        the held-out item).
    test_items : array of int, shape (M,)
    item_weights : array_like, shape (N,)
        Weights over the N item columns.
    ties : {"pessimistic", "optimistic"}, keyword-only

    Returns
    -------
    PopularityTruth

    Examples
    --------
    >>> S = np.array([[0.9, 0.5, 0.1, 0.7]])
    >>> t = popularity_truth(S, None, [1], [1.0, 1.0, 2.0, 4.0])
    >>> t.ranks.tolist(), t.mass_above.round(4).tolist(), t.n_candidates.tolist()
    ([3], [0.7143], [3])
    """
    ties = _check_ties(ties)
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    R = np.empty(M, np.int64)
    Q = np.empty(M)
    V = np.empty(M)
    Vmax = np.empty(M)
    inv_w = np.divide(1.0, w, out=np.zeros_like(w), where=w > 0)
    for s, e, S in _score_blocks(scorer, M, block_size):
        if np.isnan(S).any():
            raise ValueError(f"scores contain NaN (users {s}..{e - 1})")
        ts = S[np.arange(e - s), t[s:e]]
        cand = np.broadcast_to(w > 0, S.shape).copy()
        blk = E[s:e]
        cand[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = False
        A = _above(S, ts[:, None], ties) & cand
        R[s:e] = 1 + A.sum(axis=1)
        Q[s:e] = np.minimum((A @ w) / total[s:e], 1.0)
        V[s:e] = (A @ inv_w) * total[s:e]
        Vmax[s:e] = np.where(A, inv_w, 0.0).max(axis=1) * total[s:e]
    return PopularityTruth(R, Q, n_cand, V, Vmax)


def _sim_blocks(scorer, train, test_items, item_weights, n, replace, ties, rng, block_size, size):
    """Yield per block and repeat: (s, e, rep, pos scores, neg scores, neg q, n_cand)."""
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    k = check_int(n, "n", low=2) - 1
    if not replace and np.any(n_cand < k):
        u = int(np.argmin(n_cand))
        raise ValueError(f"n={n} too large for sampling without replacement: user {u} has only "
                         f"{int(n_cand[u])} candidates (needs n-1={k})")
    rng = np.random.default_rng(rng)
    bs = block_size or _block_size(N, 2)
    for s, e, S in _score_blocks(scorer, M, bs):
        if np.isnan(S).any():
            raise ValueError(f"scores contain NaN (users {s}..{e - 1})")
        ar = np.arange(e - s)
        ts = S[ar, t[s:e]]
        Wb = np.tile(w, (e - s, 1))
        blk = E[s:e]
        Wb[np.repeat(ar, np.diff(blk.indptr)), blk.indices] = 0.0
        for rep in range(size):
            idx = _draw(Wb, k, replace, rng)
            yield (s, e, rep, ts, np.take_along_axis(S, idx, axis=1),
                   np.take_along_axis(Wb, idx, axis=1) / total[s:e, None], n_cand[s:e], M, w, E)


def simulate_popularity_log(scorer, train, test_items, item_weights, n, *, replace=True,
                            ties="pessimistic", block_size=None, rng=None):
    """One popularity-sampled evaluation from real scores, with every draw logged.

    Each user draws n - 1 negatives from its candidates with probabilities
    q (eq 1; history = ``train`` excluded) and the held-out item is ranked
    among them with the model's scores: what a logged ``popN`` evaluation
    records. The returned log carries the item weights and exclusions, so
    :func:`sampling_lib.estimators.popularity_bounds` applies.

    Returns
    -------
    PopularityLog

    Examples
    --------
    >>> S = np.tile(np.arange(6.0)[::-1], (2, 1))       # item 0 best ... item 5 worst
    >>> log = simulate_popularity_log(S, None, [0, 5], [1, 1, 1, 1, 1, 1.0], 4, rng=0)
    >>> log.x.tolist(), log.n_candidates.tolist()       # the best item is never beaten
    ([0, 3], [5, 5])
    """
    if replace not in (True, False):
        raise TypeError(f"replace must be True or False; got {replace!r}")
    ties = _check_ties(ties)
    parts = []
    meta = None
    for s, e, _, ts, neg, q, nc, M, w, E in _sim_blocks(scorer, train, test_items, item_weights, n,
                                                         replace, ties, rng, block_size, 1):
        parts.append((ts, neg, q, nc))
        meta = (w, E)
    ts, neg, q, nc = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return popularity_log(ts, neg, q, nc, ties=ties, item_weights=meta[0], excluded=meta[1])


def simulate_popularity_ranks(scorer, train, test_items, item_weights, n, *, size=1, replace=True,
                              ties="pessimistic", block_size=None, rng=None):
    """Repeated popularity-sampled evaluations from real scores: X_u and the HT estimate only.

    Every user block is scored once and ``size`` independent sets of n - 1
    negatives are drawn for it (for Monte Carlo checks of eqs 3-4).

    Returns
    -------
    x : ndarray of int, shape (size, M)
        X_u = r_u - 1 per repeat.
    ht : ndarray, shape (size, M)
        A_hat_u (eq 4) per repeat.

    Examples
    --------
    >>> S = np.tile(np.arange(6.0)[::-1], (2, 1))
    >>> x, ht = simulate_popularity_ranks(S, None, [0, 5], np.ones(6), 4, size=3, rng=0)
    >>> x.shape, x[:, 0].tolist(), ht[:, 1].tolist()   # all 5 candidates above user 1's item
    ((3, 2), [0, 0, 0], [5.0, 5.0, 5.0])
    """
    ties = _check_ties(ties)
    size = check_int(size, "size", low=1)
    cur = None
    for s, e, rep, ts, neg, q, nc, M, w, E in _sim_blocks(scorer, train, test_items, item_weights, n,
                                                           replace, ties, rng, block_size, size):
        if cur is None:
            cur = (np.empty((size, M), np.int64), np.empty((size, M)))
        above = _above(neg, ts[:, None], ties)
        cur[0][rep, s:e] = above.sum(axis=1)
        cur[1][rep, s:e] = (above / q).sum(axis=1) / neg.shape[1]
    return cur


# ----------------------------------------------------------------------------
# the rank-mass curve (its estimation from the logs: sampling_lib.estimators.rank_mass_curve)
# ----------------------------------------------------------------------------
def check_draws(log, what):
    if not isinstance(log, PopularityLog):
        raise TypeError(f"log must be a PopularityLog; got {type(log).__name__}")
    if not log.has_draws:
        raise ValueError(f"{what} needs the logged negatives (their q and whether they beat the held-out "
                         "item); this log has only the sampled ranks")


@dataclass(frozen=True)
class RankMassCurve:
    """The average fraction rho(Q) of candidates whose q-mass position is below Q (eq 5).

    ``rho`` is increasing from rho(0) = 0 to rho(1) = 1; rho(Q) = Q under
    uniform sampling. :meth:`mass_of` is its inverse G: the q-mass above a
    held-out item with a fraction rho of the candidates above it.

    Attributes
    ----------
    mass : ndarray
        Grid of Q in [0, 1] (denser near 0).
    rho : ndarray
        rho(Q) on the grid.
    draws : int
        Logged negatives used (0 for :meth:`uniform`).
    """

    mass: np.ndarray
    rho: np.ndarray
    draws: int = 0

    @classmethod
    def uniform(cls):
        """rho(Q) = Q: the curve of uniform sampling ("pretend uniform")."""
        g = np.linspace(0.0, 1.0, 3)
        return cls(g, g.copy(), 0)

    def rho_of(self, Q):
        """rho(Q) by linear interpolation."""
        return np.interp(np.asarray(Q, float), self.mass, self.rho)

    def mass_of(self, rho):
        """G(rho) = rho^{-1}: the q-mass above a fraction rho of the candidates."""
        return np.interp(np.asarray(rho, float), self.rho, self.mass)


def mass_grid(size):
    """The grid of Q in [0, 1] of the rank-mass curves: uniform and geometric parts (denser near 0)."""
    g = np.concatenate([np.linspace(0.0, 1.0, size), np.geomspace(1e-7, 1.0, size)])
    return np.unique(np.concatenate([[0.0], g, [1.0]]))


def exact_rank_mass_curve(scorer, train, test_items, item_weights, *, grid_size=1025, block_size=None):
    """The average rank-mass curve rho(Q) = mean_u rho_u(Q), computed from all the scores.

    For user u the candidates are ordered by score (descending; equal scores
    by item index) and rho_u is the piecewise-linear curve through the points
    (mass of the first k candidates, k / (N_u - 1)), k = 0..N_u - 1: the
    exact version of what :func:`sampling_lib.estimators.rank_mass_curve` estimates from the logged
    negatives. A held-out item with q-mass Q_u above it has
    R_u - 1 = (N_u - 1) rho_u(Q_u) (with the pessimistic tie rule).

    Returns
    -------
    RankMassCurve

    Examples
    --------
    >>> S = np.array([[0.9, 0.1, 0.5, 0.7]])
    >>> c = exact_rank_mass_curve(S, None, [1], [2.0, 1.0, 1.0, 0.0])    # candidates 0, then 2
    >>> c.rho_of([0.25, 0.5, 1.0]).tolist()            # item 0 holds mass 2/3, half the candidates
    [0.1875, 0.375, 1.0]
    """
    M, N, t, w, E, total, n_cand = _prepare_scores(scorer, train, test_items, item_weights)
    mass = mass_grid(check_int(grid_size, "grid_size", low=3))
    rho = np.zeros(mass.size)
    for s, e, S in _score_blocks(scorer, M, block_size):
        cand = np.broadcast_to(w > 0, S.shape).copy()
        blk = E[s:e]
        cand[np.repeat(np.arange(e - s), np.diff(blk.indptr)), blk.indices] = False
        for b in range(e - s):
            j = np.flatnonzero(cand[b])
            order = j[np.argsort(-S[b, j], kind="stable")]
            P = np.concatenate([[0.0], np.cumsum(w[order]) / total[s + b]])
            P[-1] = 1.0
            rho += np.interp(mass, P, np.arange(P.size) / (P.size - 1))
    return RankMassCurve(mass, rho / M, 0)


def mass_rank_bounds(candidate_q, Q):
    """Sharp bounds on |A| for a set A of candidates with q-mass Q (no logs).

    k_min(Q) = min{k : mass of the k most probable candidates >= Q} and
    k_max(Q) = max{k : mass of the k least probable candidates <= Q}; every
    set with mass Q has between k_min and k_max items, and both are attained
    by the models ranking the most (resp. least) popular items first.

    Parameters
    ----------
    candidate_q : array_like
        q_j of one user's candidates (sum 1).
    Q : array_like
        Masses in [0, 1].

    Returns
    -------
    k_min, k_max : ndarray of int

    Examples
    --------
    >>> mass_rank_bounds([0.5, 0.25, 0.125, 0.125], [0.0, 0.5, 0.75, 1.0])
    (array([0, 1, 2, 4]), array([0, 3, 3, 4]))
    """
    q = np.asarray(candidate_q, float)
    Q = np.asarray(Q, float)
    desc = np.sort(q)[::-1]
    P = np.concatenate([[0.0], np.cumsum(desc)])
    B = np.concatenate([[0.0], np.cumsum(desc[::-1])])
    eps = 1e-12 * max(1.0, float(P[-1]))
    kmin = np.searchsorted(P, Q - eps, side="left")
    kmax = np.searchsorted(B, Q + eps, side="right") - 1
    return np.minimum(kmin, q.size), np.clip(kmax, 0, q.size)


def user_mass_rank_bounds(train, test_items, item_weights, mass_above):
    """Per user, the no-log bounds k_min(Q_u) <= R_u - 1 <= k_max(Q_u) of :func:`mass_rank_bounds`.

    Parameters
    ----------
    train : sparse or dense (M, N) or None
        History (excluded from the candidates).
    test_items : array of int, shape (M,)
    item_weights : array_like, shape (N,)
    mass_above : array_like, shape (M,)
        Q_u of each user (e.g. :attr:`PopularityTruth.mass_above`).

    Returns
    -------
    k_min, k_max : ndarray of int, shape (M,)

    Examples
    --------
    >>> user_mass_rank_bounds(None, [0], [1.0, 4.0, 2.0, 2.0], [0.5])    # candidates q = .5, .25, .25
    (array([1]), array([2]))
    """
    t = np.asarray(test_items)
    M = t.size
    w, _ = _weights_array(item_weights)
    N = w.size
    X = None if train is None else sparse.csr_matrix(train)
    if X is not None and X.shape != (M, N):
        raise ValueError(f"train must have shape (len(test_items), len(item_weights)) = {(M, N)}; got {X.shape}")
    Q = np.asarray(mass_above, float)
    if Q.shape != (M,) or np.any(~((Q >= 0) & (Q <= 1))):
        raise ValueError(f"mass_above must hold {M} values in [0, 1]; got shape {Q.shape}")
    E = _exclusion_matrix(np.arange(M), X, pd.RangeIndex(N), t)
    kmin = np.empty(M, np.int64)
    kmax = np.empty(M, np.int64)
    for u in range(M):
        keep = w > 0
        keep[E.indices[E.indptr[u]:E.indptr[u + 1]]] = False
        cq = w[keep] / w[keep].sum()
        a, b = mass_rank_bounds(cq, Q[u:u + 1])
        kmin[u], kmax[u] = a[0], b[0]
    return kmin, kmax


def bernstein_tolerance(variance, bound, pvalue=1e-4):
    """Deviation t with P(|S - E S| >= t) <= pvalue for any sum S of independent terms.

    Bernstein's inequality: if every centred term is bounded by ``bound`` in
    absolute value and Var S = ``variance``, then
    P(|S - E S| >= t) <= 2 exp(-(t^2 / 2) / (variance + bound t / 3)); the
    returned t solves 2 exp(...) = pvalue. Unlike a normal z-score it stays
    valid for heavy-tailed terms (e.g. the 1/q_j of rare items in eq 4): it
    grows with ``bound``.

    Examples
    --------
    >>> round(bernstein_tolerance(1.0, 0.0, 1e-4) / 1.0, 3)    # bounded-free limit: sqrt(2 log(2/p))
    4.45
    """
    v = check_float(variance, "variance", low=0.0)
    b = check_float(bound, "bound", low=0.0)
    p = check_float(pvalue, "pvalue", 0.0, 1.0, low_open=True, high_open=True)
    L = math.log(2.0 / p)
    return L * b / 3.0 + math.sqrt((L * b / 3.0) ** 2 + 2.0 * L * v)


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
