"""Command line interface ``sampling-lib`` (also ``python -m sampling_lib``; ``--version``).

Subcommands
-----------
``estimate``   corrected global metrics with bootstrap CIs from a ranks/scores file;
``compare``    pairwise model differences with paired bootstrap CIs and Holm decisions;
``plan-users`` how many test users a margin of error needs (TORS24 eqs 46, 52; Hoeffding);
``negatives``  a fixed file of sampled negatives, so every model sees the same items;
``run``        execute the notebooks into reports/ (same options as ``python -m sampling_lib run``).

Popularity-sampled negatives (RecBole ``popN``): give ``--item-weights`` (a
table ``item, weight``, or an interactions table ``user, item`` whose counts
raised to ``--weight-alpha`` are the weights) with a scores table that has an
``item`` column, and ``--exclude`` for the users' history; ``estimate`` and
``compare`` then use :mod:`sampling_lib.popularity` (``--method`` pop_mle,
ht or uniform) and ``negatives`` draws popularity negatives with their q.

Input files of ``estimate`` / ``compare`` (``--input-format``, default: a table,
or a TREC / ranx run when ``--qrels`` is given):

* ``table``: CSV (TSV when the name ends in .tsv), either a ranks table
  ``user, rank`` [+ ``sample_size``] [+ ``n_items``] [+ ``model``], a counts
  table ``rank, count`` [+ ``sample_size``] [+ ``n_items``] [+ ``model``] (the
  sufficient statistic, e.g. from one SQL ``GROUP BY``; also a Parquet file or
  a directory of Parquet files, read with dask.dataframe without loading it
  whole), or a scores table (the layout of a ``uni100`` evaluation)
  ``user, score, label`` [+ ``model``], label 1 for the held-out item and 0
  for each sampled negative. ``n_items`` is the user's number of candidates
  N_u (e.g. items - |history_u|); then ``--n-items`` is not needed (given
  both, they must agree). ``compare`` on counts uses an unpaired bootstrap
  (counts carry no pairing of users);
* ``trec``: TREC run file(s) (``query Q0 doc rank score tag``, one model per
  tag) ranking each user's *sampled* candidate set, with ``--qrels`` (TREC
  qrels, one relevant item per user);
* ``ranx``: ranx ``Run.save("x.json")`` file(s) (the model is the file name),
  with ``--qrels`` (TREC or ranx JSON);
* ``ncf``: NCF ``*.test.negative`` file, ``elliot``: Elliot's negatives TSV,
  ``negatives``: the file ``sampling-lib negatives`` writes; each with
  ``--scores`` (CSV ``user, item, score`` [+ ``model``]) and, where the file
  does not name the held-out items, ``--held-out`` (CSV ``user, item``).

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
    sampling-lib estimate scores.csv --item-weights interactions.csv --exclude train.csv --metric recall@10
"""
from __future__ import annotations

import argparse
import re
import sys
import warnings

import numpy as np
import pandas as pd

from ._threads import blas_threads_limited
from .estimators import DEFAULT_METHOD, METHODS
from .estimators import POPULARITY_METHODS

__all__ = ["main", "build_parser"]

PROG = "sampling-lib"


