"""The ladder within the tail: its law (kernels.strata_ladder_law) against brute-force enumeration of every
order of a small tail, and against the stratified evaluation itself (studies.strata_ladder_simulation, which
runs evaluate(proxy=) on users whose global rank is set)."""
import itertools

import numpy as np
import pytest

from sampling_lib.kernels import strata_kernel, strata_ladder_law, tail_ladder_sizes


def _enumerate(N, m, x, R, tail_n, tail_n_max):
    """{(s, r): probability} by every order of the T tail items (G = R - 1 - x of them above)."""
    T = N - 1 - m
    G = R - 1 - x
    sizes = tail_ladder_sizes(T, tail_n, tail_n_max)
    out = {}
    perms = list(itertools.permutations(range(T)))
    for order in perms:
        above = np.array([i < G for i in order])
        for j, s in enumerate(sizes):
            r = 1 + int(above[:s].sum())
            if r > 1 or j == len(sizes) - 1:
                out[(s, r)] = out.get((s, r), 0.0) + 1.0 / len(perms)
                break
    return out


@pytest.mark.parametrize("N, m, x, tail_n, tail_n_max", [(10, 2, 1, 1, 8), (9, 1, 0, 2, 5), (8, 3, 2, 3, 3),
                                                          (9, 2, 0, 1, 2)])
def test_the_ladder_law_is_every_order_of_the_tail_counted(N, m, x, tail_n, tail_n_max):
    T = N - 1 - m
    R = np.arange(x + 1, x + T + 2)
    s, r, P = strata_ladder_law(R, N, m, x, tail_n, tail_n_max)
    for i, Ri in enumerate(R):
        want = _enumerate(N, m, x, int(Ri), tail_n, tail_n_max)
        got = {(int(a), int(b)): float(p) for a, b, p in zip(s, r, P[i]) if p > 0}
        assert got.keys() == want.keys(), (Ri, got, want)
        for k in want:
            assert got[k] == pytest.approx(want[k], abs=1e-12), (Ri, k)
    outside = strata_ladder_law([x + T + 2] + ([x] if x >= 1 else []), N, m, x, tail_n, tail_n_max)[2]
    assert (outside == 0).all()


def test_the_ladder_likelihood_in_R_is_the_final_cell_s_kernel():
    """Ignorability: P(final cell | R) / P(r | R; s) does not depend on R (g_j(r) only)."""
    N, m, x = 60, 10, 2
    R = np.arange(x + 1, N - m + x + 1)
    s, r, P = strata_ladder_law(R, N, m, x, 4, 32)
    K = strata_kernel(R, N, m, x, s, r)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(K > 1e-300, P / K, np.nan)
    spread = np.nanmax(ratio, axis=0) - np.nanmin(ratio, axis=0)
    assert np.nanmax(spread) < 1e-12


def test_the_simulation_runs_evaluate_and_counts_each_final_cell():
    from sampling_lib.studies import strata_ladder_simulation

    sim = strata_ladder_simulation(40, 6, 1, [2, 5, 20], tail_n=3, tail_n_max=24, users=400, seed=3)
    assert set(sim.columns) >= {"R", "tail_size", "tail_rank", "count", "users", "probability"}
    assert (sim.groupby("R")["count"].sum() == 400).all()
    assert np.allclose(sim.groupby("R")["probability"].sum(), 1.0)
    # every simulated cell is possible under the law
    assert (sim.loc[sim["count"] > 0, "probability"] > 0).all()
    # where the proxy ranks the held-out item changes nothing: the same seed, the same draws
    first = strata_ladder_simulation(40, 6, 1, [2, 5, 20], tail_n=3, tail_n_max=24, users=400, seed=3,
                                     held_out_position="first")
    assert first["count"].tolist() == sim["count"].tolist()


