"""The sampling-lib CLI on tiny files.

Every command runs in-process through ``main(argv)`` (the console script's entry
point: same code path after start-up), with stdout and stderr captured. Two tests
start the real process (``python -m sampling_lib.cli``, so no install is needed): a
successful ``estimate`` whose output must equal the in-process one byte for byte,
and a bad input that must end with one error line and no traceback. A subprocess
costs 1-3 s of imports on this machine, so the suite keeps it to these two (issue
18: ``make test`` under 3 minutes); ``python -m sampling_lib run`` is started as a
process in test_runner_signals.py.
"""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sampling_lib.correct import compare, estimate

ROOT = Path(__file__).resolve().parents[1]
N, n, M = 120, 10, 40


def run_subprocess(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "sampling_lib.cli", *map(str, args)], cwd=cwd,
                       capture_output=True, text=True, env=env, timeout=120)
    return p


@pytest.fixture
def run(capsys, monkeypatch):
    """``run(*args, cwd=...)``: ``main(argv)`` in-process; returns a CompletedProcess (code, stdout, stderr)."""
    from sampling_lib.cli import main

    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        capsys.readouterr()                      # drop anything printed before
        argv = [str(a) for a in args]
        try:
            rc = main(argv)
        except SystemExit as exc:                # --help exits through argparse
            rc = int(exc.code or 0)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(argv, rc, out.out, out.err)

    return call


def assert_one_line_error(p, code=1, match=None):
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sampling-lib: error:"), p.stderr
    if match:
        assert match in lines[0], lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    ra = rng.integers(1, 4, M)
    rb = rng.integers(1, n + 1, M)
    pd.DataFrame({"user": np.tile(np.arange(M), 2), "model": ["A"] * M + ["B"] * M,
                  "rank": np.concatenate([ra, rb])}).to_csv(d / "ranks.csv", index=False)
    pd.DataFrame({"user": np.arange(M), "rank": ra}).to_csv(d / "one.csv", index=False)
    rows = []
    for u in range(M):
        rows.append(dict(user=u, score=0.5, label=1))
        rows += [dict(user=u, score=s, label=0) for s in rng.choice([0.1, 0.5, 0.9], n - 1)]
    pd.DataFrame(rows).to_csv(d / "scores.csv", index=False)
    pd.DataFrame({"user": ["u1", "u2", "u3"], "item": [0, 5, 9]}).to_csv(d / "users.csv", index=False)
    pd.DataFrame({"user": ["u1", "u1"], "item": [1, 2]}).to_csv(d / "train.csv", index=False)
    (d / "empty.csv").write_text("")
    pd.DataFrame({"user": [1, 2], "rank": [1, "x"]}).to_csv(d / "nonnum.csv", index=False)
    pd.DataFrame({"user": [1, 2], "rank": [1, n + 1]}).to_csv(d / "outside.csv", index=False)
    pd.DataFrame({"user": [1, 2], "position": [1, 2]}).to_csv(d / "nocol.csv", index=False)
    pd.DataFrame({"id": [1, 2]}).to_csv(d / "nouser.csv", index=False)
    # per-user candidate counts N_u (issue 14) and the counts table of the same users (issue 18)
    Nu = rng.integers(N - 30, N + 1, M)
    pd.DataFrame({"user": np.tile(np.arange(M), 2), "model": ["A"] * M + ["B"] * M,
                  "rank": np.concatenate([ra, rb]), "n_items": np.tile(Nu, 2)}).to_csv(
        d / "ranks_nu.csv", index=False)
    cnt = pd.read_csv(d / "ranks_nu.csv").groupby(["model", "n_items", "rank"]).size()
    cnt.rename("count").reset_index().to_csv(d / "counts.csv", index=False)
    cnt.rename("count").reset_index().assign(sample_size=n).to_parquet(d / "counts.parquet")
    return d


def test_estimate_csv_equals_library_and_is_deterministic(files, run):
    # the real process (python -m sampling_lib.cli) once; the same command in-process must print the same bytes
    args = ["estimate", "one.csv", "--n-items", N, "--sample-size", n, "--metric", "recall@10",
            "--metric", "ndcg@5", "--n-boot", 50, "--seed", 3, "--format", "csv"]
    p = run_subprocess(*args, cwd=files)
    assert p.returncode == 0, p.stderr
    got = pd.read_csv(io.StringIO(p.stdout))
    ranks = pd.read_csv(files / "one.csv")["rank"].to_numpy()
    ref = estimate(ranks, N, n, ["recall@10", "ndcg@5"], n_boot=50, rng=3)
    for c in ["naive", "estimate", "se", "ci_low", "ci_high"]:
        assert np.allclose(got[c], ref[c], rtol=1e-12), c
    assert p.stdout.replace("\r", "") == run(*args, cwd=files).stdout   # same seed, same output
    other = estimate(ranks, N, n, ["recall@10", "ndcg@5"], n_boot=50, rng=4)
    assert not np.allclose(got.ci_low, other.ci_low)


