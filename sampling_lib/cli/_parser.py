"""The argparse parser of ``sampling-lib``: every subcommand's options and the examples of ``--help``."""
from __future__ import annotations

import argparse

from ..estimators import DEFAULT_METHOD, METHODS, POPULARITY_METHODS
from ._common import PROG, Parser, int_in, nonneg_int

__all__ = ["build_parser", "EXAMPLES", "INPUT_FORMATS"]

INPUT_FORMATS = ("auto", "table", "trec", "ranx", "ncf", "elliot", "negatives")


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
    p.add_argument("--n-items", "-N", type=int_in(2), default=None, metavar="N",
                   help="number of items N in the global ranking (not needed when the ranks, counts or "
                        "scores table has an n_items column of per-user candidate counts N_u, with "
                        "--n-items-file, or with --item-weights)")
    p.add_argument("--n-items-file", default=None, metavar="N_ITEMS.csv",
                   help="per-user candidate counts N_u: CSV user, n_items[, model] (any input format "
                        "except counts tables, which carry N_u in their n_items column)")
    p.add_argument("--sample-size", "-n", type=int_in(2), default=None, metavar="n",
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
    p.add_argument("--n-boot", type=int_in(0), default=None,
                   help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="bootstrap seed (default 0)")
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
    from .. import __version__

    parser = Parser(prog=PROG, description="Correct sampled top-K evaluation metrics "
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
    p.add_argument("--n-items", "-N", type=int_in(2), default=None, metavar="N",
                   help="number of items; item ids are 0..N-1 (refused with --item-weights: the items are "
                        "those of the weights)")
    p.add_argument("--users", required=True, metavar="USERS.csv",
                   help="column user [, item = the held-out item, never sampled]")
    p.add_argument("--sample-size", "-n", type=int_in(2), required=True, metavar="n",
                   help="sample-set size n: n-1 negatives per user")
    p.add_argument("--seed", type=nonneg_int, required=True)
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

