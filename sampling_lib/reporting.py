"""Claims ledger and the notebook-to-report pipeline.

Inside a notebook, every verified claim goes through one :class:`ClaimLedger`:

>>> ledger = ClaimLedger("00_example")
>>> ledger.check_close("ex-1", "KDD20 eq 4", "a closed form equals a sum",
...                    measured=0.1 + 0.2, expected=0.3, rtol=1e-12)
[pass] ex-1 (KDD20 eq 4): measured 0.3, expected 0.3, rtol=1e-12, atol=0
>>> ok = ledger.check_z("ex-2", "KDD20 eq 4", "Monte Carlo mean vs exact",
...                     estimate=0.503, expected=0.5, se=0.002, z_max=4)
>>> bool(ok)
True
>>> ledger.table()[["claim_id", "passed"]]
  claim_id  passed
0     ex-1    True
1     ex-2    True

``ledger.finalize()`` (the notebook's last cell) displays the table and
publishes the claims as a JSON bundle (MIME type :data:`CLAIMS_MIME`) in the
cell output, then raises :class:`ClaimsFailed` if any claim failed, so that
papermill marks the run failed *after* every claim was recorded. The runner
reads the claims back from the executed notebook: no side files, no
environment variables, safe for parallel runs, and the claims travel with the
report.

The runner (``python -m sampling_lib run``, used by ``make reports``
and by the tests) executes ``notebooks/NN_*.ipynb`` with papermill into a fresh
temporary folder, renders HTML with nbconvert, writes ``claims.csv`` and
``index.html``, and only when every notebook succeeded replaces the output
folder; otherwise it exits non-zero naming the failed notebooks and claims,
keeps the previous reports intact and leaves the failed run in
``.reports-failed/`` for inspection.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import html
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "CLAIMS_MIME",
    "PAPERS",
    "Claim",
    "ClaimLedger",
    "CheckOutcome",
    "ClaimsFailed",
    "NotebookRun",
    "list_notebooks",
    "smoke_parameters",
    "execute_notebook",
    "claims_from_notebook",
    "run_notebooks",
    "limit_blas_threads",
    "main",
]

CLAIMS_MIME = "application/vnd.sampling-lab.claims+json"

PAPERS = {
    "KDD20": "Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020",
    "AAAI21": "Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling. AAAI 2021",
    "TORS24": "Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024",
    "AP25": "Manzhos, Ianevych, Melnyk. Average Precision at Cutoff k under Random Rankings: Expectation and Variance. 2025",
    "sampling-lab": "sampling-lab's own results (not stated in the papers)",
}

REPO_ROOT = Path(__file__).resolve().parents[1]


class ClaimsFailed(AssertionError):
    """Raised by :meth:`ClaimLedger.finalize` when at least one claim failed."""


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


@dataclass(frozen=True)
class Claim:
    """One verified claim: what was compared, the measured value and the verdict."""

    claim_id: str
    source: str
    description: str
    measured: object
    expected: object
    tolerance: str
    comparison: str
    passed: bool
    notebook: str = ""

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
        return (f"[{'pass' if c.passed else 'FAIL'}] {c.claim_id} ({c.source}): measured {c.measured}, "
                f"expected {c.expected}, {c.tolerance}")


@dataclass
class ClaimLedger:
    """Records the verified claims of one notebook.

    Parameters
    ----------
    notebook : str
        Notebook name, e.g. ``"01_sampling_theorem"``.

    Notes
    -----
    Every ``check_*`` method records a :class:`Claim` and returns a
    :class:`CheckOutcome` (truthy if it passed, displayed as a one-line
    verdict); none raises, so a notebook records all of its claims before
    :meth:`finalize` raises on the failures. Claim ids must be unique within
    a notebook. ``source`` starts with a key of :data:`PAPERS`.
    """

    notebook: str
    claims: list = field(default_factory=list)

    def _add(self, claim_id, source, description, measured, expected, tolerance, comparison, passed):
        if any(c.claim_id == claim_id for c in self.claims):
            raise ValueError(f"claim_id must be unique within the notebook; {claim_id!r} was recorded already")
        if not source or source.split()[0] not in PAPERS:
            raise ValueError(f"source must start with one of {sorted(PAPERS)}; got {source!r}")
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
        )
        self.claims.append(c)
        return CheckOutcome(c)

    def check_close(self, claim_id, source, description, *, measured, expected, rtol=0.0, atol=0.0):
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
        if m.size == 1 and e.size == 1:
            mv, ev = float(m.reshape(())), float(e.reshape(()))
        else:
            i = int(np.nanargmax(err - allowed)) if np.all(np.isfinite(err)) else 0
            mv = f"max abs err {np.max(err):.3g}"
            ev = f"allowed {np.broadcast_to(allowed, err.shape).flat[i]:.3g} at worst element ({err.size} compared)"
        return self._add(claim_id, source, description, mv, ev, f"rtol={rtol:g}, atol={atol:g}", "close", ok)

    def check_z(self, claim_id, source, description, *, estimate, expected, se, z_max=4.0):
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
        if est.size == 1 and exp.size == 1:
            mv, ev = float(est.reshape(())), float(exp.reshape(()))
        else:
            mv, ev = f"max |z| {zmax:.3g} over {z.size}", "|z| <= z_max"
        return self._add(claim_id, source, description, mv, ev, f"|z| <= {z_max:g} (z = {zmax:.3g})", "z-score", ok)

    def check_le(self, claim_id, source, description, *, measured, bound, tol=0.0):
        """Pass when measured <= bound + tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, sign=1.0)

    def check_ge(self, claim_id, source, description, *, measured, bound, tol=0.0):
        """Pass when measured >= bound - tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, sign=-1.0)

    def _check_order(self, claim_id, source, description, measured, bound, tol, sign):
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
        return self._add(claim_id, source, description, mv, b, tolerance, "<=" if sign > 0 else ">=", ok)

    def check_true(self, claim_id, source, description, *, passed, measured=None, expected=None, tolerance=""):
        """Record a claim decided by the caller; give the evidence in measured/expected."""
        return self._add(claim_id, source, description, measured, expected, tolerance, "condition", bool(passed))

    def table(self) -> pd.DataFrame:
        """Tidy DataFrame of the recorded claims (one row per claim)."""
        cols = ["claim_id", "source", "description", "measured", "expected", "tolerance", "comparison", "passed"]
        return pd.DataFrame([{k: getattr(c, k) for k in cols} for c in self.claims], columns=cols)

    @property
    def failed(self):
        return [c for c in self.claims if not c.passed]

    def finalize(self):
        """Display the claims, publish them for the runner, raise if any failed."""
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
            ids = ", ".join(c.claim_id for c in self.failed)
            raise ClaimsFailed(f"{self.notebook}: {len(self.failed)} of {len(self.claims)} claims failed: {ids}")
        return self.table()


# --------------------------------------------------------------------------- runner


def list_notebooks(notebooks_dir=None, only=None):
    """The ``NN_*.ipynb`` notebooks, sorted; ``only`` keeps names starting with any prefix."""
    d = Path(notebooks_dir or REPO_ROOT / "notebooks")
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
    """Claims published by :meth:`ClaimLedger.finalize` in an executed notebook."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if CLAIMS_MIME in data:
                payload = data[CLAIMS_MIME]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                out.extend(payload["claims"])
    return out


