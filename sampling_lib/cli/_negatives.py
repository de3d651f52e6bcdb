"""``sampling-lib negatives``: a fixed negatives file (stage 1) and the negatives of later stages."""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

from ._common import CLIError, check_output
from ._inputs import read_weights
from ._stages import STAGE_OPTIONS, catalogue, check_stage_one, cmd_stage, item_positions
from ..io._tables import _check_not_blank

__all__ = ["cmd_negatives"]

def cmd_negatives(args):
    from .._validation import check_columns
    from ..io import id_text, read_table, row_location, write_stage_negatives
    from ..sampling import sample_negatives

    check_output(args)
    if args.proxy is not None or args.head is not None or args.tail_n is not None:
        return _cmd_requests(args)
    if args.stage >= 2:
        return cmd_stage(args)
    check_stage_one(args)
    fmt = args.input_format or "negatives"
    if fmt != "negatives" and args.item_weights:
        raise CLIError(f"--input-format {fmt} cannot carry the draw probabilities q of popularity-sampled "
                       "negatives, which their estimators need: write the negatives CSV (the default)")
    users = read_table(args.users, "users")
    check_columns(users, ["user"], f"the users file {args.users}")
    _check_not_blank(users, ["user"], "users")
    excl = None
    if args.exclude is not None:
        excl = read_table(args.exclude, "exclude")
        check_columns(excl, ["user", "item"], f"the exclude file {args.exclude}")
    held = users["item"].to_numpy() if "item" in users.columns else None
    user_ids = id_text(users["user"])                   # the ids as text, once: every use below compares them
    held_ids = None if held is None else id_text(users["item"])
    if held is None and fmt == "ncf":
        raise CLIError(f"an NCF file names each user's held-out item: give it in the column item of {args.users}")
    if args.item_weights:
        from ..popularity import sample_popularity_negatives

        if args.n_items is not None or args.items is not None:
            raise CLIError(f"{'--n-items' if args.n_items is not None else '--items'} does not apply with "
                           "--item-weights: the items are those of the weights table or of the interactions "
                           "(items without an interaction weigh 0)")
        replace = True if args.replace is None else args.replace
        out = sample_popularity_negatives(users["user"].to_numpy(),
                                          read_weights(args, items=() if held is None else held),
                                          args.sample_size, held_out=held, exclude=excl, replace=replace,
                                          rng=args.seed)
    else:
        if args.weight_exponent is not None:
            raise CLIError("--weight-exponent needs --item-weights (an interactions table)")
        N, ids = catalogue(args)
        if excl is not None:
            _report_exclusions(user_ids, excl, args.exclude)
            excl = excl.assign(user=id_text(excl["user"]))
        if ids is not None:                   # the catalogue's ids as positions 0..N-1, and back below
            if held is not None:
                held = item_positions(held_ids, "held-out item", N,
                                      lambda i: row_location(users, i), ids, args.items)
            if excl is not None:
                excl = excl.assign(item=item_positions(id_text(excl["item"]), "excluded item", N,
                                                       lambda i: row_location(excl, i), ids, args.items))
        out = sample_negatives(user_ids, N, args.sample_size, exclude=excl,
                               held_out=held, scheme="binomial" if args.replace else "hypergeometric",
                               rng=args.seed)
        if ids is not None:
            out = out.assign(item=ids.to_numpy()[out["item"].to_numpy()])
    if fmt == "negatives":
        out.to_csv(args.output or sys.stdout, index=False)
        return
    # a framework's format: NCF lines name the held-out item; Elliot lines do when --users gives it
    hold = None if held_ids is None else pd.Series(held_ids, index=user_ids)
    write_stage_negatives(out, args.output or sys.stdout, fmt, held_out=hold)


def _report_exclusions(users, excl, path):
    """--exclude rows naming no user of --users: an error when none matches, else a warning (ids as text)."""
    from ..io import id_text, row_location

    eu = id_text(excl["user"])
    blank = pd.Series(eu).str.strip() == ""
    if blank.any():
        raise CLIError(f"column 'user' of {path} is blank in {row_location(excl, int(np.flatnonzero(blank)[0]))}")
    miss = ~pd.Series(eu, dtype=object).isin(set(users)).to_numpy()
    if len(eu) and miss.all():
        raise CLIError(f"none of the {len(eu)} rows of {path} names a user of --users (e.g. user "
                        f"{eu[0]!r}); ids are compared as text: check the user ids")
    if miss.any():
        warnings.warn(f"{int(miss.sum())} of the {len(eu)} rows of {path} name a user not in --users (e.g. "
                      f"{eu[np.flatnonzero(miss)[0]]!r}): they exclude nothing (ids compared as text)",
                      UserWarning, stacklevel=2)


