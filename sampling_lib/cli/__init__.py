"""Command line interface ``sampling-lib`` (also ``python -m sampling_lib``; ``--version``).

Subcommands
-----------
``estimate``   corrected global metrics with bootstrap CIs from a ranks/scores file;
``compare``    pairwise model differences with paired bootstrap CIs and Holm decisions;
``ranks``      the per-user sampled ranks (user, model, rank, sample_size[, n_items]) of any input of estimate;
``plan``       which sampled design (a larger n, a second stage, the doubling ladder, full ranking of
               some users) reaches a target precision at least cost (:func:`sampling_lib.design.plan`);
``plan-users`` how many test users a margin of error needs (TORS24 eqs 46, 52; Hoeffding);
``negatives``  a fixed file of sampled negatives, so every model sees the same items; with
               ``--stage K`` the items added at stage K of a nested design;
``design``     a planned sampled evaluation through files (``init`` / ``next`` / ``status`` /
               ``estimate`` DIR): the loop of :func:`sampling_lib.evaluate` for frameworks that only
               read and write files;
``run``        execute the notebooks into reports/ (same options as ``python -m sampling_lib run``).

Nested designs (README, 'Resolving a metric below resolution'), one module each: ``_stages`` (``negatives --stage K``),
``_plan`` (``plan``). Stage 1 is a fixed negatives file; ``negatives --stage 2
--previous STAGE1 --ranks RANKS1.csv --threshold 1 --n2 900 ...`` (or ``--n-max``
for the doubling ladder of TORS24 Algorithm 1, ``--full-fraction``) writes the
items added for the users that any model needs to resolve (one shared set, so
``compare`` stays paired), without replacement avoiding the history, the held-out
item and every earlier negative, in the first stage's format (``--input-format
negatives | ncf | elliot``). ``estimate``, ``compare`` and ``ranks`` read every
stage's file in order (``RANKS`` = the negatives files, first stage first) with
the scores of all their candidates (``--scores``, repeatable) and merge them into
each user's final (n_u, r_u) per model (:func:`sampling_lib.io.read_stages`).

Popularity-sampled negatives (RecBole ``popN``): give ``--item-weights`` (a
table ``item, weight``, or an interactions table ``user, item`` whose counts
raised to ``--weight-exponent`` are the weights; items without an interaction
weigh 0) with a scores table that has an ``item`` column, and ``--exclude`` for
the users' history; ``estimate`` and ``compare`` then use
:mod:`sampling_lib.popularity` (``--method`` pop_mle, ht or uniform) and
``negatives`` draws popularity negatives with their q (with replacement unless
``--no-replace``).

Input files of ``estimate`` / ``compare`` (``--input-format``, default: a table,
or a TREC / ranx run when ``--qrels`` is given):

* ``table``: CSV (TSV when the name ends in .tsv), either a ranks table
  ``user, rank`` [+ ``sample_size``] [+ ``n_items``] [+ ``model``], a counts
  table ``rank, count`` [+ ``sample_size``] [+ ``n_items``] [+ ``model``] (the
  sufficient statistic, e.g. from one SQL ``GROUP BY``; also a Parquet file or
  a directory of Parquet files, read with dask.dataframe without loading it
  whole), or a scores table (the layout of a ``uni100`` evaluation)
  ``user, score, label`` [+ ``model``], label 1 for the held-out item and 0
  for each sampled negative; with a ``stratum`` column ("head": a retriever's
  top m, "tail": random negatives from the rest) it is a cascade's scores
  table, which ``estimate`` corrects to the full catalogue (or bounds, with no
  tail); as ranks, one row per user ``user, head, head_rank`` [+ ``tail_size,
  tail_rank``] [+ ``model``] (``head``: the head's negatives, ``head_rank``: 1 +
  those ranked above the held-out item; the same for the tail sample).
  ``n_items`` is the user's number of candidates N_u (e.g. items -
  |history_u|); then ``--n-items`` is not needed (given both, they must agree).
  A table must match exactly one of these layouts (no other column):
  ``user, rank, count`` is an error, not a guess.
  ``compare`` on counts uses an unpaired bootstrap (counts carry no pairing
  of users);
* ``trec``: TREC run file(s) (``query Q0 doc rank score tag``, one model per
  tag) ranking each user's *sampled* candidate set, with ``--qrels`` (TREC
  qrels, one relevant item per user);
* ``ranx``: ranx ``Run.save("x.json")`` file(s) (the model is the file name),
  with ``--qrels`` (TREC or ranx JSON);
* ``ncf``: NCF ``*.test.negative`` file, ``elliot``: Elliot's negatives TSV,
  ``negatives``: the file ``sampling-lib negatives`` writes; each with
  ``--scores`` (CSV ``user, item, score`` [+ ``model``] [+ ``n_items``]) and,
  where the file does not name the held-out items, ``--held-out`` (CSV
  ``user, item``). An NCF line that lists its held-out item among its
  negatives is read as NCF's ``evaluate.py`` scores it (the item once).

Files are UTF-8 (a byte-order mark is dropped); ids (user, item, model) are
text, compared as text across the files of one call. Per-user N_u: an
``n_items`` column, or ``--n-items-file`` (CSV ``user, n_items`` [+ ``model``])
for any input. ``--sample-size`` must be the size of every user's candidate
set (an error names the first user and line that differ); without it each
user keeps its own size. An option that does not apply to the input is an
error, and ``-o`` may not name an input file.

Output of ``estimate`` / ``compare`` (:mod:`sampling_lib._display`): by default
a compact view -- a header line with what every row shares (N, n, users,
method, confidence level, replicates, seed), one short row per model and
metric (naive, estimate, interval, ``*`` below resolution, ``!`` clipped) and
a legend for the marks shown, whose below-resolution line describes the
interval of the method used. ``--wide`` prints every column with a legend;
``--format csv/json`` the full table (notes then go to stderr). ``estimate
--plot FILE`` also draws naive vs corrected (:func:`sampling_lib.plotting.plot_estimates`,
extra ``[plot]``).

Bad input prints one line ``sampling-lib: error: ...`` on stderr and exits
with status 1 (2 for a bad command line); never a traceback. Progress goes to
stderr: a tqdm bar on a terminal, plain throttled lines otherwise (nohup, CI),
for the fit and the bootstrap (:mod:`sampling_lib._progress`); ``--quiet``
turns it off. BLAS runs on one thread unless the environment sets a thread
count (:mod:`sampling_lib._threads`).

Examples
--------
::

    sampling-lib estimate ranks.csv --n-items 3706 --sample-size 100 --metric recall@10 --metric ndcg@10
    sampling-lib estimate ranks_with_n_items.csv --sample-size 100     # per-user N_u from the file
    sampling-lib estimate counts.parquet --metric ndcg@10               # rank,count[,n_items,...]
    sampling-lib estimate bpr.trec pop.trec --qrels test.qrels --n-items 3706
    sampling-lib estimate ml-1m.test.negative --input-format ncf --scores scores.csv --n-items 3706 --scheme hypergeometric
    sampling-lib estimate ranks.csv --n-items 3706 --sample-size 100 --plot estimates.png
    sampling-lib compare ranks.csv --n-items 3706 --sample-size 100 --metric ndcg@10
    sampling-lib plan-users --margin 0.01 --models 5
    sampling-lib negatives --n-items 3706 --users users.csv --sample-size 100 --seed 0 --exclude train.csv
    sampling-lib plan ranks1.csv -N 3706 -n 100
    sampling-lib negatives --stage 2 --previous s1.csv --users users.csv --ranks ranks1.csv --threshold 1 --n2 900 -N 3706 --seed 0 -o s2.csv
    sampling-lib estimate s1.csv s2.csv --input-format negatives --held-out users.csv --scores sc1.csv --scores sc2.csv -N 3706 --scheme hypergeometric
    sampling-lib estimate scores.csv --item-weights interactions.csv --exclude train.csv --metric recall@10
"""
from __future__ import annotations

