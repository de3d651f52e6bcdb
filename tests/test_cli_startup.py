"""``sampling-lib --version`` and ``--help`` start fast: the command line imports only what a command uses.

Before, every call imported pandas, scipy and every estimator (about 3 s on the 2-core machine) before
argparse looked at ``--version``. The names the parser shows (estimators, stage formats) are written out in
``sampling_lib.cli._names``; they must equal the library's. ``run --help`` prints without the extra
[notebooks] (it said "needs papermill").
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

HEAVY = ("pandas", "scipy", "sampling_lib.estimators", "sampling_lib.io", "sampling_lib.correct")

PROBE = r"""
import contextlib, io, json, sys
from sampling_lib.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "heavy": sorted(m for m in %r if m in sys.modules), "out": out.getvalue()}))
""" % (HEAVY,)


def _probe(*argv, prelude=""):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", prelude + PROBE, *argv], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["estimate", "--help"], ["compare", "--help"],
                                  ["negatives", "--help"], ["plan", "--help"], ["plan-users", "--help"],
                                  ["ranks", "--help"]])
def test_version_and_help_import_no_pandas_nor_estimators(argv):
    got = _probe(*argv)
    assert got["rc"] == 0 and got["heavy"] == [], got["heavy"]
    assert got["out"].startswith("sampling-lib 0.") if argv == ["--version"] else "usage:" in got["out"]


def test_the_parsers_names_are_the_librarys():
    from sampling_lib import estimators, io
    from sampling_lib.cli import _names

    assert _names.METHODS == estimators.METHODS
    assert _names.POPULARITY_METHODS == estimators.POPULARITY_METHODS
    assert _names.DEFAULT_METHOD == estimators.DEFAULT_METHOD
    assert _names.STAGE_FORMATS == io.STAGE_FORMATS


def test_run_help_prints_without_the_notebooks_extra():
    # papermill & co. made unimportable, as in an environment with the core install only
    hide = ("import sys\nfor m in ('papermill', 'nbformat', 'nbconvert', 'nbclient', 'psutil', 'ipykernel', "
            "'jupyter_client'):\n    sys.modules[m] = None\n")
    got = _probe("run", "--help", prelude=hide)
    assert got["rc"] == 0 and "--out" in got["out"] and "--smoke" in got["out"], got
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = hide + "from sampling_lib.__main__ import main\nsys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "run", "--help"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "--smoke" in p.stdout, p.stderr
    # a run itself still needs the extra, and says so in one line
    p = subprocess.run([sys.executable, "-c", code, "run", "--smoke"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "pip install 'sampling-lab[notebooks]'" in p.stderr
