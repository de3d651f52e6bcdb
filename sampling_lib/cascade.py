"""Correcting a published cascade evaluation: a retriever's top-m, with or without random negatives.

LLM-reranker papers score each test user's held-out item against a cheap retriever's top m candidates
(LlamaRec: the top 20), or against those plus r random negatives, and report the top-K metrics among
the items scored as the model's quality. Neither is the metric over the full catalogue. Given the costly
model's scores of every candidate it scored, this module corrects both:

* **top-m plus r random negatives** (the tail drawn uniformly without replacement from the user's
  candidates outside the head): x_u, the head items scored at or above the held-out item, is known
  exactly; the tail's sampled rank is hypergeometric given the tail rank R - 1 - x_u. That is the
  stratified design of :mod:`sampling_lib.stratarun` with one tail stage, and
  :func:`sampling_lib.estimators.strata_estimate` corrects it to the full catalogue. Beside that estimate
  (which leans on a smooth prior over the tail ranks below the tail's resolution),
  :func:`cascade_bounds` gives the bounds the design alone guarantees, whatever the tail ranks:
  ``bound_low`` / ``bound_high`` hold their interval;
* **top-m only**: the data give x_u and nothing about the tail. The global rank lies anywhere in
  1 + x_u .. 1 + x_u + T_u (T_u = N_u - 1 - m_u tail items, all below or all above), so the metric is
  bounded, not estimated: ``bound_low`` / ``bound_high`` are the means of F(1 + x_u + T_u) and F(1 + x_u)
  (F non-increasing in the rank), the reported metric is the upper bound, and the interval
  [``ci_low``, ``ci_high``] is the user bootstrap's lower end of the lower bound and upper end of the upper
  bound (covering the identified set, Imbens and Manski 2004, conservatively).

The table has one row per scored candidate: ``user``, ``score``, ``label`` (1 = the held-out item, 0 = a
negative), ``stratum`` (``"head"``: the retriever's top m; ``"tail"``: a random negative), and optionally
``model`` (several models scored on the same candidates) and ``item`` (then an item listed twice, or in
both strata, is refused). The held-out item's own row may carry either stratum (it is always scored).
N_u counts the user's candidates, the held-out item included (the catalogue less the history).

A file that keeps ranks instead of scores gives one row per user (:data:`RANK_COLUMNS`): ``user``, ``head``
(the head's negatives m_u), ``head_rank`` (1 + the head negatives ranked above the held-out item) and, with
random negatives, ``tail_size`` (r_u) and ``tail_rank`` (1 + the sampled ones above it); optionally
``model``. Its ties were resolved when the ranks were computed.

References
----------
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments. CIKM 2006
   (statAP / infAP: metrics from judgments sampled with known inclusion probabilities).
.. [IM04] Imbens, Manski. Confidence intervals for partially identified parameters. Econometrica 72(6),
   2004.
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016 (the tail's prior).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ._validation import check_int, check_int_column, show_value
from .counts import bootstrap_loop
from .inference import percentile_interval
from .kernels import check_strata
from .metrics import metric_matrix, parse_metrics
from .ranking import TIE_RULES

__all__ = ["cascade_bounds", "cascade_cells", "cascade_estimate", "cascade_requests", "design_interval",
           "head_only_bounds", "CASCADE_COLUMNS", "RANK_COLUMNS", "WEIGHT_MAX"]

#: The columns of :func:`cascade_cells`.
CASCADE_COLUMNS = ("model", "user", "n_items", "head", "head_above", "tail_size", "tail_rank")
#: A cascade's rank table, one row per (model, user): required columns, then optional ones.
RANK_COLUMNS = (("user", "head", "head_rank"), ("tail_size", "tail_rank", "model"))
#: The ``method`` of a head-only table, and how the views label its bounds (``_display``, ``plotting``).
BOUNDS_METHOD = "bounds (head only)"
BOUNDS_LABEL = "bounds (tail unscored)"
#: How the views label the design-only interval of a cascade with random negatives.
DESIGN_BOUNDS_LABEL = "design-only interval"
#: :func:`cascade_bounds` uses its design-based high bound for a user where that bound's largest weight 1/h is
#: at most this (h: the chance that the tail sample misses an item set that would leave the held-out item in the
#: top K), and the sure bound elsewhere. Either is valid; the choice only trades the bound's variance.
WEIGHT_MAX = 2.0


def cascade_cells(table, n_items, *, ties="pessimistic"):
    """Each (model, user)'s stratified cell from a cascade's score table (module docstring).

    Parameters
    ----------
    table : pandas.DataFrame
        One row per scored candidate: ``user``, ``score``, ``label``, ``stratum`` and optionally ``model``
        and ``item``. Or a rank table, one row per user (:data:`RANK_COLUMNS`; module docstring).
    n_items : int, mapping or pandas.Series
        N_u, the user's candidates with the held-out item: one int for every user, or one per user (every
        user of the table must be listed).
    ties : {"pessimistic", "optimistic"}
        A negative scored equal to the held-out item ranks above it (pessimistic) or below. A rank table's
        ties were resolved when its ranks were computed: only the default is accepted with one.

    Returns
    -------
    pandas.DataFrame
        :data:`CASCADE_COLUMNS`: N_u, the head's negatives m_u, those at or above the held-out item x_u,
        the tail's negatives s_u and the held-out item's rank among them 1 + (tail items above).

    Examples
    --------
    >>> t = pd.DataFrame({"user": [1] * 5, "score": [0.5, 0.9, 0.1, 0.7, 0.2], "label": [1, 0, 0, 0, 0],
    ...                   "stratum": ["head", "head", "head", "tail", "tail"]})
    >>> cascade_cells(t, 100)[["head", "head_above", "tail_size", "tail_rank"]].to_numpy().tolist()
    [[2, 1, 2, 2]]
    """
    from .io._tables import _check_not_blank

    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame; got {type(table).__name__}")
    _check_not_blank(table, [c for c in ("user", "model") if c in table.columns], "cascade")
    if ties not in ("pessimistic", "optimistic"):
        raise ValueError(f"ties must be 'pessimistic' or 'optimistic' (a cascade table has no random tie "
                         f"keys; {sorted(TIE_RULES)} elsewhere); got {show_value(ties)}")
    if "head_rank" in table.columns and "score" not in table.columns:
        if ties != "pessimistic":
            raise ValueError(f"ties={ties!r} applies to a scores table; a rank table's ranks already resolved "
                             "their ties")
        return _cells_from_ranks(table, n_items)
    missing = [c for c in ("user", "score", "label", "stratum") if c not in table.columns]
    if missing:
        raise ValueError(f"table needs the columns user, score, label, stratum (and optionally model, item), or "
                         f"a rank table's user, head, head_rank (and optionally tail_size with tail_rank, model); "
                         f"missing {missing}")
    t = table.copy()
    named = "model" in t.columns
    if not named:
        t["model"] = "model"

    def of(model):          # the model, where the table names one
        return f" (model {show_value(model)})" if named else ""
    score = pd.to_numeric(t["score"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(score).all():
        j = int(np.flatnonzero(~np.isfinite(score))[0])
        raise ValueError(f"score must be finite numbers; row {j} holds {show_value(t['score'].iloc[j])}")
    t["score"] = score
    label = pd.to_numeric(t["label"], errors="coerce")
    if not label.isin([0, 1]).all():
        j = int(np.flatnonzero(~label.isin([0, 1]).to_numpy())[0])
        raise ValueError(f"label must be 1 (the held-out item) or 0 (a negative); row {j} holds "
                         f"{show_value(t['label'].iloc[j])}")
    t["label"] = label.astype(int)
    stratum = t["stratum"].astype(str).str.strip().str.lower()
    bad = ~stratum.isin(["head", "tail"]) & (t["label"] == 0)
    if bad.any():
        j = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"stratum must be 'head' (the retriever's top m) or 'tail' (a random negative); row {j} "
                         f"holds {show_value(t['stratum'].iloc[j])}")
    t["stratum"] = stratum
    if "item" in t.columns:
        dup = t.duplicated(["model", "user", "item"])
        if dup.any():
            j = int(np.flatnonzero(dup.to_numpy())[0])
            raise ValueError(f"item {show_value(t['item'].iloc[j])} is listed twice for user "
                             f"{show_value(t['user'].iloc[j])}{of(t['model'].iloc[j])}: each "
                             "candidate is scored once, in the head or in the tail sample, never both")
    held = t[t["label"] == 1]
    twice = held.duplicated(["model", "user"])
    if twice.any():
        r = held[twice].iloc[0]
        raise ValueError(f"user {show_value(r['user'])}{of(r['model'])} has two rows with "
                         "label 1: one held-out item per user")
    h = held.set_index(["model", "user"])["score"]
    neg = t[t["label"] == 0]
    key = pd.MultiIndex.from_frame(neg[["model", "user"]])
    hs = h.reindex(key).to_numpy()
    if np.isnan(hs).any():
        j = int(np.flatnonzero(np.isnan(hs))[0])
        raise ValueError(f"user {show_value(neg['user'].iloc[j])}{of(neg['model'].iloc[j])} "
                         "has negatives but no row with label 1: its held-out item must be scored")
    above = neg["score"].to_numpy() >= hs if ties == "pessimistic" else neg["score"].to_numpy() > hs
    parts = pd.DataFrame({"model": neg["model"].to_numpy(), "user": neg["user"].to_numpy(),
                          "head": (neg["stratum"] == "head").to_numpy().astype(np.int64),
                          "tail": (neg["stratum"] == "tail").to_numpy().astype(np.int64)})
    parts["head_above"] = parts["head"] * above
    parts["tail_above"] = parts["tail"] * above
    sums = parts.groupby(["model", "user"], sort=False)[["head", "head_above", "tail", "tail_above"]].sum()
    out = h.to_frame("held").join(sums, how="left").fillna(0).astype({"head": np.int64, "tail": np.int64})
    out = out.reset_index()
    out["n_items"] = _n_items_of(n_items, out["user"])
    out = out.rename(columns={"tail": "tail_size"})
    out["tail_rank"] = 1 + out["tail_above"].astype(np.int64)
    out["head_above"] = out["head_above"].astype(np.int64)
    return _checked_cells(out, of)


def _checked_cells(out, of):
    """The cells of either table form, checked against N_u (``of``: how a row's model is named in messages)."""
    over = (out["head"] + out["tail_size"] > out["n_items"] - 1).to_numpy()
    if over.any():
        r = out[over].iloc[0]
        raise ValueError(f"user {show_value(r['user'])}{of(r['model'])} has {r['head']} head and "
                         f"{r['tail_size']} tail negatives, more than the {r['n_items'] - 1} other candidates its "
                         f"n_items = {r['n_items']} allows: N_u counts every candidate of the user, the held-out "
                         "item included")
    check_strata(out["n_items"].to_numpy(), out["head"].to_numpy(), out["head_above"].to_numpy(),
                 out["tail_size"].to_numpy(), out["tail_rank"].to_numpy())
    return out[list(CASCADE_COLUMNS)].reset_index(drop=True)


def _cells_from_ranks(table, n_items):
    """:func:`cascade_cells` of a rank table (:data:`RANK_COLUMNS`)."""
    required, optional = RANK_COLUMNS
    cols = [str(c) for c in table.columns]
    missing = [c for c in required if c not in cols]
    extra = [c for c in cols if c not in required + optional]
    if missing or extra or (("tail_size" in cols) != ("tail_rank" in cols)):
        raise ValueError(f"a cascade's rank table has the columns {', '.join(required)} and optionally "
                         f"tail_size with tail_rank, model; got {cols}")
    t = table.copy()
    named = "model" in cols
    if not named:
        t["model"] = "model"
    if "tail_size" not in cols:
        t["tail_size"], t["tail_rank"] = 0, 1
    for c in ("head", "head_rank", "tail_size", "tail_rank"):
        t[c] = check_int_column(t[c], c)
    def of(model):          # the model, where the table names one
        return f" (model {show_value(model)})" if named else ""
    twice = t.duplicated(["model", "user"])
    if twice.any():
        r = t[twice].iloc[0]
        raise ValueError(f"user {show_value(r['user'])}{of(r['model'])} has two rows: a rank table has one row "
                         "per user")
    for c, top in (("head_rank", "head"), ("tail_rank", "tail_size")):
        bad = (t[c] < 1) | (t[c] > t[top] + 1) | (t[top] < 0)
        if bad.any():
            j = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{c} must lie in 1..{top} + 1 (1 + the {top.replace('_size', '')} negatives ranked "
                             f"above the held-out item) with {top} >= 0; row {j + 1} has {c} {t[c].iloc[j]} and "
                             f"{top} {t[top].iloc[j]}")
    return _checked_cells(t.assign(head_above=t["head_rank"] - 1, n_items=_n_items_of(n_items, t["user"])), of)


def _n_items_of(n_items, users):
    """N_u of each user: an int for all, or looked up in a mapping / Series (every user must be there)."""
    if isinstance(n_items, (int, np.integer)):
        return np.full(len(users), check_int(n_items, "n_items", low=2), dtype=np.int64)
    if isinstance(n_items, dict):
        n_items = pd.Series(n_items)
    if not isinstance(n_items, pd.Series):
        raise TypeError("n_items must be an int (every user's N_u) or a mapping / Series user -> N_u; got "
                        f"{type(n_items).__name__}")
    got = n_items.reindex(pd.Index(users))
    if got.isna().any():
        lost = pd.Index(users)[got.isna().to_numpy()]
        raise ValueError(f"n_items lists no N_u for {lost.size} user(s) of the table, e.g. "
                         f"{show_value(lost[0])}: give every user's candidate count")
    return got.to_numpy(dtype=np.int64)


def head_only_bounds(n_items, heads, above, metrics=("recall@10", "ndcg@10")):
    """Per user, the metric at the best and the worst global rank a head-only cascade allows.

    With only the head scored, the global rank R_u lies in 1 + x_u .. 1 + x_u + T_u (T_u = N_u - 1 - m_u):
    the tail's items may all rank below the held-out item, or all above. F is non-increasing in R, so
    F(1 + x_u + T_u) <= F(R_u) <= F(1 + x_u) whatever the tail. :func:`cascade_bounds` with no tail sample.

    Returns
    -------
    (low, high) : ndarray, shape (M, m)
        One column per metric.

    Examples
    --------
    >>> lo, hi = head_only_bounds([100, 100], [20, 20], [0, 3], "recall@10")
    >>> lo.ravel().tolist(), hi.ravel().tolist()
    ([0.0, 0.0], [1.0, 1.0])
    """
    return cascade_bounds(n_items, heads, above, 0, 1, metrics)


def cascade_bounds(n_items, heads, above, tail_sizes, ranks, metrics=("recall@10", "ndcg@10")):
    """Per user, bounds on the metric that the design alone guarantees, whatever the tail ranks.

    A user with x_u head items above the held-out item and a uniform tail sample of s_u of its
    T_u = N_u - 1 - m_u tail items, c_u = r_u - 1 of them above, has the global rank
    R_u = 1 + x_u + Y_u with Y_u (tail items above) unknown in c_u .. c_u + T_u - s_u: every sampled item
    is placed, every unsampled one may rank above or below. F is non-increasing in R, so

    * **low** = F(1 + x_u + c_u + T_u - s_u) <= F(R_u), surely;
    * **high**, where the chance h(y) = C(T_u - y, s_u) / C(T_u, s_u) that the sample misses y given items is
      at least 1 / :data:`WEIGHT_MAX` for the y = k_u = K - 1 - x_u items that would still leave the held-out
      item in the top K: the design-based bound 1{c_u = 0} max_{y <= k_u} F(1 + x_u + y) / h(y). Given
      Y_u, c_u is hypergeometric, so its expectation over the tail draw is h(Y_u) max_y F(1 + x_u + y) / h(y)
      >= F(R_u) for every Y_u (0 when Y_u > k_u, where F(R_u) = 0). Elsewhere the sure bound
      F(1 + x_u + c_u) >= F(R_u) (the naive metric). The choice depends on (N_u, m_u, x_u, s_u) only, never on
      the draw, so the mean over users bounds the metric of the same users from above in expectation.

    Far below the tail's resolution (k_u s_u << T_u) h(k_u) is near 1: the high bound is then near the share
    of users whose sample holds no item above, which is what the data can tell. The low bound is near 0
    there: a sample of s_u cannot tell a user with no tail item above from one with K of them, so the data
    alone never certify that a user is in the top K (partial identification, Manski 2003; the interval of
    :func:`cascade_estimate`'s ``bound_low`` / ``bound_high`` covers the set as Imbens and Manski 2004).
    With s_u = 0 this is :func:`head_only_bounds`. The sample must be one uniform draw without replacement
    of a size fixed before scoring: a ladder that draws more for some users after seeing their ranks is not
    covered by the design-based bound.

    Parameters
    ----------
    n_items, heads, above, tail_sizes, ranks : array_like of int, shape (M,)
        N_u, m_u, x_u, s_u and r_u as :func:`sampling_lib.estimators.strata_estimate` (scalars broadcast).
    metrics : str or sequence of str
        Top-K metrics.

    Returns
    -------
    (low, high) : ndarray, shape (M, m)
        One column per metric.

    References
    ----------
    Manski (2003), Partial Identification of Probability Distributions, ch. 1-2; [IM04]; [YA06] (metrics
    from a sample with known inclusion probabilities: the weight 1/h).

    Examples
    --------
    >>> lo, hi = cascade_bounds(20_000, 20, [0, 0, 3], 19, [1, 2, 1], "recall@10")
    >>> lo.ravel().tolist(), np.round(hi.ravel(), 4).tolist()
    ([0.0, 0.0, 0.0], [1.0086, 0.0, 1.0057])
    """
    low, high, _ = _bounds(n_items, heads, above, tail_sizes, ranks, metrics)
    return low, high


def _bounds(n_items, heads, above, tail_sizes, ranks, metrics):
    """:func:`cascade_bounds`' (low, high) and the sure high bound F(1 + x_u + c_u) (the naive metric)."""
    parsed = parse_metrics(metrics)
    N, m, x, s, r = check_strata(n_items, heads, above, tail_sizes, ranks)
    T, c = N - 1 - m, r - 1
    k = max(K for _, _, K in parsed)
    F = np.vstack([metric_matrix(parsed, k), np.zeros((1, len(parsed)))])     # ranks 1..k, then 0 beyond
    low = F[np.minimum(1 + x + c + T - s, k + 1) - 1]
    sure = F[np.minimum(1 + x + c, k + 1) - 1]
    high = sure.copy()
    step = max(1, (1 << 22) // k)
    for a in range(0, x.size, step):
        b = slice(a, a + step)
        high[b] = _design_high(F, parsed, T[b], x[b], s[b], c[b], sure[b])
    return low, high, sure


def _design_high(F, parsed, T, x, s, c, sure):
    """:func:`cascade_bounds`' high bound of a block of users: design-based where its weight allows, else sure."""
    k = F.shape[0] - 1
    y = np.arange(k)[None, :]                                   # tail items above: 0..k-1
    i = y[:, :-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        # log h(y) = sum_{i<y} log(1 - s/(T - i)); -inf once fewer than s items are left to miss
        left = (T[:, None] - i - s[:, None]).astype(float)
        term = np.where(left > 0, np.log(np.maximum(left, 1.0) / np.maximum(T[:, None] - i, 1)), -np.inf)
        log_h = np.hstack([np.zeros((T.size, 1)), np.cumsum(term, axis=1)])
        out = sure.copy()
        for j, (_, _, K) in enumerate(parsed):
            kj = K - 1 - x                                      # tail items above that keep it in the top K
            fy = F[np.minimum(1 + x[:, None] + y, k + 1) - 1, j]
            ok = (y <= np.minimum(kj, T)[:, None]) & (fy > 0)
            ratio = np.where(ok, fy * np.exp(-log_h), 0.0)
            u0 = ratio.max(axis=1)
            last = np.clip(np.minimum(kj, T), 0, k - 1)
            weight = np.exp(-log_h[np.arange(T.size), last])
            use = (kj >= 0) & (weight <= WEIGHT_MAX)
            out[:, j] = np.where(use, np.where(c == 0, u0, 0.0), sure[:, j])
    return out


def _bounds_replicates(parts, n_boot, g):
    """The user bootstrap's replicates of the means of per-user arrays ``parts`` (each (M, m)), one (n_boot, m)
    array per part, the users drawn jointly (a multinomial over the distinct rows)."""
    M, m = parts[0].shape
    rows, counts = np.unique(np.hstack(parts), axis=0, return_counts=True)
    outs = bootstrap_loop(n_boot, g, lambda b, gen: gen.multinomial(M, counts / M, size=b),
                          lambda C: C @ rows / M, cells=rows.shape[0], desc="bootstrap bounds")
    reps = np.concatenate(outs)
    return [reps[:, i * m:(i + 1) * m] for i in range(len(parts))]


def _bounds_interval(low, high, n_boot, g, confidence_level):
    """The user bootstrap's percentile intervals of the mean low and the mean high bound, per metric (NaN with
    ``n_boot=0`` or one user): ``(low_lo, low_hi, high_lo, high_hi)``."""
    M, m = low.shape
    if n_boot == 0 or M < 2:
        return (np.full(m, np.nan),) * 4
    lo_b, hi_b = _bounds_replicates([low, high], n_boot, g)
    return (*percentile_interval(lo_b, confidence_level), *percentile_interval(hi_b, confidence_level))


def design_interval(n_items, heads, above, tail_sizes, ranks, metrics=("recall@10", "ndcg@10"), *, n_boot=1000,
                    rng=None, confidence_level=0.95):
    """The design-only interval of a cascade's metrics: :func:`cascade_estimate`'s ``bound_low`` / ``bound_high``.

    The low end is the user bootstrap's lower percentile end of the mean low bound of :func:`cascade_bounds`
    at ``confidence_level``; the high end the smaller of the upper ends of its mean high bound and of the mean
    sure high bound F(1 + x_u + c_u) (the naive metric), each at 1 - (1 - confidence_level)/2 (Bonferroni over
    the two: each is a valid upper bound, and which is tighter depends on the tail's resolution). So the truth
    escapes below with chance at most (1 - level)/2, and above at most as much, up to the bootstrap's
    approximation [IM04]. With ``n_boot=0`` (or one user): the mean low bound and the smaller mean high bound.

    Parameters
    ----------
    n_items, heads, above, tail_sizes, ranks, metrics
        As :func:`cascade_bounds`.
    n_boot : int >= 0, default 1000, keyword-only
    rng : None, int or numpy.random.Generator, keyword-only
        Seeds the user bootstrap.
    confidence_level : float in (0, 1), default 0.95, keyword-only

    Returns
    -------
    (low, high) : ndarray, shape (m,)
        One entry per metric.

    Examples
    --------
    >>> lo, hi = design_interval(20_000, 20, [0, 0, 3, 12], 19, [1, 2, 1, 1], "recall@10", n_boot=0)
    >>> lo.tolist(), np.round(hi, 4).tolist()
    ([0.0], [0.5036])
    """
    n_boot = check_int(n_boot, "n_boot", low=0)
    low, high, sure = _bounds(n_items, heads, above, tail_sizes, ranks, metrics)
    M, m = low.shape
    if n_boot == 0 or M < 2:
        return low.mean(axis=0), np.minimum(high.mean(axis=0), sure.mean(axis=0))
    lo_b, hi_b, su_b = _bounds_replicates([low, high, sure], n_boot, np.random.default_rng(rng))
    half = 1.0 - (1.0 - confidence_level) / 2.0
    return (percentile_interval(lo_b, confidence_level)[0],
            np.minimum(percentile_interval(hi_b, half)[1], percentile_interval(su_b, half)[1]))


def cascade_estimate(table, n_items, *, metrics=("recall@10", "ndcg@10"), n_boot=1000, rng=None,
                     confidence_level=0.95, ties="pessimistic"):
    """Full-catalogue top-K metrics of a cascade evaluation, one row per (model, metric).

    Parameters
    ----------
    table, n_items, ties
        As :func:`cascade_cells`.
    metrics, n_boot, rng, confidence_level
        As :func:`sampling_lib.estimate` (the bootstrap resamples users; each model's Generator is
        ``default_rng(rng)``, as ``estimate`` seeds its models).

    Returns
    -------
    pandas.DataFrame
        The columns of :data:`sampling_lib.correct.ESTIMATE_COLUMNS`. With tail samples:
        :func:`sampling_lib.estimators.strata_estimate`'s rows (the estimate leans on its smooth prior below
        the tail's resolution), with ``bound_low`` / ``bound_high`` the interval the design alone gives
        (:func:`cascade_bounds`, no prior; :func:`design_interval`). Head only (no user with tail items left
        has a tail sample): ``estimate`` NaN, ``bound_low`` / ``bound_high`` the identified set's ends,
        ``naive`` the metric among the items scored (= ``bound_high``), ``ci_low`` / ``ci_high`` the
        bootstrap's ends of the set (module docstring), ``method`` "bounds (head only)".

    Raises
    ------
    ValueError
        When some users with tail items left and fewer than k_max (the metrics' largest K) head items above
        have a tail sample and others none: which protocol the file follows is then unclear (give the
        tail's rows, or drop them all for the bounds). Users with k_max or more head items above need no
        tail (every metric is 0 for them), as in ``evaluate(..., proxy=)``'s own design.

    Examples
    --------
    >>> t = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2], "score": [0.5, 0.9, 0.1, 0.8, 0.3, 0.2],
    ...                   "label": [1, 0, 0, 1, 0, 0], "stratum": "head"})
    >>> e = cascade_estimate(t, 50, metrics="recall@1", n_boot=0)
    >>> e[["naive", "bound_low", "bound_high"]].iloc[0].tolist()
    [0.5, 0.0, 0.5]
    """
    from .estimators import strata_estimate

    cells = cascade_cells(table, n_items, ties=ties)
    parsed = parse_metrics(metrics)
    n_boot = check_int(n_boot, "n_boot", low=0)
    k_max = max(K for _, _, K in parsed)
    out = []
    for model, c in cells.groupby("model", sort=False):
        # users whose metrics the head does not settle (x < k_max) and with tail items left: with x >= k_max
        # every metric is 0 whatever the tail, so a stratified design samples no tail for them
        left = (c["n_items"] - 1 - c["head"] > 0) & (c["head_above"] < k_max)
        sampled = (c["tail_size"] > 0) & left
        if sampled.any() and not sampled[left].all():
            raise ValueError(f"model {show_value(model)}: {int((~sampled & left).sum()):,} of {int(left.sum()):,} "
                             f"users with tail items left and fewer than {k_max} head items above have no tail "
                             "sample and the others have one: give every user's random negatives (stratum "
                             "'tail'), or none for the head-only bounds")
        g = np.random.default_rng(rng)
        if sampled.any() or not left.any():
            cols = [c[k].to_numpy() for k in ("n_items", "head", "head_above", "tail_size", "tail_rank")]
            e = strata_estimate(*cols, metrics=metrics, n_boot=n_boot, rng=g, confidence_level=confidence_level,
                                model=model)
            e["bound_low"], e["bound_high"] = design_interval(*cols, parsed, n_boot=n_boot, rng=g,
                                                              confidence_level=confidence_level)
            out.append(e)
        else:
            out.append(_bounds_table(model, c, parsed, n_boot, g, confidence_level))
    return pd.concat(out, ignore_index=True)


def _bounds_table(model, c, parsed, n_boot, g, confidence_level):
    """The head-only rows of :func:`cascade_estimate`."""
    from ._estimate_rows import ESTIMATE_COLUMNS

    lo, hi = head_only_bounds(c["n_items"], c["head"], c["head_above"], parsed)
    ci_lo, _, n_lo, n_hi = _bounds_interval(lo, hi, n_boot, g, confidence_level)
    ci_hi = n_hi                                                         # the naive metric is the upper bound
    N, sizes = c["n_items"].to_numpy(), 1 + c["head"].to_numpy()
    common = lambda v: int(v[0]) if (v == v[0]).all() else pd.NA      # noqa: E731
    return pd.DataFrame({
        "model": model, "metric": [p[0] for p in parsed], "K": [p[2] for p in parsed],
        "naive": hi.mean(axis=0), "naive_ci_low": n_lo, "naive_ci_high": n_hi, "estimate": np.nan,
        "se": np.nan, "ci_low": ci_lo, "ci_high": ci_hi, "method": BOUNDS_METHOD, "scheme": "hypergeometric",
        "users": len(c), "N": common(N), "n": common(sizes), "confidence_level": confidence_level, "n_boot": n_boot,
        "sensitivity_low": np.nan, "sensitivity_high": np.nan, "bound_low": lo.mean(axis=0),
        "bound_high": hi.mean(axis=0), "below_resolution": True, "clipped": False, "full_halfwidth": np.nan,
        "precision_ratio": np.nan}, columns=list(ESTIMATE_COLUMNS))


def cascade_requests(held_out, n_items, exclude=None, *, proxy, head, tail_n, seed=0):
    """The candidates a "proxy top-m + r random" evaluation scores, to score outside Python and correct with
    :func:`cascade_estimate` (or ``sampling-lib estimate``).

    Each user's head is the proxy's top ``head`` negatives, and its tail sample ``tail_n`` negatives drawn
    uniformly without replacement from the rest of its candidates: exactly the first two stages of
    ``evaluate(..., proxy=, head=, tail_n=)`` (the same heads, tie rule and seeded orders), except that every
    user gets its tail sample (which users the head settles is not known before scoring) and there is no
    ladder.

    Parameters
    ----------
    held_out, n_items, exclude
        As :func:`sampling_lib.evaluate` (N_u = ``n_items`` less the user's excluded items other than its
        held-out one).
    proxy, head, tail_n
        As :func:`sampling_lib.evaluate` with ``proxy``.
    seed : int
        The tail's seeded orders.

    Warns
    -----
    UserWarning
        What ``evaluate``'s notes would say about the inputs and the heads: excluded users without a
        held-out item, users whose top-m list held their held-out item or who are not in it, lists cut to
        ``head``, proxy ties at the head's edge.

    Returns
    -------
    pandas.DataFrame
        ``user, item, label, stratum, n_items`` in the users' order: the held-out item (label 1, stratum
        "head"), the head (label 0, "head"), the tail sample (label 0, "tail"); ``n_items`` is the user's
        N_u. Add the costly model's ``score`` (and a ``model`` column for several models) and it is a
        cascade's scores table: ``sampling-lib estimate`` reads N_u from the column, and
        :func:`cascade_estimate` takes ``table.groupby("user").n_items.first()`` as ``n_items``.

    Examples
    --------
    >>> req = cascade_requests({"a": 0, "b": 5}, 50, proxy=-np.arange(50.0), head=3, tail_n=4)
    >>> req.groupby(["user", "stratum"]).size().tolist(), req[req.stratum == "head"].item.tolist()[:4]
    ([4, 4, 4, 4], [0, 1, 2, 3])
    >>> req.n_items.unique().tolist()
    [50]
    """
    from .stratarun import StrataRun

    tail_n = check_int(tail_n, "tail_n", low=0)
    config = dict(n=2, metrics=["recall@1"], target_ratio=None, max_cost=None, seed=seed, ties="pessimistic",
                  assurance=0.9, growth=2.0, head=head, tail_n=max(tail_n, 1), tail_n_max=max(tail_n, 1))
    run = StrataRun(held_out, n_items, exclude, config=config, proxy=proxy)
    for note in run.input_notes():
        warnings.warn(note, UserWarning, stacklevel=2)
    M = run.M
    users = np.arange(M)
    s = np.minimum(tail_n, run.tails)
    places = run.tail_order.positions(users, np.zeros(M, np.int64), s)
    tail_u = np.repeat(users, s)
    tail_items = run.tail_candidates.items(places, tail_u)
    head_u = np.repeat(users, run.heads)
    u = np.concatenate([users, head_u, tail_u])
    it = np.concatenate([run.inputs["held"], run.head_items, tail_items])
    label = np.r_[np.ones(M, np.int64), np.zeros(head_u.size + tail_u.size, np.int64)]
    stratum = np.r_[np.full(M + head_u.size, "head", dtype=object), np.full(tail_u.size, "tail", dtype=object)]
    o = np.lexsort((np.r_[np.zeros(M), np.ones(head_u.size), np.full(tail_u.size, 2.0)], u))
    ids = run.inputs["ids"]
    user_ids = run.inputs["users"].to_numpy()
    return pd.DataFrame({"user": user_ids[u[o]], "item": it[o] if ids is None else ids.to_numpy()[it[o]],
                         "label": label[o], "stratum": stratum[o], "n_items": run.inputs["n_items"][u[o]]})
