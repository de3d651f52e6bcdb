"""The environment a report is produced in: project root, git commit, BLAS, packages, lock."""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import subprocess
from pathlib import Path

__all__ = [
    "REPO_ROOT", "LOCK_FILE", "KEY_PACKAGES", "SOURCES", "BLAS_THREAD_VARS", "project_root", "environment_info",
    "commit_label", "environment_summary", "lock_pins", "normalize_name", "limit_blas_threads",
]


REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = "requirements-lock.txt"

# the packages whose versions the index and claims.csv record
KEY_PACKAGES = (
    "sampling-lab", "numpy", "scipy", "pandas", "cvxpy", "clarabel", "scs", "statsmodels", "matplotlib",
    "seaborn", "joblib", "dask", "distributed", "papermill", "nbclient", "nbconvert", "ipykernel",
)


def project_root():
    """The checkout holding ``notebooks/`` (the package's parent), else the working directory."""
    return REPO_ROOT if (REPO_ROOT / "notebooks").is_dir() else Path.cwd()


def _git(root, *args):
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                              timeout=20).stdout
    except Exception:
        return None


#: What the results are made of: a change elsewhere (README, tests, reports/ itself) does not make a
#: report "dirty", nor does a commit that touches nothing else make it "behind".
SOURCES = ("sampling_lib", "notebooks", "pyproject.toml", "requirements-lock.txt")


def _git_state(root):
    """The code's commit, HEAD, and the uncommitted changes to :data:`SOURCES`.

    Returns ``(commit, head, changed)``: ``commit`` is the last commit that
    changed the sources (the commit whose checkout gives the code that ran;
    "unknown" outside a git checkout), ``head`` the checked-out commit, and
    ``changed`` the source files that differ from it (modified, added or
    untracked), or None when git cannot tell.
    """
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return "unknown", "unknown", None
    commit = _git(root, "log", "-1", "--format=%H", "HEAD", "--", *SOURCES)
    # the notebooks' clean filter (nbstripout, `make setup`) is one Python process per notebook, and git
    # runs it for every notebook whose index entry it cannot trust by its stat data (all of them in a
    # fresh clone, whose files are as new as its index, and --no-optional-locks keeps the index
    # unrefreshed): 13 s per report. So the status compares the raw files, and only the notebooks it
    # finds changed are compared again through their filter (outputs JupyterLab saved are no change)
    status = _git(root, "-c", f"filter.{NOTEBOOK_FILTER}.clean=cat", "--no-optional-locks", "status", "--porcelain",
                  "--untracked-files=all", "--", *SOURCES)
    if status is None:
        return (commit or head).strip(), head.strip(), None
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    changed = [f for f in changed if not (f.endswith(".ipynb") and _same_as_head(root, f))]
    return (commit or head).strip(), head.strip(), changed


#: The git filter that strips the notebooks (.gitattributes; installed by `make setup`).
NOTEBOOK_FILTER = "nbstripout"


def _same_as_head(root, path):
    """Whether the file at ``path``, through the filters git applies to it, is the blob committed at HEAD."""
    blob = _git(root, "hash-object", "--path", path, "--", path)
    committed = _git(root, "rev-parse", "--verify", "-q", f"HEAD:{path}")
    return blob is not None and committed is not None and blob.strip() == committed.strip()


def _blas():
    parts = []
    for mod in ("numpy", "scipy"):
        try:
            m = __import__(mod)
            cfg = m.show_config(mode="dicts")["Build Dependencies"]["blas"]
            parts.append(f"{mod}: {cfg.get('name', '?')} {cfg.get('version', '')}".strip())
        except Exception:
            parts.append(f"{mod}: unknown")
    return "; ".join(parts)


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def lock_pins(path):
    """``{name: version}`` pinned in a ``name==version`` lock file (markers ignored)."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            pins[normalize_name(m.group(1))] = m.group(2)
    return pins


def normalize_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=1)
def _installed_versions():
    """{normalized name: version} of every installed distribution. Read once per process: parsing the
    metadata of every package took 0.5 s of each report run (the test suite runs the runner in-process
    dozens of times)."""
    from importlib import metadata

    return {normalize_name(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def environment_info(root=None):
    """The environment a report is produced in, as a JSON-friendly dict.

    Python, platform, CPU model and count (and the CPUs this process may use),
    the BLAS that numpy and scipy were built with, the BLAS thread variables,
    the versions of the key packages, the code's git commit (``commit``: the
    last commit that changed :data:`SOURCES`; ``head``: the checked-out
    commit; ``dirty``: whether the sources had uncommitted changes, listed in
    ``changed_sources``), and whether the installed packages match
    ``requirements-lock.txt``.
    """
    from importlib import metadata

    root = Path(root or project_root())
    pkgs = {}
    for name in KEY_PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = "not installed"
    commit, head, changed = _git_state(root)
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        affinity = os.cpu_count()
    lock = {"file": LOCK_FILE, "sha256": None, "matches": None, "differs": []}
    lock_path = root / LOCK_FILE
    if lock_path.exists():
        lock["sha256"] = hashlib.sha256(lock_path.read_bytes()).hexdigest()[:16]
        installed = _installed_versions()
        differs = [f"{n} {installed[n]} (lock {v})" for n, v in sorted(lock_pins(lock_path).items())
                   if n in installed and installed[n] != v]
        lock["matches"], lock["differs"] = not differs, differs
    return {
        "commit": commit,
        "head": head,
        "sources": list(SOURCES),
        "dirty": None if changed is None else bool(changed),
        "changed_sources": (changed or [])[:20],
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "blas": _blas(),
        "blas_threads": {v: os.environ.get(v, "") for v in BLAS_THREAD_VARS},
        "packages": pkgs,
        "lock": lock,
    }


def commit_label(env):
    """The code's commit, short, with "(uncommitted changes)" when the sources differed from it."""
    c = env.get("commit") or "unknown"
    short = c[:12] if c != "unknown" else c
    return short + (" (uncommitted changes)" if env.get("dirty") else "")


def environment_summary(env):
    """One line for the ``environment`` column of claims.csv."""
    pk = env["packages"]
    lock = env["lock"]
    lock_s = ("lock: matches" if lock["matches"] else
              "lock: differs" if lock["matches"] is False else "lock: none")
    return "; ".join(
        [f"python {env['python']}"]
        + [f"{k} {v}" for k, v in pk.items()]
        + [f"BLAS {env['blas']}", f"{env['cpu_count']} CPUs ({env['cpus_usable']} usable)", env["platform"], lock_s]
    )


# --------------------------------------------------------------------------- safety of the output folder

BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads(n=1):
    """Default the BLAS thread count of kernels started from here to ``n``.

    Notebooks run side by side on a small machine (``--jobs``); a multi-threaded
    OpenBLAS in each of them oversubscribes the cores and was measured 10-100x
    slower on the project's 2-core machine (see benchmarks/README.md). Variables
    the user has set are left alone.
    """
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, str(n))

