"""Messages that name what is wrong (the user's ids and files, not the library's internals).

Before: the CLI's warnings named every model 'model' ("model 'model': one user"); ``negatives --stage 2
--n2 1000`` said "user index 17"; a CSV saved as ``.parquet`` got dask's "An error occurred while calling the
read_parquet method"; rows of a counts CSV that repeat a cell were summed without a word.
"""
import io as _io
import warnings

import numpy as np
import pandas as pd
import pytest

from sampling_lib.cli import main


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err.strip().splitlines()


def test_warnings_name_the_real_model(tmp_path, capsys):
    p = tmp_path / "ranks.csv"
    pd.DataFrame({"user": [1, 1, 2, 3], "model": ["A", "B", "B", "B"], "rank": [3, 2, 5, 9]}).to_csv(p, index=False)
    rc, out, err = _run(capsys, "estimate", p, "-N", 1000, "-n", 100, "-q", "--n-boot", 10)
    assert rc == 0, err
    one = [e for e in err if "one user" in e]
    assert one == ["sampling-lib: warning: model 'A': one user; a bootstrap interval needs at least 2 (ci_low/high, "
                   "naive_ci_low/high and se are NaN)"], err
    assert not any("'model'" in e for e in err), err


@pytest.fixture
def stage1(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"user": ["alice", "bob", "carol"], "item": [3, 7, 9]}).to_csv("users.csv", index=False)
    assert main(["negatives", "-N", "50", "--users", "users.csv", "-n", "5", "--seed", "0", "-o", "s1.csv"]) == 0
    pd.DataFrame({"user": ["alice", "bob", "carol"], "rank": [2, 1, 1]}).to_csv("ranks1.csv", index=False)
    return tmp_path


def test_a_stage_too_large_for_a_user_names_the_user_and_the_largest_n2(stage1, capsys):
    capsys.readouterr()
    base = ["negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv", "--ranks", "ranks1.csv",
            "--threshold", 1, "-N", 50, "--seed", 0, "-o", "s2.csv"]
    rc, out, err = _run(capsys, *base, "--n2", 1000)
    assert rc == 1 and len(err) == 1, err
    assert "user 'bob' would have 1,005 items at stage 2 (5 so far), more than its N_u = 50" in err[0], err
    assert "the largest --n2 that fits every user going on is 45" in err[0] and "index" not in err[0], err
    assert not (stage1 / "s2.csv").exists()
    rc, out, err = _run(capsys, *base, "--n2", 45)     # the value the message gives fits
    assert rc == 0, err
    added = pd.read_csv(stage1 / "s2.csv").groupby("user").size().to_dict()
    assert added == {"bob": 45, "carol": 45}
    # the ladder: the same, naming --n-max
    rc, out, err = _run(capsys, "negatives", "--stage", 2, "--previous", "s1.csv", "--users", "users.csv",
                        "--ranks", "ranks1.csv", "-N", 8, "--n-max", 40, "--seed", 0, "-o", "s2b.csv")
    assert rc == 1 and "index" not in err[-1], err


def test_a_csv_named_parquet_is_said_not_to_be_parquet(tmp_path, capsys):
    p = tmp_path / "ranks.parquet"
    p.write_text("user,model,rank\n1,A,3\n2,A,5\n")
    rc, out, err = _run(capsys, "estimate", p, "-N", 1000, "-n", 100, "-q")
    assert rc == 1 and len(err) == 1, err
    assert f"{p} is not a Parquet file" in err[0] and "looks like CSV text" in err[0], err
    assert "read_parquet method" not in err[0]


def test_repeated_cells_of_a_counts_csv_are_said_and_added(tmp_path, capsys):
    p = tmp_path / "counts.csv"
    p.write_text("rank,count\n1,5\n2,4\n1,3\n7,2\n")
    rc, out, err = _run(capsys, "estimate", p, "-N", 1000, "-n", 100, "-q", "--n-boot", 20, "--format", "csv")
    assert rc == 0
    warn = [e for e in err if "warning" in e]
    assert len(warn) == 1 and "(rank 1) in" in warn[0] and "lines 2 and 4:" in warn[0] \
        and "added (5 + 3 users)" in warn[0], err
    got = pd.read_csv(_io.StringIO(out))
    q = tmp_path / "summed.csv"
    q.write_text("rank,count\n1,8\n2,4\n7,2\n")          # the same cells, each once
    rc, out2, err2 = _run(capsys, "estimate", q, "-N", 1000, "-n", 100, "-q", "--n-boot", 20, "--format", "csv")
    assert rc == 0 and not [e for e in err2 if "warning" in e], err2
    pd.testing.assert_frame_equal(got, pd.read_csv(_io.StringIO(out2)))


def test_counts_from_frame_warns_on_repeated_cells():
    from sampling_lib.counts import counts_from_frame

    t = pd.DataFrame({"model": ["A", "A", "B", "A"], "rank": [1, 2, 1, 1], "count": [5, 4, 6, 3]})
    with pytest.warns(UserWarning, match=r"\(model 'A', sample_size 100, rank 1\) in rows 1 and 4.*5 \+ 3 users"):
        d = counts_from_frame(t, n=100)
    assert d["A"].M == 12 and d["B"].M == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts_from_frame(t.iloc[:3], n=100)              # each cell once: no warning
