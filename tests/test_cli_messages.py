"""Issue 16, "Silently wrong or lossy answers": the command line's messages.

No numpy reprs, overflowing values as written in the file, long values cut,
bad options named, blank id cells rejected (each failed before the change).
"""
import pytest


# --- CLI messages --------------------------------------------------------------
@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "frac.csv").write_text("user,rank\n1,2.5\n2,3\n")
    (tmp_path / "overflow.csv").write_text("user,rank\n1,99999999999999999999\n2,3\n")
    (tmp_path / "long.csv").write_text("user,rank\n1," + "x" * 100_000 + "\n2,3\n")
    (tmp_path / "ok.csv").write_text("user,rank\n1,2\n2,3\n")
    (tmp_path / "blank_model.csv").write_text("user,model,rank\n1,A,2\n2,,3\n1,B,2\n2,B,3\n")
    (tmp_path / "blank_user.csv").write_text("user,rank\n1,2\n,3\n")
    return tmp_path


def _cli_error(argv, capsys):
    from sampling_lib.cli import main

    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc in (1, 2) and len(lines) == 1 and lines[0].startswith("sampling-lib: error:"), err
    return lines[0]


@pytest.mark.parametrize("argv, want, not_want", [
    (["estimate", "frac.csv", "-N", 100, "-n", 10], "got 2.5 in frac.csv, line 2", "np."),
    (["estimate", "overflow.csv", "-N", 100, "-n", 10], "99999999999999999999 in overflow.csv, line 2",
     "-9223372036854775808"),
    (["estimate", "ok.csv", "-N", 100, "-n", 10, "--seed", -1], "argument --seed", "non-negative"),
    (["negatives", "-N", 10, "--users", "ok.csv", "-n", 3, "--seed", -1], "argument --seed", None),
    (["compare", "blank_model.csv", "-N", 100, "-n", 10], "column 'model'", "'nan'"),
    (["estimate", "blank_user.csv", "-N", 100, "-n", 10], "column 'user'", None),
    # the default needs no length-N array (issue 18); the exact EM kernel of mle does
    (["estimate", "ok.csv", "-N", 10**9, "-n", 10, "--method", "mle"], "GiB, over the limit", None),
])
def test_cli_messages(bad_files, capsys, monkeypatch, argv, want, not_want):
    monkeypatch.chdir(bad_files)
    line = _cli_error(argv, capsys)
    assert want in line, line
    if not_want:
        assert not_want not in line, line


def test_cli_long_values_are_cut(bad_files, capsys, monkeypatch):
    monkeypatch.chdir(bad_files)
    line = _cli_error(["estimate", "long.csv", "-N", 100, "-n", 10], capsys)
    assert "(100000 characters)" in line and len(line) < 400, len(line)
    line = _cli_error(["estimate", "ok.csv", "-N", "9" * 5000, "-n", 10, "--metric", "y" * 5000],
                      capsys)
    assert len(line) < 500, len(line)


def test_cli_one_line_drops_numpy_reprs():
    from sampling_lib.cli._common import one_line as _one_line

    assert _one_line(ValueError("got np.float64(2.5) and np.int64(3)")) == "got 2.5 and 3"


def test_cli_package_modules_stay_small_and_keep_their_entry_points():
    # the command line is a package split by command family (issue 29 item 5): no module over ~800 lines,
    # and sampling_lib.cli.main / build_parser stay where the console script and the tests find them
    from pathlib import Path

    import sampling_lib.cli as cli

    sizes = {p.name: len(p.read_text().splitlines()) for p in Path(cli.__file__).parent.glob("*.py")}
    assert sizes and max(sizes.values()) <= 800, sizes
    assert callable(cli.main) and callable(cli.build_parser) and cli.__all__ == ["main", "build_parser"]
