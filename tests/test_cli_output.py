"""What the sampling-lib command shows (issue 27 items 4 and 8): the compact view, --wide, the notes
that describe the interval actually used, --plot, the entry points, --version and the help's examples.

The full tables (--format csv/json) are checked against the library in test_cli.py.
"""
import io
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from sampling_lib import _display
from sampling_lib.cli import main

N, n, M = 120, 10, 40          # w = (N-1)/(n-1) = 13.2: recall@5 below resolution, recall@20 not


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    rng = np.random.default_rng(1)
    ra, rb = rng.integers(1, 4, M), rng.integers(1, n + 1, M)
    pd.DataFrame({"user": np.tile(np.arange(M), 2), "model": ["A"] * M + ["B"] * M,
                  "rank": np.concatenate([ra, rb])}).to_csv(d / "ranks.csv", index=False)
    Nu = rng.integers(N - 30, N + 1, M)
    pd.DataFrame({"user": np.arange(M), "rank": ra, "n_items": Nu}).to_csv(d / "nu.csv", index=False)
    pd.DataFrame({"user": [0], "rank": [1]}).to_csv(d / "one_user.csv", index=False)
    return d, int(Nu.min()), int(Nu.max())


def cli(capsys, *args):
    capsys.readouterr()
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:          # --help / --version exit through argparse
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def flat(text):
    """The text with line wrapping undone (the legend and long headers wrap at 100 characters)."""
    return " ".join(text.split())


def _table_rows(out):
    """The compact view's header (its lines joined: it wraps at the output's width), column names and rows (up
    to the first blank line after the table)."""
    lines = out.splitlines()
    blank = lines.index("")
    assert 1 <= blank <= 3 and max(len(ln) for ln in lines[:blank]) <= 100, out
    head, rows = lines[blank + 1], []
    for ln in lines[blank + 2:]:
        if not ln:
            break
        rows.append(ln)
    return " ".join(lines[:blank]), head.split(), rows


def test_compact_estimate_view(files, capsys):
    d, *_ = files
    common = ["-N", N, "-n", n, "--metric", "recall@5", "--metric", "recall@20", "--n-boot", 30, "--seed", 2]
    rc, out, err = cli(capsys, "estimate", d / "ranks.csv", *common)
    assert rc == 0 and err == "", err
    header, cols, rows = _table_rows(out)
    # the constants once, in the header line
    for part in (f"N = {N}", f"n = {n}", f"{M} users", "method logspline",
                 "95% intervals from 30 bootstrap replicates (seed 2)"):
        assert part in header, header
    assert cols == ["model", "metric", "naive", "estimate", "95%", "interval", "ratio"], cols
    assert len(rows) == 4 and max(len(r) for r in out.splitlines()) <= 110
    full = pd.read_csv(io.StringIO(cli(capsys, "estimate", d / "ranks.csv", *common, "--format", "csv")[1]))
    for row, (_, r) in zip(rows, full.iterrows()):
        cells = row.split()
        assert cells[:4] == [r.model, r.metric, f"{r.naive:.4f}", f"{r.estimate:.4f}"], row
        assert f"[{r.ci_low:.4f}, {r.ci_high:.4f}]" in row
        assert f"] {r.precision_ratio:.2f}" in " ".join(row.split()), row      # the precision ratio
        assert row.endswith("*") == bool(r.below_resolution), row          # the below-resolution mark
    legend = flat(out.split("\n\n", 2)[2])
    assert legend.startswith("* below resolution (recall@5): K < (N-1)/(n-1) = 13.2"), legend
    assert "union of the bootstrap intervals" in legend                    # the default's interval
    for hidden in ("sensitivity_low", "confidence_level", "n_boot", "clipped", "-1"):
        assert hidden not in out.split("\n\n")[1], hidden


