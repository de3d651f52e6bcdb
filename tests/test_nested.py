"""Nested negatives (sampling_lib.nested): each user's seeded order of candidates.

The estimator needs that a prefix of s places holds X of the user's "items above the held-out one" (any
fixed subset of its candidates) with the hypergeometric law, at every s (the sets of a nested design are
the prefixes). Checked here against the exact pmf (scipy) by a chi-square test over many users' orders,
for contiguous, strided and random subsets, at candidate counts on both sides of the explicit /
Feistel switch; and the orders are bijections, prefixes are nested, items skip the excluded ids.
"""
import numpy as np
import pytest
from scipy import stats

from sampling_lib import nested
from sampling_lib.nested import EXPLICIT_MAX, CandidateMap, NestedOrder, candidate_items


@pytest.mark.parametrize("C", [1, 2, 7, EXPLICIT_MAX, EXPLICIT_MAX + 1, 100, 1000, 4097, 65_536, 100_003])
def test_every_order_is_a_permutation_of_the_candidates(C):
    order = NestedOrder(np.full(3, C), rng=C)
    for u in range(3):
        p = order.at(np.full(C, u), np.arange(C)) if C <= 5000 else order.at(np.full(5000, u), np.arange(5000))
        assert p.min() >= 0 and p.max() < C
        assert np.unique(p).size == p.size
        if C <= 5000:
            assert np.array_equal(np.sort(p), np.arange(C))


def test_slices_are_prefixes_of_one_order_and_do_not_depend_on_how_they_are_cut():
    order = NestedOrder([500, 30, 5000], rng=1)
    whole = order.positions([0, 1, 2], [0, 0, 0], [400, 30, 1000])
    parts = np.concatenate([order.positions([0, 1, 2], [0, 0, 0], [100, 10, 200]),
                            order.positions([0, 1, 2], [100, 10, 200], [400, 30, 1000])])
    per_user = lambda a, cuts: np.split(a, np.cumsum(cuts)[:-1])     # noqa: E731
    w = per_user(whole, [400, 30, 1000])
    p1 = per_user(parts[:310], [100, 10, 200])
    p2 = per_user(parts[310:], [300, 20, 800])
    for u in range(3):
        assert np.array_equal(w[u], np.r_[p1[u], p2[u]])


