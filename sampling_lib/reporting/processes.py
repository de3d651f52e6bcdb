"""The runner's processes: pool workers, kernels, signals, and stopping them all."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

__all__ = [
    "RunInterrupted", "SignalGuard", "skip_iri_parser", "worker_init", "announce_start", "call_in_thread",
    "signals_raise", "signals_ignored", "stop_processes", "children_pids", "exit_with_parent",
    "process_identity", "process_gone",
]


def skip_iri_parser():
    """The runner's processes do not import ``rfc3987_syntax``.

    nbformat (under papermill and nbconvert) imports jsonschema, whose format
    checker imports rfc3987_syntax when it is installed (jupyterlab pulls it
    in) and builds an Earley parser for RFC 3987 IRIs at import: about 3 s per
    process, ten times the rest of nbformat's import. nbformat validates
    without a format checker, so the parser is never used; the runner's own
    processes (the ``run`` command and its workers, not the notebooks'
    kernels) skip it.
    """
    sys.modules.setdefault("rfc3987_syntax", None)


#: In a pool worker: where it announces each notebook it starts (set by :func:`worker_init`).
_started = None


#: Linux prctl option: the signal a process gets when the thread that created it ends
_PR_SET_PDEATHSIG = 1


def _parent_death_signal(signum):
    """Ask Linux to send ``signum`` to this process when its parent ends (prctl PR_SET_PDEATHSIG); False
    where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no prctl
        return False


def exit_with_parent(parent_pid, interval=0.5):
    """End this process when its parent ``parent_pid`` ends, whatever ends it (SIGKILL included).

    A runner killed with SIGKILL runs no clean-up: its pool workers (and, through
    them, their kernels) would run on, re-parented, and start the next notebooks.
    On Linux the kernel sends SIGKILL to this process when the parent ends
    (``prctl(PR_SET_PDEATHSIG)``; the runner creates its workers from its main
    thread, which lives as long as the runner); elsewhere a daemon thread polls
    the parent's pid every ``interval`` seconds. Either way, a parent that has
    already ended (the process was re-parented before this call) ends this one
    at once. The kernels a worker starts poll their own parent (ipykernel's
    ``JPY_PARENT_PID``), so they end within a second of their worker.
    """
    parent_pid = int(parent_pid)
    armed = _parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent_pid:          # ended before the signal was armed
        os._exit(1)
    if armed:
        return

    def poll():  # pragma: no cover - non-Linux
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=poll, name="sampling-lab-parent-watch", daemon=True).start()


def _linux_start_time(pid):
    """Start time of ``pid`` in clock ticks after boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()      # the fields after "pid (comm)": field 3 on
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _start_time(pid):
    t = _linux_start_time(pid)
    if t is not None:
        return t
    try:
        import psutil

        return psutil.Process(int(pid)).create_time()
    except Exception:  # noqa: BLE001 - unknown
        return None


def process_identity(pid=None):
    """What tells this process (``pid``: default this one) apart from any later one with the same pid: the
    host, the boot, the pid and its start time. Written into the runner's temporary folders, so that a later
    run can prove their owner has ended (:func:`process_gone`)."""
    import socket

    pid = os.getpid() if pid is None else int(pid)
    return {"host": socket.gethostname(), "boot": _boot_id(), "pid": pid, "start": _start_time(pid)}


def process_gone(identity):
    """True when the process ``identity`` (:func:`process_identity`) has provably ended: on this host and
    boot, no process has its pid, or the one that has was started at another time. False when it runs, and
    when that cannot be told (another host or boot, no start time: then nothing of it is touched)."""
    import socket

    try:
        pid, start = int(identity["pid"]), identity["start"]
        if identity["host"] != socket.gethostname() or identity["boot"] != _boot_id() or start is None:
            return False
    except (KeyError, TypeError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:       # a process of another user has that pid now: not ours
        return True
    now = _start_time(pid)
    return now is not None and now != start


def worker_init(started=None, parent_pid=None):
    """Initialise a pool worker: end with the runner, skip the IRI parser, leave Ctrl-C to the parent, keep
    ``started``.

    ``started`` is a multiprocessing queue: :func:`announce_start` puts each
    notebook's name on it when the worker starts that notebook, so that the
    parent can say which notebooks are running. ``parent_pid`` is the runner's
    pid: the worker ends when the runner does (:func:`exit_with_parent`).
    """
    global _started
    if parent_pid is not None:
        exit_with_parent(parent_pid)
    skip_iri_parser()
    # Ctrl-C reaches the whole process group: the parent alone decides and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _started = started


def announce_start(name):
    """Tell the parent (through :func:`worker_init`'s queue) that this worker starts notebook ``name``."""
    if _started is not None:
        _started.put(name)


def call_in_thread(fn, *args, **kwargs):
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
            box["result"] = fn(*args, **kwargs)
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
    """SIGTERM or SIGINT received while the runner was executing notebooks.

    ``installed`` is True when the signal came after the new report was put in
    place (the runner then finished its clean-up before stopping).
    """

    def __init__(self, signum, installed=False):
        self.signum = int(signum)
        self.installed = bool(installed)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")


class SignalGuard:
    """What :func:`signals_raise` yields: :meth:`defer` holds a signal back until the block ends."""

    def __init__(self):
        self.deferred = False
        self.received = None
        self.installed = False

    def defer(self):
        """From now on a SIGTERM/SIGINT is remembered and raised when the block ends, not at once."""
        self.deferred = True

    def handler(self, signum, frame):
        if self.deferred:
            self.received = signum
            return
        raise RunInterrupted(signum)


@contextlib.contextmanager
def signals_raise():
    """Turn SIGTERM/SIGINT into :class:`RunInterrupted` (main thread only) for the block.

    Yields a :class:`SignalGuard`. After ``guard.defer()`` (the runner calls it
    just before it puts the new report in place) a signal no longer interrupts:
    it is raised as ``RunInterrupted(signum, installed=guard.installed)`` when
    the block ends, so the swap and the clean-up are never cut in half and the
    message can say whether the report was replaced.
    """
    guard = SignalGuard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    old = {s: signal.signal(s, guard.handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield guard
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if guard.received is not None:
        raise RunInterrupted(guard.received, installed=guard.installed)


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
    whatever is still alive after ``grace`` seconds SIGKILL. (The kernels'
    connection files and sockets are in the runner's kernel folder, which the
    runner removes afterwards.)
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