def test_the_note_describes_the_interval_of_the_method_used(files, capsys):
    d, *_ = files
    args = ["estimate", d / "ranks.csv", "-N", N, "-n", n, "--metric", "recall@5", "--n-boot", 20]
    for method in ("mle", "bv"):
        rc, out, _ = cli(capsys, *args, "--method", method)
        assert rc == 0 and f"method {method}" in out.splitlines()[0]
        assert "covers user and item sampling only" in flat(out) and "union" not in out, out
    # csv: the table stays clean, the note goes to stderr and is the same text
    rc, out, err = cli(capsys, *args, "--method", "mle", "--format", "csv")
    assert rc == 0 and "below resolution" not in out
    assert err.startswith("note: below resolution (recall@5)") and "sampling only" in flat(err)
    assert max(len(ln) for ln in err.splitlines()) <= 100              # wrapped as the views are
    rc, out, err = cli(capsys, *args, "--format", "csv")
    assert "union of the bootstrap intervals" in flat(err)


def test_per_user_n_items_in_the_header(files, capsys):
    d, lo, hi = files
    rc, out, _ = cli(capsys, "estimate", d / "nu.csv", "-n", n, "--metric", "recall@20", "--n-boot", 10)
    assert rc == 0
    header, cols, rows = _table_rows(out)
    assert f"N = {lo}..{hi} (per user)" in header and "-1" not in out, header
    assert cols[0] == "metric"                     # one model in the file: no model column


def test_clipped_is_marked_and_explained(files, capsys):
    d, *_ = files
    # one user at sampled rank 1, N = 200, n = 10: BV's recall@10 is 1.134 > 1 (correct.estimate's docstring)
    rc, out, _ = cli(capsys, "estimate", d / "one_user.csv", "-N", 200, "-n", 10, "--metric", "recall@10",
                     "--method", "bv", "--n-boot", 0)
    assert rc == 0
    header, cols, rows = _table_rows(out)
    assert "no bootstrap (--n-boot 0): no intervals" in header
    assert rows[0].split()[-2:] == ["*", "!"] and "n/a" in rows[0], rows
    assert "\n! clipped: the estimator's value fell outside" in out and "metric's range" in flat(out)


def test_wide_shows_every_column_and_explains_them(files, capsys):
    d, *_ = files
    rc, out, _ = cli(capsys, "estimate", d / "ranks.csv", "-N", N, "-n", n, "--n-boot", 10, "--wide")
    assert rc == 0
    for col in ("naive_ci_low", "se", "sensitivity_low", "sensitivity_high", "below_resolution", "clipped",
                "confidence_level", "n_boot"):
        assert col in out.splitlines()[0], col
    assert "\nsensitivity_low/high: the range of the point estimate" in out
    assert "clipped: True when the estimator's value fell outside" in flat(out)
    rc, out, err = cli(capsys, "estimate", d / "ranks.csv", "-N", N, "-n", n, "--wide", "--format", "json")
    assert rc == 1 and err.startswith("sampling-lib: error: --wide applies to --format table"), err


def test_compact_compare_view(files, capsys):
    d, *_ = files
    rc, out, err = cli(capsys, "compare", d / "ranks.csv", "-N", N, "-n", n, "--metric", "recall@5",
                       "--metric", "recall@20", "--n-boot", 30)
    assert rc == 0 and err == ""
    header = flat(out.split("\n\n")[0])
    for part in (f"N = {N}", f"n = {n}", f"{M} users", "method logspline", "paired bootstrap",
                 "95% intervals from 30 bootstrap replicates (seed 0)", "p-values adjusted by holm"):
        assert part in header, header
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split() == ["metric", "model_a", "model_b", "a", "b", "a", "-", "b", "interval", "p", "adj.",
                                "decision"]
    assert all(len(ln) <= 100 for ln in out.splitlines()), out
    assert table[1].startswith("recall@5") and table[1].endswith("*")
    assert table[2].startswith("recall@20") and not table[2].endswith("*")
    assert "* below resolution (recall@5)" in out


def test_compare_view_uses_the_librarys_below_resolution_column():
    t = pd.DataFrame({"metric": ["recall@50"], "K": [50], "model_a": ["A"], "model_b": ["B"], "estimate_a": [0.3],
                      "estimate_b": [0.2], "difference": [0.1], "ci_low": [0.05], "ci_high": [0.15],
                      "pvalue_adjusted": [0.001], "reject": [True], "decision": ["A > B"], "ci_level": [0.95],
                      "n_comparisons": [1], "adjust": ["holm"], "alpha": [0.05], "method": ["mle"],
                      "users": [100], "n_boot": [200], "paired": [True], "below_resolution": [True]})
    view = _display.compare_view(t, n_items=(1000, 1000), sample_size=(100, 100))   # K = 50 > w = 10.1
    assert view.split("\n\n")[1].splitlines()[1].endswith("*")
    assert "below resolution (recall@50)" in view
    # the decision and the interval disagree: the view says so
    view = _display.compare_view(t.assign(ci_low=-0.01), n_items=(1000, 1000), sample_size=(100, 100))
    assert "on row(s) 1 the decision and the interval disagree" in flat(view)


