"""A cheap proxy's head: each user's top candidates by a proxy ranker, scored exactly by the costly model.

Large systems rank the whole catalogue with a cheap first stage (popularity, a two-tower retriever, BM25,
an ANN index) and score only what it passes on with the costly model. A *stratified* sampled evaluation
does the same: user u's candidates (the N_u - 1 items outside its history other than its held-out item)
split into

* the **head** H_u: the proxy's top m_u candidates, all scored by the costly model, so the number X_u of
  head items that beat the held-out item is known exactly; and
* the **tail**: the other C_u - m_u candidates, sampled with known inclusion probabilities (here uniformly,
  as nested prefixes of a seeded random order: :class:`sampling_lib.nested.NestedOrder`).

The global rank is then R_u = 1 + X_u + Y_u with Y_u the tail items above the held-out item, and the tail
sample's rank has the ordinary hypergeometric kernel in Y_u (:mod:`sampling_lib.kernels`). The head is
defined on the user's *candidates* (never on the held-out item, which is scored anyway), so it does not
depend on where the proxy puts the held-out item, and the design stays ignorable.

This module turns the three forms a proxy comes in into each user's head (positions in the catalogue):

* a per-item vector of proxy scores (popularity counts, a retriever's item prior): one order of the
  catalogue, each user's head its first m_u candidates in it (:func:`heads_from_scores`);
* a callable ``proxy(users, items) -> scores`` (a cheap per-user model, scored on every candidate of each
  user, in blocks of users: :func:`heads_from_callable`);
* a precomputed top-m table (a retriever's output file: ``user, item[, rank]``; :func:`heads_from_table`).

Ties: a proxy that scores candidates equally at the head's edge is ordered by the item's position in the
catalogue (lower first) -- a stated rule, counted in the result's notes (:func:`heads_and_edge_ties`). A NaN
proxy score is an error.

References
----------
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments. CIKM 2006
   (statAP / infAP: sampling with known inclusion probabilities).
.. [Schnabel16] Schnabel, Swaminathan, Frazier, Joachims. Unbiased comparative evaluation of ranking
   functions. ICTIR 2016.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ._arrays import unique_ints, user_blocks
from ._validation import check_float, check_int, show_value
from .nested import candidate_items

__all__ = ["heads_from_scores", "heads_from_callable", "heads_from_table", "head_sizes", "tail_exclusions",
           "head_enrichment", "head_enrichment_stage", "prefix_edge_ties", "table_head_notes", "rank_power_inclusion"]


def head_sizes(m, n_candidates):
    """Each user's head size: ``m`` (an int, or one per user) capped at its C_u candidates.

    Examples
    --------
    >>> head_sizes(100, np.array([5000, 40])).tolist()
    [100, 40]
    """
    C = np.asarray(n_candidates, dtype=np.int64)
    if np.ndim(m) == 0:
        m = np.full(C.size, check_int(m, "m", low=0), np.int64)
    m = np.asarray(m, dtype=np.int64)
    if m.shape != C.shape or (m < 0).any():
        raise ValueError(f"m must be an int >= 0 or one head size >= 0 per user ({C.size}); got shape {m.shape}")
    return np.minimum(m, C)


def _check_scores(v, name, size=None):
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or (size is not None and v.size != size):
        raise ValueError(f"{name} must be a 1-D array of one proxy score per item ({size}); got shape {v.shape}")
    bad = ~np.isfinite(v)
    if bad.any():
        raise ValueError(f"{name} must be finite (NaN and inf leave the head undefined); item position "
                         f"{int(np.flatnonzero(bad)[0])} has {v[np.flatnonzero(bad)[0]]}")
    return v


def heads_from_scores(scores, ptr, bad, m):
    """Each user's head from one proxy score per catalogue item: its first m_u candidates in the order of
    the scores (descending; ties by catalogue position), as catalogue positions in CSR form.

    ``ptr``, ``bad``: each user's excluded positions and held-out item, sorted (CSR, as
    :func:`sampling_lib.stagerun.check_inputs` gives them); ``m``: head sizes (:func:`head_sizes`).

    Returns (head_ptr, head_items): user u's head is ``head_items[head_ptr[u]:head_ptr[u + 1]]``, in proxy
    order.

    Examples
    --------
    >>> ptr, bad = np.array([0, 1, 2]), np.array([4, 0])          # user 0 excludes item 4, user 1 item 0
    >>> hp, hi = heads_from_scores(np.array([0.1, 0.5, 0.2, 0.4, 0.9]), ptr, bad, np.array([2, 2]))
    >>> hi[hp[0]:hp[1]].tolist(), hi[hp[1]:hp[2]].tolist()
    ([1, 3], [4, 1])
    """
    return _heads_in_order(_proxy_order(_check_scores(scores, "proxy")), ptr, bad, m)


def _proxy_order(v):
    """The catalogue in proxy order (descending; ties by catalogue position) and each item's place in it."""
    order = np.argsort(-v, kind="stable")
    place = np.empty_like(order)
    place[order] = np.arange(order.size)
    return order, place


