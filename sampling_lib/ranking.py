"""Ranks from scores and the tie rules (public; no model code).

The practitioner path (scores of the held-out item and of its sampled
negatives -> sampled ranks -> :func:`sampling_lib.correct.estimate`) needs only
this module; :mod:`sampling_lib.recommenders` uses the same rules for the
global ranks of its models.

* :data:`TIE_RULES` -- ``"pessimistic"``, ``"optimistic"``, ``"random"``;
* :func:`apply_ties` -- rank = 1 + (scored above) + (tie term);
* :func:`ranks_from_scores` -- sampled ranks from per-user score arrays.

References
----------
.. [KR20] Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020
   (sampled ranks as the rank of the held-out item among itself and the negatives).
"""
from __future__ import annotations

import numpy as np

__all__ = ["TIE_RULES", "apply_ties", "ranks_from_scores", "check_score_arrays"]

#: Tie rules: where the held-out item is placed among items with its own score.
TIE_RULES = ("pessimistic", "optimistic", "random")


def apply_ties(greater, equal, ties, rng=None):
    """Rank 1 + (items scored above) + (the tie term of the rule ``ties``).

    ``greater`` / ``equal`` count the competing items scored above / equal to
    the held-out item (arrays of the same shape). ``"pessimistic"`` puts the
    held-out item below all its ties, ``"optimistic"`` above them,
    ``"random"`` at a uniformly random position among them (``rng``).

    Examples
    --------
    >>> apply_ties(np.array([0, 2]), np.array([3, 0]), "pessimistic").tolist()
    [4, 3]
    >>> apply_ties(np.array([0, 2]), np.array([3, 0]), "optimistic").tolist()
    [1, 3]
    """
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {ties!r}")
    if ties == "random":
        rng = np.random.default_rng(rng)
    greater, equal = np.asarray(greater), np.asarray(equal)
    if ties == "pessimistic":
        return 1 + greater + equal
    if ties == "optimistic":
        return 1 + greater
    return 1 + greater + rng.integers(0, equal + 1)


def ranks_from_scores(pos_scores, neg_scores, *, ties="pessimistic", rng=None):
    """Sampled ranks from the scores of the held-out item and its sampled negatives.

    r_u = 1 + #{negatives scored above the held-out item} + (tie term).

    Tie rule (``ties``):

    * ``"pessimistic"`` (default): every negative with an **equal** score
      counts as ranked above (r = 1 + #{s_neg >= s_pos}). Deterministic, and
      a model that scores everything equally gets the worst rank instead of
      rank 1.
    * ``"optimistic"``: ties count as below (r = 1 + #{s_neg > s_pos});
      inflates the metrics of models with many ties.
    * ``"random"``: the held-out item takes a uniformly random position among
      its ties (needs ``rng`` for reproducibility).

    Whatever the rule, the corrected estimate targets the global metric with
    the *same* rule for global ties: a fixed rule makes each sampled
    negative independently "above" with probability (R - 1)/(N - 1), so
    the sampled-rank law P(r | R) of the estimators holds with R defined by
    that rule (for "random", with global ties broken at random).

    Parameters
    ----------
    pos_scores : array_like, shape (M,)
        Score of each user's held-out item.
    neg_scores : array_like, shape (M, n - 1)
        Scores of the user's sampled negatives (NaN entries are ignored, so
        users may have different numbers of negatives; their sample size is
        then 1 + the number of non-NaN negatives).
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
    rng : None, int or Generator, keyword-only

    Returns
    -------
    ranks : ndarray of int64, shape (M,)
        Sampled ranks in 1..n_u.
    sample_sizes : ndarray of int64, shape (M,)
        n_u = 1 + number of negatives of the user.

    Examples
    --------
    >>> r, n = ranks_from_scores([0.5, 0.9, 0.2], [[0.1, 0.5, 0.7], [0.1, 0.2, 0.3],
    ...                                           [0.2, 0.2, 0.2]])
    >>> r.tolist(), n.tolist()
    ([3, 1, 4], [4, 4, 4])
    >>> ranks_from_scores([0.5], [[0.1, 0.5, 0.7]], ties="optimistic")[0].tolist()
    [2]
    """
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {ties!r}")
    pos, neg, valid = check_score_arrays(pos_scores, neg_scores)
    sizes = 1 + valid.sum(axis=1)
    with np.errstate(invalid="ignore"):
        gt = ((neg > pos[:, None]) & valid).sum(axis=1)
        eq = ((neg == pos[:, None]) & valid).sum(axis=1)
    r = apply_ties(gt, eq, ties, np.random.default_rng(rng))
    return r.astype(np.int64), sizes.astype(np.int64)


def check_score_arrays(pos_scores, neg_scores):
    """Validated (pos, neg, valid) of one held-out score per user and a (M, k) array of negatives' scores.

    ``pos_scores`` must be finite; ``neg_scores`` may hold NaN for a missing negative (``valid`` is
    False there) but no inf, and every user needs at least one negative. Shared by
    :func:`ranks_from_scores` and :func:`sampling_lib.popularity.popularity_log`.

    Examples
    --------
    >>> pos, neg, valid = check_score_arrays([0.5, 0.2], [[0.1, np.nan], [0.3, 0.4]])
    >>> valid.tolist()
    [[True, False], [True, True]]
    """
    pos = np.asarray(pos_scores, dtype=float)
    neg = np.asarray(neg_scores, dtype=float)
    if pos.ndim != 1 or pos.size == 0:
        raise ValueError(f"pos_scores must be a non-empty 1-D array; got shape {pos.shape}")
    if neg.ndim != 2 or neg.shape[0] != pos.size or neg.shape[1] < 1:
        raise ValueError(f"neg_scores must have shape (M, k) = ({pos.size}, >=1), one row of negatives per "
                         f"user; got {neg.shape}")
    if not np.all(np.isfinite(pos)):
        raise ValueError("pos_scores must be finite (no NaN/inf): every user needs a held-out score")
    if np.any(np.isinf(neg)):
        raise ValueError("neg_scores must not contain inf (NaN marks a missing negative)")
    valid = ~np.isnan(neg)
    if np.any(valid.sum(axis=1) < 1):
        raise ValueError("every user needs at least one negative score")
    return pos, neg, valid
