"""The argparse parser of ``sampling-lib``: every subcommand's options and the examples of ``--help``."""
from __future__ import annotations

import argparse
import textwrap

from ._common import PROG, Parser, assurance, float_in, growth, int_in, nonneg_int, share
from ._names import DEFAULT_METHOD, METHODS, POPULARITY_METHODS, STAGE_FORMATS

__all__ = ["build_parser", "EXAMPLES", "INPUT_FORMATS"]

INPUT_FORMATS = ("auto", "table", "trec", "ranx", "ncf", "elliot", "negatives")


def _add_inputs(p):
    """The options that say what the input files are (estimate, compare, ranks)."""
    p.add_argument("ranks", metavar="RANKS.csv", nargs="+",
                   help="ranks table (user, rank[, sample_size][, n_items][, model]), counts table "
                        "(rank, count[, sample_size][, n_items][, model]; CSV or Parquet) or scores "
                        "table (user, score, label[, model]; with a stratum column, head or tail, a "
                        "retriever + reranker cascade's, which estimate corrects; or the cascade's ranks: user, "
                        "head, head_rank[, tail_size, tail_rank]); with --qrels one or more TREC/ranx run "
                        "files; with --input-format ncf/elliot/negatives the negatives file(s): one per "
                        "stage of a nested design, first stage first (sampling-lib negatives --stage)")
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS,
                   help="what RANKS holds (default auto: table, or trec/ranx (.json) with --qrels)")
    p.add_argument("--qrels", default=None, metavar="QRELS",
                   help="TREC qrels or ranx JSON qrels: the held-out item of each user (trec, ranx)")
    p.add_argument("--scores", action="append", default=None, metavar="SCORES.csv",
                   help="scores of every candidate: CSV user, item, score[, model] (ncf, elliot, "
                        "negatives); repeatable, e.g. one file per stage's scoring run")
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
    p.add_argument("--common-size-only", action="store_true",
                   help="keep only the users whose sets hold the most common number of items, and say how many "
                        "were left out: for methods that need one common n (mle, bv, ...) on files with a few "
                        "short sets (NCF's lines that list the held-out item among their negatives). Refused "
                        "when some sets are larger (a nested design: leaving those users out would bias)")