def _cmd_requests(args):
    """--proxy: the candidates of a proxy's head and a uniform tail (sampling_lib.cascade.cascade_requests)."""
    from .._validation import check_columns
    from ..cascade import cascade_requests
    from ..io import id_text, read_table, row_location

    missing = [o for o, v in (("--proxy", args.proxy), ("--head", args.head), ("--tail-n", args.tail_n),
                              ("--users", args.users)) if v is None]
    if missing:
        raise CLIError(f"a proxy's head and tail needs --proxy, --head, --tail-n and --users; missing {', '.join(missing)}")
    unused = [o for o, v in (("--sample-size", args.sample_size), ("--replace", args.replace),
                             ("--item-weights", args.item_weights), ("--weight-exponent", args.weight_exponent),
                             ("--input-format", args.input_format)) if v is not None]
    unused += ["--stage"] if args.stage != 1 else []
    if unused:
        raise CLIError(f"{unused[0]} does not apply with --proxy: each user gets its held-out item, the proxy's top "
                       "--head negatives and --tail-n distinct uniform negatives from the rest (a CSV user, item, "
                       "label, stratum)")
    later = [o for o in STAGE_OPTIONS if getattr(args, o, None) is not None]
    if later:
        raise CLIError(f"--{later[0].replace('_', '-')} applies to a later stage of a uniform design, not with --proxy")
    users = read_table(args.users, "users")
    check_columns(users, ["user", "item"], f"the users file {args.users} (user and held-out item)")
    _check_not_blank(users, ["user"], "users")
    N, ids = catalogue(args)

    def positions(t, col, what, source):      # catalogue positions 0..N-1 of a file's item ids (file and line)
        return item_positions(id_text(t[col]), what, N, lambda i: row_location(t, i), ids, args.items)

    held = pd.Series(positions(users, "item", "held-out item", args.users), index=id_text(users["user"]))
    if held.index.duplicated().any():
        raise CLIError(f"{args.users} lists user {held.index[held.index.duplicated()][0]!r} twice: one held-out item "
                       "per user")
    exclude = None
    if args.exclude is not None:
        excl = read_table(args.exclude, "exclude")
        check_columns(excl, ["user", "item"], f"the exclude file {args.exclude}")
        _check_not_blank(excl, ["user"], "exclude")
        exclude = pd.DataFrame({"user": id_text(excl["user"]),
                                "item": positions(excl, "item", "excluded item", args.exclude)})
    table = read_table(args.proxy, "proxy")
    cols = set(map(str, table.columns))
    if cols == {"item", "score"}:
        pos = positions(table, "item", "item", args.proxy)
        if pd.Index(pos).duplicated().any() or len(pos) != N:
            raise CLIError(f"{args.proxy}: an item, score table scores every catalogue item once ({N:,}); it lists "
                           f"{len(pos):,} rows for {pd.Index(pos).nunique():,} items")
        proxy = np.empty(N)
        proxy[pos] = pd.to_numeric(table["score"], errors="coerce").to_numpy(dtype=float)
    elif {"user", "item"} <= cols and cols <= {"user", "item", "rank"}:
        proxy = table.assign(user=id_text(table["user"]), item=positions(table, "item", "item", args.proxy))
        if "rank" in cols:
            proxy["rank"] = pd.to_numeric(proxy["rank"], errors="raise")
    else:
        raise CLIError(f"{args.proxy}: a proxy is item, score (one score per catalogue item) or a top-m table "
                       f"user, item[, rank]; got the columns {sorted(cols)}")
    out = cascade_requests(held, N, exclude, proxy=proxy, head=args.head, tail_n=args.tail_n, seed=args.seed)
    if ids is not None:                        # positions back to the catalogue's ids
        out["item"] = np.asarray(ids)[out["item"].to_numpy()]
    out.to_csv(args.output or sys.stdout, index=False)
    if args.output:
        print(f"{len(out):,} candidates of {held.size:,} users written to {args.output} (n_items: each user's N_u): "
              "add the costly model's score column, then sampling-lib estimate FILE", file=sys.stderr)
