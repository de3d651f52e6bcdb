"""The printed paper values shipped as data files (sampling_lib.testing.paper_table)."""
from pathlib import Path

import numpy as np
import pytest

from sampling_lib.testing import PAPER_TABLES, paper_table, per_user_em

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(PAPER_TABLES))
def test_every_table_loads_complete(name):
    t = paper_table(name)
    assert len(t) > 0 and not t.isna().any().any()


def test_every_data_file_is_listed():
    """Every data file is in PAPER_TABLES (tests/test_install.py checks that they ship in the wheel)."""
    files = {p.stem for p in (ROOT / "sampling_lib" / "paper_tables").glob("*.csv")}
    assert files == set(PAPER_TABLES)


def test_spot_values_as_printed():
    # values read off the papers (KDD20 Table 2, TORS24 Table 3, AAAI21 Table 2, TORS24 Table 9, AP25 Table 2)
    t = paper_table("kdd20_table2").set_index(["dataset", "model"])
    assert t.loc[("citeulike", "MultiVAE"), "a"] == 0.2449 and t.loc[("yelp", "EASE"), "N"] == 25815
    t = paper_table("tors24_table3").set_index(["dataset", "mapping", "K"])
    assert t.loc[("ml-20m", "Beta@1", 2), "printed"] == 42 and (t.n == 1000).all()
    t = paper_table("aaai21_table2").set_index("model")
    assert (t.loc["itemKNN", "MLE"], t.loc["itemKNN", "WMLE"]) == (40.02, 41.71)
    t = paper_table("tors24_tables8_9").set_index(["dataset", "model", "metric"])
    assert tuple(t.loc[("yelp", "MultiVAE", "NDCG"), ["user_1k", "user_10k"]]) == (16.69, 4.77)
    t = paper_table("ap25_table2").set_index("scenario")
    assert t.loc["C", "Var_WR"] == 0.00023 and tuple(t.loc["A3", ["N", "m", "k"]]) == (50, 25, 40)
    with pytest.raises(ValueError, match="name must be one of"):
        paper_table("kdd20_table9")


def test_per_user_em_weighted_equals_wmle():
    from sampling_lib.estimators import wmle, wmle_weights

    r = np.array([1, 1, 2, 3, 5, 8, 13, 21, 40])
    w = wmle_weights(40, "ndcg", 10)[r - 1]
    assert np.allclose(per_user_em(r, 200, 40, 7, w), wmle(r, 200, 40, weight="ndcg", C=10, max_iter=7),
                       rtol=1e-9, atol=1e-15)