def _add_common(p, compare=False):
    _add_inputs(p)
    p.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="metric like recall@10, ndcg@10, ap@10, precision@5, mrr@10 "
                        "(repeatable; default recall@10 and ndcg@10)")
    p.add_argument("--method", default=None, choices=METHODS + POPULARITY_METHODS, metavar="METHOD",
                   help=f"estimator, one of {', '.join(METHODS)} (default {DEFAULT_METHOD}; "
                        "also with per-user sample sizes); with popularity-sampled negatives one of "
                        f"{', '.join(POPULARITY_METHODS)} (default pop_mle)")
    p.add_argument("--confidence-level", "--ci", dest="ci", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95; --ci is the old spelling)")
    p.add_argument("--n-boot", type=int_in(0), default=None,
                   help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (a bar on a terminal; otherwise, e.g. under nohup or CI, a plain "
                        "line every 30 s once a step has run 10 s)")
    p.add_argument("--scheme", choices=["binomial", "hypergeometric"], default=None,
                   help="negatives drawn with (binomial, the papers) or without replacement (default: the "
                        "scheme column of a ranks table that sampling-lib ranks --scheme wrote, else binomial)")
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
                   help="columns user, item, the items each user's negatives were never drawn from (its "
                        "history): with --item-weights; or with negatives files (ncf, elliot, negatives), where "
                        "no negative may be in it and -N gives each user's N_u = N minus its history items "
                        "(other than the held-out one)")
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
  sampling-lib plan ranks1.csv -N 3706 -n 100    (which second stage resolves recall@10 and ndcg@10)
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
  sampling-lib estimate ranks.csv -N 3706 -n 100 --plot estimates.png
  # the stages of a nested design (sampling-lib negatives --stage): every stage's file, first stage first
  sampling-lib estimate s1.test.negative s2.test.negative --input-format ncf --scores scores1.csv --scores scores2.csv -N 3706 --scheme hypergeometric
  # popularity-sampled negatives (sampling-lib negatives --item-weights: each one's q) with their scores
  sampling-lib estimate pop_negatives.csv --input-format negatives --scores scores.csv --held-out users.csv""",
    "compare": """examples:
  sampling-lib compare ranks.csv --n-items 3706 --sample-size 100 --metric ndcg@10
  sampling-lib compare ranks.csv -N 3706 -n 100 --adjust bonferroni --alpha 0.01 --format csv
  # the two stages of a nested design, scored in one or two runs
  sampling-lib compare s1.test.negative s2.test.negative --input-format ncf --scores scores1.csv --scores scores2.csv -N 3706 --scheme hypergeometric""",
    "negatives": """examples:
  # stage 1: 99 distinct negatives per user (users.csv: user,item = held-out item), never from the history
  sampling-lib negatives -N 3706 --users users.csv -n 100 --seed 0 --exclude train.csv -o s1.csv
  # the same in NCF lines, with the framework's own item ids (items.csv: column item, the catalogue)
  sampling-lib negatives --items items.csv --users users.csv -n 100 --seed 0 --exclude train.csv --input-format ncf -o s1.test.negative
  # stage 2: 900 more items for the users whose held-out item any model ranked first (ranks of stage 1)
  sampling-lib negatives --stage 2 --previous s1.csv --users users.csv --ranks ranks1.csv --threshold 1 --n2 900 -N 3706 --seed 0 --exclude train.csv -o s2.csv
  # the doubling ladder from the stage-1 scores, NCF files: stage 2, then stage 3 from the merged scores
  sampling-lib negatives --stage 2 --previous s1.test.negative --input-format ncf --scores scores1.csv --n-max 800 -N 3706 --seed 0 -o s2.test.negative
  sampling-lib negatives --stage 3 --previous s1.test.negative s2.test.negative --input-format ncf --scores scores1.csv --scores scores2.csv --n-max 800 -N 3706 --seed 0 -o s3.test.negative
  # then: sampling-lib estimate s1.test.negative s2.test.negative ... --input-format ncf --scores ... -N 3706 --scheme hypergeometric
  # a proxy's top 100 and 50 uniform negatives from the rest (popularity.csv: item,score), scored, then corrected
  sampling-lib negatives -N 3706 --users users.csv --exclude train.csv --proxy popularity.csv --head 100 --tail-n 50 --seed 0 -o requests.csv
  sampling-lib estimate requests_scored.csv""",
    "ranks": """examples:
  # the ranks of two stages' NCF files scored by one or two runs of the framework
  sampling-lib ranks s1.test.negative s2.test.negative --input-format ncf --scores scores1.csv --scores scores2.csv -o ranks.csv
  sampling-lib ranks s1.csv --input-format negatives --held-out users.csv --scores scores1.csv -N 3706 --exclude train.csv
  # several stages: each user's merged rank and sample_size, and its rank within the first stage (first_rank),
  # with which plan pairs several models when it re-plans on these merged ranks
  sampling-lib ranks s1.csv s2.csv s3.csv --input-format negatives --held-out users.csv --scores scores1.csv --scores scores2.csv --scores scores3.csv -N 3706 --exclude train.csv --scheme hypergeometric -o merged.csv
  sampling-lib plan merged.csv -n 100""",
    "plan-users": """examples:
  # one model, Recall@10 within +-0.01 at 95%
  sampling-lib plan-users --margin 0.01
  # five models and their pairwise differences, a guessed Recall@10 near 0.2
  sampling-lib plan-users --margin 0.01 --models 5 --p 0.2
  # the full table as csv
  sampling-lib plan-users --margin 0.02 --confidence-level 0.99 --models 3 --format csv""",
    "plan": """examples:
  # from stage-1 ranks (user,model,rank): the cheapest design whose intervals are at most 1.3x full ranking's
  sampling-lib plan ranks1.csv -N 3706 -n 100
  # without a pilot: 5,000 users, a guessed Recall@10 of 0.2, a target half-width of 0.01
  sampling-lib plan -N 100000 -n 100 --users 5000 --guess-recall 0.2 --target-halfwidth 0.01
  # with a budget (a costly scorer): never above 5% of full ranking, the most precise within it if need be
  sampling-lib plan ranks1.csv -N 3706 -n 100 --max-cost 5%
  # ladders that grow by x1.5 among the candidates too: less scoring, more rounds
  sampling-lib plan ranks1.csv -N 3706 -n 100 --growth 2 1.5""",
    "design": """examples:
  # stage 1's request for the test users of held_out.csv (user,item), items 0..3705, history excluded
  sampling-lib design init run --held-out held_out.csv -N 3706 --exclude train.csv
  # your framework scores run/request-1.csv into run/scores-1.csv (user,item,score[,model]); then
  sampling-lib design next run            # reads the scores, plans, writes run/request-2.csv
  sampling-lib design status run          # the stages, the decisions, the pending request
  # the whole loop (examples/design/score_requests.py scores a request with two toy models)
  while f=$(sampling-lib design status run --pending); do
      python examples/design/score_requests.py "$f" && sampling-lib design next run; done
  sampling-lib design estimate run""",
}


def _add_design(sub):
    """``design init|next|status|estimate DIR``: the one-call evaluation through request and scores files."""
    p = sub.add_parser("design", help="a planned sampled evaluation through files: init writes the first request, "
                       "each next reads its scores and writes the next request, estimate prints the table",
                       description=textwrap.fill(
                           "A planned sampled evaluation at about full ranking's precision, for frameworks that "
                           "read and write files (in Python: sampling_lib.evaluate). init checks the inputs and "
                           "writes DIR/request-1.csv, the (user, item) pairs to score; your framework writes their "
                           "scores to DIR/scores-1.csv (user, item, score[, model]); next reads them, plans, and "
                           "writes the next request for the users who need more items, until it says the design "
                           "is done; estimate prints the corrected metrics.", 100), epilog=EXAMPLES["design"],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    acts.required = True
    q = acts.add_parser("init", help="check the inputs and write stage 1's request into a new folder DIR")
    q.add_argument("dir", metavar="DIR", help="a new or empty folder, owned by these commands from now on")
    q.add_argument("--held-out", default=None, metavar="HELD_OUT.csv",
                   help="CSV user, item: each test user's held-out item (required)")
    q.add_argument("--n-items", "-N", type=int_in(2), default=None, metavar="N",
                   help="the catalogue: item ids 0..N-1 (or --items)")
    q.add_argument("--items", default=None, metavar="ITEMS.csv",
                   help="the catalogue with any ids: column item, each item once (instead of -N)")
    q.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="CSV user, item: each user's history, never drawn and never ranked against (user u's "
                        "held-out item then competes with N_u = N - |history_u| items)")
    q.add_argument("--sample-size", "-n", type=int_in(2), default=100, metavar="n",
                   help="the first stage's set size, held-out item included (default 100; users with N_u <= n "
                        "are ranked in full)")
    q.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="metric estimated and targeted (repeatable; default recall@10 and ndcg@10)")
    q.add_argument("--target-ratio", type=float, default=None, metavar="RATIO",
                   help="the precision ratio the design aims for: interval width over full ranking's (default "
                        "1.3; with --max-cost and no target, the most precise design within the budget)")
    q.add_argument("--max-cost", type=share, default=None, metavar="SHARE",
                   help="a budget: the largest expected share of full ranking's scoring (0.05 or 5%%)")
    q.add_argument("--format", choices=["pairs", "ncf", "elliot"], default="pairs",
                   help="the request files: pairs (CSV user, item: every pair to score; default), ncf "
                        "(*.test.negative lines: (user,held-out item) and the negatives) or elliot (TSV)")
    q.add_argument("--seed", type=nonneg_int, default=0, help="seed of every draw and of the bootstrap (default 0)")
    q.add_argument("--ties", choices=["pessimistic", "optimistic", "random"], default="pessimistic",
                   help="where a negative scored equal to the held-out item ranks (default pessimistic)")
    q.add_argument("--assurance", type=assurance, default=0.9, metavar="A",
                   help="the planner's assurance (sampling-lib plan --assurance; default 0.9)")
    q.add_argument("--growth", type=growth, default=2.0, metavar="G",
                   help="the ladders' growth factor (default 2: TORS24's doubling)")
    q = acts.add_parser("next", help="read the scores of the pending request, decide, write the next request")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--scores", default=None, metavar="SCORES.csv",
                   help="the scores of the pending request (default DIR/scores-K.csv for request K)")
    q.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    q = acts.add_parser("status", help="the stages run, the decisions, the pending request")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--pending", action="store_true",
                   help="print only the pending request's path; exit status 1 when the design is done (for a "
                        "shell loop)")
    q = acts.add_parser("estimate", help="the corrected metrics of the stages scored (the estimate table)")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="metrics (default: the design's)")
    q.add_argument("--method", default=None, choices=METHODS, metavar="METHOD",
                   help=f"estimator (default {DEFAULT_METHOD}; it takes the per-user set sizes)")
    q.add_argument("--confidence-level", "--ci", dest="ci", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95)")
    q.add_argument("--n-boot", type=int_in(0), default=1000, help="bootstrap replicates (default 1000)")
    q.add_argument("--seed", type=nonneg_int, default=None, help="bootstrap seed (default: the design's)")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default: the compact view), or the full table as csv or json")
    q.add_argument("--wide", action="store_true", help="with --format table: every column")
    q.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    q.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


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
    p = sub.add_parser("ranks", help="per-user sampled ranks (user, model, rank, sample_size[, n_items][, first_rank]"
                       "[, scheme]) of "
                       "any input of estimate, e.g. negatives files + scores: the pilot of plan, the --ranks of "
                       "negatives --stage", epilog=EXAMPLES["ranks"], formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_inputs(p)
    p.add_argument("--scheme", choices=["binomial", "hypergeometric"], default=None,
                   help="how the negatives were drawn: without replacement (hypergeometric) a later stage's "
                        "negative may not repeat an earlier one. Given, it is written as the output's scheme "
                        "column, which estimate, compare and plan follow (default: the input's scheme column, "
                        "else binomial, and no column)")
    p.add_argument("--ties", choices=["pessimistic", "optimistic", "random"], default=None,
                   help="tie rule for scores tables, runs and negatives files (default pessimistic)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of --ties random (default 0)")
    p.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="negatives files: the users' history (no negative may be in it; with -N each user's "
                        "N_u = N minus its history items other than the held-out one)")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p = sub.add_parser("plan-users", help="test users needed for a margin of error",
                       description="How many test users an evaluation needs so that a metric in [0, 1] (Recall@K, "
                       "NDCG@K, ...) is known within a margin of error (the half-width of its interval): for "
                       "one metric of each model (TORS24 eq 46, the normal approximation; and Hoeffding's "
                       "inequality, for any metric and no approximation), and for the difference of two models "
                       "(TORS24 eq 52), Bonferroni-adjusted over the models or their pairs. These count users "
                       "ranked in full; a sampled evaluation needs more (by the precision ratio squared: "
                       "sampling-lib plan).",
                       epilog=EXAMPLES["plan-users"], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--margin", type=float_in(0, 1, low_open=True), required=True, metavar="E",
                   help="margin of error: the half-width of the interval, e.g. 0.01 (in (0, 1])")
    p.add_argument("--confidence-level", "--confidence", dest="confidence_level",
                   type=float_in(0, 1, low_open=True, high_open=True), default=0.95, metavar="LEVEL",
                   help="confidence level (default 0.95; --confidence is the old spelling)")
    p.add_argument("--models", type=int_in(1), default=1, metavar="K",
                   help="number of models compared on the same users (default 1)")
    p.add_argument("--p", type=float_in(0, 1), default=0.5, metavar="P",
                   help="planning value of the metric: 0.5 (default) is the worst case of p(1 - p); a guess "
                        "such as 0.2 for a Recall@10 near 0.2 needs fewer users")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default: one row per quantity, with a header line and a legend), or every "
                        "column (quantity, margin, confidence_level, models, p, users, source) as csv or json")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p = sub.add_parser("plan", help="which sampled design reaches a target precision at least cost (a pilot's "
                       "ranks, counts, or a guess)", epilog=EXAMPLES["plan"],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pilot", metavar="PILOT.csv", nargs="?", default=None,
                   help="stage-1 ranks (user, rank[, model][, sample_size][, n_items]) or a counts table (rank, "
                        "count[, model][, sample_size][, n_items]); with larger sample sizes than -n, the merged "
                        "ranks of a design run in part (re-planning: the prior sees the top of P(R); their "
                        "first_rank column, written by sampling-lib ranks, pairs several models' first stages); "
                        "without it: -N, -n, --users, --guess-recall")
    p.add_argument("--n-items", "-N", type=int_in(2), default=None, metavar="N",
                   help="items N (N_u; the median of an n_items column)")
    p.add_argument("--sample-size", "-n", type=int_in(2), default=None, metavar="n",
                   help="first-stage set size n (held-out item included)")
    p.add_argument("--users", type=int_in(1), default=None, metavar="M",
                   help="users of the evaluation (default: the pilot's)")
    p.add_argument("--guess-recall", type=float, default=None, metavar="R",
                   help="without a pilot: a guessed Recall@10 (a power law P(R) ~ R^-a with it)")
    p.add_argument("--model", default=None, help="only this model of the pilot (default: every model; a design "
                   "must meet the target for all of them)")
    p.add_argument("--metric", "-m", action="append", default=None, metavar="METRIC",
                   help="target metric (repeatable; default recall@10 and ndcg@10)")
    p.add_argument("--target-ratio", type=float, default=None, metavar="RATIO",
                   help="largest precision ratio: interval width over full ranking's (default 1.3)")
    p.add_argument("--target-halfwidth", type=float, default=None, metavar="H",
                   help="largest interval half-width (instead of --target-ratio)")
    p.add_argument("--robust", action="store_true",
                   help="judge each design by the high end of its predicted half-width (the top of P(R) is an "
                        "extrapolation in the pilot: its prior refitted with weaker and stronger smoothing)")
    p.add_argument("--assurance", type=assurance, default=0.9, metavar="A",
                   help="a design meets the target when its prediction times the planner's measured error margin "
                        "does (x1.03 for Recall@10, x1.06 for NDCG@10 at 0.9), so that the chosen design "
                        "realizes the target with about this probability (default 0.9; 0.5: the prediction "
                        "itself; sampling_lib.design.assurance_margin)")
    p.add_argument("--growth", type=growth, nargs="+", default=[2.0], metavar="G",
                   help="the ladders' growth factors, each a family of candidates (default 2: TORS24's doubling; "
                        "e.g. --growth 2 1.5 adds ladders that grow by x1.5, whose users stop nearer the size "
                        "where an item first ranks above the held-out one: less scoring, more rounds)")
    p.add_argument("--max-cost", type=share, default=None, metavar="SHARE",
                   help="a budget: the largest expected cost as a share of full ranking (0.05 or 5%%); designs "
                        "above it are never chosen, and if none within it meets the target, the most precise "
                        "within it is (default: no budget)")
    p.add_argument("--confidence-level", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95)")
    p.add_argument("--scheme", choices=["binomial", "hypergeometric"], default=None,
                   help="negatives drawn with (binomial) or without replacement (the predictions' kernel; "
                        "default: the pilot's scheme column, else binomial). Given or recorded, the printed "
                        "commands draw (--replace / --no-replace) and read (--scheme) the stages the same way; "
                        "else they draw distinct negatives, the default of sampling-lib negatives")
    p.add_argument("--seed", type=nonneg_int, default=0,
                   help="seed of the pilot drawn from --guess-recall, and of the printed negatives command (default 0)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default: the first stage and per kind the cheapest design meeting the target, the "
                        "chosen one marked), or every (design, metric[, model]) row as csv or json")
    p.add_argument("--wide", action="store_true", help="with --format table: every candidate design")
    p.add_argument("--output", "-o", default=None)
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (the fit and the candidates predicted: a bar on a terminal, "
                        "otherwise a plain line every 30 s once a step has run 10 s)")
    p = sub.add_parser("negatives", help="a fixed negatives file (same sampled items for all models), or the "
                       "negatives of a later stage", epilog=EXAMPLES["negatives"],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-items", "-N", type=int_in(2), default=None, metavar="N",
                   help="number of items; item ids are 0..N-1 (refused with --item-weights: the items are "
                        "those of the weights)")
    p.add_argument("--items", default=None, metavar="ITEMS.csv",
                   help="instead of -N, the catalogue with any ids (gaps, text): column item, every item a "
                        "user can be ranked against, once; negatives are drawn from its ids. The same file at "
                        "every stage; estimate with -N = its number of rows")
    p.add_argument("--users", default=None, metavar="USERS.csv",
                   help="column user [, item = the held-out item, never sampled]; required for stage 1, and "
                        "for a later stage whose files do not name the held-out items (--input-format "
                        "negatives, Elliot '(user,)' lines)")
    p.add_argument("--sample-size", "-n", type=int_in(2), default=None, metavar="n",
                   help="stage 1: sample-set size n, n-1 negatives per user (required)")
    p.add_argument("--seed", type=nonneg_int, required=True,
                   help="seed of the draws (stage K >= 2 draws from the seed sequence (seed, K), so reusing "
                        "stage 1's seed still gives independent items)")
    p.add_argument("--exclude", default=None, metavar="TRAIN.csv",
                   help="columns user, item: items never sampled for that user (its history; the same file "
                        "at every stage: N_u = N - history items other than the held-out one)")
    p.add_argument("--replace", action=argparse.BooleanOptionalAction, default=None,
                   help="sample with replacement (binomial scheme) or not (--no-replace: distinct "
                        "negatives, then --scheme hypergeometric when estimating). Default: distinct "
                        "uniform negatives; with --item-weights, with replacement (RecBole popN; the "
                        "popularity estimators need it). A later stage draws as stage 1 did")
    p.add_argument("--output", "-o", default=None)
    _add_weights(p)
    c = p.add_argument_group("a proxy's head and a uniform tail (a stratified design of one tail stage; README "
                             "'Correcting a published cascade')")
    c.add_argument("--proxy", default=None, metavar="PROXY.csv",
                   help="a cheap ranker: item, score (one per catalogue item) or a retriever's top-m table user, "
                        "item[, rank]; writes user, item, label, stratum (the held-out item, the proxy's top "
                        "--head negatives, --tail-n uniform negatives from the rest) to score, then correct "
                        "with sampling-lib estimate")
    c.add_argument("--head", type=int_in(0), default=None, metavar="m", help="with --proxy: head negatives per user")
    c.add_argument("--tail-n", type=int_in(0), default=None, metavar="r",
                   help="with --proxy: uniform tail negatives per user")
    g = p.add_argument_group("later stages (a nested design, README 'Resolving a metric below resolution'; "
                             "sampling-lib plan prints the command)")
    g.add_argument("--stage", type=int_in(1), default=1, metavar="K",
                   help="write the negatives of stage K (default 1: a fixed negatives file); K >= 2 adds items "
                        "to the users that need them, from the ranks of the earlier stages")
    g.add_argument("--previous", nargs="+", default=None, metavar="FILE",
                   help="stage K >= 2: the negatives files of stages 1..K-1, first stage first")
    g.add_argument("--input-format", default=None, choices=STAGE_FORMATS,
                   help="format of the --previous files, and of the file written (stage 1 too): negatives "
                        "(user,item CSV, the default; held-out items in --users), ncf (*.test.negative lines) or "
                        "elliot (TSV)")
    g.add_argument("--ranks", default=None, metavar="RANKS.csv",
                   help="the current ranks: user, rank[, model][, sample_size] (the rank of the held-out item "
                        "among its merged set of stages 1..K-1, per model)")
    g.add_argument("--scores", action="append", default=None, metavar="SCORES.csv",
                   help="instead of --ranks: user, item, score[, model], the scores of every candidate of "
                        "stages 1..K-1 (repeatable: one file per stage's scoring run)")
    g.add_argument("--ties", choices=["pessimistic", "optimistic", "random"], default=None,
                   help="with --scores: tie rule (default pessimistic)")
    g.add_argument("--threshold", type=int_in(1), default=None, metavar="T",
                   help="stage 2 for the users at rank <= T under any model (with --n2)")
    g.add_argument("--n2", type=int_in(1), default=None, metavar="N2",
                   help="items added at stage 2: for the users at rank <= --threshold, or for every user "
                        "without --threshold (a single larger set)")
    g.add_argument("--n-max", type=int_in(2), default=None, metavar="N_MAX",
                   help="the doubling ladder (TORS24 Algorithm 1): a user at rank 1 under any model goes to "
                        "the next size n, 2n, 4n, ... up to N_MAX (any stage K)")
    g.add_argument("--growth", type=growth, default=None, metavar="G",
                   help="with --n-max: the ladder's sizes grow by this factor instead of doubling (each size "
                        "ceil(G x the one before); every stage of one ladder takes the same G; plan --growth)")
    g.add_argument("--full-fraction", type=float, default=None, metavar="F",
                   help="stage 2 ranks a random share F of the users in full (all their N_u - n remaining "
                        "items)")
    _add_design(sub)
    p = sub.add_parser("run", help="execute the notebooks into a report folder (make reports)",
                       add_help=False)
    p.add_argument("run_args", nargs=argparse.REMAINDER,
                   help="options of 'python -m sampling_lib run' (--out, --smoke, --only, --jobs, --timeout)")
    return parser

