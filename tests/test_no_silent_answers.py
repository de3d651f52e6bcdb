"""Issue 16, "Silently wrong or lossy answers" and "Memory must stay bounded".

Each test is one probe of the issue: it failed (or passed silently with a wrong
answer) before the change.
"""
import io as _io

import numpy as np
import pandas as pd
import pytest

from sampling_lib import metrics
from sampling_lib.correct import compare, estimate
from sampling_lib.estimators import METHODS, get_estimator
from sampling_lib.exceptions import EstimatorOptionError, MemoryLimitError
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_matrix

R10 = np.array([1, 2, 3, 5, 8, 1, 2, 9, 4, 1])


# --- unknown options raise on every path ------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_raises_on_every_method_and_path(method):
    with pytest.raises(EstimatorOptionError, match="gama"):
        estimate(R10, 200, 10, method=method, options={"gama": 0.5}, n_boot=0)
    with pytest.raises(EstimatorOptionError, match="gama"):
        compare({"A": R10, "B": R10[::-1]}, 200, 10, method=method, options={"gama": 0.5},
                n_boot=2)
    with pytest.raises(EstimatorOptionError, match="gama"):
        get_estimator(method, gama=0.5)


# --- compare: names that collide after str() --------------------------------
def test_compare_rejects_names_colliding_as_text():
    a, b, c = R10, R10[::-1], np.minimum(R10 + 1, 10)
    with pytest.raises(ValueError, match="distinct as text"):
        compare({1: a, "1": b, "C": c}, 200, 10, n_boot=10)
    with pytest.raises(ValueError, match="distinct as text"):
        compare(pd.DataFrame({1: a, "1": b}), 200, 10, n_boot=10)


# --- estimates outside the metric's range are clipped and flagged ------------
def test_bv_out_of_range_is_clipped_and_flagged():
    raw = get_estimator("bv")([1], 200, 10) @ metric_matrix(["recall@10"], 200)
    assert raw[0] > 1.1                                     # the 1.134
    t = estimate([1], 200, 10, method="bv", n_boot=0)
    row = t.set_index("metric").loc["recall@10"]
    assert row.estimate == 1.0 and bool(row.clipped)
    assert not bool(t.set_index("metric").loc["ndcg@10"].clipped)
    t = estimate([1, 1, 2], 200, 10, method="bv", n_boot=50, rng=0)
    assert (t[["estimate", "ci_low", "ci_high"]].to_numpy() <= 1.0).all()


def test_mle_is_never_flagged():
    t = estimate(R10, 200, 10, metrics=["recall@1", "recall@50", "ndcg@10"], n_boot=20, rng=0)
    assert not t.clipped.any()


def test_compare_warns_about_out_of_range_estimates():
    with pytest.warns(RuntimeWarning, match="outside the metric's range"):
        compare({"A": [1, 1, 1], "B": [1, 1, 2]}, 200, 10, method="bv", n_boot=10, rng=0)


# --- metric functions reject fractional ranks --------------------------------
@pytest.mark.parametrize("name", sorted(metrics.METRICS))
def test_metric_functions_reject_fractional_ranks(name):
    with pytest.raises(ValueError, match=r"R must hold ranks >= 1 \(whole numbers.*got 2.5"):
        metrics.METRICS[name]([2.5], 5)
    assert metrics.METRICS[name]([2.0], 5).shape == (1,)    # whole floats stay accepted


def test_estimate_metrics_none_is_a_clear_error():
    with pytest.raises(TypeError, match="metrics must be a metric name .* got None"):
        estimate(R10, 200, 10, metrics=None)


# --- memory: refuse up front, naming the size --------------------------------
def test_huge_N_is_refused_up_front_with_its_size():
    # the default needs no length-N array (issue 18, tests/test_scale.py); mle's exact kernel does
    with pytest.raises(MemoryLimitError, match=r"N=1000000000.*\) would need [0-9.]+ GiB"):
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    with pytest.raises(MemoryError):                         # also a MemoryError ...
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    with pytest.raises(ValueError):                          # ... and a ValueError
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    for method in ("bv", "mn", "cls", "mes"):
        with pytest.raises(MemoryLimitError, match="GiB"):
            estimate([1, 2, 3], 10**9, 10, n_boot=0, method=method)



def test_mle_at_ten_million_items_refuses_or_stays_under_the_limit():
    # the probe: estimate(method="mle") at N = 10^7 peaked at 2.7 GB. Either answer is acceptable
    # (a clear refusal naming the size, or a result); what is not is a peak above the per-array limit.
    import tracemalloc

    r = np.random.default_rng(0).integers(1, 101, 300)
    tracemalloc.start()
    try:
        estimate(r, 10**7, 100, ["recall@10"], method="mle", n_boot=0)
    except MemoryLimitError as exc:
        assert "N=10000000" in str(exc) and "GiB" in str(exc), str(exc)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 2 * 2**30, f"peak {peak / 2**30:.2f} GiB"

