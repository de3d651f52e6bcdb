"""``sampling-lib negatives --stage K``: the negatives added at a later stage of a nested design.

The earlier stages' files (``--previous``, any of the formats of
:data:`sampling_lib.io.STAGE_FORMATS`) are read and checked by
:func:`sampling_lib.io.read_stages`; the current ranks come from a ranks
file or from the scores of every candidate so far; the design decides which
users go on (:func:`sampling_lib.sampling.next_stage_sizes`: any model's rank
counts, so every model is scored on one shared set of added items) and
:func:`sampling_lib.sampling.sample_added_negatives` draws the items, written
in the earlier stages' format.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from ._common import CLIError, UsageError

__all__ = ["cmd_stage", "check_stage_one", "catalogue", "item_positions"]

#: the options that only a later stage reads
STAGE_OPTIONS = ("previous", "ranks", "scores", "ties", "threshold", "n2", "n_max", "growth", "full_fraction")

POPULARITY_STAGE = (
    "a later stage of popularity-sampled negatives is not supported: the users that go on are chosen by their "
    "stage-1 ranks, which biases the pop_mle rank-mass curve and the Horvitz-Thompson estimate (both treat a "
    "user's logged draws as unselected); sample a larger n at stage 1 instead")


def _opt(name):
    return "--" + name.replace("_", "-")


def check_stage_one(args):
    """Stage 1: the later-stage options do not apply; --users and -n are required."""
    given = [o for o in STAGE_OPTIONS if getattr(args, o, None) is not None]
    if given:
        raise UsageError(f"{_opt(given[0])} applies to a later stage (--stage K >= 2)")
    missing = [o for o in ("users", "sample_size") if getattr(args, o) is None]
    if missing:
        raise UsageError("stage 1 needs " + " and ".join(_opt(o) for o in missing))


def _design_of(args, K):
    """(kind, parameters) of the design options; exactly one design."""
    if args.threshold is not None and args.n2 is None:
        raise UsageError("--threshold needs --n2 (the items added for the users at rank <= T)")
    chosen = [k for k, v in (("threshold", args.n2), ("ladder", args.n_max), ("full", args.full_fraction))
              if v is not None]
    if len(chosen) != 1:
        raise UsageError("a later stage needs one design: --n2 N2 [--threshold T], --n-max N_MAX or "
                         f"--full-fraction F; got {', '.join(chosen) if chosen else 'none'}")
    kind = chosen[0]
    if args.growth is not None and kind != "ladder":
        raise UsageError("--growth applies to the ladder (--n-max)")
    if kind != "ladder" and K != 2:
        raise UsageError(f"--{'n2' if kind == 'threshold' else 'full-fraction'} designs have two stages; "
                         f"--stage {K} continues a ladder only (--n-max)")
    if kind == "full" and not 0.0 < args.full_fraction <= 1.0:
        raise UsageError(f"--full-fraction must lie in (0, 1]; got {args.full_fraction}")
    return kind


def catalogue(args):
    """(N, the catalogue's item ids as text or None) of ``-N`` (ids 0..N-1) or ``--items ITEMS.csv``.

    ``--items`` names the items as a framework's files do (gaps in integer ids,
    text ids): its ``item`` column lists every item a user can be ranked
    against, once. The draws pick positions 0..N-1 in it and write its ids.
    """
    from .._validation import check_columns
    from ..io import id_text, read_table, row_location

    if args.items is None:
        if args.n_items is None:
            raise UsageError("give the catalogue: -N N (item ids 0..N-1) or --items ITEMS.csv (any ids)")
        return args.n_items, None
    table = read_table(args.items, "items")
    check_columns(table, ["item"], f"the items file {args.items}")
    ids = id_text(table["item"])
    blank = pd.Series(ids, dtype=object).str.strip() == ""
    if blank.any():
        raise CLIError(f"{row_location(table, int(np.flatnonzero(blank)[0]))}: the item id is blank")
    dup = pd.Series(ids, dtype=object).duplicated().to_numpy()
    if dup.any():
        raise CLIError(f"{row_location(table, int(np.flatnonzero(dup)[0]))}: item {ids[np.flatnonzero(dup)[0]]!r} "
                       f"is listed twice; the items file lists each item of the catalogue once")
    if len(ids) < 2:
        raise CLIError(f"{args.items} lists {len(ids)} item(s); a catalogue has at least 2")
    if args.n_items is not None and args.n_items != len(ids):
        raise CLIError(f"-N {args.n_items} disagrees with --items {args.items}, which lists {len(ids):,} items; "
                       "give one of them")
    return len(ids), pd.Index(ids)


def item_positions(items, what, N, where, ids=None, source=None):
    """Text item ids as positions 0..N-1 of the catalogue: the ids themselves under ``-N`` (``ids`` None),
    their rows in ``--items`` (``ids``, read from ``source``) otherwise; the first bad one names its file
    and line (``where(i)``)."""
    s = pd.Series(items, dtype=object)
    if ids is not None:
        v = ids.get_indexer(s.to_numpy())
        bad = v < 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise CLIError(f"{where(i)}: {what} {s.iloc[i]!r} is not an item of --items {source}: every item id "
                           "of the files must be one of the catalogue's")
        return v.astype(np.int64)
    ok = s.str.fullmatch(r"[0-9]+").fillna(False).to_numpy()
    v = np.full(len(s), -1, dtype=np.int64)
    v[ok] = [int(x) if len(x) < 19 else -1 for x in s[ok]]
    bad = (v < 0) | (v >= N)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CLIError(f"{where(i)}: {what} {s.iloc[i]!r} is not an item id in 0..N-1={N - 1}: -N draws the ids "
                       "0..N-1, so every id of the files must be one of them (other ids: --items ITEMS.csv)")
    return v


def cmd_stage(args):
    from ..io import (concat_tables, id_text, ranks_from_negatives, ranks_from_table, read_stages, read_table,
                      row_location, stage_file_name, write_stage_negatives)
    from ..io._stages import check_stage_sizes
    from ..sampling import SHORT_FIRST_STAGE, Design, next_stage_sizes, sample_added_negatives

    K, fmt = args.stage, args.input_format or "negatives"
    if args.item_weights is not None or args.weight_exponent is not None:
        raise CLIError(POPULARITY_STAGE)
    if args.sample_size is not None:
        raise UsageError("-n does not apply to a later stage: the design gives the sizes (--n2, --n-max, "
                         "--full-fraction)")
    prev = args.previous or []
    if len(prev) != K - 1:
        raise UsageError(f"--stage {K} needs the files of stages 1..{K - 1} in --previous; got {len(prev)}")
    kind = _design_of(args, K)
    N, ids = catalogue(args)
    needs_ranks = kind == "ladder" or (kind == "threshold" and args.threshold is not None)
    if needs_ranks and (args.ranks is None) == (args.scores is None):
        raise UsageError("give the current ranks: --ranks RANKS.csv or --scores SCORES.csv (one of them)")
    if not needs_ranks and (args.ranks is not None or args.scores is not None):
        raise UsageError(f"{'--ranks' if args.ranks else '--scores'} does not apply: "
                         f"{'--full-fraction' if kind == 'full' else '--n2 without --threshold'} "
                         "does not depend on the ranks")
    if args.ties is not None and args.scores is None:
        raise UsageError("--ties applies to --scores")
    if fmt == "ncf" and args.users is not None:
        raise UsageError("--users does not apply to NCF files: their lines name the held-out items")
    replace = bool(args.replace)
    if kind == "full" and replace:
        raise UsageError("--full-fraction ranks users in full: the added items are distinct (--no-replace)")
    scheme = "binomial" if replace else "hypergeometric"
    for f in prev:
        if "q" in _columns(f):
            raise CLIError(f"{f}: {POPULARITY_STAGE}")
    excl = None
    if args.exclude is not None:
        from .._validation import check_columns

        excl = read_table(args.exclude, "exclude")
        check_columns(excl, ["user", "item"], f"the exclude file {args.exclude}")
    # duplicates="collapse": a repeated stage-1 negative is refused below, with the advice of a later stage
    cand = read_stages(prev, fmt, held_out=args.users, exclude=excl, scheme=scheme, duplicates="collapse")
    names = [stage_file_name(f, k) for k, f in enumerate(prev, start=1)]

    def where(i):
        r = cand.iloc[i]
        return f"{names[int(r['stage']) - 1]}, line {int(r['line'])}"

    items = item_positions(cand["item"].to_numpy(), "item", N, where, ids, args.items)
    users = pd.Index(pd.unique(cand["user"]))
    held = pd.Series(items[(cand.label == 1).to_numpy()], index=cand.loc[cand.label == 1, "user"].to_numpy())
    held = held.reindex(users)
    NU = np.full(users.size, N, dtype=np.int64)
    excl_int = None
    if excl is not None:
        eu = id_text(excl["user"])
        ei = item_positions(id_text(excl["item"]), "excluded item", N, lambda i: row_location(excl, i), ids,
                            args.items)
        excl_int = pd.DataFrame({"user": eu, "item": ei}).drop_duplicates()
        mine = excl_int[excl_int.user.isin(users)]
        mine = mine[mine["item"].to_numpy() != held.reindex(mine["user"]).to_numpy()]
        NU -= mine.groupby("user").size().reindex(users).fillna(0).to_numpy(np.int64)
    check_stage_sizes(cand, pd.Series(NU, index=users), prev)
    neg = cand.label == 0
    if not replace:
        dup = cand[neg].duplicated(["user", "item"]).to_numpy()
        if dup.any():
            i = int(np.flatnonzero(neg.to_numpy())[np.flatnonzero(dup)[0]])
            raise CLIError(f"{where(i)}: user {cand['user'].iloc[i]!r} lists negative {cand['item'].iloc[i]!r} "
                           "twice: drawn with replacement? then give --replace (a later stage draws as stage 1 did)")
    size = cand.groupby("user", sort=False).size().reindex(users).to_numpy(np.int64)
    first = cand[cand.stage == 1].groupby("user", sort=False).size().reindex(users).to_numpy(np.int64)
    rng = np.random.default_rng([args.seed, K])
    ranks = None
    if args.ranks is not None or args.scores is not None:
        ranks = _current_ranks(args, cand, users, size, scheme, ranks_from_negatives, ranks_from_table,
                               concat_tables, id_text)
    # the design's first-stage size: the most common one (NCF files: 100, with a few sets of 99 or 98 whose line
    # lists the held-out item among its negatives; those count as first stages a few items short, at the
    # ladder's first rung: sampling.SHORT_FIRST_STAGE); users grouped by stage-1 sizes further apart are
    # designs of their own
    n1 = int(np.bincount(first).argmax())
    base = np.where((first < n1) & (first >= SHORT_FIRST_STAGE * n1), n1, first)
    new = size.copy()
    for s1 in np.unique(base):
        sel = np.flatnonzero(base == s1)
        if kind == "ladder":
            if args.n_max < s1:
                raise UsageError(f"--n-max {args.n_max} is below the stage-1 size {s1}")
            d = Design("ladder", int(s1), n_max=args.n_max, growth=2.0 if args.growth is None else args.growth)
        elif kind == "full":
            d = Design("full_subset", int(s1), fraction=args.full_fraction)
        elif args.threshold is None:
            d = Design("single", int(s1) + args.n2)
        else:
            d = Design("threshold", int(s1), threshold=min(args.threshold, int(s1)), n2=args.n2)
        r = ranks[sel] if ranks is not None else np.ones((sel.size, 1))
        # N_u checked below, where the message can name the user and the option (the library's names an index)
        new[sel] = next_stage_sizes(r, size[sel], d, N=NU[sel] if kind == "full" else None, rng=rng)
    _check_fits(new, size, NU, users, kind, args, excl is not None)
    added = new - size
    go = added > 0
    what = {"threshold": f"rank <= {args.threshold} under any model", "ladder": "rank 1 under any model",
            "full": "chosen at random to be ranked in full"}
    why = what[kind] if not (kind == "threshold" and args.threshold is None) else "every user"
    if not go.any():
        done = ""
        if kind == "ladder" and ranks is not None and (ranks.min(axis=1) <= 1).any():
            top = int((ranks.min(axis=1) <= 1).sum())
            done = (f": the {top:,} user(s) at rank 1 are at --n-max {args.n_max} or at their N_u, the ladder's "
                    "last rung; the design is complete")
        print(f"stage {K}: no user goes on ({why}){done}; no file written. Estimate on stages 1..{K - 1}: "
              f"sampling-lib estimate {' '.join(prev)} --input-format {fmt} --scores SCORES1.csv ... -N {N}"
              + _estimate_options(args, replace), file=sys.stderr)
        return
    earlier = pd.DataFrame({"user": cand["user"].to_numpy()[neg.to_numpy()], "item": items[neg.to_numpy()]})
    out = sample_added_negatives(users.to_numpy()[go], N, added[go], earlier=earlier, exclude=excl_int,
                                 held_out=held.to_numpy()[go], scheme=scheme, rng=rng)
    hold = held[go] if (fmt == "ncf" or (fmt == "elliot" and args.users is None)) else None
    if ids is not None:                       # positions in --items back to its ids
        out = out.assign(item=ids.to_numpy()[out["item"].to_numpy()])
        hold = None if hold is None else pd.Series(ids.to_numpy()[hold.to_numpy()], index=hold.index)
    write_stage_negatives(out, args.output or sys.stdout, fmt, held_out=hold)
    dest = args.output or "stdout"
    n_add = np.unique(added[go])
    extra = _estimate_options(args, replace)
    files = f"{' '.join(prev)} {args.output or 'STAGE%d' % K}"
    if kind == "ladder" and int(new[go].min()) < args.n_max:
        # rungs remain: the next stage needs the ranks of the merged sets, not an estimate yet
        then = (f"Score them, then the next rung: sampling-lib ranks {files} --input-format {fmt} --scores "
                f"SCORES1.csv ... -N {N}{extra} -o ranks{K}.csv, and sampling-lib negatives --stage {K + 1} "
                f"--previous {files} --ranks ranks{K}.csv --n-max {args.n_max} ... (the same options); estimate "
                f"once a stage sends no user on (at the latest at --n-max {args.n_max})")
    else:
        then = (f"Score them, then estimate on every stage: sampling-lib estimate {files} --input-format {fmt} "
                f"--scores SCORES1.csv ... -N {N}{extra}")
    print(f"stage {K}: {int(go.sum()):,} of {users.size:,} users get "
          f"{n_add[0] if n_add.size == 1 else f'{n_add.min()}-{n_add.max()}'} more items ({why}); "
          f"{len(out):,} negatives written to {dest} ({fmt}). {then}", file=sys.stderr)


def _check_fits(new, size, NU, users, kind, args, history):
    """Every user's next set fits its N_u (the catalogue, less its history with --exclude); else one line
    naming the first user that does not, the option that sizes the stage, and the largest value that fits."""
    over = new > NU
    if not over.any():
        return
    i = int(np.flatnonzero(over)[0])
    going = new > size
    what = "N minus its history (--exclude)" if history else "the catalogue (-N/--items)"
    if kind == "ladder":
        opt, value, fits = "--n-max", args.n_max, int(NU[going].min())
        hint = f"a ladder that reaches no user's N_u has --n-max <= {fits:,}"
    else:
        opt, value = "--n2", args.n2
        fits = int((NU[going] - size[going]).min())
        hint = (f"the largest --n2 that fits every user going on is {fits:,}" if fits >= 1 else
                "a user going on has no item left to add; rank it in full (--full-fraction) instead")
    raise CLIError(f"{opt} {value:,}: user {users[i]!r} would have {int(new[i]):,} items at stage {args.stage} "
                   f"({int(size[i]):,} so far), more than its N_u = {int(NU[i]):,}, {what}; {hint}")


def _estimate_options(args, replace):
    """The options of the printed estimate command that follow from this command's."""
    return ((f" --held-out {args.users}" if args.users is not None else "")
            + (f" --exclude {args.exclude}" if args.exclude is not None else "")
            + (" --scheme hypergeometric" if not replace else ""))


