"""``sampling-lib plan-users`` (how many test users) and ``plan`` (which sampled design)."""
from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd

from .._display import render, wrap, wrap_command
from ._common import CLIError, UsageError, check_output, emit, progress_on, write
from ._inputs import recorded_scheme

__all__ = ["cmd_plan_users", "cmd_plan"]


def cmd_plan_users(args):
    """``sampling-lib plan-users``: the users a margin of error needs (TORS24 eqs 46, 52; Hoeffding)."""
    from ..user_sampling import (hoeffding_sample_size, sample_size_difference,
                                sample_size_proportion)

    check_output(args)
    k = args.models
    pairs = k * (k - 1) // 2
    over = (lambda what, j: f", Bonferroni over {j} {what}" if j > 1 else "")
    rows = [dict(quantity="each model's metric (normal approximation)",
                 users=sample_size_proportion(args.margin, args.confidence_level, args.p, n_models=k),
                 source="TORS24 eq 46" + over("models", k)),
            dict(quantity="each model's metric (Hoeffding: any metric)",
                 users=hoeffding_sample_size(args.margin, 1 - args.confidence_level, n_tests=k),
                 source="Hoeffding (1963)" + over("models", k))]
    if k >= 2:
        rows.append(dict(quantity="difference of two models (every pair)",
                         users=sample_size_difference(args.margin, args.confidence_level, args.p,
                                                      n_models=k),
                         source="TORS24 eq 52" + over("pairs", pairs)))
    out = pd.DataFrame(rows)
    out.insert(1, "margin", args.margin)
    out.insert(2, "confidence_level", args.confidence_level)
    out.insert(3, "models", k)
    out.insert(4, "p", args.p)
    if args.format != "table":
        write(out, args.format, args.output)
        return
    head = wrap(f"users needed for a margin of ±{args.margin:g} (the interval's half-width) at "
                f"{args.confidence_level:.0%} confidence, {k} model{'s' if k > 1 else ''}, planning value "
                f"p = {args.p:g}", indent="")
    table = render(["quantity", "users", "source"],
                   [[r["quantity"], f"{int(r['users']):,}", r["source"]] for r in rows], right={"users"})
    legend = wrap("users: test users ranked in full; a sampled evaluation needs more, by its precision ratio "
                  "squared (sampling-lib plan predicts that ratio). The normal approximation (a proportion such "
                  "as Recall@K) takes p(1 - p) at the planning value p (0.5: the worst case); Hoeffding's "
                  "inequality holds for any metric in [0, 1] without it. Every column: --format csv or --format "
                  "json.")
    emit(f"{head}\n\n{table}\n\n{legend}\n", args.output)


def cmd_plan(args):
    """``sampling-lib plan``: candidate designs scored on a pilot (sampling_lib.design.plan), the cheapest marked."""
    from ..design import plan

    check_output(args)
    if args.target_halfwidth is not None and args.target_ratio is not None:
        raise UsageError("give one target: --target-ratio or --target-halfwidth")
    if args.wide and args.format != "table":
        raise UsageError(f"--wide applies to --format table; --format {args.format} has every row")
    from ..design import candidate_designs

    pilots, N, n, max_size, paired, firsts = _pilots(args)
    M = args.users
    cands = candidate_designs(max_size, n, growths=args.growth)
    kw = dict(metrics=args.metric or ("recall@10", "ndcg@10"), confidence_level=args.confidence_level,
              scheme=args.scheme or "binomial", rng=args.seed, designs=cands, robust=args.robust, max_size=max_size,
              max_cost=args.max_cost, assurance=args.assurance, progress=progress_on(args))
    if args.target_halfwidth is not None:
        kw["target_halfwidth"] = args.target_halfwidth
    else:
        kw["target_ratio"] = 1.3 if args.target_ratio is None else args.target_ratio
    sizes = {m: r[1] for m, r in pilots.items() if isinstance(r, tuple)}
    ranks = {m: r[0] if isinstance(r, tuple) else r for m, r in pilots.items()}
    # a design run in part: sets larger than the first stage's (a first stage with short sets is not one)
    # (a first stage a few items short, NCF's 99 beside 100, is at the first rung n)
    run_sizes = np.unique(np.maximum(np.concatenate(list(sizes.values())), n)) if sizes else None
    staged = run_sizes is not None and bool(run_sizes.max() > n)
    if not staged:
        run_sizes = None
    if list(pilots) == [None]:              # one model, no model column (or a guess without a pilot)
        res = plan(ranks[None], N, n, M=M, guess=args.guess_recall, sample_sizes=sizes.get(None), **kw)
    else:
        # merged ranks of stage files pair the models' first stages through their first_rank column
        firsts = firsts if staged and paired and len(pilots) > 1 else None
        res = plan(ranks, N, n, M=M, sample_sizes=sizes or None, paired=paired, first_ranks=firsts, **kw)
    table, best, per = res.table, res.best, res.designs()
    # the compact view's families: each kind, and the ladders of each growth apart (--growth 2 1.5 shows both)
    per["family"] = per.design.map({d.describe(): d.kind + (f" x{d.growth:g}" if d.kind == "ladder" else "")
                                    for d in cands})
    best_name = None if best is None else best.describe()
    n_models = len(pilots)
    meets = best_name is not None and bool(per.set_index("design").meets[best_name])
    advice = (_advice(best, args, N, n, res.target, n_models, meets, run_sizes)
              + _replan_note(table, best, args, N, n, staged, run_sizes)
              + _below_full_ranking_note(table, args, M or _pilot_users(pilots)))
    if args.format != "table":
        write(table, args.format, args.output)
        print(advice, file=sys.stderr)
        return
    emit(_plan_view(table, per, best_name, args, N, n, M or _pilot_users(pilots), res.target, n_models,
                    paired and (not staged or firsts is not None), cands)
         + advice + "\n", args.output)


