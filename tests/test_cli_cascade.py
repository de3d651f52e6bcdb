"""``sampling-lib estimate`` on a cascade's scores table (a ``stratum`` column): the file route gives the Python
route's table (sampling_lib.cascade.cascade_estimate), N_u from the column, -N or --n-items-file, and every
option that does not apply is a one-line error."""
import numpy as np
import pandas as pd
import pytest

from sampling_lib.cascade import BOUNDS_METHOD, cascade_estimate
from sampling_lib.cli import main

from test_cascade import _population


def cli(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cascade")
    t, _ = _population(M=120, N=80, m=10, r=9, seed=3)
    t = t.assign(user=t.user.map(lambda u: f"u{u}"))
    t.to_csv(d / "plain.csv", index=False)
    t.assign(n_items=80).to_csv(d / "with_n.csv", index=False)
    two = pd.concat([t.assign(model="A"), t.assign(model="B", score=-t.score)])
    two.to_csv(d / "two.csv", index=False)
    t[t.stratum == "head"].to_csv(d / "head.csv", index=False)
    pd.DataFrame({"user": pd.unique(t.user), "n_items": 80}).to_csv(d / "n_items.csv", index=False)
    return d, t, two


def test_the_file_route_gives_the_python_route_s_table(files, capsys):
    d, t, two = files
    want = cascade_estimate(two, 80, metrics=["recall@10"], n_boot=50, rng=7)
    rc, out, err = cli(capsys, "estimate", d / "two.csv", "-N", 80, "--metric", "recall@10", "--n-boot", 50,
                       "--seed", 7, "--format", "csv", "--quiet")
    assert rc == 0, err
    got = pd.read_csv(__import__("io").StringIO(out))
    assert list(got.model) == ["A", "B"] and (got.method == want.method).all()
    for col in ("naive", "estimate", "ci_low", "ci_high"):
        np.testing.assert_allclose(got[col], want[col], rtol=1e-12, err_msg=col)
    # N_u from the column, from --n-items-file and from -N: the same table
    tables = []
    for extra in ((d / "with_n.csv",), (d / "plain.csv", "--n-items-file", d / "n_items.csv"),
                  (d / "plain.csv", "-N", 80)):
        rc, out, err = cli(capsys, "estimate", *extra, "--n-boot", 30, "--format", "csv", "--quiet")
        assert rc == 0, err
        tables.append(out)
    assert tables[0] == tables[1] == tables[2]


def test_the_head_only_file_gives_bounds_and_says_what_they_are(files, capsys):
    d, t, _ = files
    rc, out, err = cli(capsys, "estimate", d / "head.csv", "-N", 80, "--n-boot", 50, "--quiet")
    assert rc == 0, err
    assert f"method {BOUNDS_METHOD}" in out          # one constant, owned by cascade, used by the views
    assert "bounds (tail unscored)" in out and "bounded, not estimated" in " ".join(out.split())
    assert "*" not in out.split("\n\n")[1]                      # no below-resolution mark on bounds
    assert max(len(x) for x in out.splitlines()[1:]) <= 100


def test_random_negatives_give_the_design_only_interval_beside_the_estimate(files, capsys):
    d, t, _ = files
    rc, out, err = cli(capsys, "estimate", d / "plain.csv", "-N", 80, "--n-boot", 50, "--quiet")
    assert rc == 0, err
    assert "design-only interval" in out.split("\n\n")[1] and "from the design alone" in " ".join(out.split())
    assert max(len(x) for x in out.splitlines()) <= 100
    # csv: the note on stderr is the stratified one, and names the columns the interval is in
    rc, out, err = cli(capsys, "estimate", d / "plain.csv", "-N", 80, "--n-boot", 50, "--quiet", "--format", "csv")
    assert rc == 0 and "design-only interval beside it (bound_low/high)" in " ".join(err.split())
    assert "tail's first sampled bin" in " ".join(err.split())
    table = cascade_estimate(t, 80, metrics=["recall@10", "ndcg@10"], n_boot=50, rng=0)
    assert ((table.bound_low <= table.estimate) & (table.estimate <= table.bound_high)).all()
    from sampling_lib.plotting import plot_estimates

    labels = [x.get_text() for x in plot_estimates(table).legends[0].get_texts()]
    assert "design-only interval" in labels, labels


def test_the_head_only_figure_draws_bounds_not_an_extrapolated_estimate(files):
    from sampling_lib.plotting import plot_estimates

    d, t, _ = files
    table = cascade_estimate(t[t.stratum == "head"], 80, metrics=["recall@10", "ndcg@10"], n_boot=30, rng=1)
    fig = plot_estimates(table)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["recall@10", "ndcg@10"]      # not "below resolution"
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "bounds (tail unscored)" in labels and "95% interval of the bounds" in labels, labels


@pytest.mark.parametrize("args, message", [
    (("plain.csv",), "give N_u (each user's candidates, the held-out item included) once: --n-items N"),
    (("with_n.csv", "-N", 80), "the n_items column and --n-items both give it"),
    (("plain.csv", "-N", 80, "-n", 20), "--sample-size does not apply to a cascade's scores table"),
    (("plain.csv", "-N", 80, "--method", "bv"), "--method does not apply"),
    (("plain.csv", "-N", 80, "--scheme", "binomial"), "--scheme binomial: a cascade's tail negatives are distinct"),
    (("plain.csv", "-N", 80, "--ties", "random"), "--ties random does not apply"),
    (("plain.csv", "-N", 80, "--model", "A"), "has no model column"),
    (("two.csv", "-N", 80, "--model", "C"), "--model must be one of ['A', 'B']"),
    (("plain.csv", "-N", 15), "has 10 head and 9 tail negatives, more than the 14 other candidates"),
])
def test_options_that_do_not_apply_are_one_line_errors(files, capsys, args, message):
    d, _, _ = files
    rc, out, err = cli(capsys, "estimate", d / args[0], *args[1:], "--n-boot", 0, "--quiet")
    assert rc != 0 and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("command", ["compare", "ranks"])
def test_compare_and_ranks_name_the_command_that_reads_a_cascade_table(files, capsys, command):
    d, _, _ = files
    rc, out, err = cli(capsys, command, d / "two.csv", "-N", 80)
    assert rc != 0 and err.count("\n") == 1 and "`sampling-lib estimate` corrects it" in err, err


def test_two_n_items_for_one_user_are_refused(files, capsys, tmp_path):
    d, t, _ = files
    bad = t.assign(n_items=np.where(np.arange(len(t)) == 3, 81, 80))
    bad.to_csv(tmp_path / "bad.csv", index=False)
    rc, out, err = cli(capsys, "estimate", tmp_path / "bad.csv", "--n-boot", 0, "--quiet")
    assert rc != 0 and "has two different n_items values" in err, err


@pytest.fixture(scope="module")
def request_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("requests")
    g = np.random.default_rng(0)
    N, M = 120, 90
    W = g.normal(size=(M, N))
    hist = [g.choice(N, 6, replace=False) for _ in range(M)]
    held = [int(g.choice(np.setdiff1d(np.arange(N), h))) for h in hist]
    W[np.arange(M), held] += 2
    pd.DataFrame({"user": [f"u{u}" for u in range(M)], "item": held}).to_csv(d / "users.csv", index=False)
    pd.DataFrame([(f"u{u}", i) for u in range(M) for i in hist[u]],
                 columns=["user", "item"]).to_csv(d / "train.csv", index=False)
    proxy = W.mean(0) + g.normal(size=N)
    pd.DataFrame({"item": np.arange(N), "score": proxy}).to_csv(d / "proxy.csv", index=False)
    return d, W, hist, held, proxy


def test_negatives_with_a_proxy_writes_cascade_requests_that_estimate_corrects(request_files, capsys):
    from sampling_lib.cascade import cascade_requests

    d, W, hist, held, proxy = request_files
    rc, out, err = cli(capsys, "negatives", "-N", 120, "--users", d / "users.csv", "--exclude", d / "train.csv",
                       "--proxy", d / "proxy.csv", "--head", 10, "--tail-n", 9, "--seed", 5, "-o", d / "req.csv")
    assert rc == 0, err
    req = pd.read_csv(d / "req.csv")
    users = [f"u{u}" for u in range(len(held))]
    want = cascade_requests(pd.Series(held, index=users), 120,
                            pd.DataFrame([(f"u{u}", i) for u, h in enumerate(hist) for i in h],
                                         columns=["user", "item"]),
                            proxy=proxy, head=10, tail_n=9, seed=5)
    assert req.astype(str).values.tolist() == want.astype(str).values.tolist()
    req["score"] = W[req.user.str[1:].astype(int).to_numpy(), req.item.to_numpy()]
    req.to_csv(d / "scored.csv", index=False)
    assert (req.n_items == 114).all()                               # N_u = 120 - 6 history items
    rc, out, err = cli(capsys, "estimate", d / "scored.csv", "--n-boot", 0, "--format", "csv", "--quiet")
    assert rc == 0, err
    got = pd.read_csv(__import__("io").StringIO(out))
    want = cascade_estimate(req.drop(columns="n_items"), req.groupby("user").n_items.first(), n_boot=0)
    np.testing.assert_allclose(got.estimate, want.estimate, rtol=1e-12)


@pytest.mark.parametrize("extra, message", [
    (("--head", 10), "missing --tail-n"),
    (("--head", 10, "--tail-n", 5, "-n", 20), "--sample-size does not apply with --proxy"),
    (("--head", 10, "--tail-n", 5, "--stage", 2), "--stage does not apply with --proxy"),
    (("--head", 10, "--tail-n", 5, "--n-max", 80), "--n-max applies to a later stage"),
])
def test_negatives_with_a_proxy_refuses_what_does_not_apply(request_files, capsys, extra, message):
    d = request_files[0]
    rc, out, err = cli(capsys, "negatives", "-N", 120, "--users", d / "users.csv", "--proxy", d / "proxy.csv",
                       "--seed", 0, *extra)
    assert rc != 0 and err.count("\n") == 1 and message in err, err


def test_a_proxy_file_of_another_layout_or_catalogue_is_refused(request_files, capsys, tmp_path):
    d = request_files[0]
    pd.DataFrame({"item": [0, 1], "weight": [1, 2]}).to_csv(tmp_path / "bad.csv", index=False)
    rc, out, err = cli(capsys, "negatives", "-N", 120, "--users", d / "users.csv", "--proxy", tmp_path / "bad.csv",
                       "--head", 5, "--tail-n", 5, "--seed", 0)
    assert rc != 0 and "a proxy is item, score" in err, err
    pd.DataFrame({"item": np.arange(119), "score": 1.0}).to_csv(tmp_path / "short.csv", index=False)
    rc, out, err = cli(capsys, "negatives", "-N", 120, "--users", d / "users.csv", "--proxy", tmp_path / "short.csv",
                       "--head", 5, "--tail-n", 5, "--seed", 0)
    assert rc != 0 and "scores every catalogue item once (120)" in err, err


def test_a_rank_table_gives_the_scores_table_s_output(files, capsys, tmp_path):
    # the same users written as ranks: estimate prints the same table; compare and ranks name estimate;
    # --ties is refused (the ranks already resolved their ties)
    from test_cascade import _rank_table

    d, t, _ = files
    _rank_table(t).to_csv(tmp_path / "ranks.csv", index=False)
    outs = []
    for f in (d / "plain.csv", tmp_path / "ranks.csv"):
        rc, out, err = cli(capsys, "estimate", f, "-N", 80, "--n-boot", 40, "--seed", 2, "--quiet")
        assert rc == 0, err
        outs.append(out)
    assert outs[0] == outs[1] and "n = 20" in outs[1]
    rc, out, err = cli(capsys, "compare", tmp_path / "ranks.csv", "-N", 80)
    assert rc != 0 and "is a cascade's rank table" in err and "`sampling-lib estimate` corrects it" in err, err
    rc, out, err = cli(capsys, "estimate", tmp_path / "ranks.csv", "-N", 80, "--ties", "optimistic", "--quiet")
    assert rc != 0 and err.count("\n") == 1 and "--ties applies to scores" in err, err
    rc, out, err = cli(capsys, "estimate", tmp_path / "ranks.csv", "-N", 80, "-n", 20, "--quiet")
    assert rc != 0 and "--sample-size does not apply to a cascade's rank table" in err, err


def test_a_blank_user_in_a_cascade_file_is_a_one_line_error_naming_its_line(files, capsys, tmp_path):
    from test_cascade import _rank_table

    d, t, _ = files
    r = _rank_table(t).astype({"user": object})
    r.loc[3, "user"] = None
    r.to_csv(tmp_path / "blank.csv", index=False)
    rc, out, err = cli(capsys, "estimate", tmp_path / "blank.csv", "-N", 80, "--n-boot", 0, "--quiet")
    assert rc != 0 and err.count("\n") == 1 and "column 'user' of the cascade table is blank in" in err, err
    assert "blank.csv, line 5" in err, err


@pytest.mark.parametrize("blank, proxy", [("users", True), ("users", False), ("train", True)])
def test_a_blank_user_in_the_negatives_writer_s_inputs_is_a_one_line_error(request_files, capsys, tmp_path,
                                                                           blank, proxy):
    # a blank user id had been written as a user '' (users file) or dropped into a note (exclude file)
    d, *_ = request_files
    t = pd.read_csv(d / f"{blank}.csv", dtype=str)
    t.loc[2, "user"] = ""
    t.to_csv(tmp_path / f"{blank}.csv", index=False)
    files = {k: (tmp_path if k == blank else d) / f"{k}.csv" for k in ("users", "train")}
    design = ("--proxy", d / "proxy.csv", "--head", 10, "--tail-n", 9) if proxy else ("-n", 20)
    rc, out, err = cli(capsys, "negatives", "-N", 120, "--users", files["users"], "--exclude", files["train"],
                       *design, "--seed", 5, "-o", tmp_path / "out.csv")
    assert rc != 0 and err.count("\n") == 1 and "column 'user' of" in err and "is blank in" in err, err
    assert f"{blank}.csv, line 4" in err and not (tmp_path / "out.csv").exists(), err


def test_a_blank_user_in_the_n_items_file_of_a_cascade_is_a_one_line_error(files, capsys, tmp_path):
    d, *_ = files
    n = pd.read_csv(d / "n_items.csv", dtype=str)
    n.loc[1, "user"] = ""
    n.to_csv(tmp_path / "n.csv", index=False)
    rc, out, err = cli(capsys, "estimate", d / "plain.csv", "--n-items-file", tmp_path / "n.csv", "--n-boot", 0)
    assert rc != 0 and err.count("\n") == 1 and "column 'user' of the n_items table is blank in" in err, err
