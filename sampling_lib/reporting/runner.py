"""The report runner: execute the notebooks, write the ledger and the index, replace the report folder."""
from __future__ import annotations

import difflib
import json
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from .environment import environment_info, limit_blas_threads, project_root
from .folders import current_umask, install_dir, locked, remove_tree
from .index import format_value, index_html
from .ledger import ledger_frame, read_discrepancies, read_ledger
from .notebook import NotebookRun, execute_job, list_notebooks, smoke_parameters
from .processes import children_pids, signals_ignored, signals_raise, stop_processes, worker_init

__all__ = ["run_notebooks", "run_claim", "longest_first"]


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


def _execute_all(jobs_args, jobs, log, previous_dir=None):
    """Run the notebooks (in a pool when jobs > 1, longest first by ``previous_dir``'s times; runs
    are returned in ``jobs_args`` order); on interruption stop every child first, then re-raise."""
    runs = []
    before = children_pids()
    ex = None
    try:
        if jobs > 1 and len(jobs_args) > 1:
            import multiprocessing as mp

            ex = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=worker_init)
            order = longest_first(jobs_args, previous_dir) if previous_dir is not None else list(jobs_args)
            futures = {ex.submit(execute_job, a): a[0] for a in order}
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
                r = execute_job(a)
                _log_run(log, r)
                runs.append(r)
        return runs
    except BaseException:
        with signals_ignored():
            roots = set(getattr(ex, "_processes", None) or {}) if ex is not None else set()
            roots |= children_pids() - before
            stop_processes(roots)
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
    out_dir = Path(out_dir or project_root() / "reports").resolve()
    nbs = list_notebooks(notebooks_dir, only)
    if not nbs:
        raise ValueError(f"no notebooks matched only={only!r} in {notebooks_dir or project_root() / 'notebooks'}")
    if not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1; got {jobs!r}")
    limit_blas_threads()
    mode = "smoke" if smoke else "default"
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    disc = read_discrepancies(Path(notebooks_dir) / "discrepancies.csv" if notebooks_dir else None)
    with signals_raise(), locked(out_dir):
        env = environment_info()
        tmp = Path(tempfile.mkdtemp(prefix=".reports-tmp-", dir=out_dir.parent))
        try:
            os.chmod(tmp, 0o777 & ~current_umask())  # the report folder gets the usual mode, not mkdtemp's 0700
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
            df = ledger_frame(all_runs, mode, env)
            df.to_csv(tmp / "claims.csv", index=False)
            (tmp / "environment.json").write_text(json.dumps(env, indent=2) + "\n", encoding="utf-8")
            (tmp / "index.html").write_text(index_html(df, all_runs, mode, env, disc), encoding="utf-8")
            previous = install_dir(tmp, out_dir)
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
            remove_tree(tmp)

def _keep_previous(out_dir, tmp, done):
    """With --only: copy the other notebooks' files into ``tmp`` and return their earlier records."""
    generated = ("claims.csv", "index.html", "environment.json")
    for f in out_dir.iterdir():
        if f.is_file() and f.stem not in done and f.name not in generated:
            shutil.copy2(f, tmp / f.name)
    kept = []
    old = out_dir / "claims.csv"
    if old.exists():
        prev = read_ledger(old)
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
            f"    measured {format_value(rec['measured'], scale)}  expected/bound {format_value(rec['expected'], scale)}"
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
    reports_dir = Path(reports_dir or project_root() / "reports")
    ledger_path = reports_dir / "claims.csv"
    if not ledger_path.exists():
        raise FileNotFoundError(f"no claims ledger at {ledger_path}; run `make reports` first or pass --out")
    recorded = _find_claim(read_ledger(ledger_path), claim_id, only)
    nb_name = recorded["notebook"]
    src = Path(notebooks_dir or project_root() / "notebooks") / f"{nb_name}.ipynb"
    if not src.exists():
        raise FileNotFoundError(f"claim {claim_id!r} is checked in {nb_name}, but {src} does not exist")
    params = smoke_parameters(src) if smoke else {}
    limit_blas_threads()
    log(f"claim {claim_id}: running {src.name} with {'smoke' if smoke else 'default'} parameters"
        + (f" {json.dumps(params, sort_keys=True)}" if params else "") + " ...")
    with signals_raise(), tempfile.TemporaryDirectory(prefix=".claim-") as tmp:
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