def test_the_same_seed_gives_the_same_orders_and_another_seed_others():
    a = NestedOrder([1000, 40], rng=7).positions([0, 1], [0, 0], [50, 40])
    b = NestedOrder([1000, 40], rng=7).positions([0, 1], [0, 0], [50, 40])
    c = NestedOrder([1000, 40], rng=8).positions([0, 1], [0, 0], [50, 40])
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _subset(kind, C, G, rng):
    if kind == "contiguous low":
        return np.arange(G)
    if kind == "contiguous high":
        return np.arange(C - G, C)
    if kind == "strided":
        return np.arange(0, C, max(1, C // G))[:G]
    return rng.choice(C, G, replace=False)


@pytest.mark.parametrize("C", [40, 300, 5000, pytest.param(100_000, marks=pytest.mark.slow)])   # 100,000: 4 s
@pytest.mark.parametrize("kind", ["contiguous low", "contiguous high", "strided", "random"])
def test_prefix_counts_of_a_fixed_subset_follow_the_hypergeometric_law(C, kind):
    # 4,000 users' orders; X = items of the subset among the first s places; chi-square against the exact
    # hypergeometric pmf (cells with expected count >= 5, the rest pooled), at three prefix lengths
    users = 4000
    rng = np.random.default_rng(C)
    G = max(1, C // 10)
    subset = _subset(kind, C, G, rng)
    order = NestedOrder(np.full(users, C), rng=C + 1)
    for s in sorted({min(C, 8), min(C, 37), min(C, max(8, C // 3), 1500)}):
        places = order.positions(np.arange(users), np.zeros(users, np.int64), np.full(users, s))
        X = np.isin(places, subset).reshape(users, s).sum(axis=1)
        pmf = stats.hypergeom.pmf(np.arange(s + 1), C, G, s)
        expected = users * pmf
        obs = np.bincount(X, minlength=s + 1).astype(float)
        big = expected >= 5
        if big.sum() < 2:
            continue
        e = np.r_[expected[big], expected[~big].sum()]
        o = np.r_[obs[big], obs[~big].sum()]
        keep = e > 0
        p = stats.chisquare(o[keep], e[keep] * o[keep].sum() / e[keep].sum()).pvalue
        assert p > 1e-4, (C, kind, s, p)


@pytest.mark.parametrize("C", [50, 3000])
def test_every_place_holds_every_candidate_equally_often(C):
    # the inclusion of each candidate in the first s places is s / C for a uniform order: over 6,000
    # orders, a chi-square on the counts of each candidate in the first ten places
    users, s = 6000, 10
    order = NestedOrder(np.full(users, C), rng=3)
    places = order.positions(np.arange(users), np.zeros(users, np.int64), np.full(users, s))
    counts = np.bincount(places, minlength=C)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_candidate_items_skip_the_excluded_ids():
    # user 0 excludes {0, 3, 4}, user 1 nothing, user 2 excludes {9}: positions in the allowed list -> ids
    ptr = np.array([0, 3, 3, 4])
    bad = np.array([0, 3, 4, 9])
    N = 10
    for u, excl in enumerate([{0, 3, 4}, set(), {9}]):
        allowed = [i for i in range(N) if i not in excl]
        pos = np.arange(len(allowed))
        got = candidate_items(pos, np.full(pos.size, u), ptr, bad)
        assert got.tolist() == allowed


def test_bad_places_are_errors():
    order = NestedOrder([10], rng=0)
    with pytest.raises(ValueError, match="places k must lie in 0..C_u - 1"):
        order.at(np.array([0]), np.array([10]))
    with pytest.raises(ValueError, match="n_candidates"):
        NestedOrder([-1])


@pytest.mark.parametrize("width", [1, 3, nested._PADDED_MAX, nested._PADDED_MAX + 1, 40])
def test_candidate_map_lists_the_allowed_ids_in_order_whichever_path_it_takes(width):
    # users excluding 0..width ids (the padded table up to _PADDED_MAX, the binary search beyond), against
    # the allowed ids listed one by one
    rng = np.random.default_rng(width)
    N, M = 60, 25
    excl = [np.sort(rng.choice(N, size=int(rng.integers(0, width + 1)), replace=False)) for _ in range(M)]
    excl[0] = np.arange(min(width, N))                      # a user excluding the lowest ids
    ptr = np.r_[0, np.cumsum([e.size for e in excl])]
    cmap = CandidateMap(ptr, np.concatenate(excl))
    assert (cmap._table is not None) == (max(e.size for e in excl) <= nested._PADDED_MAX)
    users = np.concatenate([np.full(N - e.size, u) for u, e in enumerate(excl)])
    pos = np.concatenate([rng.permutation(N - e.size) for e in excl])     # any order within a user
    got = cmap.items(pos, users)
    want = np.concatenate([np.setdiff1d(np.arange(N), e)[rng_pos] for e, rng_pos in
                           zip(excl, np.split(pos, np.cumsum([N - e.size for e in excl])[:-1]))])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("C", [2**31 + 11, 2**33 + 5])
def test_orders_of_more_than_32_bits_stay_within_the_candidates_and_distinct(C):
    # 32 bits or fewer run in uint32 arithmetic, more in uint64: both give distinct places below C
    order = NestedOrder([C], rng=5)
    assert int(order._bits[0]) == (32 if C < 2**32 else 34)
    p = order.positions([0], [0], [20_000])
    assert p.min() >= 0 and p.max() < C and np.unique(p).size == p.size
    assert p.max() > C // 2                                 # spread over the range, not stuck low


def test_unique_ints_equals_numpy_unique():
    from sampling_lib._arrays import unique_ints

    rng = np.random.default_rng(0)
    for a in (np.zeros(0, np.int64), np.array([7]), rng.integers(0, 2**45, 5000), rng.integers(-3, 4, (40, 3))):
        assert np.array_equal(unique_ints(a), np.unique(a))