def test_dense_kernel_over_the_limit_is_refused():
    with pytest.raises(MemoryLimitError, match=r"N x n sampling kernel .* 7.45 GiB"):
        kernel(10**7, 100)
    with pytest.raises(MemoryLimitError, match="kernel"):
        get_estimator("bv")([1, 2], 10**7, 100)


def test_memory_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", "4000")
    with pytest.raises(MemoryLimitError, match="limit of 0.00 GiB"):
        metrics.metric_values("recall@3", 1000)             # 8000 bytes
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", "many")
    with pytest.raises(ValueError, match="SAMPLING_LIB_MAX_ARRAY_BYTES"):
        metrics.metric_values("recall@3", 1000)
    monkeypatch.delenv("SAMPLING_LIB_MAX_ARRAY_BYTES")
    assert metrics.metric_values("recall@3", 1000).size == 1000


# =============================================================================
# Issues 26 and 27 item 0: the input surfaces (files and options of estimate / compare / negatives)
# =============================================================================
import os  # noqa: E402

from sampling_lib import io as sio  # noqa: E402
from sampling_lib import popularity as pop  # noqa: E402
from sampling_lib.cli import main  # noqa: E402


def cli(argv, capsys, cwd=None):
    """main(argv) in-process: (exit status, stdout, stderr lines)."""
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        rc = main([str(a) for a in argv])
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return rc, out.out, [ln for ln in out.err.splitlines() if ln.strip()]


def cli_error(argv, capsys, cwd=None, code=1):
    rc, _, err = cli(argv, capsys, cwd)
    errors = [ln for ln in err if ln.startswith("sampling-lib: error:")]
    assert rc == code and len(errors) == 1 and "Traceback" not in "".join(err), (rc, err)
    return errors[0]


# --- item 1: NCF's real file: the held-out item among its own negatives ---------------------
def ncf_like(path, M=40, listed=(3, 12, 30), seed=0):
    """A file of the shape of NCF's ml-1m.test.negative: (user,item) + 99 distinct negatives per line;
    on the lines ``listed`` the held-out item is one of the 99 (as on 156 of NCF's 6,040 lines)."""
    rng = np.random.default_rng(seed)
    lines, held = [], {}
    for u in range(M):
        h = int(rng.integers(0, 3706))
        negs = [int(x) for x in rng.choice(np.setdiff1d(np.arange(3706), [h]), 99, replace=False)]
        if u in listed:
            negs[int(rng.integers(0, 99))] = h
        held[str(u)] = str(h)
        lines.append(f"({u},{h})\t" + "\t".join(map(str, negs)))
    path.write_text("\n".join(lines) + "\n")
    return held


def test_ncf_file_with_held_out_among_negatives_reads_as_ncf_evaluates(tmp_path, capsys):
    f = tmp_path / "ml-1m.test.negative"
    held = ncf_like(f)
    with pytest.warns(UserWarning) as rec:
        cand = sio.read_ncf_negatives(f)
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 1 and "3 of 40 users list their held-out item" in msgs[0], msgs
    assert "user '3', line 4" in msgs[0] and "n_u = 99" in msgs[0], msgs[0]
    sizes = cand.groupby("user").size()
    assert sizes[["3", "12", "30"]].tolist() == [99, 99, 99] and (sizes.drop(["3", "12", "30"]) == 100).all()
    neg = cand[cand.label == 0]
    assert not (neg["item"] == neg["user"].map(held)).any()          # the duplicate is gone
    # scores with a per-user N_u column: estimate runs, no -N, no -n; one warning line
    rng = np.random.default_rng(1)
    sc = cand.assign(score=rng.random(len(cand)), n_items=cand["user"].astype(int) + 3000)
    sc[["user", "item", "score", "n_items"]].to_csv(tmp_path / "scores.csv", index=False)
    rc, out, err = cli(["estimate", f, "--input-format", "ncf", "--scores", "scores.csv", "--metric",
                        "recall@10", "--n-boot", 0, "--format", "csv", "--method", "adaptive_mle"],
                       capsys, tmp_path)
    assert rc == 0, err
    assert sum("held-out item among their negatives" in ln for ln in err) == 1, err
    s = sio.ranks_from_negatives(cand, tmp_path / "scores.csv")
    assert s.items_for_model("model").tolist() == list(range(3000, 3040))     # N_u used
    assert s.for_model("model")[1].tolist().count(99) == 3
    # --sample-size 100 is an error naming the first user of 99 candidates and its line
    line = cli_error(["estimate", f, "--input-format", "ncf", "--scores", "scores.csv", "-n", 100],
                     capsys, tmp_path)
    assert "user '3' (" in line and "line 4) has 99 candidates" in line and "n=100" in line, line


