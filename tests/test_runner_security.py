"""What the report runner executes and exposes (issue 26, security).

* ``run --claim ID`` executes only a notebook of the notebooks folder, found by
  name: a ``notebook`` value in claims.csv such as ``../../x/payload`` is
  refused and never executed;
* kernels talk to the runner over IPC, with their connection file and sockets
  in a 0700 folder the runner creates and removes, and listen on no TCP port
  (ipykernel's IOPub pipe included); the "Kernel is running over TCP without
  encryption" warning is gone;
* executed notebooks record papermill's ``input_path`` / ``output_path``
  relative to the project, not the runner's temporary folder.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from conftest import REPO
from sampling_lib import reporting
from sampling_lib.reporting.notebook import project_relative

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.notebooks


def _write(path, code, name=None):
    nb = new_notebook(cells=[new_code_cell("seconds = 0", metadata={"tags": ["parameters"]}), new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["sampling_lab"] = {"smoke_parameters": {"seconds": 0}}
    nbformat.write(nb, str(path))


def _ledger_code(name, extra=""):
    return (f"{extra}from sampling_lib.reporting import ClaimLedger\nledger = ClaimLedger({name!r})\n"
            "ledger.check_true('c1', 'KDD20 eq 4', 'decided', passed=True)\nledger.finalize()")


def test_claim_naming_a_path_outside_the_notebooks_folder_is_never_executed(tmp_path, capsys):
    nbdir = tmp_path / "a" / "b" / "nbs"
    nbdir.mkdir(parents=True)
    _write(nbdir / "01_real.ipynb", _ledger_code("01_real"))
    sentinel = tmp_path / "PAYLOAD-RAN"
    payload = tmp_path / "a" / "x" / "payload.ipynb"       # nbs/../../x/payload
    payload.parent.mkdir(parents=True)
    _write(payload, f"open({str(sentinel)!r}, 'w').write('ran')\n" + _ledger_code("payload"))
    out = tmp_path / "sent-report"
    out.mkdir()
    pd.DataFrame({"notebook": ["../../x/payload"], "claim_id": ["c1"], "source": "KDD20 eq 4", "description": "d",
                  "measured": 1, "expected": 1, "tolerance": "", "passed": True}).to_csv(out / "claims.csv",
                                                                                         index=False)
    rc = reporting.main(["run", "--claim", "c1", "--out", str(out), "--notebooks", str(nbdir)])
    err = capsys.readouterr().err
    assert not sentinel.exists(), "the payload notebook was executed"
    assert rc == 2 and err.count("\n") == 1, err
    assert "'../../x/payload', which is not a notebook of" in err and "01_real" in err


def _listeners(pid):
    """TCP listening sockets of ``pid`` and its descendants: [(pid, command, address)]."""
    found = []
    try:
        procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return found
    for p in procs:
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    found.append((p.pid, " ".join(p.cmdline())[:80], f"{c.laddr.ip}:{c.laddr.port}"))
        except psutil.Error:
            pass
    return found


def _kernel_files(pid):
    """The connection files (``-f FILE``) of the kernels below ``pid``."""
    files = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return files
    for p in children:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if "-f" in cmd and cmd.index("-f") + 1 < len(cmd):
            files.append(Path(cmd[cmd.index("-f") + 1]))
    return files


def test_kernels_use_ipc_in_a_private_folder_and_listen_on_no_tcp_port(tmp_path):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _write(nbdir / "01_slow.ipynb", _ledger_code("01_slow", "import time\ntime.sleep(seconds)\n"))
    out = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "sampling_lib", "run", "--notebooks", str(nbdir), "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    listeners, files, seen = [], set(), []
    # default parameters: seconds = 0, but the kernel lives a few seconds while it starts and runs
    while proc.poll() is None:
        listeners += _listeners(proc.pid)
        for f in _kernel_files(proc.pid):
            if f not in files:
                files.add(f)
                try:
                    folder = f.parent
                    seen.append((f, stat.S_IMODE(folder.stat().st_mode), folder.stat().st_uid,
                                 json.loads(f.read_text()).get("transport")))
                except (OSError, ValueError):
                    pass
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    assert listeners == [], f"TCP listeners: {sorted(set(listeners))}"
    assert "without encryption" not in stderr, stderr
    assert seen, "no kernel connection file was seen"
    for f, mode, uid, transport in seen:
        assert transport == "ipc", (f, transport)
        assert mode & 0o777 == 0o700 and uid == os.getuid(), (f, oct(mode))   # (jupyter_client adds the sticky bit)
        assert f.parent.name.startswith("sampling-lab-kernels-") and f.parent.parent == Path(tempfile.gettempdir())
        assert not f.parent.exists(), f"kernel folder {f.parent} left behind"
    # the executed notebook records where it came from and went, not the runner's temporary folder
    meta = json.loads((out / "01_slow.ipynb").read_text())["metadata"]["papermill"]
    assert meta["input_path"] == "nbs/01_slow.ipynb" and meta["output_path"] == "reports/01_slow.ipynb", meta
    assert str(tmp_path) not in (out / "01_slow.ipynb").read_text()


def test_paths_inside_the_project_are_recorded_relative_to_it():
    assert project_relative(REPO / "notebooks" / "01_sampling_theorem.ipynb") == "notebooks/01_sampling_theorem.ipynb"
    assert project_relative(REPO / "reports" / "01_x.ipynb") == "reports/01_x.ipynb"
    assert project_relative("/elsewhere/smoke/01_x.ipynb") == "smoke/01_x.ipynb"
