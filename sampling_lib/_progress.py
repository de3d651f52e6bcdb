"""Progress on stderr for the long steps of ``estimate`` / ``compare``: a bar on a terminal, lines elsewhere.

On a terminal (or in Jupyter) a tqdm bar, as before. When stderr is not a
terminal -- a run under ``nohup``, in CI, piped into a log -- a bar's
carriage returns would fill the log with one unreadable line, and no bar at
all left a multi-minute run silent. There, a step prints plain lines::

    sampling-lib: fit logspline (2 models): running, 10 s
    sampling-lib: bootstrap logspline: 448/1000 replicates (45%), 20 s, about 25 s left
    sampling-lib: bootstrap logspline: done, 1000 replicates in 44 s

throttled: nothing for a step that ends within :data:`FIRST_LINE_AFTER`
seconds (short runs stay quiet), then a line every :data:`LINE_EVERY`
seconds, and a last line when it ends. A step without a count (the fit)
is covered by the same lines, from a background timer: nothing inside the
estimators has to report.
"""
from __future__ import annotations

import sys
import threading
import time

__all__ = ["FIRST_LINE_AFTER", "LINE_EVERY", "progress", "stage", "PlainLines"]

#: seconds before the first plain line of a step (steps that end sooner print nothing)
FIRST_LINE_AFTER = 10.0
#: seconds between two plain lines of a step
LINE_EVERY = 30.0
PREFIX = "sampling-lib"


def _in_jupyter():
    """Running in a Jupyter kernel (its stderr is no terminal, but it renders tqdm's widget)."""
    ipython = sys.modules.get("IPython")
    try:
        shell = ipython.get_ipython() if ipython is not None else None
    except Exception:  # noqa: BLE001 - any failure: not Jupyter
        return False
    return type(shell).__name__ == "ZMQInteractiveShell"


def _interactive(stream):
    """A terminal, or Jupyter."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    return _in_jupyter()


def _seconds(s):
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class PlainLines:
    """Throttled plain progress lines for one step (see the module docstring).

    Parameters
    ----------
    desc : str
        What the step is, e.g. "bootstrap logspline".
    total : int, optional
        Number of units; None for a step without a count.
    unit : str, default "replicates"
        What the units are, in the lines.
    stream : file, default sys.stderr
    first, every : float, optional
        :data:`FIRST_LINE_AFTER` and :data:`LINE_EVERY` by default.
    """

    def __init__(self, desc, total=None, *, stream=None, first=None, every=None, unit="replicates"):
        self.desc, self.total, self.n, self.unit = desc, total, 0, unit
        self.stream = sys.stderr if stream is None else stream
        self.first = FIRST_LINE_AFTER if first is None else first
        self.every = LINE_EVERY if every is None else every
        self.start = time.monotonic()
        self.printed = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._timer = threading.Thread(target=self._run, name=f"progress: {desc}", daemon=True)
        self._timer.start()

    def _line(self, text):
        with self._lock:
            self.stream.write(f"{PREFIX}: {self.desc}: {text}\n")
            self.stream.flush()
            self.printed = True

    def _status(self):
        elapsed = time.monotonic() - self.start
        if not self.total:
            return f"running, {_seconds(elapsed)}"
        text = f"{self.n}/{self.total} {self.unit} ({self.n / self.total:.0%}), {_seconds(elapsed)}"
        if self.n:
            text += f", about {_seconds(elapsed * (self.total - self.n) / self.n)} left"
        return text

    def _run(self):
        if self._stop.wait(self.first):
            return
        while True:
            self._line(self._status())
            if self._stop.wait(self.every):
                return

    def update(self, k=1):
        """``k`` more units done."""
        self.n += k

    def close(self):
        """End the step; a last line when an earlier one was printed."""
        self._stop.set()
        self._timer.join()
        if self.printed:
            done = f"{self.total} {self.unit} " if self.total else ""
            self._line(f"done, {done}in {_seconds(time.monotonic() - self.start)}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress(total, enabled, desc, unit="replicates"):
    """A progress object for ``total`` units (``update(k)``, ``close()``), or None when not ``enabled``.

    A tqdm bar when stderr is a terminal or Jupyter, else :class:`PlainLines`.
    """
    if not enabled:
        return None
    if _interactive(sys.stderr):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, unit=f" {unit}")
    return PlainLines(desc, total, unit=unit)


class _TerminalLine(PlainLines):
    """A step without a count on a terminal: one line rewritten in place every second, erased at the end."""

    def __init__(self, desc):
        super().__init__(desc, None, first=2.0, every=1.0)

    def _line(self, text):
        with self._lock:
            self.stream.write(f"\r{self.desc}: {text}\x1b[K")
            self.stream.flush()
            self.printed = True

    def close(self):
        self._stop.set()
        self._timer.join()
        if self.printed:
            with self._lock:
                self.stream.write("\r\x1b[K")
                self.stream.flush()


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def stage(enabled, desc):
    """Context for a step without a count (a fit): how long it has run, on stderr.

    Plain lines (:class:`PlainLines`) when stderr is not a terminal; on a terminal one
    line rewritten every second from the second second on, erased when the step ends
    (in Jupyter nothing: the cell shows that it runs).
    """
    if not enabled:
        return _Nothing()
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return _TerminalLine(desc)
    if _interactive(sys.stderr):
        return _Nothing()
    return PlainLines(desc)
