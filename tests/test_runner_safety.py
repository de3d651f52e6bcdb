"""The report runner never deletes, empties or renames what it did not write (issue 26).

``sampling-lib run --out DIR`` only ever replaces a folder the runner wrote
(marked by its ``.sampling-lab-report`` file, which lists the runner's files).
Every other folder is refused up front with one line and exit status 2, and
nothing on disk changes: the repository root, a folder holding ``.git``, a
folder with the user's subfolders or a file whose stem is a notebook's, a
file, a symbolic link to any of these, a report folder to which the user added
something, a mount point. Then, whichever way a run ends (success, ``--only``,
a failed notebook, a report that cannot be put in place, a signal just after
it was), every file and folder of the user's around the output folder is still
there, with the same content and the same inode (not renamed and copied back).
"""
import errno
import os
import signal
import stat
import subprocess
import sys

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib import reporting
from sampling_lib.reporting import folders, runner

pytestmark = pytest.mark.notebooks


def _nb(path, passes=True):
    nb = new_notebook(cells=[
        new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        new_code_cell("from sampling_lib.reporting import ClaimLedger\n"
                      f"ledger = ClaimLedger({path.stem!r})\n"
                      f"ledger.check_true('c1', 'KDD20 eq 4', 'decided', passed={passes})\n"
                      "ledger.finalize()"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["sampling_lab"] = {"smoke_parameters": {"x": 1}}
    nbformat.write(nb, str(path))


@pytest.fixture
def nbdir(tmp_path):
    """One notebook (each run starts a kernel: a few seconds)."""
    d = tmp_path / "nbs"
    d.mkdir()
    _nb(d / "01_first.ipynb")
    return d


@pytest.fixture
def nbdir2(nbdir):
    """Two notebooks: for --only and for two workers."""
    _nb(nbdir / "02_second.ipynb")
    return nbdir


def _snapshot(root, skip=()):
    """{relative path: (file type, inode, content or link target)} of everything below ``root``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel.split(os.sep)[0] in skip:
                continue
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                content = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    content = fh.read()
            else:
                content = None
            out[rel] = (stat.S_IFMT(st.st_mode), st.st_ino, content)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return out


def _run(argv, capsys):
    rc = reporting.main(["run", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _refused(capsys, argv, root, expect):
    """Run ``argv``; it must stop with exit 2, one line naming ``expect``, and change nothing below root."""
    before = _snapshot(root)
    rc, out, err = _run(argv, capsys)
    assert rc == 2, (rc, out, err)
    assert err.count("\n") == 1 and expect in err and "Traceback" not in err, err
    assert "started" not in out, "no notebook may run"
    assert _snapshot(root) == before


def _report(nbdir, out, capsys):
    """A report folder written by the runner (smoke parameters)."""
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out)], capsys)
    assert rc == 0, (text, err)
    assert folders.read_marker(out) is not None
    return out


# --------------------------------------------------------------------------- refused, nothing changes


def test_repository_root_as_out_is_refused(tmp_path, nbdir, capsys, monkeypatch):
    victim = tmp_path / "victim"
    (victim / ".git" / "objects").mkdir(parents=True)
    (victim / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (victim / "src").mkdir()
    (victim / "src" / "code.py").write_text("print('mine')\n")
    (victim / "WIP.txt").write_text("wip\n")
    monkeypatch.chdir(victim)
    for argv in (["--smoke", "--only", "01", "--out", "."], ["--smoke", "--out", "."]):
        _refused(capsys, ["--notebooks", str(nbdir), *argv], tmp_path, "is not empty and is not a report folder")


def test_user_subfolders_and_notebook_named_files_are_refused(tmp_path, nbdir, capsys):
    d = tmp_path / "d"
    (d / "mydata").mkdir(parents=True)
    (d / "mydata" / "keep.csv").write_text("x\n")
    _refused(capsys, ["--smoke", "--only", "01", "--notebooks", str(nbdir), "--out", str(d)], tmp_path,
             "not a report folder")
    e = tmp_path / "e"
    e.mkdir()
    (e / "01_first.csv").write_text("the user's table\n")     # its stem is a re-run notebook's
    _refused(capsys, ["--smoke", "--only", "01", "--notebooks", str(nbdir), "--out", str(e)], tmp_path,
             "not a report folder")


def test_out_that_is_a_file_is_refused(tmp_path, nbdir, capsys):
    f = tmp_path / "results.csv"
    f.write_text("a,b\n1,2\n")
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(f)], tmp_path, "is a file, not a folder")
    assert not list(tmp_path.glob(".reports-tmp-*"))


def test_symlink_to_a_user_folder_is_refused(tmp_path, nbdir, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.tex").write_text("\\documentclass{article}\n")
    link = tmp_path / "reports"
    link.symlink_to(target)
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(link)], tmp_path,
             "is a symbolic link to")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(tmp_path / "dangling")], tmp_path,
             "is a symbolic link to")


@pytest.mark.slow
def test_symlink_to_a_report_folder_writes_the_report_it_points_to(tmp_path, nbdir, capsys):
    target = _report(nbdir, tmp_path / "store" / "reports", capsys)
    link = tmp_path / "reports"
    link.symlink_to(target)
    rc, out, err = _run(["--notebooks", str(nbdir), "--out", str(link)], capsys)
    assert rc == 0, err
    assert link.is_symlink() and link.resolve() == target.resolve()          # the link stays a link
    claims = pd.read_csv(target / "claims.csv")
    assert set(claims.run) == {"default"}                                    # the new report is there
    assert set(folders.read_marker(target)) >= {"01_first.ipynb", "01_first.html", "claims.csv", "index.html"}


def test_report_folder_with_user_additions_is_refused(tmp_path, nbdir, capsys):
    out = _report(nbdir, tmp_path / "reports", capsys)
    (out / "notes.txt").write_text("my notes\n")
    (out / "mydata").mkdir()
    (out / "mydata" / "keep.csv").write_text("x\n")
    for argv in ([], ["--only", "01"]):
        _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(out), *argv], tmp_path,
                 "holds entries the runner did not write: mydata/, notes.txt")


def test_foreign_failed_run_folder_is_refused_up_front(tmp_path, nbdir, capsys):
    (tmp_path / ".reports-failed").mkdir()
    (tmp_path / ".reports-failed" / "mine.txt").write_text("not the runner's\n")
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(tmp_path / "reports")], tmp_path,
             "the failed-run folder")


def test_mount_point_is_refused_up_front(tmp_path, nbdir, capsys, monkeypatch):
    out = tmp_path / "mnt"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: os.fspath(p) == os.fspath(out) or real(p))
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(out)], tmp_path, "is a mount point")


def test_read_only_parent_is_one_line(tmp_path, nbdir, capsys, monkeypatch):
    real_open = os.open

    def open_(path, flags, *args, **kwargs):
        if os.fspath(path).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    before = _snapshot(tmp_path)
    rc, out, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(tmp_path / "reports")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Read-only file system" in err and "cannot write in" in err, err
    assert "started" not in out
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("argv, expect", [
    (["--only", ""], "--only must name the start of a notebook's name"),
    (["--only", "01", "--only", " "], "--only must name the start of a notebook's name"),
    (["--timeout", "-5"], "--timeout must be a whole number of seconds >= 1; got -5"),
    (["--timeout", "0"], "--timeout must be a whole number of seconds >= 1; got 0"),
    (["--jobs", "0"], "--jobs must be an integer >= 1"),
    (["--claim", "c1", "--jobs", "2"], "--jobs does not apply to --claim"),
])
def test_refused_options(tmp_path, nbdir, capsys, argv, expect):
    _refused(capsys, ["--smoke", "--notebooks", str(nbdir), "--out", str(tmp_path / "reports"), *argv], tmp_path,
             expect)


def test_library_refuses_empty_only_and_bad_timeout(tmp_path, nbdir):
    with pytest.raises(ValueError, match="only must name the start of a notebook's name"):
        reporting.run_notebooks(tmp_path / "r", notebooks_dir=nbdir, only="")
    with pytest.raises(ValueError, match="timeout must be None or a whole number of seconds >= 1"):
        reporting.run_notebooks(tmp_path / "r", notebooks_dir=nbdir, timeout=-1)
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- the swap fails or is interrupted


@pytest.mark.slow
def test_report_that_cannot_be_put_in_place_is_kept_with_one_line(tmp_path, nbdir, capsys, monkeypatch):
    out = _report(nbdir, tmp_path / "reports", capsys)
    before = _snapshot(out)

    def busy(a, b):
        if os.fspath(b) == os.fspath(out):
            raise OSError(errno.EBUSY, "Device or resource busy", os.fspath(a), None, os.fspath(b))
        return real(a, b)

    real = folders.exchange
    monkeypatch.setattr(folders, "exchange", busy)
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out)], capsys)
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "could not put the new report at" in err and "Device or resource busy" in err
    assert ".reports-failed" in err
    assert _snapshot(out) == before                                      # the previous report as it was
    kept = tmp_path / ".reports-failed"
    assert (kept / "claims.csv").exists() and folders.read_marker(kept) is not None
    assert not list(tmp_path.glob(".reports-tmp-*"))


@pytest.mark.slow
def test_signal_just_after_the_report_is_installed_says_so(tmp_path, nbdir, capsys, monkeypatch):
    out = _report(nbdir, tmp_path / "reports", capsys)
    old_index = (out / "index.html").read_text()
    real = runner.install_dir

    def install_then_signal(new, dst):
        previous = real(new, dst)
        if dst == out:
            os.kill(os.getpid(), signal.SIGTERM)   # e.g. a CI timeout, right after the swap
        return previous

    monkeypatch.setattr(runner, "install_dir", install_then_signal)
    rc, text, err = _run(["--notebooks", str(nbdir), "--out", str(out)], capsys)
    assert rc == 128 + signal.SIGTERM, err
    assert "unchanged" not in err and "after the new report was put in place" in err, err
    assert (out / "index.html").read_text() != old_index and "default</b> parameters" in (out / "index.html").read_text()
    # the old report removed, and the lock file (removed on exit since the runner cleans up after itself)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbs", "reports"]


# --------------------------------------------------------------------------- no runner path touches the user's files


def _user_files(tmp_path):
    """A folder of the user's files around the output folder, and ``check(label)``: nothing of theirs changed,
    nothing left beside it but the runner's own paths."""
    root = tmp_path
    (root / "notes.txt").write_text("mine\n")
    (root / "reports.old").mkdir()
    (root / "reports.old" / "keep").write_text("the user's backup\n")
    for name in (".reports-tmp-mine", ".reports-old-mine", ".reports-failed-mine", "reports-x"):
        (root / name).mkdir()
        (root / name / "f").write_text(name)
    (root / "data").mkdir()
    (root / "data" / "ratings.csv").write_text("user,item\n1,2\n")
    (root / "link-to-data").symlink_to(root / "data")
    runner_paths = ("reports", ".reports-failed", ".reports.lock")
    user = _snapshot(root, skip=runner_paths + ("nbs",))   # nbs/: the test's notebooks, rewritten below

    def check(label):
        assert _snapshot(root, skip=runner_paths + ("nbs",)) == user, label
        extra = {p.name for p in root.iterdir()} - set(user) - set(runner_paths) - {"nbs"}
        assert extra == set(), f"{label}: left {extra}"

    return root / "reports", check


def test_no_runner_path_removes_or_renames_what_it_did_not_create(tmp_path, nbdir2, capsys):
    nbdir = nbdir2
    out, check = _user_files(tmp_path)
    # success, into a new folder, with two workers
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out), "--jobs", "2"], capsys)
    assert rc == 0, err
    check("success")
    # a failed notebook: the run is kept in .reports-failed
    _nb(nbdir / "02_second.ipynb", passes=False)
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out)], capsys)
    assert rc == 1 and (tmp_path / ".reports-failed" / "02_second.ipynb").exists(), err
    check("failure")
    # (--only and a report that cannot be put in place: the slow test below; interrupted runs:
    # tests/test_runner_signals.py checks the same around its runners)


