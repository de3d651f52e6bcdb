"""Claims ledger and the notebook-to-report pipeline.

Inside a notebook, every verified statement goes through one :class:`ClaimLedger`:

>>> ledger = ClaimLedger("00_example")
>>> ledger.check_close("ex-1", "KDD20 eq 4", "a closed form equals a sum",
...                    measured=0.1 + 0.2, expected=0.3, rtol=1e-12)
[pass] ex-1 (KDD20 eq 4): measured 0.3, expected 0.3, rtol=1e-12, atol=0
>>> ok = ledger.check_z("ex-2", "KDD20 eq 4", "Monte Carlo mean vs exact",
...                     estimate=0.503, expected=0.5, se=0.002, z_max=4)
>>> bool(ok)
True
>>> ledger.check_le("ex-3", "TORS24 Table 4", "relative error on this dataset below 15%",
...                 measured=0.173, bound=0.15, observation=True)
[observation: does not hold] ex-3 (TORS24 Table 4): measured 0.173, expected 0.15, <= bound + 0
>>> ledger.table()[["kind", "claim_id", "passed"]]
          kind claim_id  passed
0        claim     ex-1    True
1        claim     ex-2    True
2  observation     ex-3   False

Two kinds of record (DESIGN.md, "Notebooks"):

* a **claim** must hold for any data (mathematics, exactness, Monte Carlo
  against a formula); a failed claim fails the notebook and the run;
* an **observation** is a statement about one dataset (which estimator wins,
  an error level, a paper's empirical table). Its verdict is recorded and
  shown apart in the index, and it never fails the run, so a notebook runs to
  the end on any data a user points it at. Every ``check_*`` method takes
  ``observation=True``; :meth:`ClaimLedger.observe` records one decided by the
  caller.

``ledger.finalize()`` (the notebook's last cell) displays the table and
publishes the records as a JSON bundle (MIME type :data:`CLAIMS_MIME`) in the
cell output, then raises :class:`ClaimsFailed` if any claim failed, so that
papermill marks the run failed *after* everything was recorded. The runner
reads the records back from the executed notebook: no side files, no
environment variables, safe for parallel runs, and the claims travel with the
report. Each record carries the execution count of the cell that checked it;
the runner turns it into the cell id, and the index links to that cell's
anchor (``NN_name.html#cell-id=<id>``) in the rendered notebook.

The runner (``python -m sampling_lib run``, used by ``make reports`` and by the
tests) executes ``notebooks/NN_*.ipynb`` with papermill into a fresh temporary
folder beside the output folder, renders HTML with nbconvert, writes
``claims.csv``, ``environment.json`` and ``index.html``, and only when every
notebook succeeded replaces the output folder; otherwise it exits non-zero
naming the failed notebooks and claims, keeps the previous reports intact and
leaves the failed run in ``.reports-failed/`` for inspection.

Safety of the output folder:

* **lock**: a runner holds an exclusive ``flock`` on ``.<out>.lock`` beside
  the output folder for the whole run; a second runner into the same folder
  stops at once with :class:`ReportsLocked`;
* **swap**: the new folder replaces the old one with one atomic
  ``renameat2(RENAME_EXCHANGE)`` (Linux), so a reader always sees a complete
  folder, old or new, and never a missing one. Where the exchange is not
  supported (other systems or file systems) it falls back to two renames
  through a backup folder with a unique name (``mkdtemp``) that it created
  itself, leaving a window of two system calls. A user's own ``<out>.old``
  (or any other folder) is never touched;
* **permissions**: the report folder gets the usual ``0777 & ~umask`` mode,
  not ``mkdtemp``'s 0700;
* **signals**: on SIGTERM or SIGINT (Ctrl-C) the runner freezes its pool
  workers, stops them and every kernel they started, then removes the
  temporary folder, and exits with status 128 + signal number without a
  traceback; the previous reports stay in place.

``python -m sampling_lib run --claim ID`` re-executes only the notebook that
holds claim ``ID`` (looked up in ``reports/claims.csv``) with its default
parameters (or ``--smoke``), prints the claim's fresh row next to the
recorded one, and exits non-zero when the claim fails. It does not modify the
report folder.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import difflib
import functools
import hashlib
import html
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "CLAIMS_MIME",
    "PAPERS",
    "KINDS",
    "Claim",
    "ClaimLedger",
    "CheckOutcome",
    "ClaimsFailed",
    "NotebookRun",
    "ReportsLocked",
    "RunInterrupted",
    "list_notebooks",
    "smoke_parameters",
    "execute_notebook",
    "claims_from_notebook",
    "run_notebooks",
    "run_claim",
    "environment_info",
    "read_discrepancies",
    "limit_blas_threads",
    "add_run_arguments",
    "run_command",
    "main",
]

CLAIMS_MIME = "application/vnd.sampling-lab.claims+json"

PAPERS = {
    "KDD20": "Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020",
    "AAAI21": "Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling. AAAI 2021",
    "TORS24": "Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024",
    "AP25": "Manzhos, Ianevych, Melnyk. Average Precision at Cutoff k under Random Rankings: Expectation and Variance. 2025",
    "KR20": "Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020",
    "sampling-lab": "sampling-lab's own results (not stated in the papers)",
}

#: The two kinds of ledger record: a claim fails the run, an observation never does.
KINDS = ("claim", "observation")

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCK_FILE = "requirements-lock.txt"

# the packages whose versions the index and claims.csv record
KEY_PACKAGES = (
    "sampling-lab", "numpy", "scipy", "pandas", "cvxpy", "clarabel", "scs", "statsmodels", "matplotlib",
    "seaborn", "joblib", "dask", "distributed", "papermill", "nbclient", "nbconvert", "ipykernel",
)


def _project_root():
    """The checkout holding ``notebooks/`` (the package's parent), else the working directory."""
    return REPO_ROOT if (REPO_ROOT / "notebooks").is_dir() else Path.cwd()


class ClaimsFailed(AssertionError):
    """Raised by :meth:`ClaimLedger.finalize` when at least one claim failed."""


class ReportsLocked(RuntimeError):
    """Another runner is writing into the same report folder."""


def _jsonable(x):
    """Summarise a measured/expected value as a JSON-friendly scalar or short string."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, str):
        return x
    a = np.asarray(x)
    if a.size == 1:
        return _jsonable(a.reshape(()).item())
    return f"array{a.shape}"


def _execution_count():
    """Execution count of the notebook cell running now (None outside IPython)."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is None:
            return None
        # the result being filled holds the count of the running cell (shell.execution_count may
        # already point at the next one: IPython 9 increments it before running the cell)
        result = getattr(getattr(ip, "displayhook", None), "exec_result", None)
        count = getattr(result, "execution_count", None)
        return int(count if count is not None else ip.execution_count)
    except Exception:  # pragma: no cover - IPython missing or exotic shell
        return None


@dataclass(frozen=True)
class Claim:
    """One ledger record: what was compared, the measured value and the verdict.

    ``kind`` is ``"claim"`` (must hold for any data; fails the run) or
    ``"observation"`` (about one dataset; shown, never fails). ``scale`` is
    the tolerance on the scale of the values (e.g. ``atol + rtol |expected|``)
    when the comparison is scalar; the index uses it to show the digits that
    matter. ``cell`` is the execution count of the cell that recorded it.
    """

    claim_id: str
    source: str
    description: str
    measured: object
    expected: object
    tolerance: str
    comparison: str
    passed: bool
    notebook: str = ""
    kind: str = "claim"
    scale: object = None
    cell: object = None

    @property
    def paper(self) -> str:
        key = self.source.split()[0] if self.source else ""
        return key if key in PAPERS else "other"


@dataclass(frozen=True)
class CheckOutcome:
    """What a ``check_*`` call returns: truthy when the claim passed; shows its verdict."""

    claim: Claim

    def __bool__(self):
        return self.claim.passed

    def __repr__(self):
        c = self.claim
        if c.kind == "observation":
            verdict = "observation: holds" if c.passed else "observation: does not hold"
        else:
            verdict = "pass" if c.passed else "FAIL"
        return (f"[{verdict}] {c.claim_id} ({c.source}): measured {c.measured}, "
                f"expected {c.expected}, {c.tolerance}")


def _finite_scalar(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class ClaimLedger:
    """Records the verified claims and the observations of one notebook.

    Parameters
    ----------
    notebook : str
        Notebook name, e.g. ``"01_sampling_theorem"``.

    Notes
    -----
    Every ``check_*`` method records a :class:`Claim` and returns a
    :class:`CheckOutcome` (truthy if it passed, displayed as a one-line
    verdict); none raises, so a notebook records all of its checks before
    :meth:`finalize` raises on the failed claims. With ``observation=True``
    the record is an observation: a statement about the data at hand whose
    verdict is shown but never fails the run (DESIGN.md: a claim must hold for
    any data). Ids must be unique within a notebook. ``source`` starts with a
    key of :data:`PAPERS`.
    """

    notebook: str
    claims: list = field(default_factory=list)

    def _add(self, claim_id, source, description, measured, expected, tolerance, comparison, passed,
             observation=False, scale=None):
        if any(c.claim_id == claim_id for c in self.claims):
            raise ValueError(f"claim_id must be unique within the notebook; {claim_id!r} was recorded already")
        if not source or source.split()[0] not in PAPERS:
            raise ValueError(f"source must start with one of {sorted(PAPERS)}; got {source!r}")
        if not isinstance(observation, (bool, np.bool_)):
            raise TypeError(f"observation must be True or False; got {observation!r}")
        c = Claim(
            claim_id=str(claim_id),
            source=str(source),
            description=str(description),
            measured=_jsonable(measured),
            expected=_jsonable(expected),
            tolerance=str(tolerance),
            comparison=comparison,
            passed=bool(passed),
            notebook=self.notebook,
            kind="observation" if observation else "claim",
            scale=_finite_scalar(scale),
            cell=_execution_count(),
        )
        self.claims.append(c)
        return CheckOutcome(c)

    def check_close(self, claim_id, source, description, *, measured, expected, rtol=0.0, atol=0.0,
                    observation=False):
        """Pass when |measured - expected| <= atol + rtol |expected| elementwise.

        For arrays the recorded ``measured`` is the largest absolute error and
        ``expected`` the allowed error at that element.
        """
        m = np.asarray(measured, dtype=float)
        e = np.asarray(expected, dtype=float)
        if m.shape != e.shape and m.size != 1 and e.size != 1:
            raise ValueError(f"measured and expected shapes differ: {m.shape} vs {e.shape}")
        err = np.abs(m - e)
        allowed = atol + rtol * np.abs(e)
        ok = bool(np.all(np.isfinite(m)) and np.all(err <= allowed))
        scale = None
        if m.size == 1 and e.size == 1:
            mv, ev = float(m.reshape(())), float(e.reshape(()))
            scale = float(np.reshape(allowed, ()))
        else:
            i = int(np.nanargmax(err - allowed)) if np.all(np.isfinite(err)) else 0
            mv = f"max abs err {np.max(err):.3g}"
            ev = f"allowed {np.broadcast_to(allowed, err.shape).flat[i]:.3g} at worst element ({err.size} compared)"
        return self._add(claim_id, source, description, mv, ev, f"rtol={rtol:g}, atol={atol:g}", "close", ok,
                         observation, scale)

    def check_z(self, claim_id, source, description, *, estimate, expected, se, z_max=4.0, observation=False):
        """Pass when |estimate - expected| / se <= z_max (elementwise, Monte Carlo check).

        Elements with se == 0 must match exactly (to 1e-12).
        """
        est = np.asarray(estimate, dtype=float)
        exp = np.asarray(expected, dtype=float)
        se = np.broadcast_to(np.asarray(se, dtype=float), np.broadcast_shapes(est.shape, exp.shape))
        diff = np.abs(est - exp)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, diff / se, np.where(diff <= 1e-12, 0.0, np.inf))
        zmax = float(np.max(z)) if z.size else 0.0
        ok = bool(np.all(np.isfinite(est)) and zmax <= z_max)
        scale = None
        if est.size == 1 and exp.size == 1:
            mv, ev = float(est.reshape(())), float(exp.reshape(()))
            scale = float(se.reshape(-1)[0])
        else:
            mv, ev = f"max |z| {zmax:.3g} over {z.size}", "|z| <= z_max"
        return self._add(claim_id, source, description, mv, ev, f"|z| <= {z_max:g} (z = {zmax:.3g})", "z-score",
                         ok, observation, scale)

    def check_le(self, claim_id, source, description, *, measured, bound, tol=0.0, observation=False):
        """Pass when measured <= bound + tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, 1.0, observation)

    def check_ge(self, claim_id, source, description, *, measured, bound, tol=0.0, observation=False):
        """Pass when measured >= bound - tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, -1.0, observation)

    def _check_order(self, claim_id, source, description, measured, bound, tol, sign, observation):
        # sign = +1: measured <= bound + tol; sign = -1: measured >= bound - tol
        m, b = np.asarray(measured, dtype=float), np.asarray(bound, dtype=float)
        holds = m <= b + tol if sign > 0 else m >= b - tol
        ok = bool(np.all(np.isfinite(m)) and np.all(holds))
        if m.size > 1 or b.size > 1:
            mv = f"max excess {np.max(m - b):.3g}" if sign > 0 else f"min margin {np.min(m - b):.3g}"
            b = "0"
        else:
            mv, b = float(m.reshape(())), float(b.reshape(()))
        tolerance = f"<= bound + {tol:g}" if sign > 0 else f">= bound - {tol:g}"
        return self._add(claim_id, source, description, mv, b, tolerance, "<=" if sign > 0 else ">=", ok,
                         observation, tol if tol > 0 else None)

    def check_true(self, claim_id, source, description, *, passed, measured=None, expected=None, tolerance="",
                   observation=False):
        """Record a claim decided by the caller; give the evidence in measured/expected."""
        return self._add(claim_id, source, description, measured, expected, tolerance, "condition", bool(passed),
                         observation)

    def observe(self, claim_id, source, description, *, holds, measured=None, expected=None, tolerance=""):
        """Record an observation decided by the caller (shown with its verdict, never fails the run).

        Same as ``check_true(..., passed=holds, observation=True)``.
        """
        return self.check_true(claim_id, source, description, passed=holds, measured=measured,
                               expected=expected, tolerance=tolerance, observation=True)

    def table(self) -> pd.DataFrame:
        """Tidy DataFrame of the records (one row per claim or observation)."""
        cols = ["kind", "claim_id", "source", "description", "measured", "expected", "tolerance", "comparison",
                "passed"]
        return pd.DataFrame([{k: getattr(c, k) for k in cols} for c in self.claims], columns=cols)

    @property
    def failed(self):
        """The claims (not observations) that failed."""
        return [c for c in self.claims if c.kind == "claim" and not c.passed]

    @property
    def observations(self):
        return [c for c in self.claims if c.kind == "observation"]

    def finalize(self):
        """Display the records, publish them for the runner, raise if any claim failed."""
        payload = {"notebook": self.notebook, "claims": [asdict(c) for c in self.claims]}
        try:
            from IPython.display import display

            tbl = self.table()
            display(
                {
                    "text/html": tbl.to_html(index=False),
                    "text/plain": tbl.to_string(index=False),
                    CLAIMS_MIME: payload,
                },
                raw=True,
            )
        except ImportError:  # pragma: no cover - IPython is a dependency
            pass
        if not self.claims:
            raise ClaimsFailed(f"{self.notebook}: no claims were recorded")
        if self.failed:
            n = sum(c.kind == "claim" for c in self.claims)
            ids = ", ".join(c.claim_id for c in self.failed)
            raise ClaimsFailed(f"{self.notebook}: {len(self.failed)} of {n} claims failed: {ids}")
        return self.table()