def test_the_frontier_sets_each_stratified_design_beside_the_ladder_on_the_same_users():
    from sampling_lib.experiments import global_ranks_from_data
    from sampling_lib.studies import PANEL_MODELS, proxy_frontier

    models = {m: PANEL_MODELS[m] for m in ("itemknn", "popularity")}
    pop = global_ranks_from_data(None, models, rng=0, keep_models=True,
                                 synthetic={"n_users": 200, "n_items": 300})
    table, summary = proxy_frontier(pop, ["itemknn"], ["popularity"], heads=[10, 30, None], tail_n=5, tail_n_max=40,
                                    draws=1, n=20, metrics=["recall@10"], n_boot=40, full_boot=500)
    assert set(table.model) == {"itemknn"}                                    # the proxy is not evaluated
    # (no head with a fixed design would be head n: not run twice)
    assert list(summary.design) == ["uniform ladder (target 1.3)", "head 10 + tail 5..40", "head 30 + tail 5..40"]
    assert table.groupby("design").truth.nunique().eq(1).all() and table.truth.nunique() == 1   # same users
    assert (table.pairs_counted == table.pairs_reported).all() and (table.repeats == 0).all()
    rand, _ = proxy_frontier(pop, ["itemknn"], ["random"], heads=[10], tail_n=5, tail_n_max=40, draws=1, n=20,
                             metrics=["recall@10"], n_boot=40, full_boot=500)
    assert set(rand.proxy) == {"-", "random"} and (rand.pairs_counted == rand.pairs_reported).all()
    with pytest.raises(ValueError, match="missing"):
        proxy_frontier(pop, ["ease-200"], ["popularity"], heads=[10], tail_n=5, tail_n_max=40)
    assert table.uniform_price_ratio.isna().all()                            # fixed designs price no ladder
    # a planned design (a pilot of 300 deciding for 100 others): its price of the ladder against the ladder's
    # cost on the same draw, both as the table reports them
    pop = global_ranks_from_data(None, models, rng=0, keep_models=True, synthetic={"n_users": 400, "n_items": 300})
    table, summary = proxy_frontier(pop, ["itemknn"], ["popularity"], heads=[10, None], tail_n=5, tail_n_max=None,
                                    draws=1, n=20, metrics=["recall@10"], n_boot=40, full_boot=500)
    assert list(summary.design)[1:] == ["head 10 + tail 5..planned (target 1.3)",
                                        "climbing head + tail 5..planned (target 1.3)"]
    climbed = table[table.design.str.startswith("climbing")].iloc[0]
    assert np.isnan(climbed["head"]) and climbed.pilot_head >= 20 and summary.pilot_head.iloc[2] == climbed.pilot_head
    ladder, planned = table[table.proxy == "-"].iloc[0], table[table.proxy == "popularity"].iloc[0]
    assert 0 < planned.uniform_predicted_share < 1 and planned.uniform_priced_on in ("first stage", "cells")
    assert planned.uniform_price_ratio == pytest.approx(planned.uniform_predicted_share / ladder.cost_share)
    assert summary.uniform_price_ratio.iloc[1] == planned.uniform_price_ratio


def test_simulated_tail_cells_follow_the_head_and_ladder_laws():
    # nested hypergeometric draws of studies.strata_tail_cells against the exact joint law
    # P(x | R) P(s, r | R, x): the head's x hypergeometric, then kernels.strata_ladder_law
    from scipy import stats

    from sampling_lib.kernels import strata_ladder_law
    from sampling_lib.studies import strata_tail_cells

    N, m, R, users = 60, 10, 9, 20_000
    x, s, r = strata_tail_cells(np.full(users, R), N, m, tail_n=4, tail_n_max=32, rng=np.random.default_rng(3))
    z = []
    for xv in range(0, min(m, R - 1) + 1):
        px = stats.hypergeom.pmf(xv, N - 1, R - 1, m)
        sizes, ranks, P = strata_ladder_law([R], N, m, xv, 4, 32)
        for sj, rj, p in zip(sizes, ranks, P[0]):
            e = users * px * p
            if e < 5:
                continue
            c = np.sum((x == xv) & (s == sj) & (r == rj))
            z.append((c - e) / np.sqrt(e * (1 - px * p)))
    assert len(z) > 10 and np.max(np.abs(z)) < 5


def test_strata_consistency_errors_vanish_where_the_tail_is_scored_in_full():
    from sampling_lib.rankdist import synthetic_models
    from sampling_lib.studies import strata_consistency

    pmf = synthetic_models(120)["beta_a0.35"]
    full = strata_consistency(pmf, 15, [80], tail_n=104, tail_n_max=104, replicates=2)
    np.testing.assert_allclose(full["error"], 0, atol=1e-9)
    np.testing.assert_allclose(full["cost"], 120)
    part = strata_consistency(pmf, 15, [80, 160], tail_n=8, tail_n_max=32, replicates=2, seed=1)
    np.testing.assert_allclose(part["error"], part["estimate"] - part["truth"])
    assert set(part["M"]) == {80, 160} and (part["cost"] < 120).all()
