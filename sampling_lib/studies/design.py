"""Designs of a sampled evaluation by simulation: realized widths, coverage, errors and cost (notebook 12).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_float, check_int
from ..correct import estimate
from ..experiments import seed_sequence
from ..metrics import metric_values, parse_metrics
from ..sampling import sample_design

__all__ = [
    "log_rank_bandwidth",
    "stretch_ranks",
    "full_ranking_halfwidth",
    "design_study",
    "design_summary",
]


def log_rank_bandwidth(global_ranks):
    """Silverman's rule-of-thumb bandwidth of a kernel density estimate of log R.

    0.9 min(sd, IQR / 1.34) M^(-1/5) over the M users' log R (Silverman 1986, eq 3.31): the
    ``bandwidth`` of :func:`stretch_ranks` for a population drawn from these users.

    Examples
    --------
    >>> round(log_rank_bandwidth(np.arange(1, 1001)), 3)
    0.185

    References
    ----------
    Silverman, B. W. Density Estimation for Statistics and Data Analysis (1986), Sec 3.4.2.
    """
    x = np.log(np.asarray(global_ranks, dtype=float))
    if x.size < 2 or np.any(~np.isfinite(x)) or np.any(x < 0):
        raise ValueError("global_ranks must hold at least 2 ranks >= 1")
    q75, q25 = np.percentile(x, [75, 25])
    spread = min(float(x.std(ddof=1)), (q75 - q25) / 1.34) or float(x.std(ddof=1))
    return float(0.9 * spread * x.size ** -0.2)


def stretch_ranks(global_ranks, N0, N, *, bandwidth=0.0, rng=None):
    """Global ranks of a catalogue of N0 items carried to N >= N0 items, preserving log R.

    Rank R of 1..N0 maps to a uniform integer of [R^c, (R + 1)^c) with
    c = log N / log N0 (rank 1 to 1..2^c - 1, ...), so the power-law head of a
    real model's rank distribution keeps its slope in log R and 1..N0 covers 1..N.
    A stand-in for real rank distributions of catalogues of 10^5-10^6 items
    (issue 29's benchmark).

    ``bandwidth`` > 0 first draws each user's log-rank from a Gaussian kernel density
    estimate around their own (log(R + U) + bandwidth Z, U uniform, reflected at 0 and
    log(N0 + 1)) and maps the continuous rank x to floor(x^c). A population of many more users
    than its source (e.g. 10^4 drawn from 943 real ones) otherwise repeats each source user's
    rank block about 10 times: its rank distribution keeps the lumps of the small sample while
    its metrics are known to the precision of the large one (:func:`log_rank_bandwidth` gives
    Silverman's bandwidth of the source).

    Examples
    --------
    >>> r = stretch_ranks([1, 1, 50, 1000], 1000, 10**6, rng=0)     # c = 2
    >>> bool(r[:2].max() <= 3 and 50**2 <= r[2] < 51**2 and r[3] == 10**6)
    True
    >>> s = stretch_ranks(np.full(1000, 50), 1000, 10**6, bandwidth=0.2, rng=0)
    >>> bool(s.min() < 50**2 and s.max() >= 51**2 and s.max() <= 10**6)
    True
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    N0 = check_int(N0, "N0", low=2)
    N = check_int(N, "N", low=N0)
    bandwidth = check_float(bandwidth, "bandwidth", low=0.0)
    if R.min() < 1 or R.max() > N0:
        raise ValueError(f"global_ranks must lie in 1..N0={N0}; got {R.min()}..{R.max()}")
    c = np.log(N) / np.log(N0)
    g = np.random.default_rng(rng)
    if bandwidth > 0:
        top = np.log(N0 + 1.0)
        x = np.log(R + g.random(R.size)) + bandwidth * g.standard_normal(R.size)
        x = np.abs(x)                                        # reflected at log 1 = 0 ...
        x = np.where(x > top, 2 * top - x, x)                # ... and at log(N0 + 1)
        out = np.floor(np.exp(c * np.clip(x, 0.0, top))).astype(np.int64)
        return np.clip(out, 1, N)
    lo = np.floor(R.astype(float) ** c)
    hi = np.minimum(np.floor((R + 1.0) ** c), N + 1.0)
    u = g.random(R.size)
    out = np.floor(lo + u * np.maximum(hi - lo, 1.0)).astype(np.int64)
    return np.clip(out, 1, N)


def _metric_rows(parsed, R):
    """F_j(R_u) for every metric j and user u: (m, M)."""
    H = min(int(R.max()), max(K for _, _, K in parsed))
    out = np.zeros((len(parsed), R.size))
    for j, (full, _, _) in enumerate(parsed):
        f = metric_values(full, H)
        inside = R <= H
        out[j, inside] = f[R[inside] - 1]
    return out


def full_ranking_halfwidth(global_ranks, metrics=("recall@10", "ndcg@10"), *, confidence_level=0.95,
                           n_boot=1000, rng=None):
    """Half-width of full ranking's own percentile interval: the user bootstrap of the true ranks.

    The reference of the *precision ratio* (interval width over this one):
    the uncertainty about the users' metric that remains with every item
    ranked, from which users are in the test set.

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    >>> hw = full_ranking_halfwidth(np.r_[np.ones(300, int), np.full(700, 50)], "recall@10", rng=0)
    >>> bool(abs(hw[0] - 1.96 * np.sqrt(0.3 * 0.7 / 1000)) < 0.004)
    True
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    F = _metric_rows(parse_metrics(metrics), R)
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0, low_open=True, high_open=True)
    g = np.random.default_rng(rng)
    reps = g.multinomial(R.size, np.full(R.size, 1.0 / R.size), size=check_int(n_boot, "n_boot", low=2))
    boot = reps @ F.T / R.size
    lo, hi = np.quantile(boot, [0.5 - level / 2, 0.5 + level / 2], axis=0)
    return (hi - lo) / 2


def design_study(global_ranks, N, design, *, metrics=("recall@10", "ndcg@10"), repeats=10, n_boot=300,
                 confidence_level=0.95, scheme="binomial", rng=None):
    """Simulate a design on fixed users and estimate with the default: one row per draw and metric.

    Each draw samples the users' sets stage by stage
    (:func:`sampling_lib.sampling.sample_design`) and estimates with
    :func:`sampling_lib.correct.estimate` on the final per-user sizes; the
    truth is the users' own metric (their full-ranking value).

    Returns
    -------
    pandas.DataFrame
        ``design, draw, metric, truth, estimate, ci_low, ci_high, halfwidth,
        covered, rel_error, cost_share`` (items scored per user over N_u),
        ``full_halfwidth`` (:func:`full_ranking_halfwidth`) and ``ratio``
        (halfwidth / full_halfwidth).

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> R = np.r_[np.ones(100, int), np.arange(1, 901)]
    >>> t = design_study(R, 1000, Design("ladder", 20, n_max=160), metrics="recall@10", repeats=2, n_boot=20, rng=0)
    >>> t.shape, sorted(t.columns)[:3]
    ((2, 13), ['ci_high', 'ci_low', 'cost_share'])
    """
    R = np.asarray(global_ranks, dtype=np.int64)
    parsed = parse_metrics(metrics)
    repeats = check_int(repeats, "repeats", low=1)
    root = seed_sequence(rng)
    names = [p[0] for p in parsed]
    truth = _metric_rows(parsed, R).mean(axis=1)
    full = full_ranking_halfwidth(R, metrics, confidence_level=confidence_level,
                                  rng=np.random.default_rng(root.spawn(1)[0]))
    Nu = np.broadcast_to(np.asarray(N, dtype=np.int64), R.shape)
    rows = []
    for k, child in enumerate(root.spawn(repeats)):
        g = np.random.default_rng(child)
        r, s = sample_design(R, N, design, scheme=scheme, rng=g)
        t = estimate(r, N, None, names, sample_sizes=s, n_boot=n_boot, scheme=scheme,
                     confidence_level=confidence_level, rng=g)
        for j, name in enumerate(names):
            est, lo, hi = float(t.estimate[j]), float(t.ci_low[j]), float(t.ci_high[j])
            rows.append({"design": design.describe(), "draw": k, "metric": name, "truth": truth[j],
                         "estimate": est, "ci_low": lo, "ci_high": hi, "halfwidth": (hi - lo) / 2,
                         "covered": lo <= truth[j] <= hi,
                         "rel_error": abs(est - truth[j]) / truth[j] if truth[j] > 0 else np.nan,
                         "cost_share": float(np.mean(s / Nu)), "full_halfwidth": full[j]})
    out = pd.DataFrame(rows)
    out["ratio"] = out.halfwidth / out.full_halfwidth
    return out


def design_summary(study, by=("design", "metric")):
    """Per design and metric: draws, coverage, mean realized ratio and half-width, mean |relative error|,
    mean cost share (of a :func:`design_study` table, or several concatenated with extra key columns).

    Examples
    --------
    >>> t = pd.DataFrame({"design": "d", "metric": "m", "covered": [True, False], "ratio": [1.0, 1.2],
    ...                   "halfwidth": [0.1, 0.12], "rel_error": [0.01, 0.03], "cost_share": 0.04})
    >>> design_summary(t).round(3).to_dict("records")
    [{'design': 'd', 'metric': 'm', 'draws': 2, 'coverage': 0.5, 'ratio': 1.1, 'halfwidth': 0.11, 'rel_error': 0.02, 'cost_share': 0.04}]
    """
    return (study.groupby(list(by), sort=False)
            .agg(draws=("covered", "size"), coverage=("covered", "mean"), ratio=("ratio", "mean"),
                 halfwidth=("halfwidth", "mean"), rel_error=("rel_error", "mean"),
                 cost_share=("cost_share", "mean"))
            .reset_index())