# --------------------------------------------------------------------------- runner


def list_notebooks(notebooks_dir=None, only=None):
    """The ``NN_*.ipynb`` notebooks, sorted; ``only`` keeps names starting with any prefix."""
    d = Path(notebooks_dir or _project_root() / "notebooks")
    nbs = sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))
    if only:
        prefixes = [only] if isinstance(only, str) else list(only)
        nbs = [p for p in nbs if any(p.name.startswith(x) for x in prefixes)]
    return nbs


def smoke_parameters(path):
    """The smoke parameter set declared in the notebook metadata (``sampling_lab``)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    meta = nb.metadata.get("sampling_lab", {})
    if "smoke_parameters" not in meta:
        raise ValueError(f"{Path(path).name}: metadata.sampling_lab.smoke_parameters is missing")
    return dict(meta["smoke_parameters"])


def claims_from_notebook(path):
    """Records published by :meth:`ClaimLedger.finalize` in an executed notebook.

    Each record gets ``cell_id``: the id of the cell whose execution count the
    record carries (the cell that ran the check), or ``""`` when unknown.
    """
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    cell_ids = {c.get("execution_count"): c.get("id", "") for c in nb.cells
                if c.cell_type == "code" and c.get("execution_count") is not None}
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if CLAIMS_MIME in data:
                payload = data[CLAIMS_MIME]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                for c in payload["claims"]:
                    c = dict(c)
                    c.setdefault("kind", "claim")
                    c["cell_id"] = cell_ids.get(c.get("cell"), "") or ""
                    out.append(c)
    return out


@dataclass
class NotebookRun:
    """Outcome of executing one notebook (or of an earlier run kept by ``--only``)."""

    name: str
    ok: bool
    seconds: float
    error: str = ""
    claims: list = field(default_factory=list)
    mode: str = ""
    parameters: dict = field(default_factory=dict)
    kept: bool = False

    @property
    def failed_claims(self):
        return [c["claim_id"] for c in self.claims if c.get("kind", "claim") == "claim" and not c["passed"]]


def execute_notebook(src, dst, parameters=None, cwd=None, html=True, timeout=None):
    """Execute one notebook with papermill into ``dst`` and render ``dst`` as HTML.

    Returns a :class:`NotebookRun`; never raises on notebook errors (only on
    interruption: KeyboardInterrupt and the runner's signal handling).
    """
    import papermill as pm

    src, dst = Path(src), Path(dst)
    t0 = time.perf_counter()
    err = ""
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters=parameters or {},
            cwd=str(cwd or src.parent),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            execution_timeout=timeout,
            request_save_on_cell_execute=False,   # written at the end (and on error), not after each cell
            shutdown_kernel="immediate",
        )
        ok = True
    except Exception as exc:  # papermill wraps the cell error
        ok = False
        err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    seconds = time.perf_counter() - t0
    claims = claims_from_notebook(dst) if dst.exists() else []
    run = NotebookRun(src.stem, ok, seconds, err, claims, parameters=dict(parameters or {}))
    if run.ok and not claims:
        run.ok, run.error = False, "no claims recorded (ledger.finalize() missing?)"
    if run.ok and run.failed_claims:
        run.ok, run.error = False, "failed claims"
    if html and dst.exists():
        try:
            _render_html(dst, dst.with_suffix(".html"))
        except Exception as exc:  # pragma: no cover - rendering problems are reported, not fatal
            run.error = (run.error + "; " if run.error else "") + f"HTML rendering failed: {exc}"
            run.ok = False
    return run


@functools.lru_cache(maxsize=1)
def _html_exporter():
    """One nbconvert HTML exporter per process: its Jinja template is compiled once, not per
    notebook (0.5-1 s each on the project's machine; a runner worker renders several)."""
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab")


def _render_html(ipynb, out):
    """nbconvert's lab template: every cell is ``<div id="cell-id=<cell id>">`` (the index links there)."""
    import nbformat

    nb = nbformat.read(str(ipynb), as_version=4)
    body, _ = _html_exporter().from_notebook_node(nb)
    Path(out).write_text(body, encoding="utf-8")


def _skip_iri_parser():
    """The runner's processes do not import ``rfc3987_syntax``.

    nbformat (under papermill and nbconvert) imports jsonschema, whose format
    checker imports rfc3987_syntax when it is installed (jupyterlab pulls it
    in) and builds an Earley parser for RFC 3987 IRIs at import: about 3 s per
    process, ten times the rest of nbformat's import. nbformat validates
    without a format checker, so the parser is never used; the runner's own
    processes (the ``run`` command and its workers, not the notebooks'
    kernels) skip it. Issue 18.
    """
    sys.modules.setdefault("rfc3987_syntax", None)


def _worker_init():
    _skip_iri_parser()
    # Ctrl-C reaches the whole process group: the parent alone decides and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _call_in_thread(fn, *args):
    """Call ``fn`` in a helper thread while this thread waits (interruptibly) for it.

    nbclient (under papermill) installs its own SIGINT/SIGTERM handlers while
    it executes, when it runs in the main thread: they would shut the kernel
    down behind the runner's back and let it go on with the next notebook.
    Python lets only the main thread install handlers, so from a helper
    thread the runner's handlers (or the worker's SIGINT ignore) stay in charge.
    """
    box = {}

    def target():
        try:
            box["result"] = fn(*args)
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    t = threading.Thread(target=target, name=f"sampling-lab-{getattr(fn, '__name__', 'job')}", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.2)   # a signal interrupts the wait: its handler runs here, in the main thread
    if "error" in box:
        raise box["error"]
    return box["result"]


def _execute_job(args):
    src, dst, params, timeout = args
    return _call_in_thread(execute_notebook, src, dst, params, None, True, timeout)


# --------------------------------------------------------------------------- environment


def _git(root, *args):
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                              timeout=20).stdout
    except Exception:
        return None


def _git_state(root):
    """(commit, dirty): the full commit hash (or "unknown") and whether the work tree has changes."""
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return "unknown", None
    status = _git(root, "status", "--porcelain")
    return head.strip(), (None if status is None else bool(status.strip()))


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


def _lock_pins(path):
    """``{name: version}`` pinned in a ``name==version`` lock file (markers ignored)."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def environment_info(root=None):
    """The environment a report is produced in, as a JSON-friendly dict.

    Python, platform, CPU model and count (and the CPUs this process may use),
    the BLAS that numpy and scipy were built with, the BLAS thread variables,
    the versions of the key packages, the git commit with a dirty flag, and
    whether the installed packages match ``requirements-lock.txt``.
    """
    from importlib import metadata

    root = Path(root or _project_root())
    pkgs = {}
    for name in KEY_PACKAGES:
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = "not installed"
    commit, dirty = _git_state(root)
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        affinity = os.cpu_count()
    lock = {"file": LOCK_FILE, "sha256": None, "matches": None, "differs": []}
    lock_path = root / LOCK_FILE
    if lock_path.exists():
        lock["sha256"] = hashlib.sha256(lock_path.read_bytes()).hexdigest()[:16]
        installed = {_norm(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}
        differs = [f"{n} {installed[n]} (lock {v})" for n, v in sorted(_lock_pins(lock_path).items())
                   if n in installed and installed[n] != v]
        lock["matches"], lock["differs"] = not differs, differs
    return {
        "commit": commit,
        "dirty": dirty,
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


def _commit_label(env):
    c = env.get("commit") or "unknown"
    short = c[:12] if c != "unknown" else c
    return short + ("+dirty" if env.get("dirty") else "")


def _environment_summary(env):
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


@contextlib.contextmanager
def _locked(out_dir):
    """Exclusive lock on ``.<out>.lock`` beside ``out_dir`` for the whole run."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield None
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ReportsLocked(
            f"another report runner (pid {holder}) is writing {out_dir}; wait for it to finish or use "
            f"another --out (lock file {path})"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _exchange(a, b):
    """Atomically swap the names ``a`` and ``b`` (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover - old glibc
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    import errno

    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):  # pragma: no cover
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))  # pragma: no cover


def _install_dir(new, out):
    """Put folder ``new`` at ``out``; return a folder of ours that holds the previous content, or None.

    One atomic exchange where supported (``new`` then holds the old reports);
    otherwise two renames through a uniquely named backup folder created here.
    """
    if not out.exists():
        new.rename(out)
        return None
    if _exchange(new, out):
        return new
    backup = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))  # pragma: no cover
    out.rename(backup / out.name)  # pragma: no cover
    new.rename(out)  # pragma: no cover
    return backup  # pragma: no cover


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class RunInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT received while the runner was executing notebooks."""

    def __init__(self, signum):
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")


@contextlib.contextmanager
def _signals_raise():
    """Turn SIGTERM/SIGINT into :class:`RunInterrupted` (main thread only) for the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise RunInterrupted(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _signals_ignored():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _stop_processes(roots, grace=3.0):
    """Stop ``roots`` (pool workers or kernels) and all their descendants; return how many were stopped.

    The roots are frozen first (SIGSTOP) so that no worker starts a new kernel
    while we look; then every descendant gets SIGTERM, the roots SIGKILL, and
    whatever is still alive after ``grace`` seconds SIGKILL.
    """
    import psutil

    procs = []
    for pid in roots:
        try:
            p = psutil.Process(pid)
            p.suspend()
            procs.append(p)
        except psutil.Error:
            pass
    family = []
    for p in procs:
        try:
            family.extend(p.children(recursive=True))
        except psutil.Error:
            pass
    leftovers = []  # kernel connection files (``ipykernel_launcher -f FILE``) that their manager would remove
    for q in procs + family:
        with contextlib.suppress(psutil.Error, ValueError, IndexError):
            cmd = q.cmdline()
            if any("ipykernel" in part for part in cmd) and "-f" in cmd:
                f = Path(cmd[cmd.index("-f") + 1])
                if f.suffix == ".json":
                    leftovers.append(f)
    for q in family:
        with contextlib.suppress(psutil.Error):
            q.terminate()
            q.resume()
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    everyone = procs + family
    _, alive = psutil.wait_procs(everyone, timeout=grace)
    for q in alive:
        with contextlib.suppress(psutil.Error):
            q.kill()
    psutil.wait_procs(alive, timeout=grace)
    for f in leftovers:
        with contextlib.suppress(OSError):
            f.unlink()
    return len(everyone)


def _children_pids():
    """Direct children of this process, except multiprocessing's resource tracker (it must outlive the pool)."""
    try:
        import psutil
        from multiprocessing import resource_tracker

        tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
        return {p.pid for p in psutil.Process().children()} - {tracker}
    except Exception:  # pragma: no cover
        return set()


# --------------------------------------------------------------------------- the ledger files


LEDGER_COLUMNS = [
    "paper", "notebook", "kind", "claim_id", "source", "description", "measured", "expected",
    "tolerance", "comparison", "passed", "scale", "cell_id", "run", "commit", "environment",
]


def _ledger_frame(runs, mode, env):
    rows = []
    commit, env_s = _commit_label(env), _environment_summary(env)
    for r in runs:
        for c in r.claims:
            row = {k: c.get(k) for k in LEDGER_COLUMNS}
            row["notebook"] = r.name
            first = str(row["source"]).split()[0] if str(row["source"]).split() else ""
            row["paper"] = first if first in PAPERS else "other"
            row["kind"] = c.get("kind") or "claim"
            if not r.kept:  # rows kept from an earlier run keep their own mode, commit and environment
                row["run"], row["commit"], row["environment"] = mode, commit, env_s
            rows.append(row)
    df = pd.DataFrame(rows, columns=LEDGER_COLUMNS)
    df["passed"] = df["passed"].map(lambda v: v in (True, "True", "true", 1)).astype(bool)
    return df


def _read_ledger(path):
    """claims.csv as written by any version of the runner (missing columns filled)."""
    df = pd.read_csv(path, keep_default_na=False, dtype=str)
    defaults = {"kind": "claim", "scale": "", "cell_id": "", "run": "", "commit": "unknown", "environment": ""}
    for k, v in defaults.items():
        if k not in df.columns:
            df[k] = v
    df["passed"] = df["passed"].astype(str).str.lower().isin(["true", "1"])
    df.loc[df["kind"] == "", "kind"] = "claim"
    return df


def read_discrepancies(path=None):
    """The table of paper statements that disagree with derivation and simulation.

    ``notebooks/discrepancies.csv`` (columns paper, statement, measured,
    notebooks) is the one source: the index renders it and README.md shows
    the same rows (a test checks that they agree).
    """
    path = Path(path or _project_root() / "notebooks" / "discrepancies.csv")
    if not path.exists():
        return pd.DataFrame(columns=["paper", "statement", "measured", "notebooks"])
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# --------------------------------------------------------------------------- the index page


def _fmt_num(x, scale=None):
    """A number with the digits that matter: one digit beyond the tolerance, 2..12 significant.

    Without a tolerance 4 significant digits; integers stay integers.
    """
    if x == 0:
        return "0"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):d}"
    if scale is not None and scale > 0:
        sig = int(math.floor(math.log10(abs(x))) - math.floor(math.log10(scale))) + 2
        sig = min(12, max(2, sig))
    else:
        sig = 4
    return f"{x:.{sig}g}"