def test_elliot_still_refuses_a_held_out_item_among_negatives(tmp_path):
    f = tmp_path / "elliot.tsv"
    f.write_text("(0,25)\t3\t25\n")
    with pytest.raises(ValueError, match=r"line 1: the held-out item '25' of user '0' is also listed"):
        sio.read_elliot_negatives(f)


def test_per_user_n_items_from_the_cli_for_every_input(tmp_path, capsys):
    # scores table user,score,label,n_items: the n_items column was ignored ("the file has no n_items column")
    rng = np.random.default_rng(0)
    rows = []
    for u in range(30):
        rows += [dict(user=u, score=0.5, label=1, n_items=200 + u)]
        rows += [dict(user=u, score=float(s), label=0, n_items=200 + u) for s in rng.random(9)]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    rc, out, err = cli(["estimate", "scores.csv", "--metric", "recall@10", "--n-boot", 0, "--format", "csv",
                        "--method", "mle"], capsys, tmp_path)
    assert rc == 0, err
    got = pd.read_csv(_io.StringIO(out))
    s = sio.ranks_from_score_table(tmp_path / "scores.csv")
    r, nu = s.for_model("model")
    ref = estimate(r, np.arange(200, 230), None, "recall@10", sample_sizes=nu, method="mle", n_boot=0)
    assert got.estimate.iloc[0] == pytest.approx(ref.estimate.iloc[0], rel=1e-12)
    # --n-items-file: per-user N_u for a TREC run (and not both with -N)
    lines = [f"u{u} Q0 {it} 1 {s:.3f} bpr" for u in range(30)
             for it, s in zip([f"h{u}"] + [f"i{j}" for j in range(9)], [0.5, *rng.random(9)])]
    (tmp_path / "a.trec").write_text("\n".join(lines) + "\n")
    (tmp_path / "q.txt").write_text("".join(f"u{u} 0 h{u} 1\n" for u in range(30)))
    pd.DataFrame({"user": [f"u{u}" for u in range(30)], "n_items": np.arange(200, 230)}).to_csv(
        tmp_path / "nu.csv", index=False)
    rc, out2, err = cli(["estimate", "a.trec", "--qrels", "q.txt", "--n-items-file", "nu.csv", "--metric",
                         "recall@10", "--n-boot", 0, "--format", "csv", "--method", "mle"], capsys, tmp_path)
    assert rc == 0, err
    assert "--n-items or --n-items-file" in cli_error(
        ["estimate", "a.trec", "--qrels", "q.txt", "--n-items-file", "nu.csv", "-N", 300], capsys, tmp_path)
    pd.DataFrame({"user": ["u0"], "n_items": [300]}).to_csv(tmp_path / "nu1.csv", index=False)
    assert "no n_items for user 'u1'" in cli_error(
        ["estimate", "a.trec", "--qrels", "q.txt", "--n-items-file", "nu1.csv"], capsys, tmp_path)


