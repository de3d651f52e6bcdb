"""A tail sampled by the proxy's rank: its inclusion probabilities and the study of what they would draw.

``proxy.rank_power_inclusion`` is checked against a bisection on the level c (sum min(1, c t^-power) = size),
and ``studies.tail_inclusion`` against the same quantities computed from the population's global ranks
with the costly model as its own proxy (its items above are then its first R_u - 1 candidates).
"""
import functools

import numpy as np
import pytest

from sampling_lib.proxy import rank_power_inclusion


@functools.lru_cache(maxsize=None)
def _bisected(T, size, power):
    """min(1, c w_t) summing to size, c by bisection on log c (w_t = t^-power, in log space)."""
    lw = -power * np.log(np.arange(1, T + 1, dtype=float))
    lo, hi = np.log(size) - np.log(np.exp(lw).sum()), np.log(size) - lw[-1] + 1.0
    for _ in range(100):                               # the log range is < 2^10: 2^-90 of it is exact enough
        c = 0.5 * (lo + hi)
        lo, hi = (c, hi) if np.minimum(1.0, np.exp(c + lw)).sum() < size else (lo, c)
    return np.minimum(1.0, np.exp(0.5 * (lo + hi) + lw))


@pytest.mark.parametrize("T, size, power", [(1, 1, 1.0), (7, 3, 0.0), (50, 5, 0.5), (50, 20, 1.0), (300, 40, 2.0),
                                            (300, 299.5, 3.0), (1000, 1, 1.0), (9, 9, 1.0), (10, 2.5, 50.0),
                                            (40, 3.5, 150.0)])
def test_rank_power_inclusion_is_the_water_filled_level(T, size, power):
    pi = rank_power_inclusion(T, size, power)
    np.testing.assert_allclose(pi, _bisected(T, size, power), rtol=1e-9, atol=1e-12)
    assert pi.sum() == pytest.approx(size, rel=1e-12)
    assert (pi > 0).all() and (pi <= 1).all() and (np.diff(pi) <= 1e-15).all()
    if power == 0:
        assert np.allclose(pi, size / T)


def test_rank_power_inclusion_bad_input_names_itself():
    with pytest.raises(ValueError, match=r"size must lie in \(0.0, 5\]"):
        rank_power_inclusion(5, 6, 1.0)
    with pytest.raises(ValueError, match="size must lie in"):
        rank_power_inclusion(5, 0, 1.0)
    with pytest.raises(ValueError, match="power must lie in"):
        rank_power_inclusion(5, 2, -1.0)
    with pytest.raises(ValueError, match="T must"):
        rank_power_inclusion(0, 1, 1.0)
    with pytest.raises(ValueError, match="power must leave every inclusion probability positive"):
        rank_power_inclusion(1000, 2.5, 400.0)


def test_tail_inclusion_against_the_global_ranks():
    """The costly model as its own proxy, no head: user u's Y_u = R_u - 1 items above are its tail's first
    positions, so each row is a mean over users of quantities of (T_u, R_u) computed here apart."""
    from sampling_lib import studies
    from sampling_lib.experiments import global_ranks_from_data

    pop = global_ranks_from_data(None, {m: studies.PANEL_MODELS[m] for m in ("itemknn", "popularity")}, rng=3,
                                 keep_models=True, synthetic={"n_users": 300, "n_items": 400})
    ranks, N, info = pop
    t = studies.tail_inclusion(pop, "itemknn", "itemknn", head=0, tail_sizes=[20], powers=[0.0, 1.0], users=10_000,
                               bins=[1, 4, 31]).set_index(["power", "bin"])
    Y = np.asarray(ranks["itemknn"], dtype=np.int64) - 1
    T = np.asarray(info["n_candidates"], dtype=np.int64) - 1
    keep = (Y >= 1) & (T > 20)
    b = np.searchsorted([1, 4, 31], Y, side="right") - 1
    for power in (0.0, 1.0):
        gain = np.array([_bisected(int(T_), 20, power)[:y].mean() * T_ / 20 if k else np.nan
                         for T_, y, k in zip(T, Y, keep)])
        top = np.minimum(Y, 20) / np.maximum(Y, 1) * T / 20
        for j, name in enumerate(["1-3", "4-30", ">=31"]):
            sel = keep & (b == j)
            row = t.loc[(power, name)]
            assert row.users == sel.sum() and row.items_above == Y[sel].sum()
            assert row.gain == pytest.approx(gain[sel].mean(), rel=1e-9)
            assert row.top_gain == pytest.approx(top[sel].mean(), rel=1e-12)
            assert row.uniform == pytest.approx((20 / T[sel]).mean(), rel=1e-12)
        pooled = sum(_bisected(int(T_), 20, power)[:y].sum() for T_, y in zip(T[keep], Y[keep]))
        assert t.loc[(power, "all")].pooled_gain == pytest.approx(pooled / (Y[keep] * 20 / T[keep]).sum(), rel=1e-9)
        assert t.loc[(power, "all")].users == keep.sum()
    assert np.allclose(t.loc[0.0].gain, 1.0)                  # a uniform tail draws every item alike
    # the model's own order puts the few items above of easy users first: their gain is the largest
    assert t.loc[(1.0, "1-3")].gain > t.loc[(1.0, ">=31")].gain > 1
    with pytest.raises(ValueError, match="bins must be"):
        studies.tail_inclusion(pop, "itemknn", "popularity", head=0, bins=[0, 4])
    with pytest.raises(ValueError, match="powers must lie in"):
        studies.tail_inclusion(pop, "itemknn", "popularity", head=0, powers=[-1.0])
    # no user left unsettled (k_max 1 and a head holding every candidate's first): an empty table, its columns
    empty = studies.tail_inclusion(pop, "itemknn", "itemknn", head=5, k_max=1, tail_sizes=[20])
    assert empty.empty and {"gain", "pooled_gain", "tail_size", "bin"} <= set(empty.columns)