class _CLIError(Exception):
    """A user-facing error: printed as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        sys.stderr.write(f"{PROG}: error: {_cut(message)} (see '{self.prog} --help')\n")
        raise SystemExit(2)


INPUT_FORMATS = ("auto", "table", "trec", "ranx", "ncf", "elliot", "negatives")


def _nonneg_int(text):
    """argparse type of a seed: an integer >= 0 (argparse names the option in its error)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {_cut(text)!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {v}")
    return v


def _add_common(p, compare=False):
    p.add_argument("ranks", metavar="RANKS.csv", nargs="+",
                   help="ranks table (user, rank[, sample_size][, n_items][, model]), counts table "
                        "(rank, count[, sample_size][, n_items][, model]; CSV or Parquet) or scores "
                        "table (user, score, label[, model]); with --qrels one or more TREC/ranx run "
                        "files; with --input-format ncf/elliot/negatives the negatives file")
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS,
                   help="what RANKS holds (default auto: table, or trec/ranx (.json) with --qrels)")
    p.add_argument("--qrels", default=None, metavar="QRELS",
                   help="TREC qrels or ranx JSON qrels: the held-out item of each user (trec, ranx)")
    p.add_argument("--scores", default=None, metavar="SCORES.csv",
                   help="scores of every candidate: CSV user, item, score[, model] (ncf, elliot, "
                        "negatives)")
    p.add_argument("--held-out", default=None, metavar="HELD_OUT.csv",
                   help="CSV user, item: the held-out items when the negatives file does not name "
                        "them (elliot '(user,)' lines, negatives)")
    p.add_argument("--duplicates", choices=["count", "collapse"], default="count",
                   help="a negative listed twice: count every draw (default; binomial scheme exact) "
                        "or keep distinct items (what RecBole/NCF metrics do; then --scheme "
                        "hypergeometric)")
    p.add_argument("--n-items", "-N", type=int, default=None, metavar="N",
                   help="number of items N in the global ranking (required unless the file has an n_items "
                        "column of per-user candidate counts N_u, or --item-weights is given)")
    p.add_argument("--sample-size", "-n", type=int, default=None, metavar="n",
                   help="sample-set size n (held-out item + n-1 negatives); omit if the file has "
                        "a sample_size column or is a scores table")
    p.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="metric like recall@10, ndcg@10, ap@10, precision@5, mrr@10 "
                        "(repeatable; default recall@10 and ndcg@10)")
    p.add_argument("--method", default=None, choices=METHODS + POPULARITY_METHODS, metavar="METHOD",
                   help=f"estimator, one of {', '.join(METHODS)} (default {DEFAULT_METHOD}; "
                        "adaptive_mle when sample sizes vary); with popularity-sampled negatives one of "
                        f"{', '.join(POPULARITY_METHODS)} (default pop_mle)")
    p.add_argument("--confidence-level", "--ci", dest="ci", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95; --ci is the old spelling)")
    p.add_argument("--n-boot", type=int, default=None,
                   help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (a bar on a terminal; otherwise, e.g. under nohup or CI, a plain "
                        "line every 30 s once a step has run 10 s)")
    p.add_argument("--scheme", choices=["binomial", "hypergeometric"], default="binomial",
                   help="negatives drawn with (binomial, the papers) or without replacement")
    p.add_argument("--ties", choices=["pessimistic", "optimistic", "random"],
                   default="pessimistic", help="tie rule for scores tables (default pessimistic)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="output format: table (default: a compact view with a header line and a legend), "
                        "or the full table as csv or json")
    p.add_argument("--wide", action="store_true",
                   help="with --format table: every column of the full table instead of the compact view")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    _add_weights(p)
    p.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="with --item-weights: columns user, item, the items each user's negatives were never "
                        "drawn from (its history)")
    if compare:
        p.add_argument("--alpha", type=float, default=0.05,
                       help="family-wise error rate of the decisions (default 0.05)")
        p.add_argument("--adjust", choices=["holm", "bonferroni", "none"], default="holm",
                       help="multiple-comparison adjustment (default holm)")
    else:
        p.add_argument("--model", default=None, help="only this model (column 'model')")
        p.add_argument("--plot", default=None, metavar="FILE",
                       help="also draw naive vs corrected metrics with their intervals, per model and metric, "
                            "into FILE (.png, .pdf or .svg; needs the extra [plot]: matplotlib)")


def _add_weights(p):
    p.add_argument("--item-weights", default=None, metavar="WEIGHTS.csv",
                   help="popularity-sampled negatives: columns item, weight (or user, item interactions: "
                        "weight = count ^ --weight-alpha)")
    p.add_argument("--weight-alpha", type=float, default=1.0,
                   help="exponent of the counts when --item-weights is an interactions table (default 1, "
                        "RecBole popN)")