def test_estimate_notes_metrics_below_resolution(files, run):
    # N = 120, n = 10: w = 119 / 9 = 13.2, so recall@5 is below resolution and recall@20 is not
    p = run("estimate", "one.csv", "-N", N, "-n", n, "--metric", "recall@5", "--metric", "recall@20",
            "--n-boot", 20, "--format", "csv", cwd=files)
    assert p.returncode == 0, p.stderr
    got = pd.read_csv(io.StringIO(p.stdout))
    assert got.below_resolution.tolist() == [True, False]
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "recall@5" in notes[0] and "recall@20" not in notes[0]
    p = run("estimate", "one.csv", "-N", N, "-n", n, "--metric", "recall@20", "--n-boot", 5,
            cwd=files)
    assert p.returncode == 0 and "note:" not in p.stderr


def test_estimate_table_json_and_scores(files, run):
    p = run("estimate", "ranks.csv", "-N", N, "-n", n, "--n-boot", 20, "--model", "B",
            "--method", "bv", "--format", "json", cwd=files)
    rec = json.loads(p.stdout)
    assert p.returncode == 0 and {r["model"] for r in rec} == {"B"} and rec[0]["method"] == "bv"
    # scores table: sample size taken from the groups (1 + 9 negatives)
    p = run("estimate", "scores.csv", "-N", N, "--n-boot", 10, "--format", "csv", cwd=files)
    assert p.returncode == 0, p.stderr
    assert (pd.read_csv(io.StringIO(p.stdout)).n == n).all()


def test_compare(files, run):
    p = run("compare", "ranks.csv", "-N", N, "-n", n, "--metric", "recall@10", "--n-boot", 60,
            "--seed", 1, "--format", "csv", cwd=files)
    assert p.returncode == 0, p.stderr
    got = pd.read_csv(io.StringIO(p.stdout))
    df = pd.read_csv(files / "ranks.csv")
    d = {m: g["rank"].to_numpy() for m, g in df.groupby("model")}
    ref = compare(d, N, n, "recall@10", n_boot=60, rng=1)
    assert np.allclose(got.difference, ref.difference) and np.allclose(got.pvalue_adjusted,
                                                                         ref.pvalue_adjusted)
    assert got.decision[0] == ref.decision[0]


def test_the_default_stops_newton_where_rounding_limits_the_line_search(files, monkeypatch):
    """On these 40 users (N_u 90..120, n = 10) a warm-start fit of the log-spline prior crawled for 200
    Newton steps of about 30 step halvings each (6,029 objective evaluations, most of this file's slowest
    test): at its optimum up to rounding, only tiny steps passed the line search and the gradient stayed
    above its tolerance. Newton now stops there on its decrement."""
    from sampling_lib.estimators import _logspline

    steps, real = [], _logspline.newton

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        steps.append(out[4])
        return out

    monkeypatch.setattr(_logspline, "newton", spy)
    df = pd.read_csv(files / "ranks_nu.csv")
    for _, d in df.groupby("model"):
        estimate(d["rank"].to_numpy(), d["n_items"].to_numpy(), n, ["recall@20"], n_boot=30, rng=2)
    assert steps and max(steps) < 60, steps


def test_per_user_n_items_column_and_counts_tables(files, capsys, monkeypatch):
    from sampling_lib.cli import main

    monkeypatch.chdir(files)
    df = pd.read_csv(files / "ranks_nu.csv")
    common = ["--metric", "recall@20", "--n-boot", "30", "--seed", "2", "--format", "csv"]
    tables = []
    for f, extra in (("ranks_nu.csv", ["-n", str(n)]), ("counts.csv", ["-n", str(n)]),
                     ("counts.parquet", [])):
        assert main(["estimate", f, *extra, *common]) == 0, capsys.readouterr().err
        tables.append(pd.read_csv(io.StringIO(capsys.readouterr().out)))
    ref = estimate(df[df.model == "A"]["rank"].to_numpy(), df[df.model == "A"]["n_items"].to_numpy(),
                   n, ["recall@20"], n_boot=30, rng=2)
    assert np.allclose(tables[0].estimate[0], ref.estimate[0], rtol=1e-12)
    for t in tables[1:]:                    # counts: identical estimates and intervals
        pd.testing.assert_frame_equal(t, tables[0])
    assert main(["compare", "counts.csv", "-n", str(n), "--n-boot", "30"]) == 0
    assert "unpaired" in capsys.readouterr().err


def test_plan_users(files, run):
    p = run("plan-users", "--margin", 0.01, "--models", 5, "--format", "csv", cwd=files)
    assert p.returncode == 0, p.stderr
    t = pd.read_csv(io.StringIO(p.stdout))
    # TORS24 eq 46 with Bonferroni over 5 models (sampling_lib.user_sampling docstring: 0.03 -> 1844)
    from sampling_lib.user_sampling import sample_size_proportion
    assert t.users[0] == sample_size_proportion(0.01, n_models=5) and len(t) == 3


