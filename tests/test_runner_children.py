"""The report runner's children die with it, and what a killed run leaves is cleaned by the next one.

Before: after SIGKILL to ``sampling-lib run --jobs 2`` its pool workers and their kernels kept running (and
the workers would start the queued notebooks), its ``.reports-tmp-*`` folder stayed beside ``--out`` and the
next run into that folder left it there; every run left its lock file ``.NAME.lock`` beside ``--out``.
Folders of the user's named like the runner's are never touched. ``-p NAME VALUE`` runs notebooks with other
parameters over IPC kernels (the README's plain ``papermill`` route started kernels on loopback TCP).
"""
import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib.reporting import folders

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


def _sleeping_notebooks(nbdir):
    nbdir.mkdir()
    for i in (1, 2, 3):     # three notebooks for two workers: one is queued when the runner is killed
        nb = new_notebook(cells=[
            new_code_cell("seconds = 120", metadata={"tags": ["parameters"]}),
            new_code_cell("import time\ntime.sleep(seconds)\n"
                          "from sampling_lib.reporting import ClaimLedger\n"
                          f"ledger = ClaimLedger('0{i}_sleep')\n"
                          "ledger.check_true('c', 'KDD20 x', 'd', passed=True)\nledger.finalize()"),
        ])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["sampling_lab"] = {"smoke_parameters": {"seconds": 0}}
        nbformat.write(nb, str(nbdir / f"0{i}_sleep.ipynb"))


def _with_token(token):
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SAMPLING_LAB_TEST_TOKEN") == token and p.status() != psutil.STATUS_ZOMBIE:
                found.append((p.pid, " ".join(p.cmdline())[:120]))
        except psutil.Error:
            pass
    return found


def _kernels(pid):
    try:
        return [p for p in psutil.Process(pid).children(recursive=True)
                if any("sampling_lib.reporting.kernel" in part for part in p.cmdline())]
    except psutil.Error:
        return []