def _below_full_ranking_note(table, args, M):
    """When a half-width target lies below the half-width full ranking of the same users would give: no design
    of the items reaches it (more users do), whatever the budget ("" otherwise)."""
    if args.target_halfwidth is None or "full_halfwidth" not in table.columns:
        return ""
    full = table.groupby("metric", sort=False).full_halfwidth.max()
    over = full[full > args.target_halfwidth]
    if over.empty:
        return ""
    worst = float(over.max())
    users = f"about {math.ceil(M * (worst / args.target_halfwidth) ** 2):,} users" if M else "more users"
    shown = ", ".join(f"±{v:.4g} for {m}" for m, v in over.items())
    return "\n" + wrap(
        f"note: full ranking of these {M:,} users would itself give {shown} (predicted from the fit): no design "
        f"of the items reaches ±{args.target_halfwidth:g}, whatever it costs. The half-width shrinks as "
        f"1/sqrt(users): {users} ranked in full would reach it, more when sampled (by the precision ratio "
        "squared); or relax the target.")


def _replan_note(table, best, args, N, n, staged, run_sizes=None):
    """For a ladder chosen on a first stage below resolution (or on a guess of one): why its predicted
    half-widths are uncertain, and how to re-plan on the merged ranks of its first rungs ("" otherwise, and
    for a ladder of two rungs, which its first stage already decides). On merged ranks (``staged``): the
    note of :func:`_replan_again_note`."""
    from .._display import resolution_width
    from ..design import first_rungs
    from ..metrics import parse_metrics
    from ..sampling import size_ladder

    if best is None or best.kind != "ladder":
        return ""
    rungs = size_ladder(n, best.n_max, best.growth)
    # the first rungs run before re-planning (to n_max / 8, at least n -> 4n for doubling)
    want = first_rungs(n, best.growth, n_max=best.n_max)
    if staged:
        return _replan_again_note(best, rungs, want, run_sizes)
    w = resolution_width(N, n)
    below = [m for m, _, K in parse_metrics(list(dict.fromkeys(table.metric))) if K < w]
    k = min(len(want), len(rungs) - 1)          # never the whole ladder
    if not below or k < 2:
        return ""
    stages = " ".join(f"STAGE{j}.csv" for j in range(1, k + 1))
    scores = " ".join(f"--scores SCORES{j}.csv" for j in range(1, k + 1))
    # the pilot's N_u came from an n_items column (the history given with --exclude): the merged ranks get
    # theirs the same way; else -N is the common N of both commands
    items = "--exclude TRAIN.csv" if args.n_items is None else ""
    if args.pilot is None:          # a guess: nothing has been ranked yet
        head = (f"the plan rests on a guessed Recall@10, and a first stage of n = {n} would be below resolution "
                f"for {', '.join(below)} (w = (N - 1)/(n - 1) = {w:,.0f} > K): the predicted costs and half-widths "
                "are as good as the guess (the predicted precision ratios depend on it much less). Run the first rungs "
                f"({n} -> {rungs[k - 1]:,}: stages 1..{k}), then re-plan on their merged ")
    else:
        head = (f"the first stage is below resolution for {', '.join(below)} (w = (N - 1)/(n - 1) = {w:,.0f} > K): "
                "the predicted half-widths and costs extrapolate the top of P(R) from it (in benchmarks/README.md "
                "such first stages put the metric at 0.4-3.1x its truth and the cost at 0.6-1.8x the realized, while "
                "the predicted precision ratios stayed within 10% of the realized). Re-plan after the first rungs "
                f"({n} -> {rungs[k - 1]:,}: stages 1..{k}) on their merged ")
    return ("\n" + wrap(
        head + "ranks, with a sample_size column: "
        "the prior is then fitted where the data resolve the top (predicted half-widths within 20% of the "
        "realized in 58 of 58 benchmark cells, against 45 of 58 from the first stage):")
        + "\n" + wrap_command(f"sampling-lib ranks {stages} --input-format negatives --held-out USERS.csv {scores} "
                              f"-N {_catalogue(args, N)} {items + ' ' if items else ''}--scheme "
                              f"{args.scheme or 'hypergeometric'} -o merged.csv")
        # the merged sets are read as the stages were drawn (distinct, the default of negatives, unless
        # --scheme says otherwise), and the re-plan's kernel follows them
        + "\n" + wrap_command(f"sampling-lib plan merged.csv -n {n}"
                              + ("" if args.n_items is None else f" -N {N}")
                              + f" --scheme {args.scheme or 'hypergeometric'}"
                              + ("" if best.growth == 2 else f" --growth {best.growth:g}")))


