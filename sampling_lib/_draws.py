"""Negatives drawn for real users: the items a sampled evaluation asks a model to score.

:func:`sample_negatives` draws each user's n - 1 negatives outside its history (with or without
replacement), :func:`sample_added_negatives` the items a later stage adds to them, and
:func:`log_prob_all_distinct` the chance that a draw with replacement holds no repeat. Split from
:mod:`sampling_lib.sampling`, which simulates sampled ranks from global ranks and re-exports every name here.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020, Sec 2.2.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024, Sec 6.1.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ._validation import check_columns, check_int, check_int_column, check_N_n, check_scheme

__all__ = ["sample_negatives", "sample_added_negatives", "log_prob_all_distinct"]


def sample_negatives(users, N, n, *, exclude=None, held_out=None, scheme="hypergeometric", rng=None):
    """A fixed set of n - 1 sampled negatives per user (same items for every model).

    Items are integer ids 0..N-1. For each user (in the given order) n - 1
    negatives are drawn uniformly from the items that are neither the user's
    held-out item nor in the user's ``exclude`` set (e.g. training items),
    without replacement by default (``scheme="hypergeometric"``: evaluate with
    the same scheme; ``scheme="binomial"`` draws with replacement, for which the
    papers' binomial kernel is exact). Deterministic for a given ``rng`` seed.

    Parameters
    ----------
    users : array_like
        User ids (duplicates are an error).
    N : int
        Number of items; ids 0..N-1.
    n : int
        Sample-set size; n - 1 negatives per user.
    exclude : DataFrame with columns user, item, or dict {user: items}, optional
    held_out : array_like, optional
        Held-out item of each user (aligned with ``users``), never a negative.
    scheme : {"hypergeometric", "binomial"}, keyword-only
        Without replacement (distinct negatives, default) or with replacement
        (duplicates possible).
    rng : None, int or Generator, keyword-only

    Returns
    -------
    pandas.DataFrame
        Columns ``user, item``, n - 1 rows per user, users in input order.

    Notes
    -----
    With exclusions the candidate set differs per user: the held-out item is
    ranked among N_u = N - |excluded items of u other than the held-out one|
    candidates, and its n - 1 negatives are drawn from the other N_u - 1.
    Pass these per-user N_u to :func:`sampling_lib.correct.estimate` (``N``
    as an array, or an ``n_items`` column of the ranks file).

    Examples
    --------
    >>> neg = sample_negatives(["a", "b"], N=50, n=4, held_out=[3, 7], rng=0)
    >>> neg.shape, neg.groupby("user").size().tolist()
    ((6, 2), [3, 3])
    """
    N, n = check_N_n(N, n)
    replace = check_scheme(scheme) == "binomial"
    users = _users_index(users)
    rng = np.random.default_rng(rng)
    excl = _by_user(exclude, N, "exclude", "excluded")
    ho = _held_out_items(held_out, users.size, N)
    k = n - 1
    bad = [np.concatenate([excl.get(u, np.empty(0, np.int64)), [] if ho is None else [ho[j]]])
           for j, u in enumerate(users)]
    items = _draw_items(users, N, np.full(users.size, k), bad, replace, rng,
                        lambda u, avail: f"user {u!r} has only {avail} candidate negatives; n-1={k} needed "
                                         "(lower --sample-size or use replacement)")
    return pd.DataFrame({"user": np.repeat(users.to_numpy(), k), "item": items})


def _draw_items(users, N, counts, bad, replace, rng, short):
    """counts[j] item ids of 0..N-1 per user, uniform over the ids not in bad[j] (with or without replacement).

    The draws of one user: positions in its allowed set (``rng.integers`` with
    replacement; without, ``rng.choice`` when the set is small, else rejection
    of repeated ``rng.integers``), mapped to item ids by skipping the excluded
    ones. ``short(user, available)`` is the message when too few ids are left.
    """
    out_i = []
    for j, u in enumerate(users):
        k = int(counts[j])
        if k == 0:
            continue
        b = np.unique(np.asarray(bad[j]).astype(np.int64))
        avail = N - b.size
        if avail < (1 if replace else k):
            raise ValueError(short(u, avail))
        if replace:
            pos = rng.integers(0, avail, size=k)
        else:
            pos = rng.choice(avail, size=k, replace=False) if avail < 4 * k else None
            if pos is None:
                got = np.empty(0, np.int64)
                while got.size < k:
                    cand = rng.integers(0, avail, size=2 * k)
                    _, idx = np.unique(np.concatenate([got, cand]), return_index=True)
                    got = np.concatenate([got, cand])[np.sort(idx)]
                pos = got[:k]
        # map positions in the allowed set to item ids (skip the excluded ids)
        out_i.append(pos + np.searchsorted(b - np.arange(b.size), pos, side="right"))
    return np.concatenate(out_i) if out_i else np.empty(0, np.int64)


# ---------------------------------------------------------------------------
# later stages of a nested design, with real negatives
# ---------------------------------------------------------------------------
def sample_added_negatives(users, N, added, *, earlier=None, exclude=None, held_out=None,
                           scheme="hypergeometric", rng=None):
    """The negatives of a later stage: ``added`` more items per user, drawn as the first stage's.

    Items are integer ids 0..N-1, drawn uniformly from the items that are
    neither the user's held-out item nor in its ``exclude`` set, as in
    :func:`sample_negatives`. Without replacement (``"hypergeometric"``,
    default) they also avoid the user's ``earlier`` negatives, so the merged
    set is a uniform sample of distinct items of the final size: the nested
    design of :func:`sample_design`, whose likelihood is the kernel at the
    final (n_u, r_u). With replacement (``"binomial"``) they are further
    independent draws.

    Parameters
    ----------
    users : array_like
        User ids (unique).
    N : int
        Number of items; ids 0..N-1.
    added : int or array_like of int, shape (len(users),)
        Items to add per user (0: the user stops; e.g. the new sizes of
        :func:`next_stage_sizes` minus the current ones).
    earlier : DataFrame with columns user, item, optional, keyword-only
        Every negative the users drew at the earlier stages.
    exclude : DataFrame with columns user, item, or dict {user: items}, optional, keyword-only
        Items never drawn for the user (its history), as in :func:`sample_negatives`.
    held_out : array_like, optional, keyword-only
        Held-out item of each user (aligned with ``users``).
    scheme : {"hypergeometric", "binomial"}, keyword-only
    rng : None, int or Generator, keyword-only

    Returns
    -------
    pandas.DataFrame
        Columns ``user, item``: ``added[j]`` rows for user j, users in input
        order (users with nothing added have no row).

    Examples
    --------
    >>> first = sample_negatives(["a", "b"], N=50, n=4, held_out=[3, 7], rng=0)
    >>> more = sample_added_negatives(["a", "b"], 50, [5, 0], earlier=first, held_out=[3, 7], rng=1)
    >>> more.groupby("user").size().to_dict()
    {'a': 5}
    >>> bool(set(more.item) & set(first[first.user == "a"].item)), 3 in set(more.item)
    (False, False)
    """
    N = check_int(N, "N", low=2)
    replace = check_scheme(scheme) == "binomial"
    users = _users_index(users)
    if np.ndim(added) == 0:
        added = np.full(users.size, check_int(added, "added", low=0), np.int64)
    added = np.asarray(added)
    if added.shape != (users.size,):
        raise ValueError(f"added must be an int or have one count per user ({users.size}); got shape {added.shape}")
    added = check_int_column(pd.Series(added), "added").to_numpy()
    if added.size and added.min() < 0:
        raise ValueError(f"added must be >= 0; got {added.min()}")
    excl = _by_user(exclude, N, "exclude", "excluded")
    before = {} if replace else _by_user(earlier, N, "earlier", "earlier")
    ho = _held_out_items(held_out, users.size, N)
    none = np.empty(0, np.int64)
    bad = [np.concatenate([excl.get(u, none), before.get(u, none), none if ho is None else ho[j:j + 1]])
           for j, u in enumerate(users)]
    rng = np.random.default_rng(rng)
    items = _draw_items(users, N, added, bad, replace, rng,
                        lambda u, avail: f"user {u!r} has only {avail} items left to draw (not its held-out item, "
                                         "history or earlier negatives); "
                                         f"{int(added[users.get_loc(u)])} more needed")
    return pd.DataFrame({"user": np.repeat(users.to_numpy(), added), "item": items})


def _users_index(users):
    """``users`` as a non-empty pandas Index without repeats."""
    users = pd.Index(pd.Series(users).to_numpy())
    if users.size == 0:
        raise ValueError("users must be non-empty")
    if users.has_duplicates:
        raise ValueError(f"users must be unique; {users[users.duplicated()][0]!r} repeats")
    return users


def _held_out_items(held_out, n_users, N):
    """``held_out`` as int64 item ids in 0..N-1, one per user, or None."""
    if held_out is None:
        return None
    ho = np.asarray(held_out)
    if ho.shape != (n_users,):
        raise ValueError(f"held_out must have one item per user ({n_users}); got shape {ho.shape}")
    ho = check_int_column(pd.Series(ho), "held_out").to_numpy()
    if ho.min() < 0 or ho.max() >= N:
        raise ValueError(f"held_out items must be ids in 0..N-1={N - 1}; got {ho.min()}..{ho.max()}")
    return ho


def _by_user(table, N, name, noun):
    """{user: int64 item ids} of a ``user, item`` table (ids in 0..N-1) or of a dict."""
    if table is None:
        return {}
    if not isinstance(table, pd.DataFrame):
        return {u: np.asarray(list(v), dtype=np.int64) for u, v in dict(table).items()}
    check_columns(table, ["user", "item"], f"the {name} table")
    items = check_int_column(table["item"], "item").to_numpy()
    if items.size and (items.min() < 0 or items.max() >= N):
        raise ValueError(f"{noun} items must be ids in 0..N-1={N - 1}; got {items.min()}..{items.max()}")
    return {u: it.to_numpy() for u, it in pd.Series(items).groupby(table["user"].to_numpy(), sort=False)}


def log_prob_all_distinct(k, pool):
    """log P(k uniform draws *with* replacement from ``pool`` items are all distinct).

    P = pool! / ((pool - k)! pool^k) (the birthday problem), in log space
    through ``gammaln``; 0 for k <= 1 and -inf for k > pool. Summed over
    users it is the log probability that a with-replacement (binomial) draw
    of their negatives repeats no item: far below 0, sets without a repeated
    item say the negatives were drawn without replacement (hypergeometric;
    KDD20 Sec 2.2 gives both schemes). The command line warns on it.

    Parameters
    ----------
    k : int or array_like
        Draws (a user's negatives), >= 0.
    pool : int or array_like
        Items each draw is taken from (a user's N_u - 1), >= 1.

    Returns
    -------
    numpy.ndarray
        log P, elementwise (broadcast over ``k`` and ``pool``).

    References
    ----------
    W. Feller, *An Introduction to Probability Theory and Its Applications*,
    vol. 1, 3rd ed. (1968), Sec. II.3 (the birthday problem).

    Examples
    --------
    >>> float(np.exp(log_prob_all_distinct(2, 365)))       # two draws differ: 364/365
    0.9972602739726...
    >>> round(float(np.exp(log_prob_all_distinct(23, 365))), 4)  # the birthday problem
    0.4927
    >>> log_prob_all_distinct([1, 4], [10, 3]).tolist()
    [0.0, -inf]
    """
    from scipy.special import gammaln

    k, pool = np.asarray(k, dtype=float), np.asarray(pool, dtype=float)
    if np.any(k < 0) or np.any(pool < 1):
        raise ValueError("k must be >= 0 and pool >= 1")
    rest = np.maximum(pool - k, 0.0)
    out = gammaln(pool + 1) - gammaln(rest + 1) - k * np.log(pool)
    return np.where(k <= 1, 0.0, np.where(k > pool, -np.inf, out))
