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

Safety of the output folder (:mod:`~sampling_lib.reporting.folders`):

* **only the runner's folders**: every folder the runner writes holds a
  marker file, ``.sampling-lab-report``, listing the files it put there. The
  output folder must be new, empty, or such a report folder with nothing
  added; anything else (a file, the repository root, a folder with the user's
  files, a mount point) is refused before a notebook runs, with one line and
  nothing changed. A symbolic link is followed only to a report folder (that
  folder is written; the link stays). The previous report is removed by
  deleting the files its marker lists; ``--only`` carries over only the other
  notebooks' marked files. The failed-run folder obeys the same rules;
* **lock**: a runner holds an exclusive ``flock`` on ``.<out>.lock`` beside
  the output folder for the whole run (and removes the file when it ends); a
  second runner into the same folder stops at once with :class:`ReportsLocked`;
* **swap**: the new folder replaces the old one with one atomic
  ``renameat2(RENAME_EXCHANGE)`` (Linux), so a reader always sees a complete
  folder, old or new, and never a missing one. Where the exchange is not
  supported (other systems or file systems) it falls back to two renames
  through a backup folder with a unique name (``mkdtemp``) that it created
  itself, leaving a window of two system calls. A user's own ``<out>.old``
  (or any other folder) is never touched. If the swap fails all the same,
  the complete run is kept in the failed-run folder and the message says so;
* **permissions**: the report folder gets the usual ``0777 & ~umask`` mode,
  not ``mkdtemp``'s 0700;
* **signals**: on SIGTERM or SIGINT (Ctrl-C) the runner freezes its pool
  workers, stops them and every kernel they started, then removes the
  temporary folder, and exits with status 128 + signal number without a
  traceback; the previous reports stay in place. From just before the swap a
  signal waits until the new report is in place and the old one removed;
* **SIGKILL**: the pool workers end with the runner (Linux
  ``prctl(PR_SET_PDEATHSIG)``, elsewhere a thread polling the parent's pid)
  and their kernels with them (ipykernel polls its parent); the temporary
  folders hold an owner file (:data:`~sampling_lib.reporting.folders.OWNER`:
  host, boot, pid and start time), and the next run removes those whose owner
  has provably ended.

Kernels (:mod:`~sampling_lib.reporting.kernel`) talk to the runner over IPC,
with their connection files and sockets in a 0700 folder of the runner's,
and listen on no TCP port. The rendered notebooks load MathJax from a file
beside them (:mod:`~sampling_lib.reporting.rendering`), so they read offline.

``python -m sampling_lib run --claim ID`` re-executes only the notebook that
holds claim ``ID`` (looked up in ``reports/claims.csv``; the notebook is
found by name in ``notebooks/``, never by a path) with its default
parameters (or ``--smoke``), prints the claim's fresh row next to the
recorded one, and exits non-zero when the claim fails. It does not modify the
report folder.
"""
from .command import add_run_arguments, main, run_command
from .environment import environment_info, limit_blas_threads
from .folders import ReportsLocked
from .ledger import CLAIMS_MIME, KINDS, PAPERS, CheckOutcome, Claim, ClaimLedger, ClaimsFailed, claims_from_notebook
from .ledger import read_discrepancies
from .notebook import NotebookRun, execute_notebook, list_notebooks, smoke_parameters
from .processes import RunInterrupted
from .runner import run_claim, run_notebooks

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