def test_compare_view_shows_no_p_value_below_what_its_replicates_resolve():
    """A percentile-bootstrap p-value of 0 (every replicate on one side) from B replicates says p < ~2/B, times
    the k pairs after Bonferroni or Holm: 1,000 replicates and 3 pairs give "<0.006" (it said "<0.0001")."""
    from sampling_lib.inference import percentile_pvalue

    g = np.random.default_rng(0)
    assert percentile_pvalue(g.normal(5, 1, 1000)) == 0.0          # what the library reports
    rows = pd.DataFrame({"metric": ["recall@10"] * 3, "K": 10, "model_a": ["A", "A", "B"],
                         "model_b": ["B", "C", "C"], "estimate_a": 0.3, "estimate_b": 0.2, "difference": 0.1,
                         "ci_low": 0.05, "ci_high": 0.15, "pvalue_adjusted": [0.0, 0.0123, 1e-6], "reject": True,
                         "decision": "A > B", "ci_level": 0.95, "n_comparisons": 3, "adjust": "holm",
                         "alpha": 0.05, "method": "mle", "users": 100, "n_boot": 1000, "paired": True})
    cells = [ln.split()[-4] for ln in _display.compare_view(rows).split("\n\n")[1].splitlines()[1:]]
    assert cells == ["<0.006", "0.0123", "<0.006"]
    cells = [ln.split()[-4] for ln in _display.compare_view(rows.assign(adjust="none", n_boot=10_000)
                                                             ).split("\n\n")[1].splitlines()[1:]]
    assert cells == ["<0.0002", "0.0123", "<0.0002"]


def test_plot_file_and_figure(files, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    from sampling_lib.plotting import plot_estimates

    d, *_ = files
    png = tmp_path / "est.png"
    rc, out, err = cli(capsys, "estimate", d / "ranks.csv", "-N", N, "-n", n, "--metric", "recall@5",
                       "--metric", "recall@20", "--n-boot", 20, "--plot", png)
    assert rc == 0 and f"figure written to {png}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    t = pd.read_csv(io.StringIO(cli(capsys, "estimate", d / "ranks.csv", "-N", N, "-n", n, "--metric",
                                    "recall@5", "--metric", "recall@20", "--n-boot", 20, "--format", "csv")[1]))
    fig = plot_estimates(t)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["recall@5 (below resolution)", "recall@20"]
    assert [tk.get_text() for tk in fig.axes[0].get_yticklabels()] == ["A", "B"]
    labels = [tx.get_text() for tx in fig.legends[0].get_texts()]
    assert labels[0].startswith("naive") and labels[1] == "corrected, 95% interval"
    assert labels[2] == "below resolution: K < (N-1)/(n-1) = 13.2, extrapolated"
    assert fig.axes[0].get_facecolor() != fig.axes[1].get_facecolor()     # the region is marked
    assert f"N = {N}, n = {n}, {M} users, method logspline" in fig._suptitle.get_text()
    rc, _, err = cli(capsys, "estimate", d / "ranks.csv", "-N", N, "-n", n, "--n-boot", 5,
                     "--plot", tmp_path / "x.notaformat")
    assert rc == 1 and err.startswith("sampling-lib: error: --plot ") and len(err.splitlines()) == 1, err
    with pytest.raises(ValueError, match="columns"):
        plot_estimates(pd.DataFrame({"a": [1]}))


def test_version_and_help_examples(capsys):
    from sampling_lib import __version__

    rc, out, _ = cli(capsys, "--version")
    assert rc == 0 and out.strip() == f"sampling-lib {__version__}"
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0 and "examples:\n  sampling-lib estimate ranks.csv" in out
    for command in ("estimate", "compare"):
        rc, out, _ = cli(capsys, command, "--help")
        assert rc == 0 and "examples:\n  " in out and f"sampling-lib {command} ranks.csv" in out