def _heads_in_order(proxy_order, ptr, bad, m):
    """:func:`heads_from_scores` given the catalogue's proxy order (:func:`_proxy_order`), sorted once."""
    order, place = proxy_order
    ptr = np.asarray(ptr, dtype=np.int64)
    bad = np.asarray(bad, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    head_ptr = np.r_[0, np.cumsum(m)].astype(np.int64)
    head = np.empty(int(head_ptr[-1]), np.int64)
    for a, b in user_blocks(m):                        # bounded temporaries (BLOCK_ITEMS)
        bp = ptr[a:b + 1] - ptr[a]
        seg = np.repeat(np.arange(b - a), np.diff(bp))
        bad_places = place[bad[ptr[a]:ptr[b]]]
        # sorted within each user's segment: the skip rule of candidate_items needs it
        bad_sorted = bad_places[np.lexsort((bad_places, seg))]
        mm = m[a:b]
        users = np.repeat(np.arange(b - a), mm)
        k = np.arange(users.size) - np.repeat(np.cumsum(mm) - mm, mm)
        head[head_ptr[a]:head_ptr[b]] = order[candidate_items(k, users, bp, bad_sorted)]
    return head_ptr, head


def heads_from_callable(proxy, users, n_items, ptr, bad, m, *, ids=None, block_users=None):
    """Each user's head from a callable ``proxy(users, items) -> scores`` scored on every candidate of the
    user (the proxy is cheap: that is what a proxy is), in blocks of users. Ties by catalogue position.

    ``users``: the users' ids (passed to ``proxy``); ``ids``: the catalogue's item ids (None: positions).
    """
    ptr = np.asarray(ptr, dtype=np.int64)
    bad = np.asarray(bad, dtype=np.int64)
    M = ptr.size - 1
    N = check_int(n_items, "n_items", low=2)
    m = np.asarray(m, dtype=np.int64)
    block = max(1, (1 << 22) // N) if block_users is None else check_int(block_users, "block_users", low=1)
    heads = []
    all_items = np.arange(N)
    for a in range(0, M, block):
        us = np.arange(a, min(M, a + block))
        u_rep = np.repeat(us, N)
        i_rep = np.tile(all_items, us.size)
        out = proxy(np.asarray(users)[u_rep], i_rep if ids is None else np.asarray(ids)[i_rep])
        s = _check_scores(np.asarray(out, dtype=float).ravel(), "the proxy's scores", u_rep.size).reshape(us.size, N)
        for j, u in enumerate(us):
            row = s[j].copy()
            row[bad[ptr[u]:ptr[u + 1]]] = -np.inf            # not candidates
            k = int(m[u])
            if k == 0:
                heads.append(np.zeros(0, np.int64))
                continue
            if k < N:                 # every candidate at or above the k-th score, so that ties at the edge
                kth = row[np.argpartition(-row, k - 1)[k - 1]]        # go by catalogue position too
                top = np.flatnonzero(row >= kth)
            else:
                top = np.arange(N)
            # proxy order, ties by catalogue position (stable over positions)
            top = top[np.lexsort((top, -row[top]))][:k]
            heads.append(top.astype(np.int64))
    return np.r_[0, np.cumsum(m)].astype(np.int64), (np.concatenate(heads) if heads else np.zeros(0, np.int64))


def heads_from_table(table, user_index, item_position, held, ptr, bad):
    """Each user's head from a retriever's top-m table ``user, item[, rank]`` (rows of a user in rank order,
    or ordered by ``rank``), as catalogue positions.

    ``user_index`` / ``item_position``: functions mapping the table's ids to user indices and catalogue
    positions (an unknown id is an error naming it). The held-out item, when the retriever lists it, is
    not a head *candidate* (it is scored anyway) and is dropped from the user's head; an item listed twice
    for a user, or an excluded item, is an error.

    Returns
    -------
    head_ptr, head_items : ndarray of int64
        The heads in CSR form (user u's are ``head_items[head_ptr[u]:head_ptr[u + 1]]``).
    held_listed : ndarray of bool
        Per user: the table listed the user's held-out item (dropped from the head).
    """
    if not isinstance(table, pd.DataFrame) or not {"user", "item"} <= set(table.columns):
        raise ValueError("the proxy's top-m table holds the columns user, item[, rank]")
    extra = [c for c in table.columns if c not in ("user", "item", "rank")]
    if extra:
        raise ValueError(f"the proxy's top-m table holds the columns user, item[, rank]; column(s) {extra} are not "
                         "read")
    t = table.sort_values("rank", kind="stable") if "rank" in table.columns else table
    u = user_index(t["user"].to_numpy())
    it = item_position(t["item"].to_numpy())
    keep = it != np.asarray(held)[u]
    M = ptr.size - 1
    held_listed = np.bincount(u[~keep], minlength=M) > 0
    u, it = u[keep], it[keep]
    key = u * (int(it.max(initial=0)) + 1) + it
    if unique_ints(key).size != key.size:
        d = pd.Series(key).duplicated().to_numpy()
        j = int(np.flatnonzero(d)[0])
        raise ValueError(f"the proxy's top-m table lists item {show_value(t['item'].to_numpy()[keep][j])} twice for "
                         f"user {show_value(t['user'].to_numpy()[keep][j])}")
    ptr = np.asarray(ptr, dtype=np.int64)
    seg_bad = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    excluded = pd.Index(seg_bad * (int(max(it.max(initial=0), np.max(bad, initial=0))) + 1) + np.asarray(bad))
    probe = u * (int(max(it.max(initial=0), np.max(bad, initial=0))) + 1) + it
    hit = excluded.get_indexer(probe) >= 0
    if hit.any():
        j = int(np.flatnonzero(hit)[0])
        raise ValueError(f"the proxy's top-m table lists item {show_value(t['item'].to_numpy()[keep][j])} for user "
                         f"{show_value(t['user'].to_numpy()[keep][j])}, which its history excludes")
    order = np.argsort(u, kind="stable")
    counts = np.bincount(u, minlength=M)
    return np.r_[0, np.cumsum(counts)].astype(np.int64), it[order].astype(np.int64), held_listed


def tail_exclusions(ptr, bad, head_ptr, head_items):
    """Each user's excluded positions, held-out item *and head*, sorted (CSR): the tail's candidates are the
    catalogue less these (:func:`sampling_lib.nested.candidate_items` maps tail positions to items)."""
    ptr, head_ptr = np.asarray(ptr, dtype=np.int64), np.asarray(head_ptr, dtype=np.int64)
    bad, head_items = np.asarray(bad, dtype=np.int64), np.asarray(head_items, dtype=np.int64)
    counts = np.diff(ptr) + np.diff(head_ptr)
    out_ptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
    out = np.empty(int(out_ptr[-1]), np.int64)
    for a, b in user_blocks(counts):                   # bounded temporaries (BLOCK_ITEMS)
        u = np.r_[np.repeat(np.arange(b - a), np.diff(ptr[a:b + 1])),
                  np.repeat(np.arange(b - a), np.diff(head_ptr[a:b + 1]))]
        it = np.r_[bad[ptr[a]:ptr[b]], head_items[head_ptr[a]:head_ptr[b]]]
        out[out_ptr[a]:out_ptr[b]] = it[np.lexsort((it, u))]
    return out_ptr, out


def heads_and_edge_ties(scores, ptr, bad, m):
    """:func:`heads_from_scores` with the number of users whose head the tie rule decided (the head's last
    proxy score equals the best one outside it), from one ordering: each user's top m_u + 1 candidates,
    the last kept only to be compared.

    Examples
    --------
    >>> hp, hi, ties = heads_and_edge_ties(np.array([0.3, 0.3, 0.1]), np.array([0, 0]), np.array([], int), [1])
    >>> hi.tolist(), ties
    ([0], 1)
    """
    v = _check_scores(scores, "proxy")
    ptr = np.asarray(ptr, dtype=np.int64)
    bad = np.asarray(bad, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    n_cand = v.size - np.diff(ptr)
    ext_m = np.minimum(m + 1, n_cand)
    sizes = np.minimum(ext_m, m)
    head_ptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    head, ties = np.empty(int(head_ptr[-1]), np.int64), 0
    proxy_order = _proxy_order(v)                      # sorted once, not per block
    for a, b in user_blocks(ext_m):                    # bounded temporaries (BLOCK_ITEMS)
        ext_p, ext = _heads_in_order(proxy_order, ptr[a:b + 1] - ptr[a], bad[ptr[a]:ptr[b]], ext_m[a:b])
        ext_sizes = np.diff(ext_p)
        place = np.arange(ext.size) - np.repeat(ext_p[:-1], ext_sizes)       # place within the user's list
        head[head_ptr[a]:head_ptr[b]] = ext[place < np.repeat(m[a:b], ext_sizes)]
        ties += prefix_edge_ties(v, ext_p, ext, m[a:b])
    return head_ptr, head, ties


def prefix_edge_ties(scores, head_ptr, head_items, m):
    """How many users' heads cut to their first ``m`` items end on a tie: a non-empty prefix followed, in the
    longer heads held (``head_ptr``, ``head_items``, proxy order), by an item of the same proxy score (the tie
    rule decided that edge). Users whose held heads are no longer than ``m`` have no candidate beyond it.

    Examples
    --------
    >>> prefix_edge_ties(np.array([0.3, 0.3, 0.1]), np.array([0, 3]), np.array([0, 1, 2]), np.array([1]))
    1
    """
    v, hp, m = np.asarray(scores, dtype=float), np.asarray(head_ptr, dtype=np.int64), np.asarray(m, dtype=np.int64)
    edge = (np.diff(hp) > m) & (m > 0)
    at = hp[:-1][edge] + m[edge]                       # the first item beyond each cut head
    return int(np.sum(v[head_items[at - 1]] == v[head_items[at]]))


def table_head_notes(listed, given, m, head, M):
    """The notes of a retriever's top-m table read as heads (:func:`heads_from_table`; ``listed``: per user,
    whether its list held its held-out item, dropped from the head since it is scored as the held-out item;
    ``given``: each user's list length after that; ``m``: the head sizes, ``head`` as given; ``M``: users):
    users whose list held their held-out item, users the table does not list, lists cut to ``head``."""
    notes = []
    if listed.any():
        notes.append(f"proxy: the top-m table lists the held-out item of {int(listed.sum()):,} of {M:,} users; it is "
                     "scored as the held-out item, not as a head candidate, so their heads hold one item less")
    if (given == 0).any():
        notes.append(f"proxy: {int((given == 0).sum()):,} of {M:,} users are not in the top-m table (or only with "
                     "their held-out item): their head is empty and their tail is drawn from all their candidates")
    cut = given > m
    if cut.any():
        notes.append(f"proxy: the top-m table lists more than head = {head:,} items (or than their candidates) for "
                     f"{int(cut.sum()):,} of {M:,} users: their first items (by rank, else file order) form the head")
    return notes


def head_enrichment(head, x, tail_size, tail_hits, k_max):
    """Does the proxy's head hold more of the items above the held-out one than a random set would?

    For the users with x_u < ``k_max`` head items above the held-out item and a first tail sample
    (the users a stratified evaluation gives a tail), S_u = x_u + y_u of the m_u + t_u scored candidates
    beat the held-out item (head m_u, tail sample t_u, y_u of them in the tail). If the proxy's order
    carried no information on which candidates beat it, the head would be a random m_u of the m_u + t_u
    (the tail sample is uniform), so given S_u, x_u would be hypergeometric(m_u + t_u, S_u, m_u),
    truncated to x_u < k_max (the users were chosen by it). The score statistic
    z = sum (x_u - E0 x_u) / sqrt(sum Var0 x_u) is then about standard normal, whatever the users' global
    ranks; a proxy that ranks the beating items first makes it large. ``ratio`` = sum x_u / sum E0 x_u is
    the head's hits over those a random head would get. The null draws each user's head independently
    (a per-user proxy that knows nothing). A global proxy (one score per item) gives every user nearly the
    same head items, whose hits are then correlated across users: z overstates the evidence either way
    (a random global proxy gave z = -3.9 and -2.3 on 300 users in ``tests/test_evaluate_proxy.py``), and
    ``ratio`` is the better guide.

    Parameters
    ----------
    head, x, tail_size, tail_hits : array_like of int, one entry per user
        m_u, x_u, t_u (0: no tail sample; the user is left out) and y_u.
    k_max : int
        The largest cutoff of the metrics (users with x_u >= k_max get no tail).

    Returns
    -------
    (z, ratio, users) : (float, float, int)
        NaN z and ratio when no user carries information (S_u = 0 or every user's law is a point).

    References
    ----------
    The conditional (permutation) test of a 2 x 2 table per user, summed as in Mantel and Haenszel
    (JNCI 1959).

    Examples
    --------
    >>> z, ratio, users = head_enrichment([5, 5], [0, 2], [5, 5], [2, 0], 10)
    >>> round(z, 3), round(ratio, 3), users
    (0.0, 1.0, 2)
    """
    from scipy import stats

    m, x, t, y = (np.asarray(a, dtype=np.int64) for a in (head, x, tail_size, tail_hits))
    k_max = check_int(k_max, "k_max", low=1)
    use = (t > 0) & (x < k_max)
    m, x, t, y = m[use], x[use], t[use], y[use]
    S = x + y
    grid = np.arange(k_max)[None, :]
    pmf = stats.hypergeom.pmf(grid, (m + t)[:, None], S[:, None], m[:, None])
    tot = pmf.sum(axis=1)
    ok = tot > 0
    pmf = pmf[ok] / tot[ok, None]
    e = pmf @ np.arange(k_max)
    v = pmf @ np.arange(k_max) ** 2 - e ** 2
    return _summed_z(x[ok], e, v, int(use.sum()))


def _summed_z(x, e, v, users):
    """(z, ratio, users) of per-user counts ``x`` with null means ``e`` and variances ``v``, summed over users
    (Mantel and Haenszel): NaN z and ratio when no user's law has any spread."""
    if not v.sum() > 0:
        return float("nan"), float("nan"), users
    return float((x - e).sum() / np.sqrt(v.sum())), float(x.sum() / e.sum()), users


def head_enrichment_stage(in_stage, owner, above, tail_sizes_in, tail_hits):
    """:func:`head_enrichment` on a uniform sample of each user's candidates (a pilot's uniform first stage):
    every user, no truncation.

    User u's uniform sample of n_u = h_u + t_u candidates holds h_u of its head and t_u of its tail, and
    a_u = xh_u + xt_u of them beat the held-out item. If the proxy's order carried no information on which
    candidates beat it, the head part would be a random h_u of the n_u, so xh_u would be
    hypergeometric(n_u, a_u, h_u) given a_u; z = sum (xh_u - E0) / sqrt(sum Var0) and ``ratio`` =
    sum xh_u / sum E0 as in :func:`head_enrichment` (the same caveat on a global proxy's z). The users the head
    settles count too: after the first tail sample, :func:`head_enrichment` sees only the users the head left
    unsettled, the proxy's failures, and behind a strong proxy that climbed to a large head it lost its power
    (40 users left of 1,053 on a held-out data set: z = 1.5; benchmarks/README.md, "The rest of the panel").

    Parameters
    ----------
    in_stage, owner, above : array_like, one entry per head item
        Whether the item is in its user's uniform sample, its user (0..M-1), whether it beats the held-out
        item (its value where the item is not in the sample is not read).
    tail_sizes_in, tail_hits : array_like of int, one entry per user
        t_u and xt_u.

    Returns
    -------
    (z, ratio, users) : (float, float, int)
        ``users``: those whose law is not a point (0 < h_u < n_u, 0 < a_u < n_u); NaN z and ratio when none.

    Examples
    --------
    >>> z, ratio, users = head_enrichment_stage([1, 1, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0], [8, 8], [1, 2])
    >>> round(ratio, 3), users          # 1 head hit where a random head part would hold 0.4 + 0.4
    (1.25, 2)
    """
    in_stage, above = np.asarray(in_stage, dtype=bool), np.asarray(above, dtype=bool)
    own = np.asarray(owner, dtype=np.int64)[in_stage]
    t, xt = np.asarray(tail_sizes_in, dtype=np.float64), np.asarray(tail_hits, dtype=np.float64)
    h = np.bincount(own, minlength=t.size).astype(np.float64)
    xh = np.bincount(own[above[in_stage]], minlength=t.size).astype(np.float64)
    n, a = h + t, xh + xt
    use = (h > 0) & (t > 0) & (a > 0) & (a < n)
    h, xh, n, a = h[use], xh[use], n[use], a[use]
    return _summed_z(xh, h * a / n, h * a * (n - a) * (n - h) / (n * n * (n - 1)), int(use.sum()))


def rank_power_inclusion(T, size, power):
    """Inclusion probabilities of a tail sampled by the proxy's rank: pi_t = min(1, c t^-power) for the tail
    positions t = 1..T in the proxy's order, with c such that they sum to ``size`` (the expected sample size).

    Positions whose c t^-power would pass 1 are taken with certainty and the rest share what is left
    (water-filling: the smallest number j of certain positions with (size - j) w_{j+1} / sum_{t > j} w_t
    <= 1, w_t = t^-power). ``power`` 0 is the uniform tail (size / T each); every pi_t is positive, so each
    tail item can be drawn and a Horvitz-Thompson estimate [HT52] exists, as statAP's and infAP's sampling
    with known inclusion probabilities needs [YA06].

    Parameters
    ----------
    T : int >= 1
        The tail's size.
    size : float in (0, T]
        The expected number of tail items sampled (sum of the pi_t).
    power : float >= 0

    Returns
    -------
    ndarray of float, shape (T,)
        pi_1 >= pi_2 >= ... >= pi_T > 0.

    References
    ----------
    .. [HT52] Horvitz, Thompson. A generalization of sampling without replacement from a finite universe. JASA
       47 (1952).

    Examples
    --------
    >>> rank_power_inclusion(4, 2, 1.0).round(3).tolist()        # c = 2 / (1 + 1/2 + 1/3 + 1/4)
    [0.96, 0.48, 0.32, 0.24]
    >>> rank_power_inclusion(4, 3, 2.0).round(3).tolist()        # the first two positions are certain
    [1.0, 1.0, 0.64, 0.36]
    """
    T = check_int(T, "T", low=1)
    size = check_float(size, "size", low=0.0, low_open=True, high=T)
    power = check_float(power, "power", low=0.0)
    lw = -power * np.log(np.arange(1, T + 1, dtype=float))        # log w_t, in log space for large powers
    rest = np.logaddexp.accumulate(lw[::-1])[::-1]                # log of sum of w over positions j + 1..T
    j = np.arange(T)
    with np.errstate(divide="ignore", invalid="ignore"):       # size - j <= 0: never the level
        log_level = np.log(size - j) - rest                       # log c if the first j positions are certain
    fits = (log_level + lw <= 1e-12) & (size - j > 0)
    if not fits.any():                                            # size == T: every position certain
        return np.ones(T)
    k = int(np.argmax(fits))
    out = np.ones(T)
    out[k:] = np.minimum(1.0, np.exp(log_level[k] + lw[k:]))
    if out[-1] <= 0.0:
        raise ValueError(f"power must leave every inclusion probability positive; got {power} (T = {T}: the last "
                         f"one underflows below {np.finfo(float).tiny:.0e})")
    return out