def test_table_output_in_process(files, capsys, monkeypatch):
    from sampling_lib.cli import main

    monkeypatch.chdir(files)
    assert main(["estimate", "ranks.csv", "-N", str(N), "-n", str(n), "--n-boot", "20"]) == 0
    out = capsys.readouterr()
    assert "recall@10" in out.out and any(ln.startswith("A ") for ln in out.out.splitlines())
    assert out.err == ""         # no tty: no bar, and a run shorter than _progress.FIRST_LINE_AFTER prints no line
    assert main(["compare", "ranks.csv", "-N", str(N), "-n", str(n), "--n-boot", "20"]) == 0
    assert "decision" in capsys.readouterr().out
    assert main(["plan-users", "--margin", "0.03"]) == 0
    assert "1,068" in capsys.readouterr().out                    # TORS24 eq 47: ~1067
    # --confidence-level, and --confidence as the old spelling
    assert main(["plan-users", "--margin", "0.03", "--confidence-level", "0.9"]) == 0
    new = capsys.readouterr().out
    assert main(["plan-users", "--margin", "0.03", "--confidence", "0.9"]) == 0
    assert capsys.readouterr().out == new and "752" in new       # 0.25 (1.645 / 0.03)^2 = 751.6


def test_negatives(files, run):
    out = files / "neg.csv"
    p = run("negatives", "-N", 10, "--users", "users.csv", "-n", 5, "--seed", 7, "--exclude",
            "train.csv", "--output", out, cwd=files)
    assert p.returncode == 0, p.stderr
    neg = pd.read_csv(out)
    assert neg.groupby("user").size().eq(4).all()
    bad = {("u1", 0), ("u1", 1), ("u1", 2), ("u2", 5), ("u3", 9)}
    assert not any((u, i) in bad for u, i in zip(neg.user, neg["item"]))
    p2 = run("negatives", "-N", 10, "--users", "users.csv", "-n", 5, "--seed", 7, "--exclude",
             "train.csv", cwd=files)
    assert p2.stdout.replace("\r", "") == out.read_text()            # same seed, same file


@pytest.mark.parametrize("args, code, match", [
    (["estimate", "missing.csv", "-N", N, "-n", n], 1, "not found"),
    (["estimate", "nocol.csv", "-N", N, "-n", n], 1, "match none of the documented layouts"),
    (["estimate", "outside.csv", "-N", N, "-n", n], 1, "1..n=10"),
    (["estimate", "one.csv", "-N", 5, "-n", n], 1, "2..N=5"),
    (["estimate", "nonnum.csv", "-N", N, "-n", n], 1, "integers"),
    (["estimate", "empty.csv", "-N", N, "-n", n], 1, "empty"),
    (["estimate", "one.csv", "-N", "many", "-n", n], 2, "must be an integer in 2..9223372036854775807"),
    (["estimate", "one.csv", "-N", N], 1, "--sample-size is required"),
    (["estimate", "one.csv", "-N", N, "-n", n, "--metric", "hits@x"], 1, "metric"),
    (["estimate", "one.csv", "-N", N, "-n", n, "--method", "magic"], 2, "--method: invalid choice"),  # argparse choices= (METHODS)
    (["estimate", "one.csv", "-N", N, "-n", n, "--ci", 1.5], 1, "confidence_level"),
    (["compare", "one.csv", "-N", N, "-n", n], 1, "at least 2 models"),
    (["plan-users", "--margin", 0], 2, "argument --margin: must be a number in (0, 1]"),
    (["negatives", "-N", 10, "--users", "nouser.csv", "-n", 5, "--seed", 1], 1, "user"),
    (["negatives", "-N", 10, "--users", "users.csv", "-n", 5], 2, "--seed"),
    (["negatives", "-N", 3, "--users", "users.csv", "-n", 5, "--seed", 1], 1, "2..N=3"),
    (["frobnicate"], 2, "invalid choice"),
    (["estimate", "one.csv", "-n", n], 1, "--n-items is required"),
    (["estimate", "ranks_nu.csv", "-N", N + 5, "-n", n], 1, "disagrees with column 'n_items'"),
    (["estimate", "counts.csv"], 1, "sample size is unknown"),
])
def test_bad_input_one_line_error(files, args, code, match, capsys, monkeypatch):
    from sampling_lib.cli import main

    monkeypatch.chdir(files)
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    assert_one_line_error(subprocess.CompletedProcess(args, rc, out.out, out.err), code, match)


def test_bad_input_one_line_error_subprocess(files):
    # the real process: a data error raised deep in the library ends as one line, exit status 1, no
    # traceback (the other bad inputs, argument-parser ones included, run in-process above)
    assert_one_line_error(run_subprocess("estimate", "outside.csv", "-N", N, "-n", n, cwd=files), 1, "1..n=10")


def test_run_subcommand_is_the_report_runner(capsys):
    """``sampling-lib run`` takes the options of ``python -m sampling_lib run``."""
    from sampling_lib.cli import main

    assert main(["run", "--help"]) == 0      # returns its status, as every other command (it raised SystemExit)
    out = capsys.readouterr().out
    assert "--smoke" in out and "--jobs" in out
    assert main(["--help"]) == 0
    assert "run" in capsys.readouterr().out
