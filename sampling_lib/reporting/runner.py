"""The report runner: execute the notebooks, write the ledger and the index, replace the report folder."""
from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import tempfile
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np

from .environment import environment_info, limit_blas_threads, project_root
from .folders import (MARKER, ReportFolderError, check_report_folder, current_umask, install_dir, locked,
                      make_run_folder, read_marker, release_run_folder, remove_report_folder,
                      remove_stale_run_folders, remove_tree, write_marker)
from .index import format_value, index_html
from .ledger import ledger_frame, read_discrepancies, read_ledger
from .notebook import (NotebookJob, NotebookRun, execute_job, is_notebook_name, list_notebooks, project_relative,
                       smoke_parameters)
from .processes import children_pids, signals_ignored, signals_raise, stop_processes, worker_init
from .rendering import MATHJAX_FILE

__all__ = ["run_notebooks", "run_claim", "longest_first", "ClaimNotebookError"]


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


def longest_first(jobs_args, previous_dir):
    """Order notebook jobs longest first by the time each took in ``previous_dir``.

    With ``--jobs`` > 1 the pool starts jobs in list order; starting the longest
    notebooks first (LPT scheduling) keeps one long notebook from starting last
    and finishing alone. Times come from the papermill metadata of the executed
    notebooks of the previous run; notebooks without one (new, or never run)
    go first, in name order, since they may be long.

    Examples
    --------
    >>> longest_first([("a.ipynb", "x/a.ipynb", {}, None)], "/nonexistent")[0][0]
    'a.ipynb'
    """
    def key(args):
        t = _previous_seconds(Path(previous_dir) / Path(args[0]).name)
        return (t is not None, -(t or 0.0))
    return sorted(jobs_args, key=key)   # stable: name order among equals


def _pool_run(jobs_args, jobs, log, previous_dir, announce):
    """Run the jobs in a spawn pool of ``jobs`` workers, longest first; returns {src: run}."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    started = ctx.SimpleQueue()   # workers put each notebook's name on it as they start it
    # the workers end with the runner, even one killed with SIGKILL (worker_init: exit_with_parent)
    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=worker_init,
                             initargs=(started, os.getpid()))
    try:
        order = longest_first(jobs_args, previous_dir) if previous_dir is not None else list(jobs_args)
        futures = {ex.submit(execute_job, a): a[0] for a in order}
        done, pending = {}, set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            while not started.empty():
                announce(started.get())
            for fut in finished:
                r = fut.result()
                _log_run(log, r)
                done[futures[fut]] = r
        ex.shutdown(wait=True)
        return done
    except BaseException:
        _stop_children(ex)
        raise


def _stop_children(ex=None, before=frozenset()):
    """Stop a pool's workers, every kernel they started, and any other new child of this process."""
    with signals_ignored():
        roots = set(getattr(ex, "_processes", None) or {}) if ex is not None else set()
        roots |= children_pids() - set(before)
        stop_processes(roots)
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)


def _execute_all(jobs_args, jobs, log, previous_dir=None):
    """Run the notebooks (in a pool when jobs > 1, longest first by ``previous_dir``'s times; runs
    are returned in ``jobs_args`` order); on interruption stop every child first, then re-raise.

    Each notebook is announced as it starts, ``"3 of 11: 03_name started"``.
    """
    n_started = [0]

    def announce(name):
        n_started[0] += 1
        log(f"{n_started[0]} of {len(jobs_args)}: {name} started")

    before = children_pids()
    try:
        if jobs > 1 and len(jobs_args) > 1:
            done = _pool_run(jobs_args, jobs, log, previous_dir, announce)
            return [done[a[0]] for a in jobs_args]
        runs = []
        for a in jobs_args:
            announce(Path(a[0]).stem)
            r = execute_job(a)
            _log_run(log, r)
            runs.append(r)
        return runs
    except BaseException:
        _stop_children(None, before)
        raise


def _check_timeout(timeout):
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, np.integer))
                                or timeout < 1):
        raise ValueError(f"timeout must be None or a whole number of seconds >= 1; got {timeout!r}")


#: The runner's temporary folders: the run beside the report folder, and the kernels' connection files
TMP_PREFIX, KERNELS_PREFIX = ".reports-tmp-", "sampling-lab-kernels-"


def _run_file(name):
    """A file the runner writes into its temporary run folder: an executed notebook, its HTML, the ledger,
    index, environment, MathJax and marker files."""
    p = Path(name)
    return name in _fresh_names(()) or (p.suffix in (".ipynb", ".html") and is_notebook_name(p.stem))


