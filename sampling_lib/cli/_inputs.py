"""Reading the inputs of ``estimate`` / ``compare``: ranks, counts, scores, runs, negatives files, popularity logs."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._names import POPULARITY_METHODS
from ._common import CLIError
from ._stages import POPULARITY_STAGE

#: the input formats of negatives files (one per stage of a nested design) with scores
NEGATIVES_FORMATS = ("ncf", "elliot", "negatives")

__all__ = ["CascadeTable", "common_size_only", "NEGATIVES_FORMATS", "input_format", "load_ranks", "recorded_scheme", "size_arg", "model_items", "pick_models",
           "read_weights", "popularity_logs",
           "is_popularity"]

@dataclass(frozen=True)
class CascadeTable:
    """A cascade's scores table (the ``cascade`` layout: a ``stratum`` column) or rank table (``cascade
    ranks``: ``head`` and ``head_rank`` columns), read by ``estimate`` with
    :func:`sampling_lib.cascade.cascade_estimate`."""

    table: pd.DataFrame
    source: str

    @property
    def ranked(self):
        """True for a rank table (one row per user), False for a scores table (one row per candidate)."""
        return "head_rank" in self.table.columns

    @property
    def what(self):
        return ("a cascade's rank table (head and head_rank columns: each user's rank among the retriever's "
                "head and among its random tail negatives)" if self.ranked else "a cascade's scores table (a "
                "stratum column: the retriever's head and random tail negatives)")

    def refuse(self, command):
        raise CLIError(f"{self.source} is {self.what}: `sampling-lib estimate` corrects it; {command} reads "
                       "ranks, counts and scores tables")


def input_format(args):
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
            raise CLIError(f"--input-format {fmt} needs --{opt.replace('_', '-')}")
    unused = [o for o in ("qrels", "scores", "held_out")
              if getattr(args, o) is not None and o not in needs and not (fmt == "elliot" and o == "held_out")]
    if unused:
        raise CLIError(f"--{unused[0].replace('_', '-')} is not used with --input-format {fmt}")
    if fmt not in ("trec", "ranx", *NEGATIVES_FORMATS) and len(args.ranks) > 1:
        raise CLIError(f"--input-format {fmt} reads one file; got {len(args.ranks)}")
    if args.scores is not None and len(args.scores) > 1 and fmt not in NEGATIVES_FORMATS:
        raise CLIError(f"--scores is given {len(args.scores)} times; several scores files (one per stage) go "
                       f"with negatives files (--input-format ncf, elliot, negatives), not {fmt}")
    if args.duplicates is not None and fmt not in ("ncf", "elliot", "negatives"):
        raise CLIError(f"--duplicates applies to negatives files (--input-format ncf, elliot, negatives); "
                        f"the input is read as {fmt}")
    return fmt


def load_ranks(args):
    """The sampled ranks of RANKS: SampledRanks, or {model: RankCounts} for a counts table.

    Sets ``args.scheme`` to the kernel's scheme (--scheme, else a ranks table's scheme column, else
    binomial) and ``args.scheme_stated`` to the scheme given or recorded (None: the default)."""
    from .. import io

    given = args.scheme
    args.scheme, args.scheme_stated = given or "binomial", given
    fmt = input_format(args)
    src = args.ranks[0]
    ties = args.ties or "pessimistic"
    n = args.sample_size
    if fmt in ("trec", "ranx"):
        t = io.ranks_from_run(list(args.ranks), args.qrels, candidates="sampled", ties=ties, n=n,
                              file_format=fmt, rng=args.seed)
        return _per_user_items(args, io.ranks_from_table(t, n=None))
    if fmt in NEGATIVES_FORMATS:
        return _stage_ranks(args, fmt, ties, n)
    from ..counts import counts_from_frame

    if io.is_parquet(src):
        return _counts(args, counts_from_frame(io.counts_table(src, n=n, N=args.n_items), n=n, N=args.n_items))
    df = io.read_table(src, "ranks")
    layout = io.table_layout(df)
    if layout == "popularity":
        raise CLIError(f"{src} is a popularity scores table (columns {list(df.columns)}): give "
                        "--item-weights, or q and n_candidates columns")
    if layout not in ("scores", "cascade") and args.ties is not None:
        raise CLIError(f"--ties applies to scores (equal scores of the held-out item and a negative); "
                        f"{src} is a {layout} table")
    if layout in ("cascade", "cascade ranks"):
        return CascadeTable(df, str(src))
    if layout == "counts":
        return _counts(args, counts_from_frame(io.counts_table(df, n=n, N=args.n_items), n=n, N=args.n_items))
    if layout == "ranks":
        sr = io.ranks_from_table(df, n=n, N=args.n_items)
        args.scheme_stated = recorded_scheme(given, sr.scheme, src)
        args.scheme = args.scheme_stated or "binomial"
        return _per_user_items(args, sr)
    return _per_user_items(args, io.ranks_from_score_table(df, ties=ties, n=n, rng=args.seed))


def recorded_scheme(given, recorded, src):
    """The scheme given (--scheme) or recorded (a ranks table's scheme column), None when neither; a given
    scheme that contradicts the record is an error."""
    if given is not None and recorded is not None and given != recorded:
        raise CLIError(f"--scheme {given} contradicts {src}: its scheme column says {recorded} (how the negatives "
                       "were drawn). Omit --scheme to use it, or drop the column to read the ranks otherwise")
    return given or recorded


def _stage_ranks(args, fmt, ties, n):
    """Negatives files (one per stage of a nested design, first stage first) + scores -> SampledRanks.

    Every user's sample size is its merged set over the stages (io.read_stages checks that the stages fit).
    With --exclude (the users' history) no negative may be in it, and -N gives each user's N_u = N minus its
    history items other than the held-out one (the items its negatives were drawn from, plus the held-out).
    """
    from .. import io

    files = list(args.ranks)
    cand = io.read_stages(files, fmt, held_out=args.held_out, exclude=args.exclude, scheme=args.scheme,
                          duplicates=args.duplicates or "count")
    scores = io.concat_tables(args.scores, "scores")
    sr = io.ranks_from_negatives(cand, scores, duplicates=args.duplicates or "count", ties=ties, n=n,
                                 rng=args.seed)
    if args.exclude is not None and args.n_items is not None:
        if sr.n_items is not None or args.n_items_file is not None:
            raise CLIError("give N_u once: -N with --exclude gives each user's N_u (N minus its history), so "
                           "drop the n_items column of the scores or --n-items-file")
        users = pd.Index(pd.unique(cand["user"]))
        held = cand[cand.label == 1].set_index("user")["item"].reindex(users)
        hist = io.read_table(args.exclude, "exclude")
        h = pd.DataFrame({"user": io.id_text(hist["user"]), "item": io.id_text(hist["item"])}).drop_duplicates()
        h = h[h.user.isin(users)]
        h = h[h["item"].to_numpy() != held.reindex(h["user"]).to_numpy()]
        NU = args.n_items - h.groupby("user").size().reindex(users).fillna(0).to_numpy(np.int64)
        io.check_stage_sizes(cand, pd.Series(NU, index=users), files)
        args.n_items = None          # consumed: the per-user N_u below carry it
        out = sr.with_n_items(pd.DataFrame({"user": users, "n_items": NU}))
        _check_drawn_with_replacement(args, cand, out, None)
        return out
    if args.n_items is not None:
        io.check_stage_sizes(cand, args.n_items, files)
    out = _per_user_items(args, sr)
    _check_drawn_with_replacement(args, cand, out, args.n_items)
    return out


#: Below this probability, sets without a repeated negative are not a with-replacement draw.
DISTINCT_UNDER_REPLACEMENT = 1e-6


def _check_drawn_with_replacement(args, cand, sr, N):
    """Warn when the negatives are read as drawn with replacement (``--scheme binomial``, the default) but
    ``--duplicates collapse`` made them distinct, or no user's set repeats an item, which such a draw makes
    improbable (:func:`sampling.log_prob_all_distinct`, summed over the users, below
    :data:`DISTINCT_UNDER_REPLACEMENT`): they were drawn without replacement,
    and the hypergeometric kernel is the exact one (it matters where n_u is a sizeable share of N_u, as at
    the top rungs of a ladder)."""
    from ..io._negatives import pair_key
    from ..sampling import log_prob_all_distinct

    if args.scheme != "binomial":
        return
    if args.duplicates == "collapse":             # distinct by construction: no probability needed
        warnings.warn("--duplicates collapse keeps each user's distinct negatives, a uniform subset of its items "
                      "given their number: the exact kernel is --scheme hypergeometric, not the default binomial",
                      UserWarning, stacklevel=2)
        return
    neg = cand[(cand["label"] == 0).to_numpy()]
    if pd.Series(pair_key(neg)).duplicated().any():
        return                                   # a repeated negative: drawn with replacement
    k = neg.groupby("user", sort=False).size()
    if sr.n_items is not None:
        Nu = sr.n_items.max(axis=1).reindex(k.index).to_numpy(dtype=float)
    elif N is not None and np.ndim(N) == 0:
        Nu = np.full(len(k), float(N))
    else:
        return                                   # N_u unknown
    if np.isnan(Nu).any():
        return
    logp = float(np.sum(log_prob_all_distinct(k.to_numpy(), np.maximum(Nu - 1, 1))))
    if logp < math.log(DISTINCT_UNDER_REPLACEMENT):
        warnings.warn(
            f"no user's negatives repeat an item: drawn with replacement (--scheme binomial, the default) that "
            f"has probability 10^{logp / math.log(10):.0f}. Drawn without replacement (as NCF, Elliot and "
            "sampling-lib negatives draw)? Then give --scheme hypergeometric (sampling-lib ranks records it in "
            "the scheme column of the ranks it writes)",
            UserWarning, stacklevel=2)


def _counts(args, stats):
    if args.n_items_file is not None:
        raise CLIError("--n-items-file does not apply to a counts table (no users): give N_u in its "
                        "n_items column")
    return stats


def _per_user_items(args, sr):
    """Per-user N_u from --n-items-file (CSV user, n_items[, model])."""
    if args.n_items_file is None:
        return sr
    if args.n_items is not None:
        raise CLIError("give --n-items or --n-items-file, not both")
    if sr.n_items is not None:
        raise CLIError(f"{args.ranks[0] if args.scores is None else ', '.join(args.scores)} has an n_items column "
                        "already: give N_u once (drop --n-items-file or the column)")
    return sr.with_n_items(args.n_items_file)


def common_size_only(sr):
    """--common-size-only: the users whose sets hold the most common number of items, with a warning counting
    those left out. Only sets *smaller* than the common size may be left out (NCF's lines that list the
    held-out item among their negatives: which users they are does not depend on the model, so leaving them
    out keeps the estimate unbiased); larger sets are a nested design's choice of users, which leaving out
    would bias."""
    import dataclasses
    import warnings

    if not hasattr(sr, "sample_sizes") or sr.sample_sizes is None:
        return sr
    sizes = sr.sample_sizes.where(sr.ranks.notna())
    values = sizes.stack()
    if values.nunique() <= 1:
        return sr
    mode = int(values.mode().max())
    larger = values[values > mode]
    if len(larger):
        raise CLIError(f"--common-size-only leaves out only sets smaller than the common one ({mode}); "
                       f"{larger.index.get_level_values(0).nunique():,} users have larger sets (up to "
                       f"{int(larger.max()):,}): a nested design chose who got them, and leaving them out would "
                       "bias the estimate. Use a method that takes per-user sizes (the default logspline)")
    keep = (sizes.isna() | (sizes == mode)).all(axis=1).to_numpy()
    out = int((~keep).sum())
    warnings.warn(f"--common-size-only: {out:,} of {keep.size:,} users have sets of fewer than {mode} items "
                  f"({sorted(int(v) for v in values[values < mode].unique())[:5]}) and are left out; the estimate "
                  f"is of the other {int(keep.sum()):,} users (unbiased when which users have short sets does "
                  "not depend on the model, as for NCF's lines that list the held-out item among the negatives)",
                  UserWarning, stacklevel=2)
    pick = lambda f: None if f is None else f[keep]          # noqa: E731
    return dataclasses.replace(sr, ranks=sr.ranks[keep], sample_sizes=pick(sr.sample_sizes),
                               n_items=pick(sr.n_items), first_ranks=pick(sr.first_ranks))


def size_arg(sr, model, n):
    """(ranks, common n or None, per-user sizes or None) of one model; --sample-size must match every user."""
    r, s = sr.for_model(model)
    if s is None:
        if n is None:
            raise CLIError("--sample-size is required (the ranks table has no sample_size column)")
        return r, n, None
    if n is not None and (s != n).any():          # the readers check this first, naming the line
        users = sr.ranks.index[sr.ranks[model].notna().to_numpy()]
        k = int(np.flatnonzero(s != n)[0])
        raise CLIError(f"user {users[k]!r} of model {model!r} has sample size {int(s[k])}, not "
                        f"--sample-size {n}; omit --sample-size to use each user's own size")
    if np.unique(s).size == 1:
        return r, int(s[0]), None
    return r, None, s


def model_items(sr, model, N):
    """The item count of one model: per-user N_u (an n_items column, --n-items-file), else --n-items."""
    it = sr.items_for_model(model)
    if it is not None:
        if N is not None and (it != N).any():
            raise CLIError(f"--n-items {N} disagrees with the per-user n_items (values "
                            f"{np.unique(it)[:5].tolist()}...): give one of them")
        return it
    if N is None:
        raise CLIError("--n-items is required: give -N (one catalogue size), an n_items column (ranks, "
                        "counts or scores table, or the --scores file) or --n-items-file (per-user N_u)")
    return N


def pick_models(available, wanted):
    if wanted is None:
        return list(available)
    if wanted not in available:
        raise CLIError(f"--model must be one of {list(available)}; got {wanted!r}")
    return [wanted]


def read_weights(args, items=()):
    """The weights of --item-weights: a weights table, or counts ** --weight-exponent of interactions.

    With an interactions table, the ``items`` (the scores table's items, the
    users' held-out items) that have no interaction get weight 0: they are
    never drawn.
    """
    from ..io import read_table
    from ..popularity import check_item_weights, popularity_weights

    df = read_table(args.item_weights, "item weights")
    cols = set(df.columns)
    if cols == {"item", "weight"}:
        if args.weight_exponent is not None:
            raise CLIError(f"--weight-exponent applies to an interactions table (user, item); "
                            f"{args.item_weights} holds weights (item, weight) already")
        return check_item_weights(df)
    if {"user", "item"} <= cols and "weight" not in cols:
        return popularity_weights(df, args.weight_exponent, items=items)
    raise CLIError(f"{args.item_weights} must have columns item, weight (weights) or user, item "
                    f"(interactions); found columns {list(df.columns)}")


def popularity_logs(args):
    from ..io import read_table, table_layout
    from ..popularity import popularity_logs_from_table

    if args.scheme not in (None, "binomial"):
        raise CLIError("popularity-sampled negatives are supported with replacement only (--scheme binomial)")
    if args.method is not None and args.method not in POPULARITY_METHODS:
        raise CLIError(f"--method must be one of {', '.join(POPULARITY_METHODS)} for popularity-sampled "
                        f"negatives; got {args.method!r}")
    negatives_file = args.input_format == "negatives"
    if negatives_file:
        # the file `negatives --item-weights` writes (user, item, q, n_candidates, replace) with its scores
        if len(args.ranks) > 1:
            raise CLIError(f"{args.ranks[1]}: {POPULARITY_STAGE}")
        if not args.scores or args.held_out is None:
            raise CLIError(f"{args.ranks[0]} holds popularity-sampled negatives (column q): give their scores "
                           "(--scores SCORES.csv: user, item, score[, model]) and the held-out items "
                           "(--held-out USERS.csv: user, item)")
    elif len(args.ranks) > 1 or args.input_format not in ("auto", "table") or args.qrels or args.scores:
        raise CLIError("popularity-sampled negatives read one scores table (--input-format table, no "
                       "--qrels/--scores), or the negatives file that sampling-lib negatives --item-weights "
                       "writes with its scores (--input-format negatives --scores ... --held-out ...)")
    given = [opt for opt, v in (("--n-items", args.n_items), ("--sample-size", args.sample_size),
                                ("--n-items-file", args.n_items_file), ("--duplicates", args.duplicates),
                                ("--held-out", None if negatives_file else args.held_out)) if v is not None]
    if given:
        raise CLIError(f"{given[0]} does not apply to popularity-sampled negatives: each user's candidates "
                        "N_u and sample size n_u come from the weights and the logged negatives (or the "
                        "n_candidates column)")
    if negatives_file:
        from ..io import concat_tables, popularity_table

        df = popularity_table(args.ranks[0], args.held_out, concat_tables(args.scores, "scores"))
    else:
        df = read_table(args.ranks[0], "scores")
    table_layout(df, popularity=True)
    if args.item_weights is None and args.weight_exponent is not None:
        raise CLIError("--weight-exponent needs --item-weights (an interactions table)")
    weights = read_weights(args, items=df["item"]) if args.item_weights else None
    excl = read_table(args.exclude, "exclude") if args.exclude else None
    return popularity_logs_from_table(df, weights, exclude=excl, ties=args.ties or "pessimistic")


def _header(path):
    """Column names of a CSV/TSV file (first line only); empty when it cannot be read (the reader says why)."""
    try:
        sep = "\t" if str(path).endswith((".tsv", ".tab")) else ","
        return set(pd.read_csv(path, sep=sep, nrows=0, encoding="utf-8-sig").columns)
    except (OSError, ValueError):
        return set()


def is_popularity(args):
    """--item-weights given, or a scores table that logs each negative's draw probability (column q)."""
    if args.item_weights:
        return True
    if {"q", "label", "item"} <= _header(args.ranks[0]):
        return True
    if args.input_format == "negatives" and "q" in _header(args.ranks[0]):
        return True                 # the negatives file of `negatives --item-weights`: read with its scores
    if args.exclude and args.input_format not in NEGATIVES_FORMATS:
        raise CLIError("--exclude needs --item-weights (popularity-sampled negatives) or negatives files "
                       "(--input-format ncf, elliot, negatives: the users' history, checked against them)")
    if args.weight_exponent is not None:
        raise CLIError("--weight-exponent needs --item-weights (an interactions table)")
    if args.method in POPULARITY_METHODS:
        raise CLIError(f"--method {args.method} is for popularity-sampled negatives: give --item-weights "
                        "(or a scores table with q and n_candidates columns)")
    return False