import importlib
import sys
import warnings

from ._common import PROG, UsageError, one_line

__all__ = ["main", "build_parser"]

#: command -> (module of this package, function): imported only when the command runs, so that
#: ``--version`` and ``--help`` import neither pandas nor the estimators (tests/test_cli_startup.py).
#: "run" is handed to the report runner in main().
_COMMANDS = {"estimate": ("_estimate", "cmd_estimate"), "compare": ("_estimate", "cmd_compare"),
             "plan-users": ("_plan", "cmd_plan_users"), "plan": ("_plan", "cmd_plan"),
             "negatives": ("_negatives", "cmd_negatives"), "ranks": ("_estimate", "cmd_ranks"),
             "design": ("_design", "cmd_design")}


def build_parser():
    """The argparse parser of ``sampling-lib`` (:func:`sampling_lib.cli._parser.build_parser`)."""
    from ._parser import build_parser as build

    return build()


def run_main(argv):
    """``sampling-lib run ...``: the report runner owns its options and its exit status (and may print
    tracebacks of failed notebooks); same as ``python -m sampling_lib run``. Its ``--help`` prints without
    the extra [notebooks]; a run needs it."""
    from .._extras import require_runner

    if not any(a in ("-h", "--help") for a in argv[1:]):
        try:
            require_runner()
        except ModuleNotFoundError as exc:
            sys.stderr.write(f"{PROG}: error: {one_line(exc)}\n")
            return 1
    from ..reporting.command import main as runner_main

    try:
        return runner_main(argv)
    except SystemExit as exc:          # argparse: --help, or a bad option (its message is printed)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def main(argv=None):
    """Entry point of the ``sampling-lib`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        return run_main(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    def showwarning(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(f"{PROG}: warning: {one_line(message)}\n")

    old = warnings.showwarning
    warnings.showwarning = showwarning
    try:
        from .._threads import blas_threads_limited

        module, name = _COMMANDS[args.command]
        command = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        with blas_threads_limited():     # small matrices: one BLAS thread unless the user set one
            status = command(args)       # None, or an exit status (design status --pending: 1 = done)
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {one_line(exc)} (see '{PROG} {args.command} --help')\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback
        sys.stderr.write(f"{PROG}: error: {one_line(exc)}\n")
        return 1
    finally:
        warnings.showwarning = old
    return int(status or 0)
