"""The API takes the CLI's ranks table, and gives the CLI's numbers for the same seed.

Before: ``sampling_lib.estimate(pd.read_csv("examples/ranks.csv"), N=3706, n=100)`` raised "must be a counts
table"; and with the same seed the CLI (one estimate per model, each from ``rng=seed``) and the API (one
Generator shared by the models) gave different intervals for the second model.
"""
import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import sampling_lib as sl
from conftest import REPO
from sampling_lib.cli import main

N, n = 3706, 100
KW = dict(metrics=["recall@10", "ndcg@10"], n_boot=120)


@pytest.fixture(scope="module")
def frame():
    return pd.read_csv(REPO / "examples" / "ranks.csv")


def _by_model(frame):
    """Each model's ranks as a plain array, taken from the frame here (not by the library's reader)."""
    return {m: g["rank"].to_numpy() for m, g in frame.groupby("model", sort=False)}


def test_estimate_takes_the_clis_ranks_frame(frame):
    got = sl.estimate(frame, N=N, n=n, rng=0, **KW)
    assert list(got.model.unique()) == ["modelA", "modelB"]
    for m, r in _by_model(frame).items():
        alone = sl.estimate(r, N, n, rng=0, **KW).drop(columns="model")
        pd.testing.assert_frame_equal(got[got.model == m].drop(columns="model").reset_index(drop=True), alone)
    # the reader's columns are read too: n_items per user, sample_size
    t = frame.assign(n_items=N, sample_size=n)
    pd.testing.assert_frame_equal(sl.estimate(t, rng=0, **KW), got)


def test_a_seed_gives_each_model_the_same_draws_alone_or_together(frame):
    sr = sl.io.ranks_from_table(frame, n=n)
    together = sl.estimate(sr, N=N, n=n, rng=7, **KW)
    for m, r in _by_model(frame).items():
        alone = sl.estimate(r, N, n, rng=7, **KW)
        pd.testing.assert_frame_equal(together[together.model == m].drop(columns="model").reset_index(drop=True),
                                      alone.drop(columns="model"))
    # a SeedSequence: the same rule
    ss = sl.estimate(sr, N=N, n=n, rng=np.random.SeedSequence(7), **KW)
    b = sl.estimate(_by_model(frame)["modelB"], N, n, rng=np.random.SeedSequence(7), **KW)
    np.testing.assert_array_equal(ss[ss.model == "modelB"].ci_low, b.ci_low)


def test_a_generator_is_shared_by_the_models_in_order(frame):
    sr = sl.io.ranks_from_table(frame, n=n)
    shared = sl.estimate(sr, N=N, n=n, rng=np.random.default_rng(3), **KW)
    g = np.random.default_rng(3)
    a = sl.estimate(_by_model(frame)["modelA"], N, n, rng=g, **KW)       # draws first
    b = sl.estimate(_by_model(frame)["modelB"], N, n, rng=g, **KW)       # then from where A left it
    np.testing.assert_array_equal(shared[shared.model == "modelA"].ci_high, a.ci_high)
    np.testing.assert_array_equal(shared[shared.model == "modelB"].ci_high, b.ci_high)
    fresh = sl.estimate(_by_model(frame)["modelB"], N, n, rng=np.random.default_rng(3), **KW)
    assert not np.array_equal(shared[shared.model == "modelB"].ci_high, fresh.ci_high)


def _cli_csv(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return pd.read_csv(io.StringIO(out))


def test_the_cli_and_the_api_agree_for_one_seed(frame, capsys):
    path = REPO / "examples" / "ranks.csv"
    cli = _cli_csv(capsys, "estimate", path, "-N", N, "-n", n, "--n-boot", KW["n_boot"], "--seed", 5, "-q",
                   "--format", "csv")
    api = sl.estimate(frame, N=N, n=n, rng=5, **KW)
    cols = ["model", "metric", "naive", "estimate", "ci_low", "ci_high", "se", "naive_ci_low", "naive_ci_high"]
    pd.testing.assert_frame_equal(cli[cols], api[cols], check_dtype=False)
    # compare: one paired bootstrap over both models in the CLI and the API alike (no per-model seeding)
    cli = _cli_csv(capsys, "compare", path, "-N", N, "-n", n, "--n-boot", KW["n_boot"], "--seed", 5, "-q",
                   "--format", "csv")
    api = sl.compare(frame, N=N, n=n, rng=5, **KW)
    cols = ["metric", "model_a", "model_b", "difference", "ci_low", "ci_high", "pvalue"]
    pd.testing.assert_frame_equal(cli[cols], api[cols], check_dtype=False)
    arrays = sl.compare(_by_model(frame), N=N, n=n, rng=5, **KW)      # the ranks table pairs users as a dict does
    pd.testing.assert_frame_equal(api[cols], arrays[cols])


def test_a_ranks_frame_takes_one_n_and_counts_tables_are_read_as_before():
    with pytest.raises(ValueError, match="N must be one int with a ranks table"):
        sl.estimate(pd.DataFrame({"user": [1, 2], "rank": [3, 1]}), N=[N, N], n=n)
    t = pd.DataFrame({"rank": [1, 2], "count": [5, 6]})                # a counts table: as before
    assert sl.estimate(t, N=N, n=n, n_boot=0).users.iloc[0] == 11
