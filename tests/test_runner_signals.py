"""SIGTERM and Ctrl-C during ``python -m sampling_lib run --jobs 2`` (issue 16).

The runner must stop its pool workers and every kernel they started (none
may go on, or start a new kernel later), then remove its temporary folder,
exit non-zero without a traceback, and leave the previous reports in place.
The cases run side by side to keep the suite fast (starting spawn workers
and kernels is the slow part): SIGTERM and Ctrl-C with ``--jobs 2``, and
Ctrl-C with ``--jobs 1`` (the kernel then runs under the runner itself,
where papermill's nbclient would otherwise take over the signal handlers).
Files and folders of the user's beside the report folder (one named like the
runner's temporary folders) must come out of it untouched (issue 26).
"""
import os
import signal
import subprocess
import sys
import time
import uuid

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib.reporting.folders import write_marker
from test_runner_safety import _snapshot

psutil = pytest.importorskip("psutil")

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]


def _sleeping_notebooks(nbdir):
    nbdir.mkdir()
    for i in (1, 2, 3):   # three notebooks for two workers: one is still queued when the signal comes
        nb = new_notebook(cells=[
            new_code_cell("seconds = 120", metadata={"tags": ["parameters"]}),
            new_code_cell("import time\ntime.sleep(seconds)\n"
                          "from sampling_lib.reporting import ClaimLedger\n"
                          f"ledger = ClaimLedger('0{i}_sleep')\n"
                          "ledger.check_true('c', 'KDD20 x', 'd', passed=True)\nledger.finalize()"),
        ])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["sampling_lab"] = {"smoke_parameters": {"seconds": 120}}
        nbformat.write(nb, str(nbdir / f"0{i}_sleep.ipynb"))


def _kernels(pid):
    try:
        return [p for p in psutil.Process(pid).children(recursive=True)
                if any(k in part for part in p.cmdline() for k in ("sampling_lib.reporting.kernel", "ipykernel"))]
    except psutil.Error:
        return []


def _alive_with_token(token):
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("SAMPLING_LAB_TEST_TOKEN") == token and p.status() != psutil.STATUS_ZOMBIE:
                found.append((p.pid, " ".join(p.cmdline())[:120]))
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_sigterm_and_ctrl_c_stop_workers_and_kernels_then_clean_up(tmp_path):
    nbdir = tmp_path / "nbs"
    _sleeping_notebooks(nbdir)
    runners, user_files = {}, {}
    for sig, jobs in ((signal.SIGTERM, 2), (signal.SIGINT, 2), (signal.SIGINT, 1)):
        root = tmp_path / f"{sig.name}-{jobs}"
        out = root / "reports"
        out.mkdir(parents=True)
        (out / "index.html").write_text("previous report")
        write_marker(out, ["index.html"])   # a report folder the runner wrote
        for name in ("reports.old", ".reports-tmp-mine", "data"):   # the user's files around it
            (root / name).mkdir()
            (root / name / "keep").write_text(name)
        (root / "notes.txt").write_text("mine")
        user_files[root] = _snapshot(root, skip=("reports", ".reports.lock"))
        token = uuid.uuid4().hex      # inherited by every descendant: finds them even when re-parented
        env = dict(os.environ, SAMPLING_LAB_TEST_TOKEN=token, OPENBLAS_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "sampling_lib", "run", "--notebooks", str(nbdir), "--out", str(out),
             "--jobs", str(jobs)],
            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,   # its own process group, like a shell job
        )
        runners[(sig, jobs)] = (proc, root, out, token)

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(len(_kernels(p.pid)) >= j for (_, j), (p, *_) in runners.items()):
        assert all(p.poll() is None for p, *_ in runners.values()), "a runner ended early"
        time.sleep(0.3)
    for (sig, jobs), (proc, *_) in runners.items():
        assert len(_kernels(proc.pid)) == jobs, "every worker should be running a kernel"
        if sig == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)   # Ctrl-C: the whole foreground group gets it
        else:
            proc.send_signal(signal.SIGTERM)     # e.g. `kill`, a CI timeout, systemd

    for (sig, jobs), (proc, root, out, token) in runners.items():
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, (proc.returncode, stderr[-2000:])
        assert "Traceback" not in stderr, stderr[-3000:]
        assert f"interrupted by {sig.name}" in stderr
        assert [p.name for p in root.glob(".reports-tmp-*")] == [".reports-tmp-mine"], "temporary folder left"
        assert (out / "index.html").read_text() == "previous report"
        assert _snapshot(root, skip=("reports", ".reports.lock")) == user_files[root]   # nothing of the user's moved
    time.sleep(3)   # the old runner's orphaned workers started a new kernel ~18 s later; none may remain
    for (sig, jobs), (proc, root, out, token) in runners.items():
        assert _alive_with_token(token) == [], f"{sig.name} --jobs {jobs}: processes left running"