def remove_stale_runs(parent, log):
    """Remove the temporary folders of runs that ended without removing them (a SIGKILL): ``.reports-tmp-*``
    beside the report folder (``parent``; None: only the kernels' folders) and ``sampling-lab-kernels-*`` in
    the system's temporary folder; only those provably the runner's whose run has ended
    (:func:`~sampling_lib.reporting.folders.remove_stale_run_folders`)."""
    if parent is not None:
        remove_stale_run_folders(parent, TMP_PREFIX, _run_file, log)
    remove_stale_run_folders(tempfile.gettempdir(), KERNELS_PREFIX, lambda n: n.startswith("kernel-"), None)


def _fresh_names(names):
    """Files of a report written afresh on every run: the ledger, index, environment, MathJax and
    marker files, and ``names`` (what the run itself wrote)."""
    return {"claims.csv", "index.html", "environment.json", MATHJAX_FILE, MARKER} | set(names)


def run_notebooks(out_dir=None, *, smoke=False, only=None, jobs=1, notebooks_dir=None, timeout=None,
                  failed_dir=None, parameters=None, log=print):
    """Execute the notebooks and, only if all succeed, replace ``out_dir``.

    Parameters
    ----------
    out_dir : path, default ``<repo>/reports``
        A new or empty folder, or a report folder the runner wrote (it holds
        the marker file :data:`~sampling_lib.reporting.folders.MARKER`) with
        nothing added to it; anything else is refused before a notebook runs
        (:func:`~sampling_lib.reporting.folders.check_report_folder`). A
        symbolic link is followed only to such a report folder.
    smoke : bool
        Use each notebook's smoke parameters (tests) instead of its defaults.
    only : str or list of str, optional
        Run only notebooks whose names start with these prefixes; the other
        notebooks' reports in ``out_dir`` are kept and the ledger is merged
        (kept rows keep their own run mode, commit and environment). Nothing
        but the runner's own files of the re-run notebooks (and the ledger,
        index and environment files) is replaced.
    jobs : int
        Notebooks executed in parallel (separate processes).
    notebooks_dir : path, default ``<repo>/notebooks``
    timeout : int, optional
        Per-cell timeout in seconds (>= 1).
    failed_dir : path, default ``<out_dir>/../.reports-failed``
        Where a failed run is kept for inspection; the same rules as
        ``out_dir`` apply (it is replaced only when the runner wrote it).
    parameters : dict, optional
        Parameters given to every notebook run (over the smoke ones with
        ``smoke``), as papermill's ``-p``; each must be a parameter of every
        selected notebook (its cell tagged ``parameters``). Needs ``out_dir``:
        the default report folder holds the default run. The ledger records
        the run mode "custom" and the index each notebook's parameters.

    Returns
    -------
    list of NotebookRun
        The notebooks that ran (not the ones kept from an earlier run).

    Raises
    ------
    ValueError
        A bad argument; :class:`~sampling_lib.reporting.folders.ReportFolderError`
        (a ``ValueError``) when ``out_dir`` or ``failed_dir`` may not be
        written. Raised before anything runs, with nothing changed on disk.
    ReportsLocked
        Another runner holds the lock of ``out_dir``.
    OSError
        The new report could not be put in place (it is then kept in the
        failed-run folder, and the message says so).
    RunInterrupted
        On SIGTERM/SIGINT, after the children were stopped and the temporary
        folder removed (``out_dir`` is unchanged, unless the signal came after
        the new report was in place: ``exc.installed``).
    """
    for name, value in (("out_dir", out_dir), ("failed_dir", failed_dir), ("notebooks_dir", notebooks_dir)):
        if value is not None and not str(value).strip():   # "" is not the default folder
            raise ValueError(f"{name} must name a folder or be None (the default); got an empty path")
    nbs = list_notebooks(notebooks_dir, only)
    if not nbs:
        raise ValueError(f"no notebooks matched only={only!r} in {notebooks_dir or project_root() / 'notebooks'}")
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1; got {jobs!r}")
    _check_timeout(timeout)
    if parameters:
        if out_dir is None:
            raise ValueError("parameters need out_dir: the default report folder holds the notebooks run with their "
                             "default parameters")
        _check_parameters(nbs, parameters)
    out_dir = check_report_folder(out_dir or project_root() / "reports", "--out")
    keep = check_report_folder(failed_dir or out_dir.parent / ".reports-failed", "the failed-run folder")
    if keep == out_dir:
        raise ReportFolderError(f"the failed-run folder must differ from --out ({out_dir})")
    limit_blas_threads()
    mode = "custom" if parameters else "smoke" if smoke else "default"
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportFolderError(f"cannot create {out_dir.parent}: {exc.strerror or exc}") from None
    disc = read_discrepancies(Path(notebooks_dir) / "discrepancies.csv" if notebooks_dir else None)
    with signals_raise() as guard, locked(out_dir):
        check_report_folder(out_dir, "--out")   # again, now that no other runner can change it
        env = environment_info()
        remove_stale_runs(out_dir.parent, log)     # left by a run killed before it could (SIGKILL)
        try:
            tmp = make_run_folder(out_dir.parent, TMP_PREFIX)
        except OSError as exc:
            raise ReportFolderError(f"cannot write in {out_dir.parent}: {exc.strerror or exc}") from None
        kernels = make_run_folder(None, KERNELS_PREFIX)   # 0700: connection files, IPC sockets
        ours = True   # tmp is still the runner's temporary folder (not installed, not kept)
        try:
            os.chmod(tmp, 0o777 & ~current_umask())  # the report folder gets the usual mode, not mkdtemp's 0700
            jobs_args = [NotebookJob(str(p), str(tmp / p.name), {**(smoke_parameters(p) if smoke else {}),
                                                                 **(parameters or {})}, timeout,
                                     str(kernels), project_relative(out_dir / p.name)) for p in nbs]
            runs = _execute_all(jobs_args, int(jobs), log, previous_dir=out_dir)
            for r in runs:
                r.mode = mode
            failed = [r for r in runs if not r.ok]
            if failed:
                for r in failed:
                    bad = r.failed_claims
                    log(f"FAILED notebook {r.name}: {r.error}" + (f"; failed claims: {', '.join(bad)}" if bad else ""))
                guard.defer()
                ours = not _keep_run(tmp, keep, log)
                log(f"{out_dir} left unchanged; the failed run is in {tmp if ours else keep}")
                ours = False   # kept for inspection either way
                return runs
            all_runs = list(runs)
            if only and out_dir.exists():
                all_runs += _keep_previous(out_dir, tmp, {r.name for r in runs})
                all_runs.sort(key=lambda r: r.name)
            df = ledger_frame(all_runs, mode, env)
            df.to_csv(tmp / "claims.csv", index=False)
            (tmp / "environment.json").write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
            (tmp / "index.html").write_text(index_html(df, all_runs, mode, env, disc), encoding="utf-8")
            release_run_folder(tmp)
            write_marker(tmp, os.listdir(tmp))
            guard.defer()   # a signal from here on waits until the report is in place and the old one removed
            try:
                previous = install_dir(tmp, out_dir)
            except OSError as exc:
                kept = _keep_run(tmp, keep, log)
                ours = False
                raise OSError(exc.errno, f"could not put the new report at {out_dir} ({exc.strerror}); the "
                                         f"complete run is in {keep if kept else tmp}") from None
            ours = False
            guard.installed = True
            _discard(previous, out_dir, log)
            n_kept = len(all_runs) - len(runs)
            kinds = df["kind"]
            n_claims = int((kinds == "claim").sum())
            n_pass = int(df.loc[kinds == "claim", "passed"].astype(bool).sum())
            log(f"{len(runs)} notebook{'s' if len(runs) != 1 else ''} ran ok"
                + (f" ({n_kept} kept from the previous report)" if n_kept else "")
                + f"; {n_pass}/{n_claims} claims pass, {int((kinds == 'observation').sum())} observations -> {out_dir}")
            return runs
        finally:
            if ours:
                remove_tree(tmp)
            remove_tree(kernels)


