"""environment.yml (conda route) and pyproject.toml (pip route) list the same packages."""
import re
import tomllib

from conftest import REPO

# names that differ between PyPI and conda-forge (none today; add pairs here)
CONDA_NAME = {}


def _pip_names():
    """The core and every extra (the conda route installs the whole lab, as ``make`` does from the lock)."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = meta["dependencies"] + [d for extra in meta["optional-dependencies"].values() for d in extra]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in deps}
    return {CONDA_NAME.get(n, n) for n in names - {meta["name"]}}   # "sampling-lab[plot]": an extra of itself


def _conda_names():
    names = set()
    text = (REPO / "environment.yml").read_text().split("dependencies:", 1)[1]
    for line in text.splitlines():
        m = re.match(r"^\s+- ([A-Za-z0-9][A-Za-z0-9_.\-]*)", line)   # conda entries and the pip: list
        if m:
            names.add(m.group(1).lower())
    return names - {"python", "pip"}


def test_environment_yml_matches_pyproject():
    pip, conda = _pip_names(), _conda_names()
    assert pip == conda, f"only in pyproject: {sorted(pip - conda)}; only in environment.yml: {sorted(conda - pip)}"


def test_no_commercial_solver():
    text = (REPO / "pyproject.toml").read_text().lower() + (REPO / "environment.yml").read_text().lower()
    for name in ("mosek", "gurobi", "cplex", "xpress"):
        assert name not in text


def test_ci_runs_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    assert "make test" in ci
    assert "make test" in readme and "make reports" in readme
