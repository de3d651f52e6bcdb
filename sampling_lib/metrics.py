"""Top-K metrics F(R) of a single held-out item at global rank R.

With one relevant item per user (leave-one-out evaluation) every top-K metric is
a function of the item's rank R only (TORS24 eq 2, AAAI21 eq 13):

=============  ==========================================
recall@K       1{R <= K}                (= hit ratio HR@K)
precision@K    1{R <= K} / K
ndcg@K         1{R <= K} / log2(R + 1)
ap@K           1{R <= K} / R            (one relevant item)
mrr@K          1{R <= K} / R
=============  ==========================================

A metric over users is the average of F(R_u) (:func:`metric_from_ranks`), or
equivalently sum_R P(R) F(R) for the rank distribution P (TORS24 eq 3,
AAAI21 eq 14; :func:`metric_from_pmf`).

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020.
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024.
"""
from __future__ import annotations

import warnings

import numpy as np

from ._validation import check_array_size, check_int, check_ranks, show_value

__all__ = [
    "METRICS",
    "recall",
    "hit_ratio",
    "precision",
    "ndcg",
    "ap",
    "mrr",
    "parse_metric",
    "metric_values",
    "metric_from_ranks",
    "metric_from_pmf",
    "parse_metrics",
    "metric_matrix",
]


def _prep(R, K):
    K = check_int(K, "K", low=1)
    R = np.asarray(R)
    if R.dtype == bool or not (np.issubdtype(R.dtype, np.integer) or np.issubdtype(R.dtype, np.floating)):
        raise TypeError(f"R must hold ranks >= 1 (whole numbers); got dtype {R.dtype}")
    if R.size and (np.any(~np.isfinite(R)) or np.any(R < 1)):
        bad = R[~np.isfinite(R) | (R < 1)].ravel()[0]
        raise ValueError(f"R must hold ranks >= 1 (whole numbers); got {show_value(bad)}")
    if R.size and np.issubdtype(R.dtype, np.floating) and np.any(R != np.round(R)):
        bad = R[R != np.round(R)].ravel()[0]
        raise ValueError(f"R must hold ranks >= 1 (whole numbers: a rank is a position); "
                         f"got {show_value(bad)}")
    return R.astype(float), K


def recall(R, K):
    """Recall@K = hit ratio HR@K = 1{R <= K} (KDD20 eq 1, TORS24 eq 2).

    Examples
    --------
    >>> recall([1, 5, 11], 10)
    array([1., 1., 0.])
    """
    R, K = _prep(R, K)
    return (R <= K).astype(float)


hit_ratio = recall


def precision(R, K):
    """Precision@K = 1{R <= K} / K for one relevant item (TORS24 eq 2).

    Examples
    --------
    >>> precision([1, 11], 10)
    array([0.1, 0. ])
    """
    R, K = _prep(R, K)
    return (R <= K) / K


def ndcg(R, K):
    """NDCG@K = 1{R <= K} / log2(R + 1); the ideal DCG is 1 (TORS24 eq 2).

    Examples
    --------
    >>> ndcg([1, 3, 11], 10)
    array([1. , 0.5, 0. ])
    """
    R, K = _prep(R, K)
    return np.where(R <= K, 1.0 / np.log2(R + 1.0), 0.0)


def ap(R, K):
    """AP@K = 1{R <= K} / R: with one relevant item, AP is the precision at its rank
    (TORS24 eq 2).

    Examples
    --------
    >>> ap([1, 4, 11], 10)
    array([1.  , 0.25, 0.  ])
    """
    R, K = _prep(R, K)
    return np.where(R <= K, 1.0 / R, 0.0)


def mrr(R, K):
    """Reciprocal rank truncated at K, 1{R <= K} / R (equal to AP@K for one item)."""
    return ap(R, K)


METRICS = {
    "recall": recall,
    "hr": recall,
    "hit_ratio": recall,
    "precision": precision,
    "ndcg": ndcg,
    "ap": ap,
    "map": ap,
    "mrr": mrr,
}


