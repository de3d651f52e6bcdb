"""The ``run`` command line: ``sampling-lib run`` and ``python -m sampling_lib run``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .folders import ReportsLocked
from .processes import RunInterrupted, skip_iri_parser
from .runner import run_claim, run_notebooks

__all__ = ["add_run_arguments", "run_command", "main"]


def add_run_arguments(p):
    """Add the options of the ``run`` subcommand to an argparse parser (shared by both entry points)."""
    p.add_argument("--out", default=None, help="report folder (default: reports/): a new or empty folder, or "
                   "one the runner wrote; with --claim, where claims.csv is looked up")
    p.add_argument("--smoke", action="store_true", help="use the notebooks' smoke parameters")
    p.add_argument("--only", action="append", help="notebook name prefix, e.g. 01 (repeatable)")
    p.add_argument("--jobs", type=int, default=None, help="notebooks run in parallel (default 1)")
    p.add_argument("--timeout", type=int, default=None, help="per-cell timeout in seconds (>= 1)")
    p.add_argument("--notebooks", default=None, help="folder of NN_*.ipynb notebooks (default: notebooks/)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=None, metavar=("NAME", "VALUE"),
                   help="run the notebooks with this parameter (repeatable; values read as papermill's -p reads "
                        "them: True/False/None, an int, a float, else text); needs --out (reports/ holds the "
                        "default run), and every selected notebook must have the parameter")
    p.add_argument("--claim", default=None, metavar="ID",
                   help="re-execute only the notebook holding this claim (found in claims.csv), print the "
                        "claim's row and exit non-zero if it fails; reports/ is not modified")
    return p


def _argument_error(args):
    """A one-line message for an option value the runner refuses, or None."""
    for opt, value, default in (("--out", args.out, "reports/"), ("--notebooks", args.notebooks, "notebooks/")):
        if value is not None and not value.strip():
            return f"{opt} must name a folder; got an empty path (omit {opt} for {default})"
    if args.jobs is not None and args.jobs < 1:
        return f"--jobs must be an integer >= 1; got {args.jobs}"
    if args.jobs is not None and args.claim:
        return "--jobs does not apply to --claim (it runs one notebook)"
    if args.timeout is not None and args.timeout < 1:
        return f"--timeout must be a whole number of seconds >= 1; got {args.timeout}"
    if getattr(args, "parameter", None):
        if args.claim:
            return "-p/--parameter does not apply to --claim (it re-checks a claim with the recorded parameters)"
        if args.out is None:
            return ("-p/--parameter needs --out: reports/ holds the notebooks run with their default parameters; "
                    "give a folder for a run with others, e.g. --out /tmp/mine")
        for name, _ in args.parameter:
            if not name.isidentifier():
                return f"-p/--parameter NAME must be a Python name, as in the notebook's parameters cell; got {name!r}"
    for x in args.only or []:
        if not x.strip():
            return f"--only must name the start of a notebook's name, e.g. 01; got {x!r}"
    return None


def run_command(args, prog="sampling-lib run"):
    """Execute a parsed ``run`` command; returns the exit status (never raises, never a traceback).

    0: every notebook ran and every claim passed (or the claim passed); 1: a
    notebook or a claim failed, or the report could not be written; 2: an
    argument or an input file was refused (nothing ran, nothing changed);
    128 + N: stopped by signal N.
    """
    skip_iri_parser()
    bad = _argument_error(args)
    if bad:
        sys.stderr.write(f"{prog}: error: {bad}\n")
        return 2
    try:
        if args.claim:
            return run_claim(args.claim, smoke=args.smoke, reports_dir=args.out, notebooks_dir=args.notebooks,
                             only=args.only, timeout=args.timeout)
        runs = run_notebooks(args.out, smoke=args.smoke, only=args.only, jobs=args.jobs or 1,
                             notebooks_dir=args.notebooks, timeout=args.timeout,
                             parameters=_parameters(getattr(args, "parameter", None)))
        return 0 if all(r.ok for r in runs) else 1
    except RunInterrupted as exc:
        if exc.installed:
            sys.stderr.write(f"{prog}: {exc} after the new report was put in place; the run had finished "
                             "and cleaned up\n")
        else:
            sys.stderr.write(f"{prog}: {exc}; child processes stopped, temporary folder removed, "
                             "the report folder is unchanged\n")
        return 128 + exc.signum
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except (ValueError, FileNotFoundError) as exc:   # a refused argument or input file
        sys.stderr.write(f"{prog}: error: {_one_line(exc)}\n")
        return 2
    except (ReportsLocked, OSError) as exc:
        sys.stderr.write(f"{prog}: error: {_one_line(exc)}\n")
        return 1


def _parameters(pairs):
    """``-p NAME VALUE`` pairs as a dict, each value read as papermill's command line reads it."""
    if not pairs:
        return None
    from papermill.cli import _resolve_type

    return {name: _resolve_type(value) for name, value in pairs}


def _one_line(exc):
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv=None):
    """Command line: ``python -m sampling_lib run [--smoke] [--only NN] [--out DIR] [--jobs J] [-p NAME VALUE]
    [--claim ID]``."""
    # the console script ``sampling-lib run ...`` hands its argv here too (cli.main)
    prog = "sampling-lib" if Path(sys.argv[0]).name == "sampling-lib" else "python -m sampling_lib"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_run_arguments(sub.add_parser("run", help="execute notebooks into a report folder, or check one claim"))
    args = ap.parse_args(argv)
    return run_command(args, prog=f"{prog} run")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