#: examples shown at the end of ``--help`` (the main one and each subcommand's)
EXAMPLES = {
    None: """examples:
  sampling-lib estimate ranks.csv -N 3706 -n 100 --metric recall@10 --metric ndcg@10
  sampling-lib compare ranks.csv -N 3706 -n 100 --metric ndcg@10
  sampling-lib estimate ranks.csv -N 3706 -n 100 --plot estimates.png
  sampling-lib plan-users --margin 0.01 --models 5
  sampling-lib run --smoke --out /tmp/smoke      (the notebooks: needs the extra [notebooks])
  python -m sampling_lib estimate ...            (the same command)

'sampling-lib COMMAND --help' shows each command's options and examples.""",
    "estimate": """examples:
  # user,model,rank (rank among the n sampled candidates, held-out item included)
  sampling-lib estimate ranks.csv --n-items 3706 --sample-size 100 --metric recall@10 --metric ndcg@10
  # per-user candidate counts: user,rank,n_items[,model]
  sampling-lib estimate ranks_with_n_items.csv --sample-size 100
  # scores dump user,score,label[,model] (label 1 = held-out item); the full table as CSV
  sampling-lib estimate scores.csv --n-items 3706 --format csv --output estimates.csv
  # NCF's negatives file with the model's scores; distinct negatives: hypergeometric
  sampling-lib estimate ml-1m.test.negative --input-format ncf --scores scores.csv -N 3706 --scheme hypergeometric
  # naive vs corrected with intervals, as a figure
  sampling-lib estimate ranks.csv -N 3706 -n 100 --plot estimates.png""",
    "compare": """examples:
  sampling-lib compare ranks.csv --n-items 3706 --sample-size 100 --metric ndcg@10
  sampling-lib compare ranks.csv -N 3706 -n 100 --adjust bonferroni --alpha 0.01 --format csv""",
}