def _replan_again_note(best, rungs, want, run_sizes):
    """Merged ranks re-planned, the chosen ladder (its sizes ``rungs``) continuing the stages run: when its
    first rungs ``want`` (``design.first_rungs``) reach above the largest set run (the re-plan extrapolating
    the top of P(R) over more than about 8x), the stages to run before re-planning again ("" otherwise)."""
    if run_sizes is None or not np.isin(run_sizes, rungs).all():
        return ""
    ran = int(run_sizes.max())
    if want[-1] <= ran or want[-1] >= best.n_max:      # nothing to re-plan: the rungs are the whole ladder
        return ""
    done = int(np.searchsorted(rungs, ran)) + 1            # stage j holds the sets of rungs[j - 1]
    later = f"stage {done + 1}" if want.size == done + 1 else f"stages {done + 1}..{want.size}"
    return "\n" + wrap(
        f"the chosen ladder reaches {best.n_max:,} items, {best.n_max / ran:.0f}x the largest set run ({ran:,}): "
        "its predicted half-widths extrapolate the top of P(R) that far. For predictions to rely on, run its "
        f"{later} (to {int(want[-1]):,}, about an eighth of its top; design.first_rungs) as written above, then "
        "re-plan on the merged ranks of all the stages: the stages are the ladder's own, so nothing is scored "
        "twice.")


def _catalogue(args, N):
    """-N of the negatives and ranks commands: the catalogue (item ids 0..N-1). A pilot with an n_items
    column gave N as the median N_u, not the catalogue (even one N_u for every user may be a catalogue less
    histories of one length), so the commands show a placeholder."""
    return "N_ITEMS" if args.pilot is not None and args.n_items is None else N


def _pilot_users(pilots):
    sizes = [0 if r is None else len(r[0] if isinstance(r, tuple) else r) for r in pilots.values()]
    return max(sizes)