# --- item 2: silent wrong answers ----------------------------------------------------------
def test_a_table_must_match_exactly_one_layout(tmp_path, capsys):
    (tmp_path / "rc.csv").write_text("user,rank,count\n1,3,20\n2,5,20\n3,1,20\n4,2,20\n5,7,16\n")
    line = cli_error(["estimate", "rc.csv", "-N", 1000, "-n", 100], capsys, tmp_path)
    assert "['user', 'rank', 'count'] match none of the documented layouts" in line, line
    (tmp_path / "extra.csv").write_text("user,rank,timestamp\n1,3,5\n")
    assert "match none" in cli_error(["estimate", "extra.csv", "-N", 1000, "-n", 100], capsys, tmp_path)
    with pytest.raises(ValueError, match="'count' column: .* counts table"):
        sio.ranks_from_table(pd.DataFrame({"user": [1], "rank": [3], "count": [20]}))
    # in Python too, a column the reader does not read is an error (a misspelt n_items was dropped: N_u lost)
    typo = pd.DataFrame({"user": [1, 2], "rank": [3, 1], "sample_size": [10, 10], "n_item": [50, 60]})
    with pytest.raises(ValueError, match=r"column\(s\) \['n_item'\] are not read"):
        sio.ranks_from_table(typo)
    assert sio.ranks_from_table(typo.rename(columns={"n_item": "N_u"}), items_col="N_u").n_items.iloc[:, 0].tolist() \
        == [50, 60]
    scores = pd.DataFrame({"user": [1, 1, 2, 2], "item": [5, 6, 7, 8], "score": [0.5, 0.4, 0.3, 0.9],
                           "label": [1, 0, 1, 0], "n_item": [9, 9, 9, 9]})
    with pytest.raises(ValueError, match=r"column\(s\) \['n_item'\] are not read"):
        sio.ranks_from_score_table(scores)
    assert sio.ranks_from_score_table(scores, items_col="n_item").n_items.iloc[:, 0].tolist() == [9, 9]
    # an NCF reader's table with a score column: its line column is the reader's own; the error names the file
    (tmp_path / "x.test.negative").write_text("(a,5)\t1\t2\n(b,6)\t3\t4\n")
    cand = sio.read_ncf_negatives(tmp_path / "x.test.negative").assign(score=[0.5, 0.1, 0.2, 0.3, 0.9, 0.1])
    assert sio.ranks_from_score_table(cand).ranks.iloc[:, 0].tolist() == [1, 2]
    with pytest.raises(ValueError, match=rf"{tmp_path / 'x.test.negative'}: column\(s\) \['n_item'\]"):
        sio.ranks_from_score_table(cand.assign(n_item=9))
    from sampling_lib import estimate

    counts = pd.DataFrame({"rank": [1, 2, 3], "count": [3, 4, 5], "sample_sizes": [20, 20, 20]})
    with pytest.raises(ValueError, match=r"column\(s\) \['sample_sizes'\] are not read"):
        estimate(counts, N=100, n=10, metrics="recall@1", n_boot=20)      # was: every user read at n = 10
    with pytest.raises(ValueError, match="both 'user' and 'count'"):
        sio.counts_table(pd.DataFrame({"user": [1], "rank": [3], "count": [20]}))


