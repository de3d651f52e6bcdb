"""Working in JupyterLab cannot break ``make test`` for long (issue 27 item 6).

JupyterLab writes outputs, execution counts and its kernel's metadata into the
notebook it runs and saves; test_notebooks.py then fails and names ``make strip``.
These tests run that command (the Makefile's recipe, on a copy) and the git filter
that ``make setup`` installs (in a scratch repository), on a notebook made to look
like JupyterLab saved it after "Run All".
"""
import json
import shutil
import subprocess

import nbformat
import pytest

from conftest import REPO

NB = next((REPO / "notebooks").glob("07_*.ipynb"))
BIN = REPO / ".venv" / "bin"
needs_tools = pytest.mark.skipif(not (BIN / "nbstripout").exists() or shutil.which("make") is None
                                 or shutil.which("git") is None,
                                 reason="needs make, git and the venv's nbstripout (make setup)")


def as_jupyterlab_saves_it(src, dst):
    """The notebook after JupyterLab's Run All and save: outputs, counts, cell timing, full language_info."""
    d = json.loads(src.read_text())
    d["metadata"]["language_info"] = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                                      "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                                      "pygments_lexer": "ipython3", "version": "3.11.2"}
    count = 0
    for c in d["cells"]:
        if c["cell_type"] == "code":
            count += 1
            c["execution_count"] = count
            c["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["an output\n"]},
                            {"data": {"image/png": "iVBORw0KGgo="}, "metadata": {}, "output_type": "display_data"}]
            c["metadata"]["execution"] = {"iopub.execute_input": "2026-11-25T10:00:00.000Z"}
    dst.write_text(json.dumps(d, indent=1))
    assert nbformat.read(str(dst), 4).cells[1].outputs


def _make(*args, cwd=REPO):
    # -o: never rebuild the venv from here; VENV: this checkout's venv, also from a scratch folder
    return subprocess.run(["make", "--no-print-directory", "-f", str(REPO / "Makefile"), "-o",
                           f"{REPO}/.venv/.installed", f"VENV={REPO}/.venv", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@needs_tools
def test_make_strip_restores_the_committed_notebook(tmp_path):
    saved = tmp_path / NB.name
    as_jupyterlab_saves_it(NB, saved)
    p = _make("strip", f"NOTEBOOKS={saved}")
    assert p.returncode == 0, p.stderr
    assert saved.read_text() == NB.read_text()      # ids, tags, smoke parameters kept; outputs gone


@pytest.mark.slow          # a development tool's route (git's clean filter), 4 s: make test-slow
@needs_tools
def test_the_git_filter_stages_notebooks_stripped(tmp_path):
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(REPO / ".gitattributes", repo / ".gitattributes")
    p = _make("git-filter", cwd=repo)
    assert p.returncode == 0 and "git filter nbstripout installed" in p.stdout, p.stderr
    as_jupyterlab_saves_it(NB, repo / "notebooks" / NB.name)
    subprocess.run(["git", "add", "notebooks"], cwd=repo, check=True, capture_output=True)
    staged = subprocess.run(["git", "show", f":notebooks/{NB.name}"], cwd=repo, check=True, capture_output=True,
                            text=True).stdout
    assert staged == NB.read_text()
    assert '"outputs": []' in staged and "an output" not in staged


def test_the_test_message_names_the_command():
    text = (REPO / "tests" / "test_notebooks.py").read_text()
    assert "run `make strip`" in text
    assert "notebooks/*.ipynb filter=nbstripout" in (REPO / ".gitattributes").read_text()


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem[:2])
def test_committed_notebooks_are_what_the_filter_writes(path):
    """The git filter re-serializes every notebook it reads (nbformat: sorted keys, indent 1). A committed
    notebook written any other way would show as modified in every clone with the filter, untouched."""
    text = path.read_text()
    assert nbformat.writes(nbformat.reads(text, as_version=4)) + "\n" == text, (
        f"{path.name} is not in nbformat's layout: run `make strip` or rewrite it with nbformat.write")