def _check_parameters(nbs, parameters):
    """Every parameter given must be one of every selected notebook's (papermill would inject an unknown name
    with a warning only: a misspelt one would run the defaults)."""
    from papermill import inspect_notebook

    for p in nbs:
        known = set(inspect_notebook(str(p)))
        unknown = [k for k in parameters if k not in known]
        if unknown:
            raise ValueError(f"parameter {unknown[0]!r} is not a parameter of {p.stem} (its parameters cell "
                             f"holds {', '.join(sorted(known)) or 'none'}); select the notebooks that have it "
                             "with --only")


def _discard(previous, out_dir, log):
    """Remove the previous report (only the files its marker lists) and a backup folder of ours."""
    if previous is None:
        return
    remove_report_folder(previous, log)
    if previous.parent != out_dir.parent:   # the two-rename fallback: our mkdtemp backup folder
        with contextlib.suppress(OSError):
            previous.parent.rmdir()


def _keep_run(tmp, keep, log):
    """Put the run in ``tmp`` at the failed-run folder ``keep``; True when done (else it stays in tmp)."""
    release_run_folder(tmp)
    write_marker(tmp, os.listdir(tmp))
    try:
        check_report_folder(keep, "the failed-run folder")
        previous = install_dir(tmp, keep)
    except (ReportFolderError, OSError) as exc:
        log(f"could not keep the run in {keep} ({exc}); it stays in {tmp}")
        return False
    _discard(previous, keep, log)
    return True