def test_sample_size_must_match_every_user_naming_user_and_line(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for u in range(5):
        rows += [dict(user=f"u{u}", item="h", score=0.5, label=1)]
        rows += [dict(user=f"u{u}", item=f"i{j}", score=float(s), label=0)
                 for j, s in enumerate(rng.random(9 if u != 3 else 8))]      # u3 has 9 rows, not 10
    pd.DataFrame(rows).drop(columns="item").to_csv(tmp_path / "scores.csv", index=False)
    line = cli_error(["estimate", "scores.csv", "-N", 500, "-n", 10], capsys, tmp_path)
    assert "user 'u3' of model 'model' has 9 candidates" in line and "scores.csv, line 32" in line, line
    # without -n the sizes are per-user (adaptive / two-stage designs)
    s = sio.ranks_from_score_table(tmp_path / "scores.csv")
    assert s.for_model("model")[1].tolist() == [10, 10, 10, 9, 10]
    # a UTF-8 BOM at the start of a TREC run: stripped (was user '\ufeffu0', a list of 9 items)
    lines = [f"u{u} Q0 {it} 1 {s:.3f} r" for u in range(3)
             for it, s in zip(["h"] + [f"i{j}" for j in range(9)], rng.random(10))]
    (tmp_path / "bom.trec").write_bytes(b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode())
    (tmp_path / "q.txt").write_text("u0 0 h 1\nu1 0 h 1\nu2 0 h 1\n")
    t = sio.ranks_from_run(tmp_path / "bom.trec", tmp_path / "q.txt", n=10)
    assert t.user.tolist() == ["u0", "u1", "u2"] and (t.sample_size == 10).all()
    # a TREC user listing 9 items with -n 10: the user, the file and its first line
    (tmp_path / "short.trec").write_text("\n".join(lines[:-1]) + "\n")
    line = cli_error(["estimate", "short.trec", "--qrels", "q.txt", "-N", 500, "-n", 10], capsys, tmp_path)
    assert "user 'u2' of run 'r' lists 9 items (short.trec, line 21)" in line, line
    # one duplicated negative in an NCF line: n_u = 101 with --duplicates count
    (tmp_path / "x.test.negative").write_text("(0,5)\t1\t2\t3\n(1,6)\t1\t2\t3\t3\n")
    cand = sio.read_ncf_negatives(tmp_path / "x.test.negative")
    with pytest.raises(ValueError, match=r"user '1' \(.*x.test.negative, line 2\) has 5 candidates.* n=4"):
        sio.ranks_from_negatives(cand, lambda u, i: np.zeros(len(u)), n=4)
    assert sio.ranks_from_negatives(cand, lambda u, i: np.zeros(len(u)), duplicates="collapse",
                                    n=4).for_model("model")[1].tolist() == [4, 4]


def test_blank_count_is_an_error_not_zero(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("rank,count\n1,5\n2,\n3,4\n")
    line = cli_error(["estimate", "c.csv", "-N", 1000, "-n", 100], capsys, tmp_path)
    assert "column 'count' must hold integers" in line and "got blank in c.csv, line 3" in line, line
    d = tmp_path / "pq"
    d.mkdir()
    pd.DataFrame({"rank": [1, 2, 3], "count": [5.0, None, 4.0]}).to_parquet(d / "p.parquet")
    with pytest.raises(ValueError, match="column 'count' must hold whole numbers >= 0; 1 rows are blank"):
        sio.counts_table(d)


def test_parquet_duplicate_user_model_rows_are_rejected(tmp_path):
    d = tmp_path / "pq"
    d.mkdir()
    pd.DataFrame({"user": [1, 2, 3], "model": "a", "rank": [1, 2, 3]}).to_parquet(d / "p0.parquet")
    pd.DataFrame({"user": [3, 4], "model": "a", "rank": [1, 5]}).to_parquet(d / "p1.parquet")
    with pytest.raises(ValueError, match="user 3 of model 'a' appears 2 times"):
        sio.counts_table(d)
    (d / "p1.parquet").unlink()
    assert sio.counts_table(d)["count"].sum() == 3
    with pytest.raises(ValueError, match=r"user '2' of model 'a' repeats \(row 3\)"):
        sio.counts_table(pd.DataFrame({"user": [1, 2, 2], "model": "a", "rank": [1, 2, 3]}))


def test_counts_path_reads_every_column_or_refuses_the_file(tmp_path):
    """The counts path (Parquet, and counts_table on CSV) once dropped a column it does not read (a typo, or a
    first_rank above rank) without a word, where the CSV path of estimate refused both. Now both paths do."""
    import importlib.util

    parquet = all(importlib.util.find_spec(m) is not None for m in ("dask", "pyarrow"))
    ranks = pd.DataFrame({"user": [1, 2, 3], "rank": [2, 5, 3], "sample_size": 10})
    for extra, match in ((dict(sampel_size=10), r"column\(s\) \['sampel_size'\] are not read"),
                         (dict(first_rank=[1, 6, 3]), "first_rank.*1..rank")):
        bad = ranks.assign(**extra)
        bad.to_csv(tmp_path / "r.csv", index=False)
        srcs = [tmp_path / "r.csv"]
        if parquet:                      # the Parquet path (extra [dask]) too
            d = tmp_path / f"pq_{next(iter(extra))}"
            d.mkdir()
            bad.to_parquet(d / "p.parquet")
            srcs.append(d)
        for src in srcs:
            with pytest.raises(ValueError, match=match):
                sio.counts_table(src)
        with pytest.raises(ValueError, match=match if "first" in match else "match none of the documented"):
            sio.table_layout(bad) if "first" not in match else sio.ranks_from_table(bad)   # the CSV path's checks
    good = ranks.assign(first_rank=[1, 5, 2])
    assert sio.counts_table(good).equals(sio.counts_table(ranks))              # checked, then not counted
    if parquet:
        (tmp_path / "ok").mkdir()
        good.to_parquet(tmp_path / "ok" / "p.parquet")
        assert sio.counts_table(tmp_path / "ok").equals(sio.counts_table(ranks))
    with pytest.raises(ValueError, match=r"column\(s\) \['first_rank'\] are not read"):
        sio.counts_table(pd.DataFrame({"rank": [1, 2], "count": [3, 4], "first_rank": [1, 1]}))


def test_model_and_user_labels_stay_text(tmp_path, capsys):
    (tmp_path / "m.csv").write_text("user,model,rank\n1,1,3\n2,1,5\n1,01,3\n2,01,5\n1,1.0,4\n2,1.0,4\n")
    rc, out, err = cli(["estimate", "m.csv", "-N", 1000, "-n", 100, "--n-boot", 0, "--format", "csv",
                        "--metric", "recall@10"], capsys, tmp_path)
    assert rc == 0, err
    assert pd.read_csv(_io.StringIO(out), dtype={"model": str}).model.tolist() == ["1", "01", "1.0"]
    t = sio.read_table(tmp_path / "m.csv")
    assert t.user.tolist()[:2] == ["1", "2"] and t.model.unique().tolist() == ["1", "01", "1.0"]


def test_exclude_ids_are_normalised_and_unmatched_ones_reported(tmp_path, capsys):
    # uniform negatives: one junk user row in train.csv turned the column into text, so user 1's
    # history stopped matching the integer users and was drawn as negatives
    (tmp_path / "users.csv").write_text("user,item\n1,0\n2,1\n")
    (tmp_path / "train.csv").write_text("user,item\n1,2\n1,3\n1,4\n1,5\n2,6\nx!,7\n")
    rc, out, err = cli(["negatives", "-N", 10, "--users", "users.csv", "-n", 5, "--seed", 0, "--exclude",
                        "train.csv"], capsys, tmp_path)
    assert rc == 0, err
    neg = pd.read_csv(_io.StringIO(out))
    assert not neg[neg.user == 1]["item"].isin([2, 3, 4, 5]).any()
    assert len(err) == 1 and "1 of the 6 rows of train.csv name a user not in --users (e.g. 'x!')" in err[0], err
    (tmp_path / "train2.csv").write_text("user,item\nu1,2\n")
    assert "none of the 1 rows of train2.csv names a user" in cli_error(
        ["negatives", "-N", 10, "--users", "users.csv", "-n", 5, "--seed", 0, "--exclude", "train2.csv"],
        capsys, tmp_path)
    # popularity: DataFrame ints against CSV text match (ids compared as text), unmatched ones warned
    w = pd.Series([1.0, 2.0, 3.0, 4.0], index=[0, 1, 2, 3])
    ex = sio.read_table(tmp_path / "train.csv")
    with pytest.warns(UserWarning, match=r"rows of the exclude table .*train.csv exclude nothing"):
        neg = pop.sample_popularity_negatives([1, 2], w, 3, held_out=[0, 1], exclude=ex, rng=0)
    assert not neg[neg.user == 1]["item"].isin([2, 3]).any()


# --- item 3: options that were ignored -------------------------------------------------------
def test_popularity_negatives_honour_replace(tmp_path, capsys):
    (tmp_path / "users.csv").write_text("user,item\na,0\nb,1\n")
    pd.DataFrame({"item": range(8), "weight": [1, 2, 3, 4, 5, 6, 7, 8.0]}).to_csv(tmp_path / "w.csv", index=False)
    base = ["negatives", "--users", "users.csv", "-n", 7, "--seed", 3, "--item-weights", "w.csv"]
    rc, out, err = cli(base + ["--no-replace"], capsys, tmp_path)
    assert rc == 0, err
    neg = pd.read_csv(_io.StringIO(out))
    assert not neg["replace"].any() and (neg.groupby("user")["item"].nunique() == 6).all()   # all distinct
    rc, out, err = cli(base, capsys, tmp_path)
    assert rc == 0 and pd.read_csv(_io.StringIO(out))["replace"].all()    # default: with replacement
    assert "--n-items does not apply with --item-weights" in cli_error(base + ["-N", 8], capsys, tmp_path)
    assert "--weight-exponent applies to an interactions table" in cli_error(
        base + ["--weight-alpha", 2], capsys, tmp_path)


def test_popularity_estimate_refuses_options_it_does_not_use(tmp_path, capsys):
    rows = [dict(user=u, item=it, score=s, label=int(it == "h"))
            for u in range(3) for it, s in zip(["h", "a", "b"], [0.5, 0.7, 0.1])]
    pd.DataFrame(rows).to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"item": ["h", "a", "b"], "weight": [1.0, 2.0, 3.0]}).to_csv(tmp_path / "w.csv", index=False)
    base = ["estimate", "s.csv", "--item-weights", "w.csv", "--n-boot", 0]
    for extra, opt in ((["-N", 100], "--n-items"), (["-n", 3], "--sample-size"),
                       (["--duplicates", "collapse"], "--duplicates")):
        assert f"{opt} does not apply to popularity-sampled negatives" in cli_error(base + extra, capsys, tmp_path)
    assert "--weight-exponent applies to an interactions table" in cli_error(
        base + ["--weight-exponent", 0.5], capsys, tmp_path)


