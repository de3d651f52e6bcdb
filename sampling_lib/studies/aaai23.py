"""The AAAI23 protocol: relative errors of Recall / NDCG / AP@1..50 and "pick the winner".

Li, Jin, Liu, Ren, Gao, Liu, "Towards Reliable Item Sampling for Recommendation
Evaluation", AAAI 2023 (AAAI23), as its code does it
(dli12/AAAI23-Towards-Reliable-Item-Sampling-for-Recommendation-Evaluation:
``data/fix_sampling.py``, ``model/EASE_repeat.ipynb``, ``estimator/*.ipynb``,
``table/Relative_Error_Fix_Sampling.py``, ``table/PICK_WINNER.py``):

* leave-one-out: one held-out item per user; every user is evaluated (M = all);
* the global rank R_u is the held-out item's rank among **all** N items, the
  user's training items keeping their scores (``EASE_repeat``: ``F = X B``,
  no masking): :func:`sampling_lib.recommenders.global_ranks` with
  ``train_last=False``;
* each repeat draws n - 1 negatives per user uniformly **with replacement** from
  the N - 1 items other than the held-out one (``fix_sampling.py``), the same
  negatives for every model (one file per repeat): r_u - 1 ~ Binomial(n - 1,
  (R_u - 1)/(N - 1)) given R_u (AAAI21 eq 18); n = 100 and 500, 100 repeats;
* the relative error of a repeat is the mean over K = 1..50 of
  |estimate - truth| / truth (``abs_relative``; a K whose truth is 0 counts
  as error 0, as there), reported as mean and standard deviation (``np.std``,
  ddof 0) over the repeats, in %;
* "pick the winner": per repeat, the model with the largest estimated metric
  at K = 10 and 20 against the model with the largest true metric; the count
  of repeats where they agree (``PICK_WINNER.py``).

The code's BV_MES / BV_MLE / MN_MES / MN_MLE use as prior the MES (MLE) estimate
*averaged over the 100 repeats* (``MN_MES_MLE.ipynb``: ``get_estimate(...).mean(0)``),
i.e. information from all repeats; a practitioner has one evaluation. Both are
reported: ``mn_mle`` (the library's, prior fitted on the repeat's own ranks) and
``mn_mle (AAAI23 code)`` (the prior pooled over the repeats).

References
----------
.. [AAAI23] Li, Jin, Liu, Ren, Gao, Liu. Towards Reliable Item Sampling for
   Recommendation Evaluation. AAAI 2023 (Tables 2-3: relative errors; Table 4: winners).
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021 (eq 18).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import check_int
from ..experiments import seed_sequence

__all__ = [
    "AAAI23_ESTIMATORS",
    "AAAI23_MODELS",
    "AAAI23_DATASETS",
    "aaai23_ranks",
    "aaai23_protocol",
    "aaai23_table",
    "aaai23_winners",
]

#: The estimators of AAAI23's tables (``BV_uniform`` is ``bv``).
AAAI23_ESTIMATORS = ("mes", "mle", "bv", "bv_mes", "bv_mle", "mn_mes", "mn_mle")
#: The models feasible on a CPU: AAAI23's itemKNN and ALS, and three weaker settings as further
#: competitors for "pick the winner" (EASE, MultiVAE and NeuMF are not run: see ``aaai23_protocol``).
AAAI23_MODELS = {
    "itemknn": ("itemknn", {"neighbors": None}),
    "als": ("als", {"factors": 64, "iterations": 15}),
    "itemknn-10": ("itemknn", {"neighbors": 10}),
    "als-8": ("als", {"factors": 8, "iterations": 3}),
    "popularity": ("popularity", {}),
}
#: AAAI23's data sets (N as in its code) and whether they are here.
AAAI23_DATASETS = {
    "pinterest-20": {"N": 9916, "available": "no: not in shared_data"},
    "yelp": {"N": 25815, "available": "its own Yelp preprocessing is not; Yelp2018 (LightGCN, N = 38,048) is"},
    "ml-20m": {"N": 20720, "available": "no: not in shared_data"},
}


def _metric_curves(N, max_K):
    """Recall, NDCG and AP@1..max_K on ranks 1..H, H = min(N, max_K): (H, 3 max_K) (AAAI23 ``*_K``)."""
    H = min(N, max_K)
    R = np.arange(1, H + 1, dtype=float)[:, None]
    K = np.arange(1, max_K + 1)[None, :]
    top = (R <= K).astype(float)
    return np.concatenate([top, top / np.log2(R + 1.0), top / R], axis=1)


def aaai23_ranks(ratings, models=AAAI23_MODELS, *, sample_sizes=(100, 500), repeats=100, rng=0,
                 block_size=256, progress=False):
    """Global ranks among all items and sampled ranks with the same negatives for every model.

    Parameters
    ----------
    ratings : sampling_lib.data.Ratings or path
        Split by :func:`sampling_lib.data.leave_one_out` (a random held-out
        interaction per user without timestamps).
    models : mapping label -> (name, params)
    sample_sizes : sequence of int
        n (held-out item included).
    repeats : int
    rng : int
    block_size : int
        Users scored at a time.

    Returns
    -------
    global_ranks : dict {model: ndarray}
        R_u in 1..N, training items keeping their scores (``train_last=False``).
    N : int
    sampled : dict {(model, n): ndarray of shape (repeats, M)}
        r_u of every repeat; repeat k of every model uses the same negatives
        (:func:`sampling_lib.recommenders.sampled_ranks_from_scores` with one
        seed per n: with the pessimistic tie rule its random stream is only the
        negatives, so equal seeds draw equal negatives).
    """
    from ..experiments import global_ranks_from_data
    from ..recommenders import sampled_ranks_from_scores

    repeats = check_int(repeats, "repeats", low=1)
    seq = seed_sequence(rng)
    ranks, N, info = global_ranks_from_data(ratings, models, rng=rng, train_last=False, keep_models=True)
    split = info["split"]
    sampled = {}
    for j, n in enumerate(sample_sizes):
        seed = np.random.SeedSequence([seq.entropy, 23, int(n)])
        for model, fitted in info["fitted"].items():
            t0 = time.perf_counter()
            sampled[(model, int(n))] = sampled_ranks_from_scores(
                fitted, split.train, split.test_items, int(n), "binomial", train_last=False,
                size=repeats, block_size=block_size, rng=np.random.default_rng(seed))
            if progress:
                print(f"  sampled ranks {model}, n = {n}: {time.perf_counter() - t0:.0f} s", flush=True)
    info.pop("fitted")
    return ranks, N, sampled


def aaai23_protocol(global_ranks, N, sampled, methods=AAAI23_ESTIMATORS + ("logspline",), *, max_K=50,
                    pooled_prior=True, progress=False):
    """Every estimator's Recall / NDCG / AP@1..max_K on every repeat (AAAI23's tables' input).

    Parameters
    ----------
    global_ranks : dict {model: ndarray}
    N : int
    sampled : dict {(model, n): ndarray (repeats, M)}
        From :func:`aaai23_ranks`.
    methods : sequence of str
        Registered estimators.
    max_K : int
    pooled_prior : bool
        Add ``"mn_mle (AAAI23 code)"``: MN with the MLE averaged over the
        repeats as prior (module docstring).

    Returns
    -------
    pandas.DataFrame
        ``model, n, repeat, estimator, metric, K, estimate, truth`` with
        ``metric`` in {"recall", "ndcg", "ap"}.
    """
    from ..estimators import get_estimator

    max_K = check_int(max_K, "max_K", low=1)
    F = _metric_curves(N, max_K)
    H = F.shape[0]
    names = np.repeat(np.array(["recall", "ndcg", "ap"], dtype=object), max_K)
    Ks = np.tile(np.arange(1, max_K + 1), 3)
    ests = {m: get_estimator(m) for m in methods}
    frames = []
    for (model, n), rr in sampled.items():
        t0 = time.perf_counter()
        R = np.asarray(global_ranks[model])
        truth = (np.bincount(R[R <= H] - 1, minlength=H) / R.size) @ F
        mle_w = []
        for k, r in enumerate(rr):
            cache = {}
            for name, est in ests.items():
                w = np.asarray(est(r, N, n, cache=cache))
                frames.append((model, n, k, name, w[:H] @ F, truth))
                if name == "mle":
                    mle_w.append(w)
        if pooled_prior:
            prior = np.mean(mle_w, axis=0) if mle_w else np.mean(
                [get_estimator("mle")(r, N, n) for r in rr], axis=0)
            mn = get_estimator("mn", prior=prior)
            for k, r in enumerate(rr):
                frames.append((model, n, k, "mn_mle (AAAI23 code)", np.asarray(mn(r, N, n))[:H] @ F, truth))
        if progress:
            print(f"  {model}, n = {n}: {time.perf_counter() - t0:.0f} s", flush=True)
    m = 3 * max_K
    cols = {c: np.repeat(np.array([f[i] for f in frames], dtype=object if c in ("model", "estimator") else None), m)
            for i, c in enumerate(("model", "n", "repeat", "estimator"))}
    cols["metric"] = np.tile(names, len(frames))
    cols["K"] = np.tile(Ks, len(frames))
    cols["estimate"] = np.concatenate([f[4] for f in frames])
    cols["truth"] = np.concatenate([f[5] for f in frames])
    return pd.DataFrame(cols)


def aaai23_table(results):
    """AAAI23's relative-error table: mean and sd over repeats of the mean over K of |rel. error| (%).

    Per repeat, ``abs_relative`` of the code: the mean over K = 1..max_K of
    |estimate - truth| / truth, with error 0 where the truth is 0.

    Returns
    -------
    pandas.DataFrame
        ``model, n, metric, estimator, mean, sd, repeats``.

    Examples
    --------
    >>> t = pd.DataFrame({"model": "m", "n": 100, "repeat": [0, 0, 1, 1], "estimator": "e",
    ...                   "metric": "recall", "K": [1, 2, 1, 2], "estimate": [0.1, 0.3, 0.2, 0.2],
    ...                   "truth": [0.0, 0.2, 0.0, 0.2]})
    >>> aaai23_table(t)[["mean", "sd"]].round(2).values.tolist()
    [[12.5, 12.5]]
    """
    t = results.copy()
    zero = t.truth == 0
    t["err"] = np.where(zero, 0.0, (t.estimate - t.truth).abs() / t.truth.where(~zero, 1.0))
    per = t.groupby(["model", "n", "metric", "estimator", "repeat"])["err"].mean() * 100.0
    return per.groupby(["model", "n", "metric", "estimator"]).agg(
        mean="mean", sd=lambda x: float(np.std(x)), repeats="size").reset_index()


def aaai23_winners(results, Ks=(10, 20)):
    """"Pick the winner": repeats where the estimated best model is the true best model.

    Returns
    -------
    pandas.DataFrame
        ``n, metric, K, estimator, true_winner, correct, repeats``.
    """
    t = results[results.K.isin(Ks)]
    rows = []
    for (n, metric, K, est), g in t.groupby(["n", "metric", "K", "estimator"]):
        tw = g.groupby("model").truth.first().idxmax()
        picks = g.loc[g.groupby("repeat").estimate.idxmax(), "model"]
        rows.append({"n": n, "metric": metric, "K": K, "estimator": est, "true_winner": tw,
                     "correct": int((picks == tw).sum()), "repeats": int(picks.size)})
    return pd.DataFrame(rows)
