"""The light install (issue 27 item 7): the core runs estimate/compare/the CLI; each extra's feature
names its extra when the extra is missing.

A fresh interpreter plays the light install: every package of an extra is made
unimportable (``sys.modules[name] = None``), then every module of sampling_lib
is imported, ``sampling-lib estimate`` runs, and each optional feature fails with
one line naming its extra. ``.ci/run`` does the real thing: the wheel with its
core dependencies only, in a clean venv.
"""
import json
import os
import re
import subprocess
import sys
import tomllib

import pandas as pd
import pytest

from conftest import REPO
from sampling_lib._extras import EXTRA_OF

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CORE = {"numpy", "scipy", "pandas", "tqdm", "threadpoolctl"}
NOT_CORE = sorted(set(EXTRA_OF) | {"clarabel", "scs", "seaborn", "statsmodels", "jupyterlab", "nbclient"})


def _name(req):
    return re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower()


def _extra_packages(extra, seen=()):
    """Package names an extra installs, following ``sampling-lab[...]`` self-references."""
    out = set()
    for req in PYPROJECT["optional-dependencies"][extra]:
        if _name(req) == PYPROJECT["name"]:
            for sub in re.search(r"\[(.*)\]", req).group(1).split(","):
                if sub not in seen:
                    out |= _extra_packages(sub.strip(), (*seen, extra))
        else:
            out.add(_name(req))
    return out


def test_the_core_is_light():
    assert {_name(r) for r in PYPROJECT["dependencies"]} == CORE
    assert _extra_packages("all") >= set(EXTRA_OF) - {"ipykernel"} | {"jupyterlab", "ipykernel"}


@pytest.mark.parametrize("module, extra", sorted(EXTRA_OF.items()))
def test_each_named_extra_installs_the_package(module, extra):
    assert module in _extra_packages(extra), f"pyproject's [{extra}] does not install {module}"


LIGHT = r"""
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None                      # as if not installed
import importlib, io, contextlib
import sampling_lib
from sampling_lib.cli import main
result = {"imported": []}
for name in sampling_lib.SUBMODULES:
    importlib.import_module(f"sampling_lib.{name}")
    result["imported"].append(name)

def run(*args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()

folder = sys.argv[2]
result["estimate"] = run("estimate", folder + "/ranks.csv", "-N", "200", "-n", "20", "--n-boot", "20")
result["compare"] = run("compare", folder + "/ranks.csv", "-N", "200", "-n", "20", "--n-boot", "20")
result["plot"] = run("estimate", folder + "/ranks.csv", "-N", "200", "-n", "20", "--n-boot", "5",
                     "--plot", folder + "/x.png")
result["parquet"] = run("estimate", folder + "/counts.parquet", "-N", "200")
result["run"] = run("run", "--smoke")
from sampling_lib import estimators
try:
    estimators.mes([1, 2, 3, 4], 50, 10, solver="cvxpy")
except ImportError as exc:
    result["cvxpy"] = str(exc)
print(json.dumps(result))
"""


def test_light_install_runs_the_cli_and_names_the_missing_extras(tmp_path):
    ranks = pd.DataFrame({"user": list(range(60)) * 2, "model": ["a"] * 60 + ["b"] * 60,
                          "rank": [1 + u % 20 for u in range(60)] + [1 + (3 * u) % 20 for u in range(60)]})
    ranks.to_csv(tmp_path / "ranks.csv", index=False)
    pytest.importorskip("pyarrow")
    ranks.groupby(["model", "rank"]).size().rename("count").reset_index().assign(sample_size=20).to_parquet(
        tmp_path / "counts.parquet")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", LIGHT, json.dumps(NOT_CORE), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(got["imported"]) >= 20                       # every module imports without the extras
    for command in ("estimate", "compare"):
        rc, out, err = got[command]
        assert rc == 0 and "method logspline" in out, (command, err)
    for feature, extra in (("plot", "plot"), ("parquet", "dask"), ("run", "notebooks")):
        rc, out, err = got[feature]
        assert rc == 1 and len(err.splitlines()) == 1, (feature, err)
        assert err.startswith("sampling-lib: error: ") and f"pip install 'sampling-lab[{extra}]'" in err, err
    assert "pip install 'sampling-lab[cvxpy]'" in got["cvxpy"]
    assert not (tmp_path / "x.png").exists()


def test_ci_runs_the_light_wheel_in_a_clean_venv():
    """.ci/run installs the wheel with its core dependencies only and runs sampling-lib estimate with it."""
    ci = (REPO / ".ci" / "run").read_text()
    light = ci.split("== light install", 1)[1].split("== make test", 1)[0]
    for step in ('-m venv "$tmp/light"', '-c "$tmp/constraints.txt"', "sampling_lab-*.whl",
                 '"$tmp/light/bin/sampling-lib" estimate', "jupyterlab papermill cvxpy dask matplotlib",
                 "pip install 'sampling-lab\\[plot\\]'"):
        assert step in light, step
    assert "--require-hashes" not in light and "--no-deps" not in light      # the core's own dependencies
