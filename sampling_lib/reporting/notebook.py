"""One notebook: find it, read its smoke parameters, execute it with papermill, render its HTML."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

from .environment import project_root
from .ledger import claims_from_notebook
from .processes import call_in_thread

__all__ = ["NotebookRun", "list_notebooks", "smoke_parameters", "execute_notebook", "execute_job"]


def list_notebooks(notebooks_dir=None, only=None):
    """The ``NN_*.ipynb`` notebooks, sorted; ``only`` keeps names starting with any prefix."""
    d = Path(notebooks_dir or project_root() / "notebooks")
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


def execute_job(args):
    src, dst, params, timeout = args
    return call_in_thread(execute_notebook, src, dst, params, None, True, timeout)


# --------------------------------------------------------------------------- environment
