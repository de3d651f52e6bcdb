"""Tests for sampling_lib.experiments (global ranks from data, experiment runner)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sampling_lib.experiments import (
    EXPERIMENT_COLUMNS,
    global_ranks_from_data,
    run_experiment,
)

ML100K = Path(__file__).resolve().parents[1].parent / "shared/data/ml-100k/u.data"
SMALL = {"n_users": 300, "n_items": 120, "mean_interactions": 15.0}


def test_global_ranks_from_data_synthetic_contract():
    ranks, N, info = global_ranks_from_data(None, synthetic=SMALL, seed=3)
    assert N == 120
    assert set(ranks) == {"popularity", "itemknn", "ease", "als"}
    for m, r in ranks.items():
        assert r.dtype == np.int64 and r.shape == (info["M"],)
        assert r.min() >= 1 and r.max() <= N
    assert info["summary"]["n_users_kept"] == info["M"] == 300
    assert isinstance(info["stats"], pd.DataFrame)
    # deterministic in the seed
    ranks2, _, _ = global_ranks_from_data(None, synthetic=SMALL, seed=3)
    for m in ranks:
        np.testing.assert_array_equal(ranks[m], ranks2[m])


def test_global_ranks_from_data_default_is_fast_and_non_uniform():
    ranks, N, info = global_ranks_from_data(None, models=("popularity", "ease"))
    assert (N, info["M"]) == (1000, 2000)
    # fitted models put the held-out item far above a uniform rank (median N/2)
    for m in ranks:
        assert np.median(ranks[m]) < N / 4
    # the personalised model beats popularity on this data
    assert np.mean(ranks["ease"] <= 10) > np.mean(ranks["popularity"] <= 10)


def test_global_ranks_from_data_bad_model():
    with pytest.raises(ValueError, match="model must be one of"):
        global_ranks_from_data(None, models=("nope",), synthetic=SMALL)


@pytest.mark.skipif(not ML100K.exists(), reason="MovieLens 100K not available")
def test_global_ranks_from_data_ml100k():
    ranks, N, info = global_ranks_from_data(ML100K, models=("popularity", "ease"))
    assert N == 1682 and info["M"] == 943
    assert info["summary"]["n_users_dropped"] == 0
    assert info["stats"]["interactions"].iloc[0] == 100000
    # EASE is far better than popularity on ml-100k (HR@10)
    assert np.mean(ranks["ease"] <= 10) > np.mean(ranks["popularity"] <= 10) + 0.03
