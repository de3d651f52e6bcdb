"""Data paths mean the same files whichever folder a notebook runs from (issue 27 item 9).

``sampling-lib run`` and JupyterLab run notebooks from ``notebooks/``; plain
``papermill notebooks/10_....ipynb out.ipynb`` from wherever it is started. Notebook
10's reference panel (``shared_data``) used to be "../../shared/data" relative to
``notebooks/``: from the repository root it was not found and the notebook quietly
switched to synthetic data. Relative paths now go through
:func:`sampling_lib.data.resolve_path` (the project root and the working folder,
exactly one must answer), and a missing panel stops the notebook.
"""
import pytest

from conftest import REPO
from sampling_lib.data import load_ratings, project_root, resolve_path
from sampling_lib.reporting import execute_notebook, smoke_parameters

NB10 = next((REPO / "notebooks").glob("10_*.ipynb"))
SHARED = REPO.parent / "shared" / "data"


def test_project_root_is_the_checkout():
    assert project_root() == REPO


@pytest.mark.parametrize("where", ["root", "notebooks", "elsewhere"])
def test_a_relative_path_names_the_same_file_from_every_folder(where, monkeypatch, tmp_path):
    monkeypatch.chdir({"root": REPO, "notebooks": REPO / "notebooks", "elsewhere": tmp_path}[where])
    assert resolve_path("notebooks/discrepancies.csv") == REPO / "notebooks" / "discrepancies.csv"


def test_missing_and_ambiguous_paths_stop_with_the_places_looked_in(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as exc:
        resolve_path("no/such.csv", what="data_path")
    msg = str(exc.value)
    assert msg.startswith("data_path 'no/such.csv' not found") and str(REPO / "no" / "such.csv") in msg
    assert str(tmp_path / "no" / "such.csv") in msg
    with pytest.raises(FileNotFoundError, match="shared_data not found: /no/such/folder"):
        resolve_path("/no/such/folder", what="shared_data")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "discrepancies.csv").write_text("another file\n")
    with pytest.raises(ValueError, match="ambiguous: both .* and .* exist; give an absolute path"):
        resolve_path("notebooks/discrepancies.csv")


def _default(name):
    """A parameter's default, from the parameters cell of notebook 10."""
    import nbformat

    cell = next(c for c in nbformat.read(str(NB10), 4).cells if c.cell_type == "code")
    scope = {}
    exec(cell.source, scope)                    # the parameters cell only assigns literals
    return scope[name]


@pytest.mark.skipif(not (SHARED / "ml-100k" / "u.data").exists(), reason=f"no reference data in {SHARED}")
def test_notebook_10s_panel_is_found_from_the_root_and_from_notebooks(monkeypatch):
    found = set()
    for cwd in (REPO, REPO / "notebooks"):
        monkeypatch.chdir(cwd)
        found.add(resolve_path(_default("shared_data"), what="shared_data"))
        assert load_ratings("../shared/data/ml-100k/u.data").n_users == 943
    assert found == {SHARED.resolve()}


def test_smoke_run_asks_for_synthetic_data_explicitly():
    assert smoke_parameters(NB10)["shared_data"] is None


@pytest.mark.slow
@pytest.mark.notebooks
def test_notebook_10_stops_when_the_panel_is_missing(tmp_path):
    params = dict(smoke_parameters(NB10), shared_data="no/such/panel")
    run = execute_notebook(NB10, tmp_path / NB10.name, params, cwd=REPO, html=False)
    assert not run.ok
    assert "shared_data 'no/such/panel' not found" in run.error, run.error[-2000:]