# slow (3 s, a subprocess): .ci/run runs `python -m sampling_lib` from the installed wheel
@pytest.mark.slow
def test_python_dash_m_sampling_lib_is_the_cli(files, capsys):
    """``python -m sampling_lib estimate ...`` (was: "invalid choice ... choose from 'run'")."""
    d, *_ = files
    args = ["estimate", "ranks.csv", "-N", N, "-n", n, "--n-boot", 10, "--format", "csv"]
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "sampling_lib", *map(str, args)], cwd=d, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    os.chdir(d)
    try:
        assert p.stdout == cli(capsys, *args)[1]
    finally:
        os.chdir(REPO)


def test_views_of_a_per_user_table_without_context():
    """The library's table with per-user N (N missing or -1 in the table) shows without the CLI's ranges."""
    from sampling_lib.correct import estimate

    rng = np.random.default_rng(3)
    t = estimate(rng.integers(1, 11, 60), rng.integers(90, 121, 60), 10, ["recall@5", "recall@20"], n_boot=10,
                 rng=0)
    header = _display.estimate_view(t).splitlines()[0]
    assert "N varies per user" in header and "n = 10" in header, header
    assert "N, n: empty (or -1) when they vary per user" in _display.wide_view(t)
    if pytest.importorskip("matplotlib"):
        from sampling_lib.plotting import plot_estimates

        fig = plot_estimates(t)
        assert "n = 10" in fig._suptitle.get_text() and "N =" not in fig._suptitle.get_text()


def test_below_resolution_notes_point_to_the_planner_and_an_existing_readme_section():
    """The notes of estimate and compare name `sampling-lib plan` and a README section that exists."""
    import re
    from pathlib import Path
    from sampling_lib import _display
    headings = {ln.lstrip("#").strip() for ln in
                (Path(__file__).resolve().parents[1] / "README.md").read_text().splitlines() if ln.startswith("#")}
    named = re.findall(r"README: '([^']+)'", _display._RESOLVE)
    assert named and all(h in headings for h in named)
    assert "sampling-lib plan" in _display._RESOLVE
    assert _display._RESOLVE in _display.resolution_note(["recall@10"], 37.4, widened=True)
    # popularity-sampled negatives get no staged design: their note says so, and names a section that exists
    named = re.findall(r"README: '([^']+)'", _display._RESOLVE_POPULARITY)
    assert named and all(h in headings for h in named)
    note = _display.resolution_note(["recall@10"], 37.4, widened=False, popularity=True)
    assert _display._RESOLVE_POPULARITY in note and _display._RESOLVE not in note and "logspline" not in note


def test_the_view_says_when_replicates_are_first_order_in_a_fitted_prior():
    # MN with a fitted prior and per-user N: replicates first order in the prior, said in one note;
    # not with one N (exact batched refits), not without replicates, not for the other methods
    # (the notes wrap to the terminal: compare with the line breaks taken out)
    from sampling_lib.correct import compare, estimate

    def said(view):
        return "first order in the fitted prior" in " ".join(view.split())

    rng = np.random.default_rng(4)
    r, Nu = rng.integers(1, 11, 300), rng.integers(90, 121, 300)
    est = lambda N, **kw: estimate(r, N, 10, ["recall@5"], rng=0, **kw)  # noqa: E731
    assert said(_display.estimate_view(est(Nu, method="mn_mle", n_boot=20)))
    assert not said(_display.estimate_view(est(120, method="mn_mle", n_boot=20)))
    assert not said(_display.estimate_view(est(Nu, method="mn_mle", n_boot=0)))
    for exact in ("mn", "bv_mle"):                  # linear with a fixed prior; BV's replicates are not first order
        assert not said(_display.estimate_view(est(Nu, method=exact, n_boot=20)))
    ranks = {"a": r, "b": np.minimum(10, r + rng.integers(0, 2, r.size))}
    c = compare(ranks, Nu, 10, ["recall@5"], method="mn_mle", n_boot=20, rng=0)
    assert said(_display.compare_view(c, n_items=(int(Nu.min()), int(Nu.max()))))
