"""One notebook: find it, read its smoke parameters, execute it with papermill, render its HTML.

Kernels run over IPC (:mod:`sampling_lib.reporting.kernel`): each kernel's
connection file and Unix sockets are in a folder of the runner's (mode 0700,
created with ``mkdtemp`` and removed after the run), and no kernel of the
runner listens on a network port.

The executed notebook records where it came from and where it went
(papermill's ``input_path`` / ``output_path`` metadata) relative to the
project, e.g. ``notebooks/01_sampling_theorem.ipynb`` and
``reports/01_sampling_theorem.ipynb``, not the runner's temporary folder.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .environment import project_root
from .ledger import claims_from_node
from .processes import announce_start, call_in_thread
from .rendering import render_html

__all__ = [
    "NotebookRun", "NotebookJob", "list_notebooks", "smoke_parameters", "execute_notebook",
    "execute_job", "is_notebook_name", "project_relative", "shared_kernel",
]

_NAME = re.compile(r"[0-9]{2}_[A-Za-z0-9_.-]*")


def is_notebook_name(name):
    """True for a notebook's name as the runner writes it (``NN_words``: no folder, no ``..``)."""
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and ".." not in name


def list_notebooks(notebooks_dir=None, only=None):
    """The ``NN_*.ipynb`` notebooks, sorted; ``only`` keeps names starting with any prefix.

    An empty prefix (which every name starts with) is refused with a
    ``ValueError``, as is a prefix with a folder separator.
    """
    d = Path(notebooks_dir or project_root() / "notebooks")
    nbs = sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))
    if only is not None:
        prefixes = [only] if isinstance(only, str) else list(only)
        for x in prefixes:
            if not isinstance(x, str) or not x.strip() or "/" in x or os.sep in x:
                raise ValueError(f"only must name the start of a notebook's name, e.g. '01' or '01_sampling'; "
                                 f"got {x!r}")
        nbs = [p for p in nbs if any(p.name.startswith(x.strip()) for x in prefixes)]
    return nbs


def smoke_parameters(path):
    """The smoke parameter set declared in the notebook metadata (``sampling_lab``)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    meta = nb.metadata.get("sampling_lab", {})
    if "smoke_parameters" not in meta:
        raise ValueError(f"{Path(path).name}: metadata.sampling_lab.smoke_parameters is missing")
    return dict(meta["smoke_parameters"])


def project_relative(path):
    """``path`` relative to the project (``notebooks/01_x.ipynb``); outside it, ``<folder>/<file>``."""
    path = Path(os.path.abspath(path))
    with contextlib.suppress(ValueError):
        return path.relative_to(project_root().resolve()).as_posix()
    return f"{path.parent.name}/{path.name}"


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


class NotebookJob(NamedTuple):
    """One notebook for the runner's pool: source, output, parameters and where its kernel connects."""

    src: str
    dst: str
    parameters: dict
    timeout: object = None
    kernel_dir: object = None
    output_label: object = None


def _kernel_dir():
    """A private folder (mkdtemp, mode 0700) for kernels' IPC sockets and connection files."""
    return Path(tempfile.mkdtemp(prefix="sampling-lab-kernels-"))


def _ipc_config(kdir, name):
    """The kernel manager's configuration: IPC transport, its connection file ``kernel-<name>.json`` in ``kdir``."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "connection_file": str(kdir / f"kernel-{name}.json")}})


@contextlib.contextmanager
def shared_kernel(env=None):
    """A notebook kernel for several runs of :func:`execute_notebook` (``kernel=``), shut down on exit.

    Made for the test suite's smoke runs: a fresh kernel costs about 4 s before a notebook's
    first cell (its start and the imports of numpy, scipy, pandas, matplotlib and the library),
    paid once per process instead of once per notebook. Each run clears the kernel's namespace
    first (``%reset -f``, every figure closed), so a name one notebook defines is not seen by
    the next; modules stay imported, with their caches. ``make reports`` (``sampling-lib run``)
    gives every notebook a fresh kernel.

    Parameters
    ----------
    env : mapping, optional
        The kernel's environment (default: this process's).

    Yields
    ------
    RunnerKernelManager
        Started over IPC in a private folder (removed on exit), as the runner's kernels.
    """
    from jupyter_core.utils import run_sync

    from .kernel import RunnerKernelManager

    kdir = _kernel_dir()
    km = RunnerKernelManager(kernel_name="python3", config=_ipc_config(kdir, "shared"))
    try:
        run_sync(km.start_kernel)(env=dict(os.environ if env is None else env))   # restarts reuse these arguments
        yield km
    finally:
        try:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
        finally:
            shutil.rmtree(kdir, ignore_errors=True)


#: what a run in a :func:`shared_kernel` executes first: the namespace cleared, the warning filters as at the
#: kernel's first run, numpy's floating-point error handling and matplotlib's settings at their defaults,
#: figures closed, the cwd set
_RESET = """%reset -f
import os as _os, sys as _sys, warnings as _warnings
_first = _sys.__dict__.setdefault("_sampling_lab_shared_kernel", {{"filters": list(_warnings.filters)}})
_warnings.filters[:] = _first["filters"]
_warnings._filters_mutated()
if "numpy" in _sys.modules:
    _sys.modules["numpy"].seterr(divide="warn", over="warn", under="ignore", invalid="warn")
