"""The RecBole recipe's own output is what sampling-lib reads (examples/recbole/).

Before, ``recbole_ranks.py`` wrote one ``ranks.csv`` with ``rank_distinct``, ``sample_size_distinct`` and
``global_rank`` columns beside the ranks, which ``sampling-lib estimate`` refuses ("matches none of the
documented layouts"), and its README's ``estimate ranks.csv --n-items 1682`` contradicted the file's own
``n_items`` column. RecBole itself is not installed here: the test builds the table the recipe's two passes
give (RecBole's uni100 protocol: 100 negatives drawn with replacement among the items outside the user's
history) and runs the recipe's writer, the README's commands and summarize.py on it.
"""
import importlib.util
import io

import numpy as np
import pandas as pd
import pytest

import sampling_lib as sl
from conftest import REPO
from sampling_lib.cli import main

RECIPE = REPO / "examples" / "recbole"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", RECIPE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)          # imports neither torch nor RecBole at module level
    return mod


def _passes_table(seed=0, users=300, items=1682, draws=100):
    """One row per user and model as sampled_pass and full_pass give them, merged."""
    g = np.random.default_rng(seed)
    rows = []
    for model, scale in (("Pop", 0.3), ("BPR", 0.12)):
        for u in range(users):
            Nu = int(g.integers(900, items))
            R = int(min(Nu, 1 + np.floor(np.exp(g.exponential(1 / scale) * 0.5))))   # global rank in 1..N_u
            others = g.integers(1, Nu, draws)             # the draws' global ranks among the N_u - 1 others
            above = others < R                            # ranked above the held-out item
            uniq, first = np.unique(others, return_index=True)
            rows.append(dict(uid=u, user=f"u{u}", model=model, rank=1 + int(above.sum()), sample_size=1 + draws,
                             rank_distinct=1 + int((uniq < R).sum()), sample_size_distinct=1 + uniq.size,
                             global_rank=R, n_items=Nu))
    return pd.DataFrame(rows).drop(columns="uid")


def test_the_recipes_files_are_read_by_sampling_lib(tmp_path, capsys):
    recipe = _load("recbole_ranks")
    t = _passes_table()
    counted, distinct, truth = recipe.write_outputs(t, tmp_path / "ranks.csv")
    assert [p.name for p in (counted, distinct, truth)] == ["ranks.csv", "ranks_distinct.csv", "ranks_truth.csv"]
    for f in (counted, distinct):           # the README's commands
        rc = main(["estimate", str(f), "--metric", "recall@10", "--metric", "ndcg@10", "--n-boot", "50", "-q",
                   "--format", "csv"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        got = pd.read_csv(io.StringIO(out))
        # the same numbers as the table's own columns given to the API (N_u per user)
        rank, size = ("rank", "sample_size") if f == counted else ("rank_distinct", "sample_size_distinct")
        scheme = "binomial" if f == counted else "hypergeometric"
        for m, g in t.groupby("model", sort=False):
            want = sl.estimate(g[rank].to_numpy(), g["n_items"].to_numpy(), None, ["recall@10", "ndcg@10"],
                               sample_sizes=g[size].to_numpy(), scheme=scheme, n_boot=50, rng=0)
            row = got[got.model == m].reset_index(drop=True)
            np.testing.assert_allclose(row.estimate, want.estimate, rtol=1e-12)
            np.testing.assert_allclose(row.ci_low, want.ci_low, rtol=1e-12)
            assert (row.scheme == scheme).all()
    assert pd.read_csv(truth).columns.tolist() == ["user", "model", "global_rank", "n_items"]


def test_summarize_reads_the_three_files(tmp_path, capsys):
    recipe, summarize = _load("recbole_ranks"), _load("summarize")
    t = _passes_table(users=150)
    recipe.write_outputs(t, tmp_path / "ranks.csv")
    pd.DataFrame({"model": ["Pop", "BPR"], "mode": "full", "metric": "hit@10", "value": [0.07, 0.12]}).to_csv(
        tmp_path / "metrics.csv", index=False)
    assert summarize.main([str(tmp_path / "ranks.csv"), str(tmp_path / "metrics.csv"), "--n-items", "1682",
                           "--n-boot", "20", "--metric", "recall@10"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["model", "metric", "recbole_full"] and len(out) == 3
    for line, (m, g) in zip(out[1:], t.groupby("model", sort=False)):
        assert line.split()[0] == m
        truth = float(line.split()[3])
        assert truth == pytest.approx((g.global_rank <= 10).mean(), abs=5e-5)   # Recall@10 of the global ranks