def _fmt_value(v, scale=None):
    if v is None or (isinstance(v, float) and math.isnan(v)):  # missing (a measured "nan" is a string)
        return ""
    if isinstance(v, bool):
        return str(v)
    s = str(v).strip()
    if s == "" or s.lower() in ("none", "nan"):
        return s if s.lower() == "nan" else ""
    try:
        x = float(s)
    except ValueError:
        return s
    if not math.isfinite(x) or s.lower() in ("true", "false"):
        return s
    sc = _finite_scalar(scale) if scale not in (None, "") else None
    return _fmt_num(x, sc)


def _num_class(shown):
    """'num' (right-aligned, one line) for a number, 'txt' for a phrase like 'max |z| 2.4 over 40'."""
    try:
        float(shown)
        return "num"
    except ValueError:
        return "txt"


def _inline_md(text):
    """Escape, then ``*x*`` -> <em>x</em> and ``code`` -> <code>code</code>."""
    s = html.escape(str(text))
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", s)
    return s


def _claim_command(claim_id, notebook, ambiguous):
    cmd = f"sampling-lib run --claim {claim_id}"
    if ambiguous:
        cmd += f" --only {notebook[:2]}"
    return cmd


_INDEX_CSS = """
body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;line-height:1.4}
table{border-collapse:collapse;width:100%;margin-bottom:1.5em;font-size:0.88em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-size:0.92em}
code.cmd{display:block;color:#555;font-size:0.8em;margin-top:2px;overflow-wrap:anywhere}
td.txt{font-size:0.92em;min-width:7em}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}
.holds{color:#1a7f37}.nothold{color:#9a6700;font-weight:bold}
.kept{color:#777}
#filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #ddd;z-index:1}
#filters input[type=search]{width:22em}
.note{color:#555;font-size:0.9em}
tr.hidden{display:none}
h2,h3,tr{scroll-margin-top:3em}
"""

