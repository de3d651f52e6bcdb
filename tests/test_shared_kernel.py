"""A shared notebook kernel (``reporting.shared_kernel``, the notebooks' smoke runs in the test suite): each
run starts from an empty namespace in its notebook's folder, and a kernel that died is started again."""
import os
import signal

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib.reporting.notebook import execute_notebook, shared_kernel


def _nb(path, code):
    nb = new_notebook(cells=[
        new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        new_code_cell(code),
        new_code_cell("from sampling_lib.reporting import ClaimLedger\n"
                      f"ledger = ClaimLedger({path.stem!r})\n"
                      "ledger.check_true('c1', 'KDD20 eq 4', 'decided', passed=True)\n"
                      "ledger.finalize()"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def test_each_run_starts_empty_in_its_own_folder_and_a_dead_kernel_is_replaced(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    first = _nb(a / "01_defines.ipynb", "z = 41\nimport os\nopen('here.txt', 'w').write(str(os.getpid()))")
    second = _nb(b / "02_uses.ipynb", "print(z)")
    third = _nb(b / "03_writes.ipynb", "import os\nopen('here.txt', 'w').write(str(os.getpid()))")
    with shared_kernel() as km:
        run = execute_notebook(first, tmp_path / "o1.ipynb", {"x": 2}, html=False, kernel=km)
        assert run.ok, run.error
        pid = int((a / "here.txt").read_text())
        run = execute_notebook(second, tmp_path / "o2.ipynb", {}, html=False, kernel=km)
        assert not run.ok and "NameError" in run.error          # the first notebook's z is gone
        run = execute_notebook(third, tmp_path / "o3.ipynb", {}, html=False, kernel=km)
        assert run.ok, run.error
        assert int((b / "here.txt").read_text()) == pid         # the same kernel, in the third one's folder
        os.kill(pid, signal.SIGKILL)
        run = execute_notebook(first, tmp_path / "o4.ipynb", {}, html=False, kernel=km)
        assert run.ok, run.error
        new = int((a / "here.txt").read_text())
        assert new != pid
    # shut down on exit, its folder removed
    try:
        os.kill(new, 0)
        alive = not open(f"/proc/{new}/stat").read().split()[2] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert not alive
