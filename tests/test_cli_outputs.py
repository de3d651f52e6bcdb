"""No output of a command overwrites another, an input, or lands somewhere the user did not name.

``estimate -o same.png --plot same.png`` exited 0 with the table overwritten by the figure (also through a
symbolic link); an empty ``-o ""`` wrote to stdout and ``run --out ""`` ran into ``reports/``. ``run --out
FILE/sub`` (FILE a regular file) said "cannot create ...: File exists".
"""
import argparse
import os

import numpy as np
import pandas as pd
import pytest

from sampling_lib.cli import main


@pytest.fixture
def ranks(tmp_path):
    g = np.random.default_rng(0)
    p = tmp_path / "ranks.csv"
    pd.DataFrame({"user": np.arange(200), "rank": g.integers(1, 101, 200)}).to_csv(p, index=False)
    return p


def _error(capsys, *argv):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


def test_two_outputs_naming_one_file_are_refused(ranks, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    same = tmp_path / "same.png"
    rc, err = _error(capsys, "estimate", ranks, "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "-o", same,
                     "--plot", same)
    assert rc == 1 and len(err) == 1 and "name the same file" in err[0] and "--plot" in err[0], err
    assert not same.exists()                                   # nothing written
    link = tmp_path / "link.png"
    link.symlink_to(same)                                      # a link to a file not written yet
    rc, err = _error(capsys, "estimate", ranks, "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "-o", same,
                     "--plot", link)
    assert rc == 1 and "name the same file" in err[0], err
    same.write_text("mine")
    hard = tmp_path / "hard.png"
    os.link(same, hard)                                        # a hard link to an existing file
    rc, err = _error(capsys, "estimate", ranks, "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "-o", same,
                     "--plot", hard)
    assert rc == 1 and "name the same file" in err[0], err
    assert same.read_text() == "mine"


@pytest.mark.parametrize("argv", [
    ["estimate", "RANKS", "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "-o", ""],
    ["compare", "RANKS", "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "-o", " "],
    ["plan-users", "--margin", 0.01, "-o", ""],
])
def test_an_empty_output_path_is_an_error(ranks, capsys, argv):
    rc, err = _error(capsys, *[ranks if a == "RANKS" else a for a in argv])
    assert rc == 1 and len(err) == 1 and "-o/--output must name a file; got an empty path" in err[0], err
    assert capsys.readouterr().out == ""


def test_an_output_named_like_an_option_value_is_no_input(ranks, tmp_path, capsys, monkeypatch):
    # every text value of the command line may name an input file; only existing files count
    monkeypatch.chdir(tmp_path)
    rc, err = _error(capsys, "estimate", ranks, "-N", 3706, "-n", 100, "--n-boot", 5, "-q", "--format", "csv",
                     "-o", "csv")
    assert rc == 0, err
    assert pd.read_csv(tmp_path / "csv").shape[0] == 2


def _run_args(**kw):
    args = argparse.Namespace(out=None, smoke=True, only=["01"], jobs=None, timeout=None, notebooks=None,
                              claim=None)
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def test_run_refuses_an_empty_out_before_anything_runs(tmp_path, capsys, monkeypatch):
    from sampling_lib.reporting import command, runner

    # were "" taken for the default, it would be this project's reports/
    monkeypatch.setattr(runner, "project_root", lambda: tmp_path)
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    (nbs / "01_x.ipynb").write_text("{}")
    rc = command.run_command(_run_args(out="", notebooks=str(nbs)))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--out must name a folder; got an empty path" in err[0], err
    assert not (tmp_path / "reports").exists()
    with pytest.raises(ValueError, match="out_dir must name a folder"):
        runner.run_notebooks("", notebooks_dir=nbs)
    with pytest.raises(ValueError, match="reports_dir must name a folder"):
        runner.run_claim("x", reports_dir="")


def test_run_out_inside_a_file_says_the_file_is_no_folder(tmp_path, capsys):
    from sampling_lib.reporting import command

    f = tmp_path / "FILE"
    f.write_text("mine")
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    (nbs / "01_x.ipynb").write_text("{}")
    for out in (f / "sub", f / "sub" / "deeper"):
        rc = command.run_command(_run_args(out=str(out), notebooks=str(nbs)))
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert f"{f} is a file, not a folder" in err[0] and "File exists" not in err[0], err
    assert f.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "nbs"]
