"""The runner's processes: pool workers, kernels, signals, and stopping them all."""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

__all__ = [
    "RunInterrupted", "skip_iri_parser", "worker_init", "call_in_thread", "signals_raise", "signals_ignored",
    "stop_processes", "children_pids",
]


def skip_iri_parser():
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


def worker_init():
    skip_iri_parser()
    # Ctrl-C reaches the whole process group: the parent alone decides and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def call_in_thread(fn, *args):
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


class RunInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT received while the runner was executing notebooks."""

    def __init__(self, signum):
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")


@contextlib.contextmanager
def signals_raise():
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
def signals_ignored():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stop_processes(roots, grace=3.0):
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


def children_pids():
    """Direct children of this process, except multiprocessing's resource tracker (it must outlive the pool)."""
    try:
        import psutil
        from multiprocessing import resource_tracker

        tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
        return {p.pid for p in psutil.Process().children()} - {tracker}
    except Exception:  # pragma: no cover
        return set()


# --------------------------------------------------------------------------- the ledger files
