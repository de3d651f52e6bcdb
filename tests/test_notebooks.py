"""Notebook conventions, and every notebook executed with its smoke parameters.

The execution goes through the same runner as ``make reports``
(:func:`sampling_lib.reporting.execute_notebook`), so a broken notebook or a
failed claim fails CI.
"""
import nbformat
import pytest

from conftest import REPO
from sampling_lib.reporting import execute_notebook, list_notebooks, smoke_parameters

NOTEBOOKS = list_notebooks(REPO / "notebooks")
IDS = [p.stem for p in NOTEBOOKS]
SAME_SEED = next(p for p in NOTEBOOKS if p.name.startswith("01_"))   # a Monte Carlo notebook
# smoke runs of this test process, by notebook: the same-seed test reuses SAME_SEED's run as its first run when
# both ran in the same xdist worker, and runs the notebook twice otherwise
_SMOKE_RUNS = {}


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name.startswith("01_")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_conventions(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "no code cells"
    assert "parameters" in code[0].metadata.get("tags", []), "first code cell must be tagged 'parameters'"
    for c in code:
        assert c.get("outputs", []) == [] and c.get("execution_count") is None, (
            f"{path.name} has outputs or execution counts (JupyterLab writes them when it runs and saves a "
            "notebook): run `make strip` (nbstripout) before testing or committing")
    smoke = smoke_parameters(path)
    params_src = code[0].source
    for name in smoke:
        assert f"{name} =" in params_src or f"{name}=" in params_src, f"smoke parameter {name!r} not in the parameters cell"
    assert any("ClaimLedger(" in c.source for c in code), "notebook must record claims through ClaimLedger"
    assert "finalize()" in code[-1].source, "last code cell must call ledger.finalize()"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert any(c.cell_type == "markdown" for c in nb.cells)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_papermill_sees_every_parameter(path):
    """``papermill --help-notebook`` / ``inspect_notebook`` lists every name the parameters cell assigns
    (papermill skips a line with two '=', e.g. a comment saying '|z| <= 4')."""
    import re

    import papermill as pm

    src = "".join(next(c for c in nbformat.read(str(path), 4).cells if c.cell_type == "code").source)
    names = {m.group(1) for m in re.finditer(r"^(\w+)\s*=", src, re.M)}
    seen = set(pm.inspect_notebook(str(path)))
    assert names <= seen, names - seen


#: notebooks whose smoke run draws its figures inline (PNG) in a fresh kernel, as `make reports` does for all;
#: the others share a kernel with matplotlib's Agg backend (conftest.notebook_kernel): they build every figure
#: and skip the rasterization (a quarter of a notebook's time) and the kernel's start and imports (about 4 s)
INLINE_FIGURES = ("01",)


#: notebooks whose quick smoke run is another test's: notebook 10's is tests/test_notebook10_data.py's run with
#: its default data folder absent (the same smoke parameters and the same synthetic panel, plus the check
#: that it says so); here it runs in make test-slow only
SMOKE_ELSEWHERE = ("10",)


@pytest.mark.notebooks
@pytest.mark.parametrize("path", [p if p.name[:2] not in SMOKE_ELSEWHERE else pytest.param(p, marks=pytest.mark.slow)
                                  for p in NOTEBOOKS], ids=IDS)
def test_notebook_runs_with_smoke_parameters(path, tmp_path, request):
    # the Agg notebooks share one kernel per test process (conftest.notebook_kernel); the inline ones get a
    # fresh kernel each, as every notebook does in make reports
    kernel = None if path.name[:2] in INLINE_FIGURES else request.getfixturevalue("notebook_kernel")
    run = execute_notebook(path, tmp_path / path.name, smoke_parameters(path), html=False, kernel=kernel)
    _SMOKE_RUNS[path] = run
    failed = [c["claim_id"] for c in run.claims if not c["passed"]]
    assert run.ok, f"{path.name}: {run.error}; failed claims: {failed}"
    assert run.claims, "no claims recorded"


@pytest.mark.notebooks
def test_same_seed_gives_the_same_claims(tmp_path, notebook_kernel):
    # "the same seed gives the same report": two runs of a Monte Carlo notebook record identical claims (the
    # second in the shared kernel, after other notebooks: nothing a notebook leaves behind changes them)
    path, params = SAME_SEED, smoke_parameters(SAME_SEED)
    first = _SMOKE_RUNS.get(SAME_SEED) or execute_notebook(path, tmp_path / "run0.ipynb", params, html=False)
    runs = [first, execute_notebook(path, tmp_path / "run1.ipynb", params, html=False, kernel=notebook_kernel)]
    assert all(r.ok for r in runs)
    assert [(c["claim_id"], c["measured"]) for c in runs[0].claims] == [(c["claim_id"], c["measured"]) for c in runs[1].claims]
