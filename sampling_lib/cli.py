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
  for each sampled negative. ``n_items`` is the user's number of candidates
  N_u (e.g. items - |history_u|); then ``--n-items`` is not needed (given
  both, they must agree). A table must match exactly one of these layouts
  (no other column): ``user, rank, count`` is an error, not a guess.
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


_INT64_MAX = 2**63 - 1


def _int_in(low, high=_INT64_MAX):
    """argparse type: an integer in low..high (the library's counts are int64)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}; got {_cut(text)!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}; got {_cut(v)}")
        return v
    parse.__name__ = "integer"
    return parse


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
    p.add_argument("--duplicates", choices=["count", "collapse"], default=None,
                   help="ncf/elliot/negatives: a negative listed twice: count every draw (default; binomial "
                        "scheme exact) or keep distinct items (what RecBole/NCF metrics do; then --scheme "
                        "hypergeometric)")
    p.add_argument("--n-items", "-N", type=_int_in(2), default=None, metavar="N",
                   help="number of items N in the global ranking (not needed when the ranks, counts or "
                        "scores table has an n_items column of per-user candidate counts N_u, with "
                        "--n-items-file, or with --item-weights)")
    p.add_argument("--n-items-file", default=None, metavar="N_ITEMS.csv",
                   help="per-user candidate counts N_u: CSV user, n_items[, model] (any input format "
                        "except counts tables, which carry N_u in their n_items column)")
    p.add_argument("--sample-size", "-n", type=_int_in(2), default=None, metavar="n",
                   help="sample-set size n (held-out item + n-1 negatives): every user must have it (an "
                        "error names a user with another size); omit it to use each user's own size "
                        "(the file's sample_size column, or the size of its candidate set)")
    p.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="metric like recall@10, ndcg@10, ap@10, precision@5, mrr@10 "
                        "(repeatable; default recall@10 and ndcg@10)")
    p.add_argument("--method", default=None, choices=METHODS + POPULARITY_METHODS, metavar="METHOD",
                   help=f"estimator, one of {', '.join(METHODS)} (default {DEFAULT_METHOD}; "
                        "adaptive_mle when sample sizes vary); with popularity-sampled negatives one of "
                        f"{', '.join(POPULARITY_METHODS)} (default pop_mle)")
    p.add_argument("--confidence-level", "--ci", dest="ci", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95; --ci is the old spelling)")
    p.add_argument("--n-boot", type=_int_in(0), default=None,
                   help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (a bar on a terminal; otherwise, e.g. under nohup or CI, a plain "
                        "line every 30 s once a step has run 10 s)")
    p.add_argument("--scheme", choices=["binomial", "hypergeometric"], default="binomial",
                   help="negatives drawn with (binomial, the papers) or without replacement")
    p.add_argument("--ties", choices=["pessimistic", "optimistic", "random"], default=None,
                   help="tie rule for scores tables, runs and negatives files (default pessimistic)")
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
                        "weight = count ^ --weight-exponent; items without an interaction weigh 0)")
    p.add_argument("--weight-exponent", "--weight-alpha", dest="weight_exponent", type=float, default=None,
                   help="exponent of the counts when --item-weights is an interactions table (default 1, "
                        "RecBole popN's alpha; --weight-alpha is the old spelling)")


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
    p.add_argument("--n-items", "-N", type=_int_in(2), default=None, metavar="N",
                   help="number of items; item ids are 0..N-1 (refused with --item-weights: the items are "
                        "those of the weights)")
    p.add_argument("--users", required=True, metavar="USERS.csv",
                   help="column user [, item = the held-out item, never sampled]")
    p.add_argument("--sample-size", "-n", type=_int_in(2), required=True, metavar="n",
                   help="sample-set size n: n-1 negatives per user")
    p.add_argument("--seed", type=_nonneg_int, required=True)
    p.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="columns user, item: items never sampled for that user")
    p.add_argument("--replace", action=argparse.BooleanOptionalAction, default=None,
                   help="sample with replacement (binomial scheme) or not (--no-replace: distinct "
                        "negatives, then --scheme hypergeometric when estimating). Default: distinct "
                        "uniform negatives; with --item-weights, with replacement (RecBole popN; the "
                        "popularity estimators need it)")
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
    if args.duplicates is not None and fmt not in ("ncf", "elliot", "negatives"):
        raise _CLIError(f"--duplicates applies to negatives files (--input-format ncf, elliot, negatives); "
                        f"the input is read as {fmt}")
    return fmt


def _load_ranks(args):
    """The sampled ranks of RANKS: SampledRanks, or {model: RankCounts} for a counts table."""
    from . import io

    fmt = _input_format(args)
    src = args.ranks[0]
    ties = args.ties or "pessimistic"
    n = args.sample_size
    if fmt in ("trec", "ranx"):
        t = io.ranks_from_run(list(args.ranks), args.qrels, candidates="sampled", ties=ties, n=n,
                              file_format=fmt, rng=args.seed)
        return _per_user_items(args, io.ranks_from_table(t, n=None))
    if fmt in ("ncf", "elliot", "negatives"):
        if fmt == "ncf":
            cand = io.read_ncf_negatives(src)
        elif fmt == "elliot":
            cand = io.read_elliot_negatives(src, held_out=args.held_out)
        else:
            cand = io.read_negatives(src, args.held_out)
        sr = io.ranks_from_negatives(cand, args.scores, duplicates=args.duplicates or "count", ties=ties,
                                     n=n, rng=args.seed)
        return _per_user_items(args, sr)
    from .counts import counts_from_frame

    if io.is_parquet(src):
        return _counts(args, counts_from_frame(io.counts_table(src, n=n, N=args.n_items), n=n, N=args.n_items))
    df = io.read_table(src, "ranks")
    layout = io.table_layout(df)
    if layout == "popularity":
        raise _CLIError(f"{src} is a popularity scores table (columns {list(df.columns)}): give "
                        "--item-weights, or q and n_candidates columns")
    if layout != "scores" and args.ties is not None:
        raise _CLIError(f"--ties applies to scores (equal scores of the held-out item and a negative); "
                        f"{src} is a {layout} table")
    if layout == "counts":
        return _counts(args, counts_from_frame(io.counts_table(df, n=n, N=args.n_items), n=n, N=args.n_items))
    if layout == "ranks":
        return _per_user_items(args, io.ranks_from_table(df, n=n, N=args.n_items))
    return _per_user_items(args, io.ranks_from_score_table(df, ties=ties, n=n, rng=args.seed))


def _counts(args, stats):
    if args.n_items_file is not None:
        raise _CLIError("--n-items-file does not apply to a counts table (no users): give N_u in its "
                        "n_items column")
    return stats


def _per_user_items(args, sr):
    """Per-user N_u from --n-items-file (CSV user, n_items[, model])."""
    if args.n_items_file is None:
        return sr
    if args.n_items is not None:
        raise _CLIError("give --n-items or --n-items-file, not both")
    if sr.n_items is not None:
        raise _CLIError(f"{args.ranks[0] if args.scores is None else args.scores} has an n_items column "
                        "already: give N_u once (drop --n-items-file or the column)")
    return sr.with_n_items(args.n_items_file)


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
    """(ranks, common n or None, per-user sizes or None) of one model; --sample-size must match every user."""
    r, s = sr.for_model(model)
    if s is None:
        if n is None:
            raise _CLIError("--sample-size is required (the ranks table has no sample_size column)")
        return r, n, None
    if n is not None and (s != n).any():          # the readers check this first, naming the line
        users = sr.ranks.index[sr.ranks[model].notna().to_numpy()]
        k = int(np.flatnonzero(s != n)[0])
        raise _CLIError(f"user {users[k]!r} of model {model!r} has sample size {int(s[k])}, not "
                        f"--sample-size {n}; omit --sample-size to use each user's own size")
    if np.unique(s).size == 1:
        return r, int(s[0]), None
    return r, None, s


def _n_items(sr, model, N):
    """The item count of one model: per-user N_u (an n_items column, --n-items-file), else --n-items."""
    it = sr.items_for_model(model)
    if it is not None:
        if N is not None and (it != N).any():
            raise _CLIError(f"--n-items {N} disagrees with the per-user n_items (values "
                            f"{np.unique(it)[:5].tolist()}...): give one of them")
        return it
    if N is None:
        raise _CLIError("--n-items is required: give -N (one catalogue size), an n_items column (ranks, "
                        "counts or scores table, or the --scores file) or --n-items-file (per-user N_u)")
    return N


def _models(available, wanted):
    if wanted is None:
        return list(available)
    if wanted not in available:
        raise _CLIError(f"--model must be one of {list(available)}; got {wanted!r}")
    return [wanted]


def _item_weights(args, items=()):
    """The weights of --item-weights: a weights table, or counts ** --weight-exponent of interactions.

    With an interactions table, the ``items`` (the scores table's items, the
    users' held-out items) that have no interaction get weight 0: they are
    never drawn.
    """
    from .io import read_table
    from .popularity import check_item_weights, popularity_weights

    df = read_table(args.item_weights, "item weights")
    cols = set(df.columns)
    if cols == {"item", "weight"}:
        if args.weight_exponent is not None:
            raise _CLIError(f"--weight-exponent applies to an interactions table (user, item); "
                            f"{args.item_weights} holds weights (item, weight) already")
        return check_item_weights(df)
    if {"user", "item"} <= cols and "weight" not in cols:
        return popularity_weights(df, args.weight_exponent, items=items)
    raise _CLIError(f"{args.item_weights} must have columns item, weight (weights) or user, item "
                    f"(interactions); found columns {list(df.columns)}")


def _popularity_logs(args):
    from .io import read_table, table_layout
    from .popularity import popularity_logs_from_table

    if args.scheme != "binomial":
        raise _CLIError("popularity-sampled negatives are supported with replacement only (--scheme binomial)")
    if args.method is not None and args.method not in POPULARITY_METHODS:
        raise _CLIError(f"--method must be one of {', '.join(POPULARITY_METHODS)} for popularity-sampled "
                        f"negatives; got {args.method!r}")
    if len(args.ranks) > 1 or args.input_format not in ("auto", "table") or args.qrels or args.scores:
        raise _CLIError("popularity-sampled negatives read one scores table (--input-format table, "
                        "no --qrels/--scores)")
    given = [opt for opt, v in (("--n-items", args.n_items), ("--sample-size", args.sample_size),
                                ("--n-items-file", args.n_items_file), ("--duplicates", args.duplicates),
                                ("--held-out", args.held_out)) if v is not None]
    if given:
        raise _CLIError(f"{given[0]} does not apply to popularity-sampled negatives: each user's candidates "
                        "N_u and sample size n_u come from the weights and the logged negatives (or the "
                        "n_candidates column)")
    df = read_table(args.ranks[0], "scores")
    table_layout(df, popularity=True)
    if args.item_weights is None and args.weight_exponent is not None:
        raise _CLIError("--weight-exponent needs --item-weights (an interactions table)")
    weights = _item_weights(args, items=df["item"]) if args.item_weights else None
    excl = read_table(args.exclude, "exclude") if args.exclude else None
    return popularity_logs_from_table(df, weights, exclude=excl, ties=args.ties or "pessimistic")


def _header(path):
    """Column names of a CSV/TSV file (first line only); empty when it cannot be read (the reader says why)."""
    try:
        sep = "\t" if str(path).endswith((".tsv", ".tab")) else ","
        return set(pd.read_csv(path, sep=sep, nrows=0, encoding="utf-8-sig").columns)
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
    if args.weight_exponent is not None:
        raise _CLIError("--weight-exponent needs --item-weights (an interactions table)")
    if args.method in POPULARITY_METHODS:
        raise _CLIError(f"--method {args.method} is for popularity-sampled negatives: give --item-weights "
                        "(or a scores table with q and n_candidates columns)")
    return False


def _inputs(args):
    """Every input file of the command line (for the -o check)."""
    files = list(getattr(args, "ranks", None) or [])
    for opt in ("qrels", "scores", "held_out", "item_weights", "exclude", "n_items_file", "users"):
        v = getattr(args, opt, None)
        if v is not None:
            files.append(v)
    return files


def _check_output(args):
    """-o must not name an input file: writing the result there would destroy the input."""
    import os

    out = getattr(args, "output", None)
    if not out or not os.path.exists(out):
        return
    for f in _inputs(args):
        try:
            same = os.path.samefile(out, f)
        except OSError:
            same = False
        if same:
            raise _CLIError(f"--output {out} is the input file {f}: refusing to overwrite an input; "
                            "choose another output file")


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

    _check_output(args)
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

    _check_output(args)
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
    from .io import id_text, read_table
    from .sampling import sample_negatives

    _check_output(args)
    users = read_table(args.users, "users")
    check_columns(users, ["user"], f"the users file {args.users}")
    excl = None
    if args.exclude is not None:
        excl = read_table(args.exclude, "exclude")
        check_columns(excl, ["user", "item"], f"the exclude file {args.exclude}")
    held = users["item"].to_numpy() if "item" in users.columns else None
    if args.item_weights:
        from .popularity import sample_popularity_negatives

        if args.n_items is not None:
            raise _CLIError("--n-items does not apply with --item-weights: the items are those of the weights "
                            "table or of the interactions (items without an interaction weigh 0)")
        replace = True if args.replace is None else args.replace
        out = sample_popularity_negatives(users["user"].to_numpy(),
                                          _item_weights(args, items=() if held is None else held),
                                          args.sample_size, held_out=held, exclude=excl, replace=replace,
                                          rng=args.seed)
    else:
        if args.weight_exponent is not None:
            raise _CLIError("--weight-exponent needs --item-weights (an interactions table)")
        _need_n_items(args)
        if excl is not None:
            _report_exclusions(id_text(users["user"]), excl, args.exclude)
            excl = excl.assign(user=id_text(excl["user"]))
        out = sample_negatives(id_text(users["user"]), args.n_items, args.sample_size, exclude=excl,
                               held_out=held, scheme="binomial" if args.replace else "hypergeometric",
                               rng=args.seed)
    if args.output:
        out.to_csv(args.output, index=False)
    else:
        out.to_csv(sys.stdout, index=False)


def _report_exclusions(users, excl, path):
    """--exclude rows naming no user of --users: an error when none matches, else a warning (ids as text)."""
    from .io import id_text, row_location

    eu = id_text(excl["user"])
    blank = pd.Series(eu).str.strip() == ""
    if blank.any():
        raise _CLIError(f"column 'user' of {path} is blank in {row_location(excl, int(np.flatnonzero(blank)[0]))}")
    miss = ~pd.Series(eu, dtype=object).isin(set(users)).to_numpy()
    if len(eu) and miss.all():
        raise _CLIError(f"none of the {len(eu)} rows of {path} names a user of --users (e.g. user "
                        f"{eu[0]!r}); ids are compared as text: check the user ids")
    if miss.any():
        warnings.warn(f"{int(miss.sum())} of the {len(eu)} rows of {path} name a user not in --users (e.g. "
                      f"{eu[np.flatnonzero(miss)[0]]!r}): they exclude nothing (ids compared as text)",
                      UserWarning, stacklevel=2)


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