def parse_metric(metric, K=None):
    """Split ``"ndcg@10"`` into ``("ndcg", 10)``; ``metric="ndcg", K=10`` also works.

    Examples
    --------
    >>> parse_metric("Recall@20")
    ('recall', 20)
    >>> parse_metric("ap", 5)
    ('ap', 5)
    """
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a string like 'recall@10'; got {show_value(metric)}")
    name = metric.strip().lower()
    if "@" in name:
        name, k_txt = name.split("@", 1)
        if K is not None:
            raise ValueError(f"give K either in metric={metric!r} or as K={K}, not both")
        try:
            K = int(k_txt)
        except ValueError:
            raise ValueError(f"metric must look like 'recall@10'; got {show_value(metric)}") from None
    if name not in METRICS:
        raise ValueError(f"metric must be one of {sorted(set(METRICS))}; got {show_value(metric)}")
    if K is None:
        raise ValueError(f"metric {show_value(metric)} needs a cutoff K (e.g. '{name}@10')")
    return name, check_int(K, "K", low=1)


def metric_values(metric, N, K=None):
    """F(R) for R = 1..N as a float array of length N (index 0 is R = 1).

    Examples
    --------
    >>> metric_values("recall@2", 4)
    array([1., 1., 0., 0.])
    """
    name, K = parse_metric(metric, K)
    N = check_int(N, "N", low=1)
    check_array_size(N, f"the metric values F(1..N) of {name}@{K} (N={N})")
    return METRICS[name](np.arange(1, N + 1), K)


def metric_from_ranks(ranks, metric, K=None, N=None):
    """Average of F(R_u) over users: the global metric of observed global ranks.

    Examples
    --------
    >>> metric_from_ranks([1, 2, 20], "recall@10")
    0.6666666666666666
    """
    name, K = parse_metric(metric, K)
    upper = N if N is not None else np.iinfo(np.int64).max
    R = check_ranks(ranks, upper, name="ranks")
    return float(np.mean(METRICS[name](R, K)))


def metric_from_pmf(pmf, metric, K=None):
    """sum_R P(R) F(R) (TORS24 eq 3, AAAI21 eq 14) for a rank pmf over 1..N.

    ``pmf`` may also be any length-N weight vector ``w`` returned by an
    estimator; then this is ``w @ F(1..N)``.

    Examples
    --------
    >>> round(metric_from_pmf([0.5, 0.25, 0.25], "ndcg@2"), 6)   # 0.5 + 0.25 / log2(3)
    0.657732
    """
    w = np.asarray(pmf, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"pmf must be a finite non-empty 1-D array; got shape {w.shape}")
    return float(w @ metric_values(metric, w.size, K))


def parse_metrics(metrics):
    """Parse one metric name or a sequence of them: list of (``"name@K"``, name, K).

    Its own output is returned as it is (callers that take names or parsed metrics call it either way).

    A metric named twice (also under another spelling: ``"Recall@10"``,
    ``"hr@10"`` and ``"recall@10"`` are one metric) is kept once, in its first
    place, with a ``UserWarning``: a table of results has one row per metric.

    Examples
    --------
    >>> parse_metrics(["recall@10", "ndcg@5"])
    [('recall@10', 'recall', 10), ('ndcg@5', 'ndcg', 5)]
    """
    if isinstance(metrics, str):
        metrics = (metrics,)
    if isinstance(metrics, list) and metrics and isinstance(metrics[0], tuple):
        return metrics                           # already parsed
    try:
        metrics = list(metrics)
    except TypeError:
        raise TypeError("metrics must be a metric name like 'recall@10' or a sequence of names; "
                        f"got {show_value(metrics)}") from None
    if not metrics:
        raise ValueError("metrics must name at least one metric like 'recall@10'")
    out, seen = [], {}
    for m in metrics:
        name, K = parse_metric(m)
        key = (METRICS[name], K)                 # aliases (hr, hit_ratio -> recall) are one metric
        if key in seen:
            warnings.warn(f"metrics names {show_value(m)} and {show_value(seen[key])}, the same metric; it "
                          "is kept once", UserWarning, stacklevel=2)
            continue
        seen[key] = m
        out.append((f"{name}@{K}", name, K))
    return out


def metric_matrix(metrics, N):
    """F(R) for R = 1..N, one column per metric (names or :func:`parse_metrics` output): (N, m).

    Examples
    --------
    >>> metric_matrix(["recall@2", "mrr@2"], 3).tolist()
    [[1.0, 1.0], [1.0, 0.5], [0.0, 0.0]]
    """
    parsed = parse_metrics(metrics)
    return np.stack([metric_values(full, N) for full, _, _ in parsed], axis=1)