def _pilots(args):
    """{model or None: first-stage sampled ranks (or None for a guess)}, N, n, the largest set, whether the
    rows pair the models' ranks, and {model: first-stage ranks} of merged ranks with a first_rank column (or
    None)."""
    from .. import io
    from ..counts import counts_from_frame

    if args.pilot is None:
        missing = [o for o, v in (("-N", args.n_items), ("-n", args.sample_size), ("--users", args.users),
                                  ("--guess-recall", args.guess_recall)) if v is None]
        if missing:
            raise UsageError("without a pilot file, plan needs -N, -n, --users and --guess-recall; missing "
                             + ", ".join(missing))
        if args.model is not None:
            raise UsageError("--model applies to a pilot file with a model column")
        return {None: None}, args.n_items, args.sample_size, args.n_items, False, None
    if args.guess_recall is not None:
        raise UsageError("--guess-recall applies without a pilot file (the pilot's ranks give the prior)")
    df = io.read_table(args.pilot, "pilot")
    layout = io.table_layout(df)
    if layout not in ("ranks", "counts"):
        raise CLIError(f"{args.pilot}: a pilot is a ranks table (user, rank[, model][, sample_size][, n_items]"
                       f"[, first_rank][, scheme]) "
                       f"or a counts table (rank, count[, ...]); got a {layout} table")
    pilots, sizes, items, firsts = {}, {}, [], None
    paired = False          # a counts table does not pair the models' ranks user by user
    if layout == "counts":
        stats = counts_from_frame(io.counts_table(df, n=args.sample_size, N=args.n_items), n=args.sample_size,
                                  N=args.n_items)
        for m, st in stats.items():
            pilots[m] = np.repeat(st.ranks, st.counts)
            sizes[m] = np.repeat(st.sizes, st.counts)
            if "n_items" in df.columns:          # per-cell N_u of the table (else -N, filled in by counts_table)
                items.append(np.repeat(st.n_items, st.counts))
    else:
        # with a sample_size column, -n names the first stage's size (a design run in part may give every
        # user more); without one, it is every user's set size
        sized = "sample_size" in df.columns
        sr = io.ranks_from_table(df, n=None if sized else args.sample_size, N=args.n_items)
        args.scheme = recorded_scheme(args.scheme, sr.scheme, args.pilot)    # the pilot's record, if any
        paired = not sr.ranks.isna().to_numpy().any()       # every model ranks every user: rows pair them
        if sr.first_ranks is not None:
            firsts = {m: sr.first_for_model(m) for m in sr.models}
        for m in sr.models:
            r, s = sr.for_model(m)
            if s is None and args.sample_size is None:
                raise UsageError(f"-n is required: {args.pilot} has no sample_size column")
            pilots[m] = r
            sizes[m] = np.full(r.size, args.sample_size) if s is None else np.asarray(s)
            it = sr.items_for_model(m)
            if it is not None:
                items.append(it)
    if args.model is not None:
        if args.model not in pilots:
            raise CLIError(f"--model must be one of {list(pilots)}; got {args.model!r}")
        pilots, sizes = {args.model: pilots[args.model]}, {args.model: sizes[args.model]}
        firsts = None if firsts is None else {args.model: firsts[args.model]}
    alln = np.unique(np.concatenate(list(sizes.values())))
    # several sizes: a design run in part (e.g. the merged ranks of a ladder's first rungs, or of a second
    # stage), or a first stage with a few short sets (NCF's 99 beside 100): the prior is fitted on the per-user
    # sizes and the candidates start from the first stage's size (-n, else the most common size near the
    # smallest: the sets a few items short are not the first stage's size)
    from ..sampling import SHORT_FIRST_STAGE

    every = np.concatenate(list(sizes.values()))
    near = every[every * SHORT_FIRST_STAGE <= alln[0]]
    n = int(np.bincount(near).argmax()) if args.sample_size is None else args.sample_size
    if alln[0] < SHORT_FIRST_STAGE * n:
        raise CLIError(f"{args.pilot}: -n {n} is the first stage's size, but some users have sets of {int(alln[0])} "
                       f"(sets down to {SHORT_FIRST_STAGE:g} n count as a first stage a few items short)")
    if alln.size > 1 or n < alln[0]:
        pilots = {m: (r, sizes[m]) for m, r in pilots.items()}
    if items:
        if args.n_items is not None:
            raise UsageError(f"-N does not apply: {args.pilot} has an n_items column (per-user N_u)")
        items = np.concatenate(items)
        N, max_size = int(np.median(items)), int(items.min())   # every user's sets must fit: the smallest N_u
    elif args.n_items is None:
        raise UsageError(f"-N is required: {args.pilot} has no n_items column")
    else:
        N = max_size = args.n_items
    return pilots, N, n, max_size, paired, firsts


def _short_name(d):
    """A design in a few words, for the table's first column (the legend says how to read them; the chosen
    design is named in full below the table)."""
    if d.kind == "single":
        return f"n = {d.n}"
    if d.kind == "threshold":
        return f"rank <= {d.threshold}: +{d.n2}"
    if d.kind == "ladder":
        return f"ladder {d.n} -> {d.n_max}" + ("" if d.growth == 2 else f" x{d.growth:g}")
    return f"{d.fraction:.0%} in full"