def build_parser():
    """The argparse parser of ``sampling-lib``."""
    from . import __version__

    parser = _Parser(prog=PROG, description="Correct sampled top-K evaluation metrics "
                     "(Recall/NDCG/AP@K) to global ones, with bootstrap confidence intervals.",
                     epilog=EXAMPLES[None], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("estimate", help="corrected global metrics with CIs", epilog=EXAMPLES["estimate"],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(p)
    p = sub.add_parser("compare", help="pairwise model differences with Holm-adjusted decisions",
                       epilog=EXAMPLES["compare"], formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_common(p, compare=True)
    p = sub.add_parser("plan-users", help="test users needed for a margin of error")
    p.add_argument("--margin", type=float, required=True, help="margin of error, e.g. 0.01")
    p.add_argument("--confidence-level", "--confidence", dest="confidence_level", type=float, default=0.95,
                   help="confidence level (default 0.95; --confidence is the old spelling)")
    p.add_argument("--models", type=int, default=1, help="number of models (default 1)")
    p.add_argument("--p", type=float, default=0.5, help="planning value of the metric (default 0.5)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--output", "-o", default=None)
    p = sub.add_parser("negatives", help="a fixed negatives file (same sampled items for all models)")
    p.add_argument("--n-items", "-N", type=int, default=None, metavar="N",
                   help="number of items; item ids are 0..N-1 (not used with --item-weights: the items are "
                        "those of the weights)")
    p.add_argument("--users", required=True, metavar="USERS.csv",
                   help="column user [, item = the held-out item, never sampled]")
    p.add_argument("--sample-size", "-n", type=int, required=True, metavar="n",
                   help="sample-set size n: n-1 negatives per user")
    p.add_argument("--seed", type=_nonneg_int, required=True)
    p.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="columns user, item: items never sampled for that user")
    p.add_argument("--replace", action="store_true",
                   help="sample with replacement (binomial scheme; default: distinct negatives, "
                        "then use --scheme hypergeometric when estimating)")
    p.add_argument("--output", "-o", default=None)
    _add_weights(p)
    p = sub.add_parser("run", help="execute the notebooks into a report folder (make reports)",
                       add_help=False)
    p.add_argument("run_args", nargs=argparse.REMAINDER,
                   help="options of 'python -m sampling_lib run' (--out, --smoke, --only, --jobs, --timeout)")
    return parser


# ----------------------------------------------------------------------------
def _input_format(args):
    fmt = args.input_format
    if fmt == "auto":
        if args.qrels is None:
            fmt = "table"
        else:
            fmt = "ranx" if all(str(f).lower().endswith(".json") for f in args.ranks) else "trec"
    needs = {"trec": ("qrels",), "ranx": ("qrels",), "ncf": ("scores",), "elliot": ("scores",),
             "negatives": ("scores", "held_out")}.get(fmt, ())
    for opt in needs:
        if getattr(args, opt) is None:
            raise _CLIError(f"--input-format {fmt} needs --{opt.replace('_', '-')}")
    unused = [o for o in ("qrels", "scores", "held_out")
              if getattr(args, o) is not None and o not in needs and not (fmt == "elliot" and o == "held_out")]
    if unused:
        raise _CLIError(f"--{unused[0].replace('_', '-')} is not used with --input-format {fmt}")
    if fmt not in ("trec", "ranx") and len(args.ranks) > 1:
        raise _CLIError(f"--input-format {fmt} reads one file; got {len(args.ranks)}")
    return fmt


def _load_ranks(args):
    from . import io

    fmt = _input_format(args)
    src = args.ranks[0]
    if fmt in ("trec", "ranx"):
        t = io.ranks_from_run(list(args.ranks), args.qrels, candidates="sampled", ties=args.ties,
                              rng=args.seed)
        return io.ranks_from_table(t, n=None)
    if fmt in ("ncf", "elliot", "negatives"):
        if fmt == "ncf":
            cand = io.read_ncf_negatives(src)
        elif fmt == "elliot":
            cand = io.read_elliot_negatives(src, held_out=args.held_out)
        else:
            cand = io.read_negatives(src, args.held_out)
        return io.ranks_from_negatives(cand, args.scores, duplicates=args.duplicates, ties=args.ties,
                                       rng=args.seed)
    from .correct import counts_from_frame

    if io._is_parquet(src):
        return counts_from_frame(io.counts_table(src), n=args.sample_size, N=args.n_items)
    df = io.read_table(src, "ranks")
    if "rank" in df.columns and "count" in df.columns:
        return counts_from_frame(io.counts_table(df), n=args.sample_size, N=args.n_items)
    if "rank" in df.columns:
        return io.ranks_from_table(df, n=args.sample_size, N=args.n_items)
    if {"score", "label"} <= set(df.columns):
        return io.ranks_from_score_table(df, ties=args.ties, rng=args.seed)
    raise _CLIError(f"{src} must have a 'rank' column (ranks table) or 'score' and 'label' "
                    f"columns (scores table); found columns {_cut(str(list(df.columns)))}")


def _emit(text, output):
    if output:
        with open(output, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def _write(df, fmt, output):
    """A table as csv, json or a plain text table (plan-users; estimate/compare go through _show)."""
    if fmt == "csv":
        text = df.to_csv(index=False)
    elif fmt == "json":
        text = df.to_json(orient="records", indent=2) + "\n"
    else:
        with pd.option_context("display.width", 200, "display.max_columns", 100):
            text = df.to_string(index=False, float_format=lambda x: f"{x:.4f}") + "\n"
    _emit(text, output)


def _check_output_options(args):
    """--wide applies to the table format only (an option that does not apply is an error)."""
    if getattr(args, "wide", False) and args.format != "table":
        raise _CLIError(f"--wide applies to --format table (the compact view); --format {args.format} always "
                        "has every column")


def _show(out, args, kind, *, n_items=None, sample_size=None):
    """Print an estimate or compare table: the compact view (default), every column (--wide) or csv/json.

    ``n_items``/``sample_size`` are the (smallest, largest) N_u and n_u behind the table, for the
    header and the resolution note. With csv/json the notes the compact view shows as a legend go to
    stderr (the data stay clean).
    """
    from . import _display

    if args.format != "table":
        _write(out, args.format, args.output)
        if kind == "estimate" and "below_resolution" in out.columns and out.below_resolution.any():
            below = out[out.below_resolution]
            w = _display.resolution_width(n_items[1], sample_size[0]) if n_items and sample_size else None
            widened = "sensitivity_low" in below.columns and bool(below.sensitivity_low.notna().all())
            print("note: " + _display.resolution_note(list(dict.fromkeys(below.metric)), w, widened=widened),
                  file=sys.stderr)
        return
    if args.wide:
        text = _display.wide_view(out)
    elif kind == "estimate":
        text = _display.estimate_view(out, n_items=n_items, sample_size=sample_size, seed=args.seed)
    else:
        text = _display.compare_view(out, n_items=n_items, sample_size=sample_size, seed=args.seed)
    _emit(text, args.output)


def _check_plot(args):
    """--plot FILE: matplotlib installed and a format it writes, checked before the work starts."""
    if not getattr(args, "plot", None):
        return
    from pathlib import Path

    from ._extras import require

    require("matplotlib", "--plot")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(args.plot).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise _CLIError(f"--plot {args.plot}: the file name must end in one of "
                        f"{', '.join('.' + f for f in sorted(formats))}; got {('.' + suffix) if suffix else 'no suffix'}")


def _plot(out, args, *, n_items=None, sample_size=None):
    """--plot FILE: sampling_lib.plotting.plot_estimates of the estimate table."""
    if not getattr(args, "plot", None):
        return
    from .plotting import plot_estimates

    fig = plot_estimates(out, n_items=n_items, sample_size=sample_size)
    fig.savefig(args.plot, dpi=150, bbox_inches="tight")
    print(f"{PROG}: figure written to {args.plot}", file=sys.stderr)


def _size_arg(sr, model, n):
    r, s = sr.for_model(model)
    if s is not None and np.unique(s).size == 1:
        if n is not None and int(s[0]) != n:
            raise _CLIError(f"--sample-size {n} disagrees with the file's sample sizes ({int(s[0])})")
        return r, int(s[0]), None
    if s is None and n is None:
        raise _CLIError("--sample-size is required (the file has no sample_size column)")
    return r, (n if s is None else None), s


def _n_items(sr, model, N):
    """The item count of one model: the file's n_items column, else --n-items."""
    it = sr.items_for_model(model)
    if it is not None:
        return it
    if N is None:
        raise _CLIError("--n-items is required (the file has no n_items column)")
    return N


def _models(available, wanted):
    if wanted is None:
        return list(available)
    if wanted not in available:
        raise _CLIError(f"--model must be one of {list(available)}; got {wanted!r}")
    return [wanted]


def _item_weights(args):
    """The weights of --item-weights: a weights table, or counts ** --weight-alpha of an interactions table."""
    from .io import read_table
    from .popularity import check_item_weights, popularity_weights

    df = read_table(args.item_weights, "item weights")
    if "weight" in df.columns:
        return check_item_weights(df)
    if "item" in df.columns:
        return popularity_weights(df, args.weight_alpha)
    raise _CLIError(f"{args.item_weights} must have columns item, weight (weights) or user, item "
                    f"(interactions); found columns {list(df.columns)}")


def _popularity_logs(args):
    from .io import read_table
    from .popularity import popularity_logs_from_table

    if args.scheme != "binomial":
        raise _CLIError("popularity-sampled negatives are supported with replacement only (--scheme binomial)")
    if args.method is not None and args.method not in POPULARITY_METHODS:
        raise _CLIError(f"--method must be one of {', '.join(POPULARITY_METHODS)} for popularity-sampled "
                        f"negatives; got {args.method!r}")
    if len(args.ranks) > 1 or args.input_format not in ("auto", "table") or args.qrels or args.scores:
        raise _CLIError("popularity-sampled negatives read one scores table (--input-format table, "
                        "no --qrels/--scores)")
    df = read_table(args.ranks[0], "scores")
    weights = _item_weights(args) if args.item_weights else None
    excl = read_table(args.exclude, "exclude") if args.exclude else None
    return popularity_logs_from_table(df, weights, exclude=excl, ties=args.ties)


def _header(path):
    """Column names of a CSV/TSV file (first line only); empty when it cannot be read (the reader says why)."""
    try:
        sep = "\t" if str(path).endswith((".tsv", ".tab")) else ","
        return set(pd.read_csv(path, sep=sep, nrows=0).columns)
    except (OSError, ValueError):
        return set()


def _is_popularity(args):
    """--item-weights given, or a scores table that logs each negative's draw probability (column q)."""
    if args.item_weights:
        return True
    if {"q", "label", "item"} <= _header(args.ranks[0]):
        return True
    if args.exclude:
        raise _CLIError("--exclude needs --item-weights (popularity-sampled negatives)")
    if args.method in POPULARITY_METHODS:
        raise _CLIError(f"--method {args.method} is for popularity-sampled negatives: give --item-weights "
                        "(or a scores table with q and n_candidates columns)")
    return False


def _n_boot(args, popularity=False):
    return args.n_boot if args.n_boot is not None else 1000


def _cmd_estimate_popularity(args):
    from .correct import estimate

    logs = _popularity_logs(args)
    if args.model is not None:
        if args.model not in logs:
            raise _CLIError(f"--model must be one of {list(logs)}; got {args.model!r}")
        logs = {args.model: logs[args.model]}
    out = estimate(logs, None, None, args.metric or ("recall@10", "ndcg@10"), method=args.method,
                   confidence_level=args.ci, n_boot=_n_boot(args, True), rng=args.seed,
                   progress=_progress_on(args))
    if len(logs) == 1 and args.format == "table":
        out = out.drop(columns="model")
    _show(out, args, "estimate")
    _plot(out, args)


def _need_n_items(args):
    if args.n_items is None:
        raise _CLIError("--n-items is required (unless --item-weights is given)")


def _progress_on(args):
    """Progress on stderr unless --quiet: a bar on a terminal, plain lines otherwise (sampling_lib._progress)."""
    return not getattr(args, "quiet", False)


def _cmd_estimate(args):
    from .correct import estimate

    _check_output_options(args)
    _check_plot(args)
    if _is_popularity(args):
        return _cmd_estimate_popularity(args)
    sr = _load_ranks(args)
    tables = []
    common = dict(metrics=args.metric or ("recall@10", "ndcg@10"), method=args.method,
                  confidence_level=args.ci, n_boot=_n_boot(args, False), rng=args.seed,
                  scheme=args.scheme, progress=_progress_on(args))
    items_seen, sizes_seen = [], []    # for the header and the resolution note (ranges of N_u and n_u)
    if isinstance(sr, dict):           # counts table: {model: RankCounts}
        all_models = list(sr)
        for m in _models(sr, args.model):
            if sr[m].n_items is None:
                raise _CLIError("--n-items is required (the counts table has no n_items column)")
            t = estimate(sr[m], **common)
            items_seen.append(sr[m].n_items)
            sizes_seen.append(sr[m].sizes)
            t["model"] = m
            tables.append(t)
    else:
        all_models = sr.models
        for m in _models(sr.models, args.model):
            r, n, s = _size_arg(sr, m, args.sample_size)
            items = _n_items(sr, m, args.n_items)
            t = estimate(r, items, n, sample_sizes=s, **common)
            items_seen.append(items)
            sizes_seen.append(n if s is None else s)
            t["model"] = m
            tables.append(t)
    out = pd.concat(tables, ignore_index=True)
    if len(all_models) == 1 and args.format == "table":
        out = out.drop(columns="model")
    ranges = _ranges(items_seen, sizes_seen)
    _show(out, args, "estimate", **ranges)
    _plot(out, args, **ranges)


def _ranges(items_seen, sizes_seen):
    """(smallest, largest) N_u and n_u over the models: the header's N and n, and w = (N_max-1)/(n_min-1)."""
    items = [np.atleast_1d(np.asarray(x)) for x in items_seen]
    sizes = [np.atleast_1d(np.asarray(x)) for x in sizes_seen]
    return {"n_items": (int(min(x.min() for x in items)), int(max(x.max() for x in items))),
            "sample_size": (int(min(x.min() for x in sizes)), int(max(x.max() for x in sizes)))}


def _cmd_compare(args):
    from .correct import compare

    _check_output_options(args)
    if _is_popularity(args):
        logs = _popularity_logs(args)
        if len(logs) < 2:
            raise _CLIError(f"compare needs a 'model' column with at least 2 models; got {list(logs)}")
        out = compare(logs, None, None, args.metric or ("recall@10", "ndcg@10"), method=args.method,
                      confidence_level=args.ci, n_boot=_n_boot(args, True), rng=args.seed, alpha=args.alpha,
                      adjust=args.adjust, progress=_progress_on(args))
        _show(out, args, "compare")
        return
    sr = _load_ranks(args)
    common = dict(metrics=args.metric or ("recall@10", "ndcg@10"), method=args.method,
                  confidence_level=args.ci, n_boot=_n_boot(args, False), rng=args.seed,
                  alpha=args.alpha, adjust=args.adjust, scheme=args.scheme,
                  progress=_progress_on(args))
    if isinstance(sr, dict):           # counts table: unpaired
        if len(sr) < 2:
            raise _CLIError(f"compare needs a 'model' column with at least 2 models; got {list(sr)}")
        for st in sr.values():
            if st.n_items is None:
                raise _CLIError("--n-items is required (the counts table has no n_items column)")
        print("note: counts carry no pairing of users; the bootstrap resamples each model's users "
              "independently (unpaired)", file=sys.stderr)
        out = compare(sr, **common)
        ranges = _ranges([st.n_items for st in sr.values()], [st.sizes for st in sr.values()])
    else:
        if len(sr.models) < 2:
            raise _CLIError(f"compare needs a 'model' column with at least 2 models; got {sr.models}")
        d, sizes, items = {}, {}, {}
        n_common = args.sample_size
        for m in sr.models:
            r, n, s = _size_arg(sr, m, args.sample_size)
            d[m], sizes[m] = r, s
            items[m] = _n_items(sr, m, args.n_items)
            if n is not None:
                if n_common is not None and n != n_common:
                    raise _CLIError(f"models have different sample sizes ({n_common} and {n})")
                n_common = n
        if any(v is not None for v in sizes.values()):
            n_common = None
            sizes = {m: (sizes[m] if sizes[m] is not None else sr.for_model(m)[1]) for m in d}
        else:
            sizes = None
        if sr.ranks.isna().any().any():
            out = compare(sr, args.n_items, n_common, sample_sizes=sizes, **common)
        else:
            out = compare(d, items, n_common, sample_sizes=sizes, **common)
        ranges = _ranges(list(items.values()), [n_common] if sizes is None else
                         [s for s in sizes.values() if s is not None])
    _show(out, args, "compare", **ranges)


def _cmd_plan(args):
    from .user_sampling import (hoeffding_sample_size, sample_size_difference,
                                sample_size_proportion)

    k = args.models
    if k < 1:
        raise _CLIError(f"--models must be >= 1; got {k}")
    rows = [dict(quantity="one metric per model (Recall@K, normal approx.)",
                 users=sample_size_proportion(args.margin, args.confidence_level, args.p, n_models=k),
                 source="TORS24 eq 46, Bonferroni over models"),
            dict(quantity="one metric per model (any metric in [0,1], Hoeffding)",
                 users=hoeffding_sample_size(args.margin, 1 - args.confidence_level, n_tests=k),
                 source="Hoeffding, Bonferroni over models")]
    if k >= 2:
        rows.append(dict(quantity="difference of two models (all pairs)",
                         users=sample_size_difference(args.margin, args.confidence_level, args.p,
                                                      n_models=k),
                         source="TORS24 eq 52, Bonferroni over pairs"))
    out = pd.DataFrame(rows)
    out.insert(1, "margin", args.margin)
    out.insert(2, "confidence_level", args.confidence_level)
    out.insert(3, "models", k)
    _write(out, args.format, args.output)


def _cmd_negatives(args):
    from ._validation import check_columns
    from .io import read_table
    from .sampling import sample_negatives

    users = read_table(args.users, "users")
    check_columns(users, ["user"], "the users file")
    excl = None
    if args.exclude is not None:
        excl = read_table(args.exclude, "exclude")
    held = users["item"].to_numpy() if "item" in users.columns else None
    if args.item_weights:
        from .popularity import sample_popularity_negatives

        out = sample_popularity_negatives(users["user"].to_numpy(), _item_weights(args), args.sample_size,
                                          held_out=held, exclude=excl, replace=True, rng=args.seed)
        if args.output:
            out.to_csv(args.output, index=False)
        else:
            out.to_csv(sys.stdout, index=False)
        return
    _need_n_items(args)
    out = sample_negatives(users["user"].to_numpy(), args.n_items, args.sample_size, exclude=excl,
                           held_out=held, scheme="binomial" if args.replace else "hypergeometric",
                           rng=args.seed)
    if args.output:
        out.to_csv(args.output, index=False)
    else:
        out.to_csv(sys.stdout, index=False)


_COMMANDS = {"estimate": _cmd_estimate, "compare": _cmd_compare, "plan-users": _cmd_plan,
             "negatives": _cmd_negatives}  # "run" is handed to the report runner in main()


_MAX_MESSAGE = 300
_NUMPY_REPR = re.compile(r"np\.(?:float|int|uint|complex|bool|str)_?\d*\(([^()]*)\)")


def _cut(text, limit=_MAX_MESSAGE):
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _one_line(exc):
    """One line of at most ~300 characters, numpy scalar reprs shown as plain values."""
    msg = str(exc).strip() or type(exc).__name__
    if isinstance(exc, KeyError):
        msg = f"missing key {msg}"
    msg = " ".join(msg.splitlines()[0].split())
    return _cut(_NUMPY_REPR.sub(r"\1", msg))


def main(argv=None):
    """Entry point of the ``sampling-lib`` console script; returns the exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        # the report runner owns its options and its exit status (and may print tracebacks
        # of failed notebooks); same as ``python -m sampling_lib run``
        from ._extras import require_runner
        from .reporting import main as run_main

        try:
            require_runner()
        except ModuleNotFoundError as exc:
            sys.stderr.write(f"{PROG}: error: {_one_line(exc)}\n")
            return 1
        return run_main(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    def showwarning(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(f"{PROG}: warning: {_one_line(message)}\n")

    old = warnings.showwarning
    warnings.showwarning = showwarning
    try:
        with blas_threads_limited():     # small matrices: one BLAS thread unless the user set one
            _COMMANDS[args.command](args)
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI never shows a traceback
        sys.stderr.write(f"{PROG}: error: {_one_line(exc)}\n")
        return 1
    finally:
        warnings.showwarning = old
    return 0


if __name__ == "__main__":
    sys.exit(main())