if "matplotlib.pyplot" in _sys.modules:
    _sys.modules["matplotlib.pyplot"].close("all")
    _sys.modules["matplotlib"].rc_file_defaults()
_os.chdir({cwd!r})
del _os, _sys, _warnings, _first
"""


def _reset_shared(km, cwd):
    """Clear the :func:`shared_kernel`'s namespace (restarting it first if it died); then chdir to ``cwd``."""
    from jupyter_core.utils import run_sync

    for attempt in range(2):
        if attempt or not run_sync(km.is_alive)():
            run_sync(km.restart_kernel)(now=True)
        kc = km.blocking_client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            reply = kc.execute_interactive(_RESET.format(cwd=cwd), timeout=60, store_history=False,
                                           output_hook=lambda msg: None)
        except RuntimeError:       # "Kernel died before replying": not reaped yet when is_alive asked
            if attempt:
                raise
            continue
        finally:
            kc.stop_channels()
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the shared kernel could not be reset: {reply['content'].get('evalue', '')}")
        return


def execute_notebook(src, dst, parameters=None, cwd=None, html=True, timeout=None, *, kernel_dir=None,
                     output_label=None, kernel=None):
    """Execute one notebook with papermill into ``dst`` and render ``dst`` as HTML.

    Parameters
    ----------
    src, dst : path
        The notebook and the executed copy to write.
    parameters : dict, optional
        Injected by papermill after the cell tagged ``parameters``.
    cwd : path, optional
        The kernel's working directory (default: the notebook's folder).
    html : bool
        Also write ``dst`` as HTML (with the MathJax file beside it).
    timeout : int, optional
        Per-cell timeout in seconds.
    kernel_dir : path, optional
        A folder of the caller's (mode 0700) for the kernel's connection file
        and IPC sockets; by default one is created here and removed after.
    output_label : str, optional
        What the executed notebook records as papermill's ``output_path``
        (default: ``dst`` relative to the project).
    kernel : RunnerKernelManager, optional
        Run in this kernel of :func:`shared_kernel` (its namespace cleared first, restarted if it
        died) instead of a fresh one; ``kernel_dir`` does not apply.

    Returns
    -------
    NotebookRun
        Never raises on notebook errors (only on interruption:
        KeyboardInterrupt and the runner's signal handling).
    """
    import nbformat
    import papermill as pm

    from .kernel import RunnerKernelManager

    src, dst = Path(src), Path(dst)
    if kernel is not None and kernel_dir is not None:
        raise ValueError("kernel_dir does not apply to a shared kernel (kernel=); give one of them")
    own_dir = kernel_dir is None and kernel is None
    if kernel is None:
        kdir = _kernel_dir() if own_dir else Path(kernel_dir)
        how = {"shutdown_kernel": "immediate", "kernel_manager_class": RunnerKernelManager,
               "config": _ipc_config(kdir, uuid.uuid4().hex[:12])}
    else:
        how = {"km": kernel}
    t0 = time.perf_counter()
    err = ""
    try:
        if kernel is not None:
            _reset_shared(kernel, str(cwd or src.parent))
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
            **how,
        )
        ok = True
    except Exception as exc:  # papermill wraps the cell error
        ok = False
        err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    finally:
        if own_dir:
            shutil.rmtree(kdir, ignore_errors=True)
    seconds = time.perf_counter() - t0
    nb = None
    if dst.exists():
        nb = nbformat.read(str(dst), as_version=4)
        pm_meta = nb.metadata.get("papermill")
        if pm_meta is not None:   # paths relative to the project, not the runner's temporary folder
            pm_meta["input_path"] = project_relative(src)
            pm_meta["output_path"] = output_label or project_relative(dst)
            nbformat.write(nb, str(dst))
    claims = claims_from_node(nb) if nb is not None else []
    run = NotebookRun(src.stem, ok, seconds, err, claims, parameters=dict(parameters or {}))
    if run.ok and not claims:
        run.ok, run.error = False, "no claims recorded (ledger.finalize() missing?)"
    if run.ok and run.failed_claims:
        run.ok, run.error = False, "failed claims"
    if html and nb is not None:
        try:
            render_html(nb, dst.with_suffix(".html"))
        except Exception as exc:  # pragma: no cover - rendering problems are reported, not fatal
            run.error = (run.error + "; " if run.error else "") + f"HTML rendering failed: {exc}"
            run.ok = False
    return run


def execute_job(job):
    """Run one :class:`NotebookJob` (in a pool worker or in the runner), announcing its start."""
    job = NotebookJob(*job)
    announce_start(Path(job.src).stem)
    return call_in_thread(execute_notebook, job.src, job.dst, job.parameters, None, True, job.timeout,
                          kernel_dir=job.kernel_dir, output_label=job.output_label)