def _plan_view(table, per, best_name, args, N, n, M, target, n_models, paired=True, designs=()):
    """The compact view: one row per design, cost and the worst half-width and ratio per metric."""
    metrics = list(dict.fromkeys(table.metric))
    hw_col, ratio_col = ("halfwidth_high", "ratio_high") if args.robust else ("halfwidth", "ratio")
    worst = table.groupby(["design", "metric"], sort=False).agg(hw=(hw_col, "max"), ratio=(ratio_col, "max"))
    if not args.wide:       # the first stage alone, and per kind the cheapest design that meets the target
        pick = [per.index[0]]                           # (else the most precise of the kind)
        worst_ratio = worst.groupby(level=0, sort=False)["ratio"].max()
        for _, g in per.groupby("family", sort=False):
            good = g[g.meets]
            pick.append(good.cost.idxmin() if len(good) else g.index[worst_ratio.reindex(g.design).to_numpy().argmin()])
        pick += list(per.index[per.design == best_name])         # the chosen one is always shown
        per = per.loc[sorted(set(pick), key=lambda i: per.cost[i])]
    # predicted under the target, but not by the planner's error margin (--assurance): not "meets"
    bound = args.target_halfwidth if args.target_halfwidth is not None else (args.target_ratio or 1.3)
    raw = worst.groupby(level=0, sort=False)["hw" if args.target_halfwidth is not None else "ratio"].max()
    short = {d.describe(): _short_name(d) for d in designs}
    columns = ["design", "stages", "items", "cost"]
    for m in metrics:
        columns += [f"{m} ±", "ratio"]
    columns.append("")
    rows = []
    for _, d in per.iterrows():
        row = [short.get(d.design, d.design), str(int(d.stages)), f"{d.cost:,.0f}", f"{100 * d.cost_share:.2f}%"]
        for m in metrics:
            w = worst.loc[(d.design, m)]
            row += [f"{w.hw:.4f}", f"{w.ratio:.2f}"]
        mark = ("<- chosen" if d.design == best_name else "meets" if d.meets
                else "in margin" if raw[d.design] <= bound else "")
        row.append(mark + ("" if d.within_budget else (", " if mark else "") + "over budget"))
        rows.append(row)
    budget = "" if args.max_cost is None else f"; budget: {100 * args.max_cost:g}% of full ranking"
    margins = table.groupby("metric", sort=False).margin.first()
    per_user = " (the median N_u of the pilot's n_items column)" if _catalogue(args, N) != N else ""
    head = wrap(f"N = {N:,}{per_user}, n = {n}, {M:,} users{f', {n_models} models' if n_models > 1 else ''}; "
                f"target: {target} for {', '.join(metrics)} ({args.confidence_level:.0%} intervals){budget}; "
                f"predicted from the {'guessed Recall@10' if args.pilot is None else 'pilot'}'s fitted prior",
                indent="") + "\n\n"
    right = {"stages", "items", "cost", *[c for c in columns if c.endswith(" ±")], "ratio"}
    body = render(columns, rows, right=right) + "\n\n"
    legend = wrap(
        ("" if args.wide else "the first stage alone and, per kind of design (and ladder growth), the cheapest that "
         "meets the target (else the most precise; --wide: every candidate). ")
        + "design: n = N, one set of N items for every user; rank <= t: +k, k more items for the users at rank "
        "<= t; ladder n -> m, the set doubled (xG: grown by G) while the held-out item is at rank 1, up to m "
        "(TORS24 Algorithm 1); F in full, a share F of the users ranked in full, the others at n. "
        "stages: rounds of scoring after the first (a ladder: one per size); items: expected items scored per "
        "user (held-out included); cost: that share of N (full ranking); ±: predicted half-width of the "
        "interval; ratio: its width over full ranking's (precision ratio); a design meets the target when its "
        "prediction times the planner's error margin does, else one predicted under the target is marked "
        f"'in margin' (--assurance {args.assurance:g}: "
        + ", ".join(f"x{v:.3f} for {m}" for m, v in margins.items())
        + "; the SD of the realized ratio over the predicted one in benchmarks/README.md)"
        + ("; --robust: the high end of each prediction (the pilot's prior refitted with a 10x weaker and a "
           "10x stronger penalty)" if args.robust else "")
        + ("; several models: the cost of the union of the users any model sends on (they share the added "
           "items; at least the largest model's cost, at most their sum; design.shared_cost, "
           + ("the models' dependence from the pilot's first stage" if paired else
              "the models taken as independent: the pilot does not pair their first-stage ranks user by user (a "
              "counts table, or merged ranks without the first_rank column that sampling-lib ranks writes for "
              "stage files)")
           + ") and the worst value over them" if n_models > 1 else "")) + "\n"
    return head + body + legend


