"""Published cascade protocols corrected on real recommenders, beside full ranking (benchmarks/bench_proxy.py).

Re-exported by :mod:`sampling_lib.studies`.

:func:`cascade_study` fits a costly model and a retriever on a leave-one-out split (the one data-to-ranks
pipeline, :func:`sampling_lib.experiments.global_ranks_from_data`), builds for every test user the table a
cascade paper would keep -- the costly model's scores of the held-out item, of the retriever's top ``m``
candidates and of ``r`` negatives drawn uniformly from the rest -- and corrects it with
:func:`sampling_lib.cascade.cascade_estimate`, ``draws`` times (new tail draws each time; the head is the
retriever's and does not change). Every row sets the corrected estimate and the naive metric among the
scored items beside the full-ranking truth of the same users.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_int
from ..metrics import parse_metrics
from .design import _metric_rows, full_ranking_halfwidth
from .panel_data import DENSE_ITEMS_MAX, PANEL_MODELS

__all__ = ["cascade_study", "cascade_tables"]


def cascade_tables(costly_rows, retriever_rows, train, held, m, r, rng):
    """One draw's cascade score table: each user's held-out item, the retriever's top ``m`` candidates (history
    and held-out item excluded; ties by catalogue position) and ``r`` candidates drawn uniformly without
    replacement from the rest, with the costly model's scores.

    ``costly_rows`` / ``retriever_rows``: callables users -> (len(users), N) score rows; ``train`` the
    (M, N) CSR history, ``held`` (M,) the held-out items; ``rng`` a Generator. Returns the table of
    :func:`sampling_lib.cascade.cascade_cells` (``user, item, score, label, stratum``).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> rows = lambda users: np.tile(np.arange(6.0), (len(users), 1))
    >>> t = cascade_tables(rows, rows, sp.csr_matrix((2, 6)), np.array([0, 5]), 2, 1, np.random.default_rng(0))
    >>> t[t.user == 0].stratum.tolist(), t[(t.user == 0) & (t.stratum == "head")].item.tolist()
    (['head', 'head', 'head', 'tail'], [0, 5, 4])
    """
    M, N = train.shape
    out = []
    step = max(1, (1 << 22) // max(N, 1))
    for a in range(0, M, step):
        users = np.arange(a, min(a + step, M))
        k = users.size
        S, P = costly_rows(users), np.array(retriever_rows(users), dtype=float)
        sub = train[users].tocoo()
        P[sub.row, sub.col] = -np.inf
        P[np.arange(k), held[users]] = -np.inf
        head = np.argsort(-P, axis=1, kind="stable")[:, :m]
        key = rng.random((k, N))                            # the tail: r uniform draws among the rest
        key[sub.row, sub.col] = np.inf
        key[np.arange(k), held[users]] = np.inf
        key[np.arange(k)[:, None], head] = np.inf
        tail = np.argsort(key, axis=1)[:, :r]
        items = np.hstack([held[users][:, None], head, tail])
        w = items.shape[1]
        out.append(pd.DataFrame({"user": np.repeat(users, w), "item": items.ravel(),
                                 "score": S[np.arange(k)[:, None], items].ravel(),
                                 "label": np.tile(np.r_[1, np.zeros(w - 1, np.int64)], k),
                                 "stratum": np.tile(["head"] * (1 + m) + ["tail"] * r, k)}))
    return pd.concat(out, ignore_index=True)


def cascade_study(data=None, costly="ease-200", retriever="itemknn", *, m=20, r=19, draws=10,
                  metrics=("recall@10", "ndcg@10"), n_boot=1000, seed=0, data_rng=0, full_boot=100_000,
                  synthetic=None, population=None):
    """"Retriever top-``m`` + ``r`` random" corrected by :func:`sampling_lib.cascade.cascade_estimate`, ``draws``
    times, beside full ranking; and the head-only bounds ("top-``m`` only").

    Parameters
    ----------
    data : path, Ratings or None
        As :func:`sampling_lib.experiments.global_ranks_from_data` (None: its synthetic ratings).
    costly, retriever : str
        Labels of :data:`sampling_lib.studies.panel_data.PANEL_MODELS`: the model evaluated and the one whose
        top ``m`` forms the head.
    m, r : int
        Head size and random negatives per user (LLMRank-style 19 random: ``m=0, r=19``; LlamaRec: ``m=20,
        r=0`` gives the bounds only).
    draws, metrics, n_boot, seed
        Tail draws (seeds ``seed, seed + 1, ...``), metrics, bootstrap replicates.
    data_rng, synthetic
        The split's and the models' seed, and the synthetic ratings' settings (``data=None``).
    full_boot : int
        Replicates of full ranking's own percentile interval.
    population : tuple, optional
        ``global_ranks_from_data(..., keep_models=True)``'s result with both models.

    Returns
    -------
    pandas.DataFrame
        One row per (draw, metric) of the corrected protocol (``protocol`` "top-m + r random"): ``dataset, N, M,
        m, r, draw, metric, truth, naive, naive_error`` (naive - truth), ``estimate, ci_low, ci_high,
        covered, halfwidth, full_halfwidth, ratio, rel_error``; and one row per metric of the head-only bounds
        (``protocol`` "top-m only", ``draw`` -1, ``bound_low, bound_high``, ``covered`` = the truth inside
        [ci_low, ci_high]).

    Examples
    --------
    >>> t = cascade_study(None, "popularity", "itemknn", m=10, r=10, draws=1, n_boot=100, full_boot=2000,
    ...                   synthetic={"n_users": 300, "n_items": 200})
    >>> sorted(t.protocol.unique()), bool(t.bound_low.dropna().le(t.bound_high.dropna()).all())
    (['top-m + r random', 'top-m only'], True)
    """
    from ..cascade import cascade_estimate
    from ..experiments import global_ranks_from_data

    draws = check_int(draws, "draws", low=1)
    parsed = parse_metrics(metrics)
    if population is None:
        population = global_ranks_from_data(data, {costly: PANEL_MODELS[costly], retriever: PANEL_MODELS[retriever]},
                                            rng=data_rng, keep_models=True, max_dense_items=DENSE_ITEMS_MAX,
                                            synthetic=synthetic)
    ranks, N, info = population
    if costly not in ranks or retriever not in info["fitted"]:
        raise ValueError(f"population must hold the costly model {costly!r} and the retriever {retriever!r}; got "
                         f"{sorted(ranks)}")
    split = info["split"]
    train = split.train.tocsr()
    held = split.test_items.astype(np.int64)
    N_u = pd.Series(info["n_candidates"])
    R = ranks[costly]
    truth = _metric_rows(parsed, R).mean(axis=1)
    full_hw = full_ranking_halfwidth(R, metrics, n_boot=full_boot, rng=data_rng)
    fc, fr = info["fitted"][costly], info["fitted"][retriever]
    base = {"dataset": info["dataset"], "N": N, "M": int(R.size), "m": m, "r": r, "costly": costly,
            "retriever": retriever}
    rows = []
    for k in range(draws):
        table = cascade_tables(fc.score, fr.score, train, held, m, r, np.random.default_rng([seed, k]))
        e = cascade_estimate(table, N_u, metrics=metrics, n_boot=n_boot, rng=seed + k).set_index("metric")
        for j, (name, _, _) in enumerate(parsed):
            x = e.loc[name]
            hw = 0.5 * (x.ci_high - x.ci_low)
            rows.append({**base, "protocol": "top-m + r random", "draw": k, "metric": name, "truth": truth[j],
                         "naive": x.naive, "naive_error": x.naive - truth[j], "estimate": x.estimate,
                         "ci_low": x.ci_low, "ci_high": x.ci_high,
                         "covered": bool(x.ci_low <= truth[j] <= x.ci_high), "halfwidth": hw,
                         "full_halfwidth": full_hw[j], "ratio": hw / full_hw[j],
                         "rel_error": abs(x.estimate - truth[j]) / truth[j] if truth[j] > 0 else np.nan})
    head = cascade_tables(fc.score, fr.score, train, held, m, 0, np.random.default_rng([seed, draws]))
    b = cascade_estimate(head, N_u, metrics=metrics, n_boot=n_boot, rng=seed).set_index("metric")
    for j, (name, _, _) in enumerate(parsed):
        x = b.loc[name]
        rows.append({**base, "r": 0, "protocol": "top-m only", "draw": -1, "metric": name, "truth": truth[j],
                     "naive": x.naive, "naive_error": x.naive - truth[j], "ci_low": x.ci_low, "ci_high": x.ci_high,
                     "bound_low": x.bound_low, "bound_high": x.bound_high,
                     "covered": bool(x.ci_low <= truth[j] <= x.ci_high), "full_halfwidth": full_hw[j]})
    return pd.DataFrame(rows)