@pytest.mark.slow
@pytest.mark.notebooks
def test_sigkill_takes_the_workers_and_kernels_along_and_the_next_run_cleans_up(tmp_path):
    nbdir = tmp_path / "nbs"
    _sleeping_notebooks(nbdir)
    root = tmp_path / "work"
    root.mkdir()
    out = root / "reports"
    (root / ".reports-tmp-mine").mkdir()                  # the user's, named like the runner's
    (root / ".reports-tmp-mine" / "keep").write_text("mine")
    token = uuid.uuid4().hex
    env = dict(os.environ, SAMPLING_LAB_TEST_TOKEN=token, OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "sampling_lib", "run", "--notebooks", str(nbdir), "--out", str(out)]
    proc = subprocess.Popen(cmd + ["--jobs", "2"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_kernels(proc.pid)) < 2:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.3)
        assert len(_kernels(proc.pid)) == 2, "both workers should be running a kernel"
        stale = [p for p in root.iterdir() if p.name.startswith(".reports-tmp-") and p.name != ".reports-tmp-mine"]
        assert len(stale) == 1 and (stale[0] / ".sampling-lab-run").is_file()
        proc.send_signal(signal.SIGKILL)                  # no handler, no clean-up of its own
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _with_token(token):
            time.sleep(0.5)
        assert _with_token(token) == [], "workers or kernels outlived the killed runner"
    finally:
        for pid, _ in _with_token(token):               # whatever outlived it: not left for the next tests
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert stale[0].is_dir()                              # a SIGKILL leaves it: the next run removes it
    p = subprocess.run(cmd + ["--smoke", "--only", "01"], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"removed {stale[0]}" in p.stdout
    assert sorted(q.name for q in root.iterdir()) == [".reports-tmp-mine", "reports"], "tmp or lock file left"
    assert (root / ".reports-tmp-mine" / "keep").read_text() == "mine"
    assert (out / "01_sleep.ipynb").is_file()


def _dead_identity():
    from sampling_lib.reporting.processes import process_identity

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    ident = process_identity(p.pid)
    p.wait()
    return ident


def _run_folder(parent, name, owner, files=("01_x.ipynb", "01_x.html", "claims.csv")):
    d = parent / name
    d.mkdir()
    if owner is not None:
        (d / folders.OWNER).write_text(json.dumps(dict(program="sampling-lab report runner", **owner)))
    for f in files:
        (d / f).write_text("x")
    return d


def test_only_provably_stale_run_folders_are_removed(tmp_path):
    from sampling_lib.reporting.processes import process_identity
    from sampling_lib.reporting.runner import TMP_PREFIX, _run_file

    dead = _dead_identity()
    gone = _run_folder(tmp_path, ".reports-tmp-dead", dead)
    alive = _run_folder(tmp_path, ".reports-tmp-alive", process_identity())          # this process: running
    reused = _run_folder(tmp_path, ".reports-tmp-reused", dict(process_identity(), start=1))   # pid reused later
    no_owner = _run_folder(tmp_path, ".reports-tmp-mine", None)
    other_host = _run_folder(tmp_path, ".reports-tmp-host", dict(dead, host="elsewhere"))
    foreign = _run_folder(tmp_path, ".reports-tmp-foreign", dead, files=("01_x.ipynb", "notes.txt"))
    elsewhere = _run_folder(tmp_path, "reports-tmp-x", dead)                            # not the prefix
    logged = []
    removed = folders.remove_stale_run_folders(tmp_path, TMP_PREFIX, _run_file, logged.append)
    assert sorted(removed) == sorted([gone, reused])
    assert not gone.exists() and not reused.exists()
    for d in (alive, no_owner, other_host, foreign, elsewhere):
        assert d.is_dir() and len(os.listdir(d)) >= 2, d
    assert any("notes.txt" in line for line in logged), logged


def test_the_lock_file_is_removed_on_exit_unless_it_was_not_a_runners(tmp_path):
    out = tmp_path / "reports"
    lock = tmp_path / ".reports.lock"
    with folders.locked(out) as path:
        assert path == lock and lock.read_text() == f"{os.getpid()}\n"
        with pytest.raises(folders.ReportsLocked):      # a second runner, meanwhile
            with folders.locked(out):
                pass
    assert not lock.exists()
    lock.write_text("12345\n")                          # a killed runner's: taken over, then removed
    with folders.locked(out):
        pass
    assert not lock.exists()
    lock.write_text("")                                 # an empty file not made here: left as it was
    with folders.locked(out):
        pass
    assert lock.exists()


def _args(**kw):
    a = argparse.Namespace(out=None, smoke=False, only=None, jobs=None, timeout=None, notebooks=None, claim=None,
                           parameter=None)
    a.__dict__.update(kw)
    return a


@pytest.fixture
def no_project_reports(tmp_path, monkeypatch):
    """The runner's default folder under tmp_path: a run that ignored --out would not touch reports/."""
    from sampling_lib.reporting import runner

    monkeypatch.setattr(runner, "project_root", lambda: tmp_path / "project")


def test_parameters_need_an_out_folder_and_known_names(tmp_path, capsys, no_project_reports):
    from sampling_lib.reporting.command import run_command

    nbdir = tmp_path / "nbs"
    _sleeping_notebooks(nbdir)
    assert run_command(_args(notebooks=str(nbdir), parameter=[["seconds", "0"]])) == 2
    assert "-p/--parameter needs --out" in capsys.readouterr().err
    assert run_command(_args(notebooks=str(nbdir), out=str(tmp_path / "o"), parameter=[["secs", "0"]])) == 2
    err = capsys.readouterr().err
    assert "parameter 'secs' is not a parameter of 01_sleep (its parameters cell holds seconds)" in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "project").exists()


@pytest.mark.notebooks
def test_parameters_run_a_notebook_into_its_own_report(tmp_path, capsys, no_project_reports):
    from sampling_lib.reporting.command import run_command

    nbdir = tmp_path / "nbs"
    _sleeping_notebooks(nbdir)
    out = tmp_path / "mine"
    rc = run_command(_args(notebooks=str(nbdir), out=str(out), only=["02"], parameter=[["seconds", "0"]]))
    assert rc == 0, capsys.readouterr()
    nb = nbformat.read(str(out / "02_sleep.ipynb"), as_version=4)
    assert nb.metadata["papermill"]["parameters"] == {"seconds": 0}      # an int, as papermill -p reads it
    claims = (out / "claims.csv").read_text().splitlines()
    assert len(claims) == 2 and ",custom," in claims[1]


def test_the_readme_runs_notebooks_through_the_runner_not_plain_papermill():
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    commands = [ln.strip() for ln in readme.splitlines() if "papermill " in ln and ln.strip().startswith(".venv/")]
    assert commands == [], commands           # plain papermill starts kernels on loopback TCP
    assert "sampling-lib run --only 02 --out /tmp/02 -p N 20720" in readme