def _columns(path):
    """Header of a CSV stage file (empty for NCF/Elliot lines, which have none)."""
    try:
        return set(pd.read_csv(path, nrows=0, encoding="utf-8-sig").columns)
    except (OSError, ValueError, UnicodeDecodeError):
        return set()


def _current_ranks(args, cand, users, size, scheme, ranks_from_negatives, ranks_from_table, concat_tables, id_text):
    """(users x models) ranks of the held-out items among their merged sets so far (float; every cell filled)."""
    if args.scores is not None:
        sr = ranks_from_negatives(cand, concat_tables(args.scores, "scores"), duplicates="count",
                                  ties=args.ties or "pessimistic", rng=args.seed)
        src = "the scores"
    else:
        sr = ranks_from_table(args.ranks)
        src = args.ranks
        if sr.scheme is not None and sr.scheme != scheme:          # scheme: how this stage draws
            with_ = scheme == "binomial"
            raise CLIError(f"{src}: its scheme column says {sr.scheme}, but this stage draws "
                           f"{'with' if with_ else 'without'} replacement "
                           f"({'--replace' if with_ else '--no-replace, the default'}): a later stage "
                           "draws as the first did")
    idx = pd.Index(id_text(sr.ranks.index))
    stray = ~idx.isin(users)
    if stray.any():
        raise CLIError(f"{src}: user {idx[np.flatnonzero(stray)[0]]!r} is in no stage file (--previous)")
    R = sr.ranks.set_axis(idx).reindex(users)
    if R.isna().any().any():
        u, m = R.stack(future_stack=True).loc[lambda x: x.isna()].index[0]
        raise CLIError(f"{src}: user {u!r} has no rank of model {m!r}: every model ranks every user (a user "
                       "goes on when any model needs it)")
    if sr.sample_sizes is not None and args.ranks is not None:
        S = sr.sample_sizes.set_axis(idx).reindex(users).to_numpy(dtype=float)
        off = S != size[:, None]
        if off.any():
            i, j = map(int, np.argwhere(off)[0])
            raise CLIError(f"{src}: user {users[i]!r} of model {R.columns[j]!r} has sample_size {int(S[i, j])}, "
                           f"but its merged set over the --previous files holds {size[i]} items")
    vals = R.to_numpy(dtype=float)
    over = vals > size[:, None]
    if over.any():
        i, j = map(int, np.argwhere(over)[0])
        raise CLIError(f"{src}: user {users[i]!r} has rank {int(vals[i, j])} under model {R.columns[j]!r}, above "
                       f"the {size[i]} items of its merged set over the --previous files")
    return vals