@dataclass
class NotebookRun:
    """Outcome of executing one notebook."""

    name: str
    ok: bool
    seconds: float
    error: str = ""
    claims: list = field(default_factory=list)


def execute_notebook(src, dst, parameters=None, cwd=None, html=True, timeout=None):
    """Execute one notebook with papermill into ``dst`` and render ``dst`` as HTML.

    Returns a :class:`NotebookRun`; never raises on notebook errors.
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
        )
        ok = True
    except Exception as exc:  # papermill wraps the cell error
        ok = False
        err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    seconds = time.perf_counter() - t0
    claims = claims_from_notebook(dst) if dst.exists() else []
    if ok and not claims:
        ok, err = False, "no claims recorded (ledger.finalize() missing?)"
    if ok and any(not c["passed"] for c in claims):
        ok, err = False, "failed claims"
    if html and dst.exists():
        try:
            _render_html(dst, dst.with_suffix(".html"))
        except Exception as exc:  # pragma: no cover - rendering problems are reported, not fatal
            err = (err + "; " if err else "") + f"HTML rendering failed: {exc}"
            ok = False
    return NotebookRun(src.stem, ok, seconds, err, claims)


def _render_html(ipynb, out):
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(ipynb), as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    Path(out).write_text(body, encoding="utf-8")


def _execute_job(args):
    src, dst, params, timeout = args
    return execute_notebook(src, dst, params, timeout=timeout)


def _git_commit():
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except Exception:
        return "unknown"


def _write_ledger(out_dir, runs, mode):
    rows = []
    for r in runs:
        for c in r.claims:
            row = dict(c)
            row["notebook"] = r.name
            row["paper"] = row["source"].split()[0] if row["source"].split()[0] in PAPERS else "other"
            row["run"] = mode
            rows.append(row)
    cols = [
        "paper", "notebook", "claim_id", "source", "description", "measured", "expected",
        "tolerance", "comparison", "passed", "run",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df.to_csv(out_dir / "claims.csv", index=False)
    return df


def _index_html(df, runs, mode):
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>sampling-lab: verified claims</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;width:100%;margin-bottom:2em;font-size:0.9em}"
        "td,th{border:1px solid #ccc;padding:4px 6px;text-align:left;vertical-align:top}"
        ".pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}</style></head><body>",
        "<h1>sampling-lab: index of verified claims</h1>",
        f"<p>Generated {esc(_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))} from commit "
        f"<code>{esc(_git_commit())}</code> with <b>{esc(mode)}</b> parameters; Python {esc(platform.python_version())}, "
        f"numpy {esc(np.__version__)}. {int(df['passed'].sum())} of {len(df)} claims pass.</p>",
        "<h2>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>claims passed</th><th>run time (s)</th></tr>",
    ]
    for r in runs:
        n_ok = sum(bool(c["passed"]) for c in r.claims)
        status = "<span class='pass'>ok</span>" if r.ok else f"<span class='fail'>FAILED</span> {esc(r.error)}"
        parts.append(
            f"<tr><td><a href='{esc(r.name)}.html'>{esc(r.name)}</a> (<a href='{esc(r.name)}.ipynb'>ipynb</a>)</td>"
            f"<td>{status}</td><td>{n_ok} / {len(r.claims)}</td><td>{r.seconds:.1f}</td></tr>"
        )
    parts.append("</table><h2>Claims by paper</h2>")
    for paper, g in df.groupby("paper", sort=False):
        parts.append(f"<h3>{esc(paper)}: {esc(PAPERS.get(paper, 'other sources'))}</h3>")
        parts.append(
            "<table><tr><th>status</th><th>claim</th><th>source</th><th>description</th><th>measured</th>"
            "<th>expected / bound</th><th>tolerance</th><th>notebook</th></tr>"
        )
        for _, c in g.iterrows():
            st = "<span class='pass'>pass</span>" if bool(c["passed"]) else "<span class='fail'>FAIL</span>"
            parts.append(
                f"<tr><td>{st}</td><td>{esc(str(c['claim_id']))}</td><td>{esc(str(c['source']))}</td>"
                f"<td>{esc(str(c['description']))}</td><td>{esc(str(c['measured']))}</td>"
                f"<td>{esc(str(c['expected']))}</td><td>{esc(str(c['tolerance']))}</td>"
                f"<td><a href='{esc(c['notebook'])}.html'>{esc(c['notebook'])}</a></td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


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
        notebooks' reports in ``out_dir`` are kept and the ledger is merged.
    jobs : int
        Notebooks executed in parallel (separate processes).
    failed_dir : path, default ``<out_dir>/../.reports-failed``
        Where a failed run is kept for inspection.

    Returns
    -------
    list of NotebookRun
    """
    out_dir = Path(out_dir or REPO_ROOT / "reports").resolve()
    nbs = list_notebooks(notebooks_dir, only)
    limit_blas_threads()
    if not nbs:
        raise ValueError(f"no notebooks matched only={only!r} in {notebooks_dir or REPO_ROOT / 'notebooks'}")
    mode = "smoke" if smoke else "default"
    tmp = Path(tempfile.mkdtemp(prefix=".reports-tmp-", dir=out_dir.parent))
    try:
        jobs_args = [
            (str(p), str(tmp / p.name), smoke_parameters(p) if smoke else {}, timeout) for p in nbs
        ]
        runs = []
        if jobs > 1 and len(jobs_args) > 1:
            import multiprocessing as mp

            with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
                for r in ex.map(_execute_job, jobs_args):
                    log(f"[{'ok' if r.ok else 'FAILED'}] {r.name} ({r.seconds:.1f} s, {len(r.claims)} claims)")
                    runs.append(r)
        else:
            for a in jobs_args:
                log(f"running {Path(a[0]).name} ...")
                r = _execute_job(a)
                log(f"[{'ok' if r.ok else 'FAILED'}] {r.name} ({r.seconds:.1f} s, {len(r.claims)} claims)")
                runs.append(r)
        failed = [r for r in runs if not r.ok]
        if failed:
            keep = Path(failed_dir) if failed_dir else out_dir.parent / ".reports-failed"
            shutil.rmtree(keep, ignore_errors=True)
            shutil.move(str(tmp), keep)
            for r in failed:
                bad = [c["claim_id"] for c in r.claims if not c["passed"]]
                log(f"FAILED notebook {r.name}: {r.error}" + (f"; failed claims: {', '.join(bad)}" if bad else ""))
            log(f"{out_dir} left unchanged; the failed run is in {keep}")
            return runs
        if only and out_dir.exists():
            # merge: keep the other notebooks' reports and claims
            done = {r.name for r in runs}
            for f in out_dir.iterdir():
                if f.is_file() and f.stem not in done and f.name not in ("claims.csv", "index.html"):
                    shutil.copy2(f, tmp / f.name)
            old = out_dir / "claims.csv"
            if old.exists():
                prev = pd.read_csv(old)
                for name, g in prev[~prev["notebook"].isin(done)].groupby("notebook", sort=False):
                    runs.append(NotebookRun(name, True, float("nan"), "", g.drop(columns=["paper", "run"]).to_dict("records")))
            runs.sort(key=lambda r: r.name)
        df = _write_ledger(tmp, runs, mode)
        (tmp / "index.html").write_text(_index_html(df, runs, mode), encoding="utf-8")
        backup = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(backup, ignore_errors=True)
        if out_dir.exists():
            out_dir.rename(backup)
        tmp.rename(out_dir)
        shutil.rmtree(backup, ignore_errors=True)
        log(f"{len(runs)} notebooks ok, {int(df['passed'].sum())}/{len(df)} claims pass -> {out_dir}")
        return runs
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    """Command line: ``python -m sampling_lib run [--smoke] [--only NN] [--out DIR] [--jobs J]``."""
    ap = argparse.ArgumentParser(prog="python -m sampling_lib", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute notebooks into a report folder")
    run.add_argument("--out", default=str(REPO_ROOT / "reports"), help="report folder (default: reports/)")
    run.add_argument("--smoke", action="store_true", help="use the notebooks' smoke parameters")
    run.add_argument("--only", action="append", help="notebook name prefix, e.g. 01 (repeatable)")
    run.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel")
    run.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds")
    args = ap.parse_args(argv)
    runs = run_notebooks(args.out, smoke=args.smoke, only=args.only, jobs=args.jobs, timeout=args.timeout)
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
