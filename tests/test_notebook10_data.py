"""Notebook 10's data sources (issue 28): the reference panel, the loud synthetic fallback, a missing folder.

The default ``shared_data`` folder holds research data that a fresh clone does not have: the default run
must still work, and say loudly that its panel is synthetic. A ``shared_data`` the user named that does
not exist must stop the run with the places looked in (no silent switch to synthetic data).
"""
import json

import nbformat
import pytest

from conftest import REPO
from sampling_lib.reporting import execute_notebook, smoke_parameters

NB10 = REPO / "notebooks" / "10_estimator_accuracy_real_data.ipynb"
DEFAULT = '"../shared/data"'
SHARED = REPO.parent / "shared" / "data"


def _outputs_text(path):
    parts = []
    for c in json.loads(path.read_text())["cells"]:
        for o in c.get("outputs", []):
            t = o.get("text", "")
            parts.append(t if isinstance(t, str) else "".join(t))
            for v in o.get("data", {}).values():
                parts.append(v if isinstance(v, str) else "".join(v) if isinstance(v, list) else "")
    return "\n".join(parts)


def _smoke():
    params = smoke_parameters(NB10)
    params.pop("shared_data")          # the smoke run asks for synthetic data explicitly (None)
    return params


@pytest.mark.notebooks
def test_default_folder_absent_gives_a_loud_synthetic_panel(tmp_path, notebook_kernel):
    # the notebook as a fresh clone sees it: its default folder does not exist (the same notebook with the
    # default renamed everywhere it is written, i.e. the parameter and the notebook's test of "the default")
    nb = nbformat.read(str(NB10), as_version=4)
    assert sum(c.source.count(DEFAULT) for c in nb.cells) == 2, (
        "the default shared_data is written in the parameters cell and in the data cell's test of the default")
    for c in nb.cells:
        c.source = c.source.replace(DEFAULT, '"../no-shared-data-here/data"')
    src = tmp_path / NB10.name
    nbformat.write(nb, str(src))
    dst = tmp_path / "out.ipynb"
    run = execute_notebook(src, dst, _smoke(), html=False, kernel=notebook_kernel)
    failed = [c["claim_id"] for c in run.claims if not c["passed"]]
    assert run.ok, f"{run.error}; failed claims: {failed}"     # also notebook 10's quick smoke run
    assert run.claims, "no claims recorded"
    out = _outputs_text(dst)
    assert "NO REFERENCE DATA" in out and "SYNTHETIC" in out
    assert "no-shared-data-here" in out and "looked for" in out        # where it looked
    obs = [c for c in run.claims if c.get("kind") == "observation"]
    assert obs and all("SYNTHETIC" in c["description"] for c in obs), [c["description"] for c in obs]


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_named_shared_data_that_is_missing_stops_the_run(tmp_path):
    run = execute_notebook(NB10, tmp_path / "out.ipynb", dict(_smoke(), shared_data="../no-such-folder/data"),
                           html=False)
    assert not run.ok
    assert "shared_data" in run.error and "not found: looked for" in run.error and "no-such-folder" in run.error


@pytest.mark.slow
@pytest.mark.notebooks
def test_the_reference_panel_is_read_from_shared_data(tmp_path, monkeypatch):
    if not (SHARED / "ml-100k").is_dir():
        pytest.skip(f"the reference panel is not at {SHARED}")
    monkeypatch.setenv("MPLBACKEND", "agg")
    params = dict(_smoke(), shared_data="../shared/data", datasets=["ml-100k", "lastfm-2k (>=5 users/item)"],
                  aaai23_dataset="ml-100k", tail_datasets=["ml-100k"])
    dst = tmp_path / "out.ipynb"
    run = execute_notebook(NB10, dst, params, html=False)
    assert run.ok, run.error
    out = _outputs_text(dst)
    assert "reference panel" in out and "SYNTHETIC" not in out
    assert {"ml-100k", "lastfm-2k"} <= {c["claim_id"].split("[")[1].split("/")[0]
                                         for c in run.claims if c["claim_id"].startswith("N10-lodo-vs")}
