"""The report runner: replace reports/ only on success, keep it intact on failure."""
import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib.reporting import ClaimLedger, ClaimsFailed, run_notebooks


def _nb(path, passes):
    cells = [
        new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        new_code_cell(
            "from sampling_lib.reporting import ClaimLedger\n"
            f"ledger = ClaimLedger({path.stem!r})\n"
            "ledger.check_close('c1', 'KDD20 eq 4', 'one equals one', measured=x, expected=1, atol=0)\n"
            f"ledger.check_true('c2', 'sampling-lab', 'decided', passed={passes})\n"
            "ledger.finalize()"
        ),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["sampling_lab"] = {"smoke_parameters": {"x": 1}}
    nbformat.write(nb, str(path))


@pytest.mark.notebooks
def test_runner_replaces_reports_only_on_success(tmp_path):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    out = tmp_path / "reports"
    out.mkdir()
    (out / "sentinel.txt").write_text("previous good report")
    _nb(nbdir / "01_good.ipynb", True)
    _nb(nbdir / "02_bad.ipynb", False)
    logs = []
    runs = run_notebooks(out, notebooks_dir=nbdir, failed_dir=tmp_path / "failed", log=logs.append)
    assert [r.ok for r in runs] == [True, False]
    assert (out / "sentinel.txt").read_text() == "previous good report"   # untouched
    assert any("02_bad" in m and "c2" in m for m in logs)                  # names notebook and claim
    assert (tmp_path / "failed" / "02_bad.ipynb").exists()

    _nb(nbdir / "02_bad.ipynb", True)
    runs = run_notebooks(out, notebooks_dir=nbdir, failed_dir=tmp_path / "failed", log=logs.append)
    assert all(r.ok for r in runs)
    assert not (out / "sentinel.txt").exists()
    claims = pd.read_csv(out / "claims.csv")
    assert len(claims) == 4 and claims.passed.all()
    assert set(claims.paper) == {"KDD20", "sampling-lab"}
    html = (out / "index.html").read_text()
    assert "01_good.html" in html and (out / "01_good.html").exists()

    # --only merges: the other notebook's report and claims are kept
    runs = run_notebooks(out, notebooks_dir=nbdir, only="02", log=logs.append)
    claims = pd.read_csv(out / "claims.csv")
    assert sorted(claims.notebook.unique()) == ["01_good", "02_bad"] and (out / "01_good.html").exists()


def test_ledger_records_everything_then_raises():
    led = ClaimLedger("x")
    assert not led.check_close("a", "KDD20 eq 4", "d", measured=[1.0, 2.0], expected=[1.0, 2.5], atol=0.1)
    assert led.check_z("b", "TORS24 eq 42", "d", estimate=[0.5, 0.52], expected=0.5, se=0.01)
    assert not led.check_le("c", "AP25 Thm 4.2", "d", measured=2.0, bound=1.0)
    assert led.check_ge("d", "AAAI21 eq 21", "d", measured=2.0, bound=1.0)
    with pytest.raises(ValueError, match="unique"):
        led.check_true("a", "KDD20 x", "dup", passed=True)
    with pytest.raises(ValueError, match="source must start with"):
        led.check_true("e", "Somebody 1999", "d", passed=True)
    with pytest.raises(ClaimsFailed, match="2 of 4 claims failed: a, c"):
        led.finalize()
    assert list(led.table().passed) == [False, True, False, True]


def test_ledger_z_check_handles_zero_se():
    led = ClaimLedger("x")
    assert led.check_z("a", "KDD20 eq 4", "d", estimate=[1.0, 0.5], expected=[1.0, 0.5], se=[0.0, 0.1])
    assert not led.check_z("b", "KDD20 eq 4", "d", estimate=[1.0], expected=[0.9], se=[0.0])