@pytest.mark.slow
def test_no_runner_path_removes_or_renames_what_it_did_not_create_with_only_or_a_failed_install(
        tmp_path, nbdir2, capsys, monkeypatch):
    nbdir = nbdir2
    root = tmp_path
    out, check = _user_files(tmp_path)
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out)], capsys)
    assert rc == 0, err
    # --only: the other notebook's files are kept, nothing else changes
    first = (out / "01_first.html").read_bytes()
    rc, text, err = _run(["--notebooks", str(nbdir), "--out", str(out), "--only", "02"], capsys)
    assert rc == 0 and (out / "01_first.html").read_bytes() == first, err
    check("--only")
    # a failed notebook: the run is kept in .reports-failed, twice (the second, of --only 02, replaces the first)
    _nb(nbdir / "02_second.ipynb", passes=False)
    for only in ([], ["--only", "02"]):
        rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out)] + only, capsys)
        assert rc == 1 and (root / ".reports-failed" / "02_second.ipynb").exists(), err
        check("failure")
    assert not (root / ".reports-failed" / "01_first.ipynb").exists()      # replaced, not merged
    # the report cannot be put in place
    _nb(nbdir / "02_second.ipynb", passes=True)
    real = folders.exchange
    monkeypatch.setattr(folders, "exchange", lambda a, b: (_ for _ in ()).throw(OSError(errno.EXDEV, "xdev"))
                        if os.fspath(b) == os.fspath(out) else real(a, b))
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir), "--out", str(out), "--only", "02"], capsys)
    assert rc == 1, err
    check("install failed")