def test_input_format_is_honoured_not_guessed_from_the_name(tmp_path, capsys):
    (tmp_path / "a.trec").write_text("u1 Q0 h 1 0.9 r\nu1 Q0 i 2 0.5 r\n")
    (tmp_path / "q.txt").write_text("u1 0 h 1\n")
    line = cli_error(["estimate", "a.trec", "--qrels", "q.txt", "--input-format", "ranx", "-N", 50],
                     capsys, tmp_path)
    assert "a.trec, line 1: not valid JSON" in line and "ranx" in line, line


def test_repeated_metrics_give_one_row_with_a_warning(tmp_path, capsys):
    with pytest.warns(UserWarning, match="the same metric; it is kept once"):
        t = estimate(R10, 200, 10, metrics=["recall@10", "Recall@10", "hr@10", "ndcg@10"], n_boot=0)
    assert t.metric.tolist() == ["recall@10", "ndcg@10"]
    (tmp_path / "r.csv").write_text("user,rank\n1,3\n2,5\n")
    rc, out, err = cli(["estimate", "r.csv", "-N", 200, "-n", 10, "--n-boot", 0, "--format", "csv",
                        "--metric", "recall@10", "--metric", "recall@10"], capsys, tmp_path)
    assert rc == 0 and len(pd.read_csv(_io.StringIO(out))) == 1
    assert sum("kept once" in ln for ln in err) == 1, err