_INDEX_JS = """
(function () {
  var box = document.getElementById('filter');
  var notOk = document.getElementById('notok');
  var count = document.getElementById('shown');
  function apply() {
    var q = box.value.toLowerCase();
    var rows = document.querySelectorAll('tr.rec');
    var n = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var show = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
                 (!notOk.checked || r.getAttribute('data-ok') === 'false');
      r.className = show ? 'rec' : 'rec hidden';
      if (show) { n++; }
    }
    count.textContent = n + ' of ' + rows.length + ' rows shown';
  }
  box.addEventListener('input', apply);
  notOk.addEventListener('change', apply);
  apply();
})();
"""


def _index_html(df, runs, mode, env, discrepancies=None, generated=None):
    """The index page: environment, notebooks, per-paper summary, claims, observations, discrepancies.

    Self-contained (inline CSS and a small script for the filter), so it opens
    from ``file://`` without a server; every link is relative.
    """
    esc = html.escape
    generated = generated or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    claims = df[df["kind"] == "claim"]
    obs = df[df["kind"] == "observation"]
    n_pass = int(claims["passed"].astype(bool).sum())
    n_hold = int(obs["passed"].astype(bool).sum())
    ids_notebooks = df.groupby("claim_id")["notebook"].nunique()
    ambiguous = set(ids_notebooks[ids_notebooks > 1].index)
    html_names = {r.name for r in runs}

    p = []
    add = p.append
    add("<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        "<title>sampling-lab: verified claims</title>")
    add(f"<style>{_INDEX_CSS}</style></head><body>")
    add("<h1>sampling-lab: index of verified claims</h1>")
    add(f"<p>Generated {esc(generated)} from commit <code>{esc(_commit_label(env))}</code> with "
        f"<b>{esc(mode)}</b> parameters. <b>{n_pass} of {len(claims)} claims pass</b>; "
        f"{len(obs)} observations ({n_hold} hold, {len(obs) - n_hold} do not).</p>")
    add("<p class='note'>A <b>claim</b> must hold for any data (mathematics, exactness, Monte Carlo against a "
        "formula) and fails the run when it does not. An <b>observation</b> is a statement about the data at hand "
        "(which estimator wins, an error level, a paper's empirical table): its verdict is shown, it never fails "
        "the run. Raw values are in <a href='claims.csv'>claims.csv</a>; the environment in "
        "<a href='environment.json'>environment.json</a>. Check one claim again with the command under its id "
        "(it re-executes only its notebook; add <code>--smoke</code> for the small parameters).</p>")
    add("<p>Contents: <a href='#environment'>environment</a> &middot; <a href='#notebooks'>notebooks</a> &middot; "
        "<a href='#papers'>summary by paper</a> &middot; <a href='#claims'>claims</a> &middot; "
        "<a href='#observations'>observations</a> &middot; <a href='#discrepancies'>discrepancies with the "
        "papers</a></p>")

    # environment
    add("<h2 id='environment'>Environment</h2><table>")
    lock = env["lock"]
    if lock["matches"] is None:
        lock_s = "no lock file found"
    elif lock["matches"]:
        lock_s = f"installed packages match <code>{esc(lock['file'])}</code> (sha256 {esc(lock['sha256'] or '')}…)"
    else:
        lock_s = (f"<span class='fail'>differs from <code>{esc(lock['file'])}</code></span>: "
                  + esc(", ".join(lock["differs"])))
    rows_env = [
        ("commit", f"<code>{esc(env['commit'])}</code>" + (" (work tree with uncommitted changes)"
                                                          if env.get("dirty") else
                                                          " (clean work tree)" if env.get("dirty") is False else "")),
        ("python", esc(f"{env['python']} ({env['implementation']})")),
        ("platform", esc(env["platform"])),
        ("CPU", esc(f"{env['cpu']}; {env['cpu_count']} CPUs, {env['cpus_usable']} usable")),
        ("BLAS", esc(env["blas"]) + "; threads: " + esc(", ".join(f"{k}={v or 'unset'}"
                                                                   for k, v in env["blas_threads"].items()))),
        ("packages", esc(", ".join(f"{k} {v}" for k, v in env["packages"].items()))),
        ("lock", lock_s),
    ]
    for k, v in rows_env:
        add(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>")
    add("</table>")

    # notebooks
    add("<h2 id='notebooks'>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>claims passed</th>"
        "<th>observations hold</th><th>parameters</th><th>run</th><th>run time (s)</th></tr>")
    for r in runs:
        recs = df[df["notebook"] == r.name]
        rc, ro = recs[recs["kind"] == "claim"], recs[recs["kind"] == "observation"]
        status = "<span class='pass'>ok</span>" if r.ok else f"<span class='fail'>FAILED</span> {esc(r.error)}"
        if r.kept:
            first = recs.iloc[0] if len(recs) else None
            run_s = (f"<span class='kept'>kept from an earlier run: {esc(str(first['run']) if first is not None else '')}"
                     f" parameters, commit <code>{esc(str(first['commit']) if first is not None else '')}</code></span>")
        else:
            run_s = esc(mode)
        params = esc(json.dumps(r.parameters, sort_keys=True)) if r.parameters else "defaults"
        add(f"<tr id='nb-{esc(r.name)}'><td><a href='{esc(r.name)}.html'>{esc(r.name)}</a> "
            f"(<a href='{esc(r.name)}.ipynb'>ipynb</a>)</td><td>{status}</td>"
            f"<td class='num'>{int(rc['passed'].sum())} / {len(rc)}</td>"
            f"<td class='num'>{int(ro['passed'].sum())} / {len(ro)}</td><td><code>{params}</code></td>"
            f"<td>{run_s}</td><td class='num'>{'' if math.isnan(r.seconds) else f'{r.seconds:.1f}'}</td></tr>")
    add("</table>")

    # per paper
    add("<h2 id='papers'>Summary by paper</h2><table><tr><th>paper</th><th>reference</th>"
        "<th>claims passed / total</th><th>observations (hold / total)</th></tr>")
    papers = [k for k in PAPERS if k in set(df["paper"])] + sorted(set(df["paper"]) - set(PAPERS))
    for paper in papers:
        g = df[df["paper"] == paper]
        gc, go = g[g["kind"] == "claim"], g[g["kind"] == "observation"]
        add(f"<tr><td><a href='#paper-{esc(paper)}'>{esc(paper)}</a></td><td>{esc(PAPERS.get(paper, 'other sources'))}"
            f"</td><td class='num'>{int(gc['passed'].sum())} / {len(gc)}</td>"
            f"<td class='num'>{int(go['passed'].sum())} / {len(go)}</td></tr>")
    add("</table>")

    add("<div id='filters'><label>Filter rows: <input type='search' id='filter' "
        "placeholder='claim id, paper, equation, words'></label> <label><input type='checkbox' id='notok'> only "
        "failed claims / observations that do not hold</label> <span id='shown' class='note'></span></div>")

    def record_rows(g, kind):
        head = ("<table><tr><th>verdict</th><th>id and command</th><th>source</th><th>statement</th>"
                "<th>measured</th><th>expected / bound</th><th>tolerance</th><th>checked in</th></tr>")
        out = [head]
        for _, c in g.iterrows():
            ok = bool(c["passed"])
            if kind == "claim":
                st = "<span class='pass'>pass</span>" if ok else "<span class='fail'>FAIL</span>"
            else:
                st = "<span class='holds'>holds</span>" if ok else "<span class='nothold'>does not hold</span>"
            nb, cid = str(c["notebook"]), str(c["claim_id"])
            cell = str(c.get("cell_id") or "")
            if nb in html_names:
                target = f"{nb}.html" + (f"#cell-id={cell}" if cell else "")
                where = f"<a href='{esc(target)}'>{esc(nb[:2])}{' cell' if cell else ''}</a>"
            else:
                where = esc(nb)
            cmd = _claim_command(cid, nb, cid in ambiguous)
            scale = c.get("scale")
            mv, ev = _fmt_value(c["measured"], scale), _fmt_value(c["expected"], scale)
            out.append(
                f"<tr class='rec' id='{esc(kind)}-{esc(nb)}-{esc(cid)}' data-ok='{'true' if ok else 'false'}'>"
                f"<td>{st}</td><td><code>{esc(cid)}</code><code class='cmd'>{esc(cmd)}</code></td>"
                f"<td>{esc(str(c['source']))}</td><td>{_inline_md(c['description'])}</td>"
                f"<td class='{_num_class(mv)}' title='{esc(str(c['measured']))}'>{esc(mv)}</td>"
                f"<td class='{_num_class(ev)}' title='{esc(str(c['expected']))}'>{esc(ev)}</td>"
                f"<td>{esc(str(c['tolerance']))}</td><td>{where}</td></tr>"
            )
        out.append("</table>")
        return out

    add("<h2 id='claims'>Claims by paper</h2>")
    for paper in papers:
        g = claims[claims["paper"] == paper]
        add(f"<h3 id='paper-{esc(paper)}'>{esc(paper)}: {esc(PAPERS.get(paper, 'other sources'))}</h3>")
        if len(g):
            add(f"<p class='note'>{int(g['passed'].sum())} of {len(g)} claims pass.</p>")
            p.extend(record_rows(g, "claim"))
        else:
            add("<p class='note'>No claims (observations only).</p>")

    add("<h2 id='observations'>Observations (about the data at hand; never fail the run)</h2>")
    if len(obs):
        add(f"<p class='note'>{n_hold} of {len(obs)} observations hold on the data these notebooks ran on. "
            "They describe that data, not a property that must hold for every dataset.</p>")
        for paper in papers:
            g = obs[obs["paper"] == paper]
            if len(g):
                add(f"<h3>{esc(paper)}</h3>")
                p.extend(record_rows(g, "observation"))
    else:
        add("<p class='note'>No observations recorded.</p>")

    add("<h2 id='discrepancies'>Discrepancies with the papers</h2>")
    add("<p class='note'>Where a paper's printed statement disagrees with a careful derivation and a simulation that "
        "agree with each other, the notebooks show the disagreement (the code is never bent to a print).</p>")
    d = discrepancies if discrepancies is not None else pd.DataFrame()
    if len(d):
        add("<table><tr><th>paper</th><th>statement</th><th>what we measured</th><th>notebooks</th></tr>")
        for _, row in d.iterrows():
            links = []
            for num in str(row.get("notebooks", "")).replace(",", " ").split():
                match = [n for n in sorted(html_names) if n.startswith(num)]
                links.append(f"<a href='{esc(match[0])}.html'>{esc(num)}</a>" if match else esc(num))
            add(f"<tr><td>{esc(str(row['paper']))}</td><td>{_inline_md(row['statement'])}</td>"
                f"<td>{_inline_md(row['measured'])}</td><td>{', '.join(links)}</td></tr>")
        add("</table>")
    else:
        add("<p class='note'>None recorded.</p>")
    add(f"<script>{_INDEX_JS}</script>")
    add("</body></html>")
    return "\n".join(p) + "\n"


# --------------------------------------------------------------------------- running


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


def _log_run(log, r):
    n_obs = sum(c.get("kind") == "observation" for c in r.claims)
    log(f"[{'ok' if r.ok else 'FAILED'}] {r.name} ({r.seconds:.1f} s, {len(r.claims) - n_obs} claims, "
        f"{n_obs} observations)")


def _previous_seconds(ipynb):
    """Execution time (s) of an executed notebook from its papermill metadata; None if unknown."""
    try:
        with open(ipynb, encoding="utf-8") as fh:
            d = json.load(fh)["metadata"]["papermill"]["duration"]
        return float(d) if d is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _longest_first(jobs_args, previous_dir):
    """Order notebook jobs longest first by the time each took in ``previous_dir``.

    With ``--jobs`` > 1 the pool starts jobs in list order; starting the longest
    notebooks first (LPT scheduling) keeps one long notebook from starting last
    and finishing alone. Times come from the papermill metadata of the executed
    notebooks of the previous run; notebooks without one (new, or never run)
    go first, in name order, since they may be long.

    Examples
    --------
    >>> _longest_first([("a.ipynb", "x/a.ipynb", {}, None)], "/nonexistent")[0][0]
    'a.ipynb'
    """
    def key(args):
        t = _previous_seconds(Path(previous_dir) / Path(args[0]).name)
        return (t is not None, -(t or 0.0))
    return sorted(jobs_args, key=key)   # stable: name order among equals


def _execute_all(jobs_args, jobs, log, previous_dir=None):
    """Run the notebooks (in a pool when jobs > 1, longest first by ``previous_dir``'s times; runs
    are returned in ``jobs_args`` order); on interruption stop every child first, then re-raise."""
    runs = []
    before = _children_pids()
    ex = None
    try:
        if jobs > 1 and len(jobs_args) > 1:
            import multiprocessing as mp

            ex = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init)
            order = _longest_first(jobs_args, previous_dir) if previous_dir is not None else list(jobs_args)
            futures = {ex.submit(_execute_job, a): a[0] for a in order}
            done = {}
            for fut in as_completed(futures):
                r = fut.result()
                _log_run(log, r)
                done[futures[fut]] = r
            ex.shutdown(wait=True)
            runs = [done[a[0]] for a in jobs_args]
        else:
            for a in jobs_args:
                log(f"running {Path(a[0]).name} ...")
                r = _execute_job(a)
                _log_run(log, r)
                runs.append(r)
        return runs
    except BaseException:
        with _signals_ignored():
            roots = set(getattr(ex, "_processes", None) or {}) if ex is not None else set()
            roots |= _children_pids() - before
            _stop_processes(roots)
            if ex is not None:
                ex.shutdown(wait=False, cancel_futures=True)
        raise


def run_notebooks(out_dir=None, *, smoke=False, only=None, jobs=1, notebooks_dir=None, timeout=None,
                  failed_dir=None, log=print):
    """Execute the notebooks and, only if all succeed, replace ``out_dir``.

    Parameters
    ----------
    out_dir : path, default ``<repo>/reports``
    smoke : bool
        Use each notebook's smoke parameters (tests) instead of its defaults.
    only : str or list of str, optional
        Run only notebooks whose names start with these prefixes; the other
        notebooks' reports in ``out_dir`` are kept and the ledger is merged
        (kept rows keep their own run mode, commit and environment).
    jobs : int
        Notebooks executed in parallel (separate processes).
    failed_dir : path, default ``<out_dir>/../.reports-failed``
        Where a failed run is kept for inspection.

    Returns
    -------
    list of NotebookRun
        The notebooks that ran (not the ones kept from an earlier run).

    Raises
    ------
    ReportsLocked
        Another runner holds the lock of ``out_dir``.
    RunInterrupted
        On SIGTERM/SIGINT, after the children were stopped and the temporary
        folder removed (``out_dir`` is unchanged).
    """
    out_dir = Path(out_dir or _project_root() / "reports").resolve()
    nbs = list_notebooks(notebooks_dir, only)
    if not nbs:
        raise ValueError(f"no notebooks matched only={only!r} in {notebooks_dir or _project_root() / 'notebooks'}")
    if not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1; got {jobs!r}")
    limit_blas_threads()
    mode = "smoke" if smoke else "default"
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    disc = read_discrepancies(Path(notebooks_dir) / "discrepancies.csv" if notebooks_dir else None)
    with _signals_raise(), _locked(out_dir):
        env = environment_info()
        tmp = Path(tempfile.mkdtemp(prefix=".reports-tmp-", dir=out_dir.parent))
        try:
            os.chmod(tmp, 0o777 & ~_umask())  # the report folder gets the usual mode, not mkdtemp's 0700
            jobs_args = [
                (str(p), str(tmp / p.name), smoke_parameters(p) if smoke else {}, timeout) for p in nbs
            ]
            runs = _execute_all(jobs_args, int(jobs), log, previous_dir=out_dir)
            for r in runs:
                r.mode = mode
            failed = [r for r in runs if not r.ok]
            if failed:
                keep = Path(failed_dir) if failed_dir else out_dir.parent / ".reports-failed"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.move(str(tmp), keep)
                for r in failed:
                    bad = r.failed_claims
                    log(f"FAILED notebook {r.name}: {r.error}" + (f"; failed claims: {', '.join(bad)}" if bad else ""))
                log(f"{out_dir} left unchanged; the failed run is in {keep}")
                return runs
            all_runs = list(runs)
            if only and out_dir.exists():
                all_runs += _keep_previous(out_dir, tmp, {r.name for r in runs})
                all_runs.sort(key=lambda r: r.name)
            df = _ledger_frame(all_runs, mode, env)
            df.to_csv(tmp / "claims.csv", index=False)
            (tmp / "environment.json").write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
            (tmp / "index.html").write_text(_index_html(df, all_runs, mode, env, disc), encoding="utf-8")
            previous = _install_dir(tmp, out_dir)
            if previous is not None and previous != tmp:  # pragma: no cover - fallback path only
                shutil.rmtree(previous, ignore_errors=True)
            n_kept = len(all_runs) - len(runs)
            kinds = df["kind"]
            n_claims = int((kinds == "claim").sum())
            n_pass = int(df.loc[kinds == "claim", "passed"].astype(bool).sum())
            log(f"{len(runs)} notebook{'s' if len(runs) != 1 else ''} ran ok"
                + (f" ({n_kept} kept from the previous report)" if n_kept else "")
                + f"; {n_pass}/{n_claims} claims pass, {int((kinds == 'observation').sum())} observations -> {out_dir}")
            return runs
        finally:
            _remove_tree(tmp)


def _remove_tree(path, attempts=20, pause=0.25):
    """Remove a folder, retrying for up to ``attempts * pause`` seconds: after an interrupt, a
    stopping worker's kernel may still be writing its output notebook into it (seen under load:
    the folder survived a single rmtree)."""
    for _ in range(attempts):
        if not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            time.sleep(pause)


def _keep_previous(out_dir, tmp, done):
    """With --only: copy the other notebooks' files into ``tmp`` and return their earlier records."""
    generated = ("claims.csv", "index.html", "environment.json")
    for f in out_dir.iterdir():
        if f.is_file() and f.stem not in done and f.name not in generated:
            shutil.copy2(f, tmp / f.name)
    kept = []
    old = out_dir / "claims.csv"
    if old.exists():
        prev = _read_ledger(old)
        for name, g in prev[~prev["notebook"].isin(done)].groupby("notebook", sort=False):
            recs = g.to_dict("records")
            kept.append(NotebookRun(name, True, float("nan"), "", recs, mode=str(recs[0].get("run", "")),
                                    parameters=_papermill_parameters(tmp / f"{name}.ipynb"), kept=True))
    return kept


def _papermill_parameters(path):
    """The parameters papermill injected into an executed notebook ({} for defaults or when unknown)."""
    try:
        return dict(json.loads(Path(path).read_text(encoding="utf-8"))["metadata"]["papermill"]["parameters"])
    except (OSError, KeyError, TypeError, ValueError):
        return {}


# --------------------------------------------------------------------------- one claim


def _find_claim(ledger, claim_id, only=None):
    rows = ledger[ledger["claim_id"] == claim_id]
    if only:
        prefixes = [only] if isinstance(only, str) else list(only)
        rows = rows[rows["notebook"].map(lambda n: any(n.startswith(x) for x in prefixes))]
    if rows.empty:
        close = difflib.get_close_matches(claim_id, ledger["claim_id"].unique().tolist(), n=5, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise ValueError(f"claim {claim_id!r} is not in the ledger{hint}")
    if rows["notebook"].nunique() > 1:
        nbs = ", ".join(sorted(rows["notebook"].unique()))
        raise ValueError(f"claim id {claim_id!r} is recorded by several notebooks ({nbs}); add --only NN to pick one")
    return rows.iloc[0]


def _describe(rec, scale=None):
    kind = rec.get("kind") or "claim"
    ok = rec.get("passed") in (True, "True", "true")
    verdict = ("pass" if ok else "FAIL") if kind == "claim" else ("holds" if ok else "does not hold")
    return (f"[{verdict}] {kind} {rec['claim_id']} ({rec['source']}): {rec['description']}\n"
            f"    measured {_fmt_value(rec['measured'], scale)}  expected/bound {_fmt_value(rec['expected'], scale)}"
            f"  tolerance {rec['tolerance']}")


def run_claim(claim_id, *, smoke=False, reports_dir=None, notebooks_dir=None, only=None, timeout=None, log=print):
    """Re-execute only the notebook that holds ``claim_id`` and report that claim.

    The notebook is found in ``<reports_dir>/claims.csv`` and executed into a
    temporary folder (``reports_dir`` is not modified) with its default
    parameters, or its smoke parameters when ``smoke``. The fresh record and
    the recorded one are printed through ``log``.

    Returns
    -------
    int
        0 when the claim passes (or is an observation, which never fails), 1
        when it fails or the notebook did not record it.
    """
    reports_dir = Path(reports_dir or _project_root() / "reports")
    ledger_path = reports_dir / "claims.csv"
    if not ledger_path.exists():
        raise FileNotFoundError(f"no claims ledger at {ledger_path}; run `make reports` first or pass --out")
    recorded = _find_claim(_read_ledger(ledger_path), claim_id, only)
    nb_name = recorded["notebook"]
    src = Path(notebooks_dir or _project_root() / "notebooks") / f"{nb_name}.ipynb"
    if not src.exists():
        raise FileNotFoundError(f"claim {claim_id!r} is checked in {nb_name}, but {src} does not exist")
    params = smoke_parameters(src) if smoke else {}
    limit_blas_threads()
    log(f"claim {claim_id}: running {src.name} with {'smoke' if smoke else 'default'} parameters"
        + (f" {json.dumps(params, sort_keys=True)}" if params else "") + " ...")
    with _signals_raise(), tempfile.TemporaryDirectory(prefix=".claim-") as tmp:
        run = _execute_all([(str(src), str(Path(tmp) / src.name), params, timeout)], 1, lambda m: None)[0]
    fresh = next((c for c in run.claims if c["claim_id"] == claim_id), None)
    log(f"recorded in {ledger_path} ({recorded['run'] or '?'} parameters, commit {recorded['commit']}):")
    log("  " + _describe(recorded, recorded.get("scale") or None).replace("\n", "\n  "))
    if fresh is None:
        log(f"this run ({run.seconds:.1f} s) did not record {claim_id}: {run.error or 'the claim was not checked'}")
        return 1
    log(f"this run ({run.seconds:.1f} s):")
    log("  " + _describe(fresh, fresh.get("scale")).replace("\n", "\n  "))
    others = [c for c in run.failed_claims if c != claim_id]
    if others:
        log(f"note: other claims of {nb_name} failed in this run: {', '.join(others)}")
    if fresh.get("kind", "claim") == "observation":
        return 0
    return 0 if fresh["passed"] else 1


# --------------------------------------------------------------------------- command line


def add_run_arguments(p):
    """Add the options of the ``run`` subcommand to an argparse parser (shared by both entry points)."""
    p.add_argument("--out", default=None, help="report folder (default: reports/); with --claim, where "
                   "claims.csv is looked up")
    p.add_argument("--smoke", action="store_true", help="use the notebooks' smoke parameters")
    p.add_argument("--only", action="append", help="notebook name prefix, e.g. 01 (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel (default 1)")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    p.add_argument("--notebooks", default=None, help="folder of NN_*.ipynb notebooks (default: notebooks/)")
    p.add_argument("--claim", default=None, metavar="ID",
                   help="re-execute only the notebook holding this claim (found in claims.csv), print the "
                        "claim's row and exit non-zero if it fails; reports/ is not modified")
    return p


def run_command(args, prog="sampling-lib run"):
    """Execute a parsed ``run`` command; returns the exit status (never raises, never a traceback)."""
    _skip_iri_parser()
    if args.jobs is not None and args.jobs < 1:
        sys.stderr.write(f"{prog}: error: --jobs must be an integer >= 1; got {args.jobs}\n")
        return 2
    try:
        if args.claim:
            return run_claim(args.claim, smoke=args.smoke, reports_dir=args.out, notebooks_dir=args.notebooks,
                             only=args.only, timeout=args.timeout)
        runs = run_notebooks(args.out, smoke=args.smoke, only=args.only, jobs=args.jobs,
                             notebooks_dir=args.notebooks, timeout=args.timeout)
        return 0 if all(r.ok for r in runs) else 1
    except RunInterrupted as exc:
        sys.stderr.write(f"{prog}: {exc}; child processes stopped, temporary folder removed, "
                         "the report folder is unchanged\n")
        return 128 + exc.signum
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except (ReportsLocked, ValueError, FileNotFoundError) as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return 1


def main(argv=None):
    """Command line: ``python -m sampling_lib run [--smoke] [--only NN] [--out DIR] [--jobs J] [--claim ID]``."""
    # the console script ``sampling-lib run ...`` hands its argv here too (cli.main)
    prog = "sampling-lib" if Path(sys.argv[0]).name == "sampling-lib" else "python -m sampling_lib"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_run_arguments(sub.add_parser("run", help="execute notebooks into a report folder, or check one claim"))
    args = ap.parse_args(argv)
    return run_command(args, prog=f"{prog} run")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