@pytest.mark.slow
def test_started_lines_announce_each_notebook(tmp_path, nbdir2, capsys):
    rc, text, err = _run(["--smoke", "--notebooks", str(nbdir2), "--out", str(tmp_path / "r"), "--jobs", "2"],
                         capsys)
    assert rc == 0, err
    lines = text.splitlines()
    started = sorted(x for x in lines if x.endswith(" started"))
    assert started in (["1 of 2: 01_first started", "2 of 2: 02_second started"],
                       ["1 of 2: 02_second started", "2 of 2: 01_first started"]), lines
    for name in ("01_first", "02_second"):   # each is announced before its result
        assert lines.index(next(x for x in lines if x.endswith(f"{name} started"))) < \
            lines.index(next(x for x in lines if x.startswith(f"[ok] {name}")))


@pytest.mark.slow
def test_make_reports_prints_a_line_as_each_notebook_starts(tmp_path, nbdir):
    # through the command line with one worker, as `make reports` prints it: the line comes first
    proc = subprocess.run([sys.executable, "-m", "sampling_lib", "run", "--smoke", "--notebooks", str(nbdir),
                           "--out", str(tmp_path / "r")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "1 of 1: 01_first started", proc.stdout


def test_committed_reports_folder_is_a_report_folder():
    # a fresh clone's `make reports` must find reports/ marked as the runner's, listing exactly what is committed
    from conftest import REPO

    tracked = subprocess.run(["git", "ls-files", "reports"], cwd=REPO, capture_output=True, text=True)
    if tracked.returncode != 0 or not tracked.stdout.strip():
        pytest.skip("not a git checkout with a committed reports/")
    names = {os.path.basename(p) for p in tracked.stdout.split()}
    assert folders.MARKER in names, "reports/ must carry the runner's marker file"
    assert set(folders.read_marker(REPO / "reports")) == names - {folders.MARKER}
