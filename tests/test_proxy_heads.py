"""The proxy's heads, the tails' exclusions and their candidate map, built in blocks of users.

Each builder is checked against a per-user brute force (sort the user's candidates by the proxy score,
descending, ties by catalogue position) with blocks far smaller than the instance, so that every block
boundary and a user larger than a block are crossed.
"""
import numpy as np
import pytest

import sampling_lib._arrays as arrays
from sampling_lib._arrays import user_blocks
from sampling_lib.nested import CandidateMap
from sampling_lib.proxy import heads_and_edge_ties, heads_from_scores, tail_exclusions


def _instance(seed, M=23, N=40):
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 8, N).astype(float)            # few distinct scores: many ties
    excluded = [np.sort(rng.choice(N, rng.integers(1, 12), replace=False)) for _ in range(M)]
    ptr = np.r_[0, np.cumsum([e.size for e in excluded])].astype(np.int64)
    bad = np.concatenate(excluded).astype(np.int64)
    C = N - np.diff(ptr)
    m = np.minimum(rng.integers(0, 15, M), C)
    return v, ptr, bad, m, excluded


def _brute_heads(v, excluded, m):
    heads, ties = [], 0
    for e, k in zip(excluded, m):
        cand = np.setdiff1d(np.arange(v.size), e)
        order = cand[np.lexsort((cand, -v[cand]))]
        heads.append(order[:k])
        ties += int(0 < k < order.size and v[order[k - 1]] == v[order[k]])
    return heads, ties


@pytest.mark.parametrize("block", [1, 5, 17, 1 << 22])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blocked_heads_equal_the_per_user_brute_force(monkeypatch, block, seed):
    monkeypatch.setattr(arrays, "BLOCK_ITEMS", block)
    v, ptr, bad, m, excluded = _instance(seed)
    want, want_ties = _brute_heads(v, excluded, m)
    hp, hi = heads_from_scores(v, ptr, bad, m)
    assert [hi[hp[u]:hp[u + 1]].tolist() for u in range(m.size)] == [w.tolist() for w in want]
    hp2, hi2, ties = heads_and_edge_ties(v, ptr, bad, m)
    assert np.array_equal(hp2, hp) and np.array_equal(hi2, hi)
    assert ties == want_ties


@pytest.mark.parametrize("block", [1, 6, 1 << 22])
def test_blocked_tail_exclusions_are_each_users_sorted_union(monkeypatch, block):
    monkeypatch.setattr(arrays, "BLOCK_ITEMS", block)
    v, ptr, bad, m, excluded = _instance(3)
    hp, hi = heads_from_scores(v, ptr, bad, m)
    tp, tb = tail_exclusions(ptr, bad, hp, hi)
    for u, e in enumerate(excluded):
        want = np.sort(np.r_[e, hi[hp[u]:hp[u + 1]]])
        assert tb[tp[u]:tp[u + 1]].tolist() == want.tolist()


def test_user_blocks_cover_every_user_once_within_the_bound():
    sizes = np.array([0, 3, 9, 0, 2, 2, 2, 12, 1])
    blocks = list(user_blocks(sizes, 6))
    assert [a for a, _ in blocks] == [0] + [b for _, b in blocks[:-1]] and blocks[-1][1] == sizes.size
    for a, b in blocks:
        assert b - a == 1 or sizes[a:b].sum() <= 6
    assert list(user_blocks(np.zeros(0, np.int64), 6)) == []


@pytest.mark.parametrize("block", [1, 7, 1 << 22])
def test_blocked_candidate_map_maps_positions_to_each_users_candidates(monkeypatch, block):
    # users excluding more than the padded table's width take the blocked key (here every head is long)
    monkeypatch.setattr(arrays, "BLOCK_ITEMS", block)
    v, ptr, bad, m, excluded = _instance(4)
    hp, hi = heads_from_scores(v, ptr, bad, np.minimum(m + 5, v.size - np.diff(ptr)))
    cmap = CandidateMap(*tail_exclusions(ptr, bad, hp, hi))
    assert cmap._key is not None
    for u, e in enumerate(excluded):
        cand = np.setdiff1d(np.arange(v.size), np.r_[e, hi[hp[u]:hp[u + 1]]])
        got = cmap.items(np.arange(cand.size), np.full(cand.size, u))
        assert got.tolist() == cand.tolist()