def test_output_equal_to_an_input_is_refused(tmp_path, capsys):
    f = tmp_path / "r.csv"
    f.write_text("user,rank\n1,3\n2,5\n")
    for argv in (["estimate", "r.csv", "-N", 200, "-n", 10, "-o", "r.csv"],
                 ["estimate", "r.csv", "-N", 200, "-n", 10, "-o", "./sub/../r.csv"],
                 ["negatives", "-N", 10, "--users", "r.csv", "-n", 3, "--seed", 0, "-o", "r.csv"],
                 # plan's pilot (once overwritten by the plan table), negatives' catalogue, estimate's --plot
                 ["plan", "r.csv", "-N", 200, "-n", 10, "-o", "r.csv"],
                 ["negatives", "--items", "r.csv", "--users", "u.csv", "-n", 3, "--seed", 0, "-o", "r.csv"],
                 ["estimate", "r.csv", "-N", 200, "-n", 10, "--plot", "r.csv"]):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert "refusing to overwrite an input" in cli_error(argv, capsys, tmp_path)
        assert f.read_text() == "user,rank\n1,3\n2,5\n"
    # plan's --users is a number of users, not a file: an existing -o is simply replaced (it failed with
    # "'int' object is not iterable")
    (tmp_path / "plan.txt").write_text("old")
    argv = ["plan", "-N", 400, "-n", 10, "--users", 300, "--guess-recall", 0.3, "--metric", "recall@10",
            "-o", "plan.txt"]
    rc, _, err = cli(argv, capsys, tmp_path)
    assert rc == 0, err
    assert "chosen:" in (tmp_path / "plan.txt").read_text()


# --- item 4: popularity inputs ---------------------------------------------------------------
def test_interactions_route_gives_weight_zero_to_items_without_interactions(tmp_path, capsys):
    # the held-out item 'c' of user 1 has no training interaction ("no weight for 1 item(s) ... ['29']")
    (tmp_path / "train.csv").write_text("user,item\n1,a\n1,b\n2,a\n2,b\n2,d\n3,d\n")
    rows = [dict(user=1, item="c", score=0.9, label=1), dict(user=1, item="d", score=0.5, label=0),
            dict(user=2, item="e", score=0.4, label=1), dict(user=2, item="c", score=0.3, label=0)]
    pd.DataFrame(rows).to_csv(tmp_path / "s.csv", index=False)
    w = pop.popularity_weights(sio.read_table(tmp_path / "train.csv"), items=["c", "e"])
    assert w.to_dict() == {"a": 2.0, "b": 2.0, "d": 2.0, "c": 0.0, "e": 0.0}
    # user 2 drew 'c', which has no interaction: weight 0, cannot have been drawn -> a clear error
    assert "'c' of user '2' has weight 0" in cli_error(
        ["estimate", "s.csv", "--item-weights", "train.csv", "--n-boot", 0], capsys, tmp_path)
    pd.DataFrame(rows[:2] + [dict(user=2, item="e", score=0.4, label=1),
                             dict(user=2, item="a", score=0.3, label=0)]).to_csv(tmp_path / "s.csv", index=False)
    rc, out, err = cli(["estimate", "s.csv", "--item-weights", "train.csv", "--n-boot", 0, "--format", "csv",
                        "--metric", "recall@1"], capsys, tmp_path)
    assert rc == 0, err


def test_interactions_route_on_movielens(ml100k_path, tmp_path, capsys):
    d = pd.read_csv(ml100k_path, sep="\t", names=["user", "item", "r", "t"]).sort_values(["user", "t"])
    test = d.groupby("user").tail(1)
    train = d.drop(test.index)
    assert not set(test.item) <= set(train.item)                   # held-out items never trained on
    train[["user", "item"]].to_csv(tmp_path / "train.csv", index=False)
    test[["user", "item"]].to_csv(tmp_path / "users.csv", index=False)
    rc, out, err = cli(["negatives", "--users", "users.csv", "--item-weights", "train.csv", "--exclude",
                        "train.csv", "-n", 20, "--seed", 0], capsys, tmp_path)
    assert rc == 0, err
    neg = pd.read_csv(_io.StringIO(out))
    sc = pd.concat([test[["user", "item"]].assign(label=1), neg[["user", "item"]].assign(label=0)])
    sc.assign(score=np.random.default_rng(0).random(len(sc))).to_csv(tmp_path / "s.csv", index=False)
    rc, out, err = cli(["estimate", "s.csv", "--item-weights", "train.csv", "--exclude", "train.csv",
                        "--n-boot", 0, "--format", "csv", "--metric", "recall@10"], capsys, tmp_path)
    assert rc == 0, err
    assert pd.read_csv(_io.StringIO(out)).users.iloc[0] == test.user.nunique()


