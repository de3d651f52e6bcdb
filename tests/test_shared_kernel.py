"""A shared notebook kernel (``reporting.shared_kernel``, the notebooks' smoke runs in the test suite): each
run starts from an empty namespace in its notebook's folder, and a kernel that died is started again."""
import os
import signal

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib.reporting.notebook import execute_notebook, shared_kernel

NO_LEDGER = "no claims recorded"      # the run's error when every cell ran (these notebooks record no claim)


def _nb(path, code):
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"tags": ["parameters"]}), new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def test_each_run_starts_empty_in_its_own_folder_and_a_dead_kernel_is_replaced(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pid_file = "import os\nopen('here.txt', 'w').write(str(os.getpid()))"
    # the first notebook also changes what a namespace reset would not: warning filters, numpy's error handling
    first = _nb(a / "01_defines.ipynb", "z = 41\nimport warnings, numpy\nwarnings.simplefilter('error')\n"
                "numpy.seterr(all='raise')\n" + pid_file)
    second = _nb(b / "02_uses.ipynb", pid_file + "\nimport warnings, numpy\n"
                 "assert not any(f[0] == 'error' and f[2] is Warning for f in warnings.filters)\n"
                 "assert numpy.geterr()['divide'] == 'warn'\nprint(z)")
    with shared_kernel() as km:
        run = execute_notebook(first, tmp_path / "o1.ipynb", {"x": 2}, html=False, kernel=km)
        assert NO_LEDGER in run.error, run.error
        pid = int((a / "here.txt").read_text())
        run = execute_notebook(second, tmp_path / "o2.ipynb", {}, html=False, kernel=km)
        assert "NameError" in run.error, run.error                # the first notebook's z is gone
        assert int((b / "here.txt").read_text()) == pid         # the same kernel, in the second one's folder
        os.kill(pid, signal.SIGKILL)
        run = execute_notebook(first, tmp_path / "o4.ipynb", {}, html=False, kernel=km)
        assert NO_LEDGER in run.error, run.error
        new = int((a / "here.txt").read_text())
        assert new != pid
    try:                                                        # shut down on exit
        alive = open(f"/proc/{new}/stat").read().split()[2] != "Z"
    except FileNotFoundError:
        alive = False
    assert not alive