def _keep_previous(out_dir, tmp, done):
    """With --only: copy the runner's files of the other notebooks into ``tmp``; return their records.

    Only the files the previous report's marker lists are copied, never the
    re-run notebooks' (``done``) nor the ledger, index, environment and MathJax
    files (written afresh).
    """
    listed = read_marker(out_dir) or []
    fresh = _fresh_names(os.listdir(tmp))
    for name in listed:
        f = out_dir / name
        if name not in fresh and Path(name).stem not in done and f.is_file() and not f.is_symlink():
            shutil.copy2(f, tmp / name)
    kept = []
    old = out_dir / "claims.csv"
    if "claims.csv" in listed and old.is_file():
        prev = read_ledger(old)
        prev = prev[prev["notebook"].map(is_notebook_name)]   # a name, never a path
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


class ClaimNotebookError(ValueError):
    """claims.csv names a notebook that is not one of the project's notebooks (never executed)."""


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
            f"    measured {format_value(rec['measured'], scale)}  expected/bound {format_value(rec['expected'], scale)}"
            f"  tolerance {rec['tolerance']}")


def run_claim(claim_id, *, smoke=False, reports_dir=None, notebooks_dir=None, only=None, timeout=None, log=print):
    """Re-execute only the notebook that holds ``claim_id`` and report that claim.

    The notebook is found in ``<reports_dir>/claims.csv`` and looked up *by
    name* among the notebooks of ``notebooks_dir`` (the project's
    ``notebooks/``): a ``notebook`` value that is not one of their names (such
    as a path ``../../x/payload``) raises :class:`ClaimNotebookError` and
    nothing is executed. The notebook is executed into a
    temporary folder (``reports_dir`` is not modified) with its default
    parameters, or its smoke parameters when ``smoke``. The fresh record and
    the recorded one are printed through ``log``.

    Returns
    -------
    int
        0 when the claim passes (or is an observation, which never fails), 1
        when it fails or the notebook did not record it.
    """
    _check_timeout(timeout)
    for name, value in (("reports_dir", reports_dir), ("notebooks_dir", notebooks_dir)):
        if value is not None and not str(value).strip():   # "" is not the default folder
            raise ValueError(f"{name} must name a folder or be None (the default); got an empty path")
    reports_dir = Path(reports_dir or project_root() / "reports")
    ledger_path = reports_dir / "claims.csv"
    if not ledger_path.exists():
        raise FileNotFoundError(f"no claims ledger at {ledger_path}; run `make reports` first or pass --out")
    recorded = _find_claim(read_ledger(ledger_path), claim_id, only)
    nb_name = recorded["notebook"]
    nbdir = Path(notebooks_dir or project_root() / "notebooks")
    by_name = {p.stem: p for p in list_notebooks(nbdir)}   # by name, inside the notebooks folder only
    if nb_name not in by_name:
        raise ClaimNotebookError(
            f"{ledger_path} says claim {claim_id!r} is checked in notebook {nb_name!r}, which is not a notebook "
            f"of {nbdir} (the runner executes only those, by name); its notebooks: "
            f"{', '.join(sorted(by_name)) or 'none'}")
    src = by_name[nb_name]
    params = smoke_parameters(src) if smoke else {}
    limit_blas_threads()
    log(f"claim {claim_id}: running {src.name} with {'smoke' if smoke else 'default'} parameters"
        + (f" {json.dumps(params, sort_keys=True)}" if params else "") + " ...")
    remove_stale_runs(None, log)
    kernels = make_run_folder(None, KERNELS_PREFIX)   # 0700: connection file, IPC sockets
    try:
        with signals_raise(), tempfile.TemporaryDirectory(prefix=".claim-") as tmp:
            job = NotebookJob(str(src), str(Path(tmp) / src.name), params, timeout, str(kernels))
            run = _execute_all([job], 1, lambda m: None)[0]
    finally:
        remove_tree(kernels)
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