def test_logged_negatives_must_fit_the_stated_candidates():
    k = 49
    df = pd.DataFrame({"user": 1, "item": ["h"] + [f"i{j}" for j in range(k)], "score": np.linspace(1, 0, k + 1),
                       "label": [1] + [0] * k, "q": [np.nan] + [0.01] * k, "n_candidates": 2})
    with pytest.raises(ValueError, match="49 distinct sampled negatives but n_candidates = 2"):
        pop.popularity_logs_from_table(df)
    df2 = df.assign(n_candidates=60, q=[np.nan] + [0.05] * k)          # 49 x 0.05 = 2.45 > 1
    with pytest.raises(ValueError, match=r"q of the distinct negatives .* sum to 2.45 > 1"):
        pop.popularity_logs_from_table(df2)


def test_subnormal_item_weights_are_refused_naming_the_item():
    with pytest.raises(ValueError, match=r"item 'x' has weight 1e-310.* not a normal float"):
        pop.check_item_weights({"a": 1.0, "x": 1e-310})
    with pytest.raises(ValueError, match="finite sum"):
        pop.check_item_weights({"a": 1e308, "b": 1e308})
    df = pd.DataFrame({"user": 1, "item": ["h", "a"], "score": [1.0, 0.0], "label": [1, 0],
                       "q": [np.nan, 1e-310], "n_candidates": 3})
    with pytest.raises(ValueError, match="normal float"):
        pop.popularity_logs_from_table(df)


def test_weight_exponent_is_the_name_and_alpha_is_deprecated():
    items = [0, 0, 0, 1]
    with pytest.warns(DeprecationWarning, match="weight_exponent"):
        old = pop.popularity_weights(items, alpha=0.5)
    assert old.equals(pop.popularity_weights(items, weight_exponent=0.5))
    with pytest.raises(TypeError, match="not both"), pytest.warns(DeprecationWarning):
        pop.popularity_weights(items, 0.5, alpha=0.5)


# --- item 5: messages that name the file or the argument ---------------------------------------
def test_two_trec_runs_with_one_tag(tmp_path, capsys):
    for f in ("a.trec", "b.trec"):
        (tmp_path / f).write_text("u1 Q0 h 1 0.9 bpr\nu1 Q0 i 2 0.5 bpr\n")
    (tmp_path / "q.txt").write_text("u1 0 h 1\n")
    line = cli_error(["estimate", "a.trec", "b.trec", "--qrels", "q.txt", "-N", 50], capsys, tmp_path)
    assert "a.trec and b.trec both hold the run 'bpr'" in line, line


def test_blank_model_in_a_counts_file(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("rank,count,model\n1,5,a\n2,3,\n3,4,a\n")
    assert "column 'model' is blank in c.csv, line 3" in cli_error(
        ["estimate", "c.csv", "-N", 1000, "-n", 100], capsys, tmp_path)


def test_counts_past_int64_are_refused_in_the_reader(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("rank,count\n1,9223372036854775000\n2,9223372036854775000\n")
    line = cli_error(["estimate", "c.csv", "-N", 1000, "-n", 100], capsys, tmp_path)
    assert "c.csv: the counts of model 'model' sum to 18446744073709550000 users, more than 2**63-1" in line


def test_non_utf8_files_are_named(tmp_path, capsys):
    (tmp_path / "u16.csv").write_bytes("user,rank\n1,3\n".encode("utf-16"))
    line = cli_error(["estimate", "u16.csv", "-N", 1000, "-n", 100], capsys, tmp_path)
    assert "u16.csv is UTF-16 text" in line and "iconv" in line, line
    (tmp_path / "latin.csv").write_bytes("user,rank\nJos\xe9,3\n".encode("latin-1"))
    assert "latin.csv, line 2: ranks file is not UTF-8 text" in cli_error(
        ["estimate", "latin.csv", "-N", 1000, "-n", 100], capsys, tmp_path)


def test_huge_integers_on_the_command_line(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("user,rank\n1,3\n")
    line = cli_error(["estimate", "r.csv", "-N", 2**63, "-n", 10], capsys, tmp_path, code=2)
    assert "argument --n-items/-N: must be an integer in 2..9223372036854775807; got 9223372036854775808" in line
