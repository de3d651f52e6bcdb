"""Progress when stderr is not a terminal (nohup, CI, a log file): plain throttled lines, fit included.

Before issue 27, progress was a tqdm bar shown only on a terminal and only during the
bootstrap, so a multi-minute run under nohup or CI printed nothing.
"""
import io
import time

import numpy as np

from sampling_lib import _progress
from sampling_lib._progress import PlainLines


def test_plain_lines_are_throttled_and_end_with_a_done_line():
    out = io.StringIO()
    p = PlainLines("bootstrap x", 100, stream=out, first=0.05, every=0.1)
    p.update(40)
    time.sleep(0.33)
    p.update(60)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("sampling-lib: bootstrap x: 40/100 replicates (40%)"), lines
    assert "left" in lines[0]
    assert 2 <= len(lines) - 1 <= 5, lines                      # a line every 0.1 s, not one per update
    assert lines[-1].startswith("sampling-lib: bootstrap x: done, 100 replicates in"), lines
    assert "\r" not in out.getvalue()                           # no carriage returns in a log


def test_a_short_step_prints_nothing():
    out = io.StringIO()
    with PlainLines("fit x", stream=out, first=5.0, every=5.0) as p:
        p.update(1)
    assert out.getvalue() == ""


def test_estimate_and_compare_report_the_fit_and_the_bootstrap_off_a_terminal(capsys, monkeypatch):
    from sampling_lib.correct import compare, estimate

    monkeypatch.setattr(_progress, "FIRST_LINE_AFTER", 0.0)     # a line at once: every step shows
    r = np.arange(1, 21).repeat(10)
    estimate(r, 300, 20, ["recall@10"], n_boot=100, rng=0, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert any(ln.startswith("sampling-lib: fit logspline (200 users): running") for ln in err), err
    assert any(ln.startswith("sampling-lib: bootstrap logspline: ") and "replicates" in ln for ln in err), err
    assert any(ln.startswith("sampling-lib: bootstrap logspline: done, 100 replicates") for ln in err), err
    compare({"a": r, "b": r[::-1]}, 300, 20, ["recall@10"], n_boot=50, rng=0, progress=True)
    err = capsys.readouterr().err
    assert "sampling-lib: fit the default method (2 models): running" in err
    assert "sampling-lib: paired bootstrap logspline: done, 50 replicates" in err
    estimate(r, 300, 20, ["recall@10"], n_boot=20, rng=0)          # progress=False: silent
    assert capsys.readouterr().err == ""


def test_cli_progress_lines_and_quiet(tmp_path, capsys, monkeypatch):
    from sampling_lib.cli import main

    monkeypatch.setattr(_progress, "FIRST_LINE_AFTER", 0.0)
    f = tmp_path / "r.csv"
    f.write_text("user,rank\n" + "".join(f"{u},{1 + u % 20}\n" for u in range(200)))
    assert main(["estimate", str(f), "-N", "300", "-n", "20", "--n-boot", "50", "-o", str(tmp_path / "o")]) == 0
    assert "sampling-lib: bootstrap logspline: done" in capsys.readouterr().err
    assert main(["estimate", str(f), "-N", "300", "-n", "20", "--n-boot", "50", "-o", str(tmp_path / "o"),
                 "--quiet"]) == 0
    assert capsys.readouterr().err == ""