def _advice(best, args, N, n, target, n_models, meets=True, run_sizes=None):
    """Which design meets the target at least cost, and the command that writes its next stage's negatives.

    ``run_sizes``: the set sizes of a pilot of merged ranks (a design run in part), else None. When they are
    the first rungs of the chosen ladder, the command continues it at the next stage; else the design starts
    after the first stage (the stages run beyond it are not part of it, and the advice says so)."""
    budget = "" if args.max_cost is None else f" within the budget ({100 * args.max_cost:g}% of full ranking)"
    if best is None:
        return (f"no candidate design{budget} meets the target ({target}): relax it, "
                + ("raise --max-cost, " if args.max_cost is not None else "") + "or plan for more users")
    if not meets:
        head = (f"no candidate design{budget} meets the target ({target}); what the budget buys, the most "
                "precise design within it:\n")
    else:
        head = ""
    ranks = f" --ranks {args.pilot}" if args.pilot is not None else " --ranks RANKS1.csv"
    if best.kind == "single" and best.n == n:
        return (f"{head}chosen: {best.describe()}: the first stage alone "
                + ("meets the target; " if meets else "is all the budget allows; ") + "no second stage needed")
    if best.kind == "single":
        flags, ranks = f"--n2 {best.n - n}", ""
    elif best.kind == "threshold":
        flags = f"--threshold {best.threshold} --n2 {best.n2}"
    elif best.kind == "ladder":
        flags = f"--n-max {best.n_max}" + ("" if best.growth == 2 else f" --growth {best.growth:g}")
    else:
        flags, ranks = f"--full-fraction {best.fraction:g}", ""
    from ..sampling import size_ladder

    rungs = size_ladder(n, best.n_max, best.growth) if best.kind == "ladder" else None
    stage, note = 2, ""
    if run_sizes is not None and run_sizes.max() > n:
        if rungs is not None and np.isin(run_sizes, rungs).all():
            stage = int(np.searchsorted(rungs, run_sizes.max())) + 2
            if stage > len(rungs):
                return (f"{head}chosen: {best.describe()}: the stages already run ({args.pilot}) complete it; "
                        "estimate their merged ranks")
        else:
            ranks = " --ranks RANKS1.csv" if ranks else ""
            note = "\n" + wrap(f"(it does not continue the stages already run, whose sets of up to "
                               f"{int(run_sizes.max())} items are not its rungs: it starts after stage 1, from the "
                               f"stage-1 ranks RANKS1.csv -- the first_rank column of {args.pilot} -- and the later "
                               "stages already scored are not part of it)", first="  ", indent="    ")
    prev = " ".join(f"STAGE{k}.csv" for k in range(1, stage))
    draw = {None: "", "binomial": " --replace", "hypergeometric": " --no-replace"}[args.scheme]
    cmd = (f"sampling-lib negatives --stage {stage} --previous {prev} --users USERS.csv{ranks} {flags}{draw} "
           f"-N {_catalogue(args, N)} --seed {args.seed} -o STAGE{stage}.csv")
    more = ""
    if rungs is not None and len(rungs) > stage:
        later = f"stage {stage + 1}" if len(rungs) == stage + 1 else f"stages {stage + 1}..{len(rungs)}"
        more = "\n" + wrap(f"then {later} the same way (--stage K, --previous the files of stages 1..K-1, the ranks "
                           "of their merged sets)", first="  ", indent="    ")
    return (f"{head}chosen: {best.describe()}\n"
            + wrap("(a new evaluation runs all its stages with sampling-lib design, nothing to fill in; by hand:)",
                   first="", indent="  ") + "\n"
            f"write its stage-{stage} negatives:\n{wrap_command(cmd)}{more}{note}\n"
            + wrap("(-N: the item ids 0..N-1 of stage 1"
                   + (", the catalogue, not the median N_u of the pilot's n_items column"
                      if _catalogue(args, N) != N else "")
                   + "; other item ids: --items ITEMS.csv instead; NCF or Elliot files: --input-format ncf|elliot; "
                   "the users' history: --exclude TRAIN.csv; see sampling-lib negatives --help)",
                   first="  ", indent="    "))
