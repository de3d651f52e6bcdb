"""requirements-lock.txt: the exact environment of the reports (issue 19).

Fast checks run always: every package that pyproject.toml asks for is pinned,
within its range, with hashes, and ``make`` installs from the lock. The
``latest`` test runs on demand only (``make test-latest``, or
``SAMPLING_LAB_TEST_LATEST=1 pytest -m latest tests/test_lock.py``): it builds
a fresh venv with the newest versions the ranges allow and runs the whole
suite there, so the looser ranges keep working for library users.
"""
import os
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import REPO
from sampling_lib.reporting.environment import lock_pins as _lock_pins, normalize_name as _norm

LOCK = REPO / "requirements-lock.txt"


def _requirements():
    """The core and every extra's requirements (the lock holds them all: ``make`` installs the whole lab)."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in meta["dependencies"]]
    reqs += [Requirement(r) for extra in meta["optional-dependencies"].values() for r in extra]
    return [r for r in reqs if r.name != meta["name"]]      # "sampling-lab[plot,cvxpy]": its own extras


def test_lock_pins_every_requirement_within_its_range():
    pins = _lock_pins(LOCK)
    for req in _requirements():
        name = _norm(req.name)
        assert name in pins, f"{req.name} is not pinned in requirements-lock.txt (run `make lock`)"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), \
            f"{req.name}=={pins[name]} in the lock is outside pyproject's range {req.specifier}"


def test_every_pin_is_exact_and_hashed():
    text = LOCK.read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])   # after the two header lines
    pinned = [e for e in entries if re.match(r"^[A-Za-z0-9][\w.-]*==", e)]
    assert len(pinned) == len(_lock_pins(LOCK)) > 50
    for e in pinned:
        assert "--hash=sha256:" in e, f"no hash for {e.splitlines()[0]}"
    # one version per package (no per-Python forks): the reports come from one set of versions
    names = [_norm(e.split("==", 1)[0]) for e in pinned]
    assert len(names) == len(set(names))


def test_make_installs_from_the_lock():
    make = (REPO / "Makefile").read_text()
    setup = make.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert "$(LOCK)" in setup.splitlines()[0], "the venv must be rebuilt when the lock changes"
    assert "--require-hashes -r $(LOCK)" in setup and "--no-deps -e ." in setup
    assert re.search(r"^LOCK\s*:=\s*requirements-lock\.txt$", make, re.M)


@pytest.mark.latest
@pytest.mark.skipif(os.environ.get("SAMPLING_LAB_TEST_LATEST") != "1",
                    reason="on demand: make test-latest (SAMPLING_LAB_TEST_LATEST=1)")
def test_suite_passes_with_the_newest_allowed_versions(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--quiet", "--upgrade"]
    subprocess.run(pip + ["pip"], check=True)
    subprocess.run(pip + ["--upgrade-strategy", "eager", "-e", f"{REPO}[all,test,dev]"], check=True, timeout=1800)
    freeze = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    newest = {_norm(k): v for k, v in re.findall(r"^([A-Za-z0-9][\w.-]*)==(\S+)$", freeze, re.M)}
    pins = _lock_pins(LOCK)
    newer = sorted(f"{n} {v} (lock {pins[n]})" for n, v in newest.items() if n in pins and pins[n] != v)
    print("newer than the lock:", ", ".join(newer) or "none")
    env = dict(os.environ, SAMPLING_LAB_TEST_LATEST="0", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not latest"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
