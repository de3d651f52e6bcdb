"""``sampling-lib design init|next|status|estimate DIR``: a planned sampled evaluation through files.

For frameworks that only read and write files, the loop of :func:`sampling_lib.evaluate` runs one stage
per command, in a folder DIR that the commands own (:class:`sampling_lib.stagerun.StagedRun`):

* ``init`` checks the inputs, writes them into DIR and stage 1's request ``DIR/request-1.csv``: every
  (user, item) pair to score (the held-out items and n - 1 negatives per user; ``--format ncf`` or
  ``elliot``: the negatives files those frameworks read, the held-out item named on each line);
* the user's framework scores the request and writes ``DIR/scores-K.csv`` (``user, item, score[, model]``);
* ``next`` reads those scores (every pair of the request, once per model), takes the next decision (a
  plan, a re-plan, the next stage's users) and writes ``DIR/request-K+1.csv``, or says the design is done;
* ``status`` shows the stages, the decisions and the pending request (``--pending``: its path, for a
  shell loop); ``estimate`` prints the table of ``sampling-lib estimate``.

Nothing the user wrote is overwritten: DIR is new or empty at ``init``, the commands write only their own
files (``design.json``, ``state.npz``, ``inputs.npz``, ``held_out.csv``, ``items.csv``, ``request-K.*``),
and a scores file is read, never moved. A scores file read once is refused the second time.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ._common import CLIError, UsageError, check_output, emit, progress_on

__all__ = ["cmd_design"]

_REQUEST_EXT = {"pairs": "csv", "ncf": "test.negative", "elliot": "tsv"}


def _folder(args, new=False):
    from ..stagerun import STATE_FILE

    d = Path(args.dir)
    if new:
        if d.exists() and (not d.is_dir() or any(d.iterdir())):
            raise CLIError(f"{d} exists and is not empty: design init writes into a new or empty folder (nothing "
                           "in it is overwritten)")
        return d
    if not (d / STATE_FILE).is_file():
        raise CLIError(f"{d} is not a design folder (no {STATE_FILE}): start one with sampling-lib design init {d} "
                       "...")
    return d


def _load(d):
    from ..stagerun import StagedRun

    run = StagedRun.from_folder(d)
    extra = json.loads((d / "design.json").read_text(encoding="utf-8")).get("cli", {})
    return run, extra


def _save(run, d, extra):
    run.save(d)
    path = d / "design.json"
    state = json.loads(path.read_text(encoding="utf-8"))
    state["cli"] = extra
    tmp = d / "design.json.tmp"
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    tmp.replace(path)


def _request_path(d, extra, k):
    return d / f"request-{k}.{_REQUEST_EXT[extra['format']]}"


def _scores_path(d, k):
    return d / f"scores-{k}.csv"


def _request_pairs(run):
    """The pending stage's pairs as text ids (user, item, held) in the order of the run's chunks."""
    from ..io import id_text

    users = run.inputs["users"].to_numpy()
    ids = run.inputs["ids"]
    parts = [(u, it, h) for u, it, h in run.chunks(1 << 20)]
    u = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    it = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    held = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, bool)
    item_ids = it if ids is None else ids.to_numpy()[it]
    return pd.DataFrame({"user": id_text(users[u]), "item": id_text(item_ids), "held": held}), u, it


def _write_request(run, d, extra):
    """Write the pending stage's request file (once: an existing one is the same, and is left alone)."""
    from ..io import id_text, write_stage_negatives

    k = run.pending["stage"]
    path = _request_path(d, extra, k)
    if path.exists():
        return path
    pairs, _, _ = _request_pairs(run)
    tmp = path.with_name(path.name + ".tmp")
    if extra["format"] == "pairs":
        pairs[["user", "item"]].to_csv(tmp, index=False)
    else:
        users = run.inputs["users"].to_numpy()
        ids = run.inputs["ids"]
        held_items = run.inputs["held"] if ids is None else ids.to_numpy()[run.inputs["held"]]
        hold = pd.Series(id_text(held_items), index=id_text(users))
        neg = pairs[~pairs.held]
        write_stage_negatives(neg[["user", "item"]], tmp, extra["format"], held_out=hold)
    tmp.replace(path)
    return path


def _say_request(run, path, d):
    n_pairs = run.pending_pairs()
    users = int(run.pending["users"].size)
    print(f"stage {run.pending['stage']}: {path} asks for {n_pairs:,} scores ({users:,} users). Score every pair "
          f"of it and write {_scores_path(d, run.pending['stage'])} (columns user, item, score[, model]), then run:\n"
          f"  sampling-lib design next {d}")


def _read_table(path):
    from ..io import read_table

    df = read_table(str(path), "scores")
    need = {"user", "item", "score"}
    extra = [c for c in df.columns if c not in need | {"model", "label"}]
    if not need <= set(df.columns) or extra:
        raise CLIError(f"{path}: a scores file holds the columns user, item, score[, model]; got "
                       f"{', '.join(map(str, df.columns))}")
    return df


def _absorb_scores(run, path, extra):
    """Read a scores file, check it against the pending request, and count it into the run."""
    from ..io import id_text

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    seen = extra.setdefault("scores_read", {})
    if digest in seen:
        raise CLIError(f"{path} was already read, as the scores of request {seen[digest]}: score the pending "
                       f"request-{run.pending['stage']} and write its own scores file")
    df = _read_table(path)
    models = sorted(set(id_text(df["model"]))) if "model" in df.columns else ["model"]
    if run.models is not None and sorted(run.models) != models:
        raise CLIError(f"{path} scores the models {models}; the earlier stages scored {run.models}")
    pairs, u, it = _request_pairs(run)
    key = pairs.user + "\x1f" + pairs.item
    scores = {}
    for m in (run.models or models):
        part = df[id_text(df["model"]) == m] if "model" in df.columns else df
        k = pd.Series(id_text(part["user"])) + "\x1f" + pd.Series(id_text(part["item"]))
        dup = k.duplicated().to_numpy()
        if dup.any():
            j = int(np.flatnonzero(dup)[0])
            raise CLIError(f"{path}: model {m!r} scores user {part['user'].iloc[j]!r}, item {part['item'].iloc[j]!r} "
                           "twice; one score per pair")
        val = pd.to_numeric(part["score"], errors="coerce").to_numpy(dtype=float)
        s = pd.Series(val, index=k.to_numpy())
        got = s.reindex(key.to_numpy()).to_numpy()
        miss = np.isnan(got)
        if miss.any():
            j = int(np.flatnonzero(miss)[0])
            what = "has no finite score" if key.iloc[j] in s.index else "is missing"
            raise CLIError(f"{path}: model {m!r}: the pair user {pairs.user.iloc[j]!r}, item {pairs.item.iloc[j]!r} "
                           f"of request-{run.pending['stage']} {what} ({int(miss.sum()):,} of {len(key):,} pairs)")
        if not np.isfinite(got).all():
            j = int(np.flatnonzero(~np.isfinite(got))[0])
            raise CLIError(f"{path}: model {m!r}: the score of user {pairs.user.iloc[j]!r}, item "
                           f"{pairs.item.iloc[j]!r} is {got[j]}; every score must be finite")
        other = ~pd.Index(k.to_numpy()).isin(key.to_numpy())
        if other.any():
            _check_other_pairs(run, part[other], m, path)
        scores[m] = got
    run.absorb(u, it, pairs.held.to_numpy(), scores)
    seen[digest] = run.pending["stage"]


def _check_other_pairs(run, rows, model, path):
    """Pairs not in the request: a held-out item scored again (an NCF / Elliot request names it on every
    line) must keep its score; anything else is an error."""
    from ..io import id_text

    users = pd.Index(id_text(run.inputs["users"].to_numpy()))
    ids = run.inputs["ids"]
    held = run.inputs["held"] if ids is None else ids.to_numpy()[run.inputs["held"]]
    held_text = pd.Series(id_text(held), index=users)
    ru, ri = id_text(rows["user"]), id_text(rows["item"])
    is_held = pd.Series(ru).map(held_text).to_numpy() == ri
    if not is_held.all():
        j = int(np.flatnonzero(~is_held)[0])
        raise CLIError(f"{path}: model {model!r} scores user {ru[j]!r}, item {ri[j]!r}, which request-"
                       f"{run.pending['stage']} does not ask for (a scores file of another request?)")
    if run.models is None:
        return
    pos = run.pos[model][users.get_indexer(ru)]
    val = pd.to_numeric(rows["score"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isclose(val, pos, rtol=1e-9, atol=0.0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise CLIError(f"{path}: model {model!r} scores the held-out item {ri[j]!r} of user {ru[j]!r} {val[j]:g}, "
                       f"but {pos[j]:g} at stage 1: the model changed between stages (retrained, or not "
                       "deterministic); every stage must score with the same model")


def _init(args):
    from ..io import read_table
    from ..stagerun import StagedRun
    from ._stages import catalogue

    d = _folder(args, new=True)
    if args.held_out is None:
        raise UsageError("design init needs --held-out USERS.csv (columns user, item: each test user's held-out item)")
    held = read_table(args.held_out, "held-out items")
    if not {"user", "item"} <= set(held.columns):
        raise CLIError(f"{args.held_out}: the held-out file holds the columns user, item; got "
                       f"{', '.join(map(str, held.columns))}")
    from ..io import id_text

    held = pd.DataFrame({"user": id_text(held["user"]), "item": id_text(held["item"])})
    N, ids = catalogue(args)
    exclude = None
    if args.exclude is not None:
        ex = read_table(args.exclude, "exclude")
        if not {"user", "item"} <= set(ex.columns):
            raise CLIError(f"{args.exclude}: the history file holds the columns user, item")
        exclude = pd.DataFrame({"user": id_text(ex["user"]), "item": id_text(ex["item"])})
    config = dict(n=args.sample_size, metrics=args.metric or ["recall@10", "ndcg@10"],
                  target_ratio=args.target_ratio, max_cost=args.max_cost, seed=args.seed, ties=args.ties,
                  assurance=args.assurance, growth=args.growth)
    try:
        run = StagedRun(held, N if ids is None else ids.to_numpy(), exclude, config=config)
    except ValueError as exc:
        raise CLIError(str(exc).replace("n_items", "-N" if ids is None else "--items")) from None
    d.mkdir(parents=True, exist_ok=True)
    run.save_inputs(d)
    extra = {"format": args.format}
    _save(run, d, extra)
    path = _write_request(run, d, extra)
    if run.inputs["unused_exclude_users"]:
        print(f"note: {run.inputs['unused_exclude_users']:,} users of --exclude have no held-out item and are not "
              "used", file=sys.stderr)
    _say_request(run, path, d)


def _next(args):
    d = _folder(args)
    run, extra = _load(d)
    if run.done:
        print(f"the design is done: sampling-lib design estimate {d}")
        return
    k = run.pending["stage"]
    path = Path(args.scores) if args.scores else _scores_path(d, k)
    if not path.is_file():
        req = _write_request(run, d, extra)
        raise CLIError(f"{path} not found: score every pair of {req} and write the scores there (user, item, "
                       "score[, model]), or name the file with --scores")
    _absorb_scores(run, path, extra)
    run.finish_stage(plan_progress=progress_on(args))
    _save(run, d, extra)
    for dec in run.decisions:
        if dec["after_stage"] == len(run.stages):
            print(f"after stage {len(run.stages)}: {dec['decision']}")
    if run.done:
        print(f"the design is done: sampling-lib design estimate {d}")
        return
    _say_request(run, _write_request(run, d, extra), d)


def _status(args):
    d = _folder(args)
    run, extra = _load(d)
    if args.pending:
        if run.done:
            return 1
        print(_write_request(run, d, extra))
        return 0
    t = run.stages_table()
    total = float(run.inputs["n_items"].sum())
    lines = [f"{d}: {run.M:,} users, catalogue of {run.inputs['N']:,} items (N_u "
             f"{int(run.inputs['n_items'].min()):,}..{int(run.inputs['n_items'].max()):,}), n = {run.config['n']}, "
             f"target: " + (f"precision ratio <= {run.config['target_ratio']:g}" if run.config["max_cost"] is None
                            else f"budget {run.config['max_cost']:.2%} of full ranking") + f", seed {run.config['seed']}"]
    for st in t.itertuples():
        lines.append(f"  stage {st.stage}: {st.users:,} users, {st.pairs:,} pairs, sets of {st.sizes} ({st.design})")
        for dec in run.decisions:
            if dec["after_stage"] == st.stage:
                lines.append(f"    then: {dec['decision']}")
    scored = int(t.pairs.sum()) if len(t) else 0
    lines.append(f"scored so far: {scored:,} pairs per model ({scored / total:.2%} of full ranking)")
    if run.done:
        lines.append(f"done: sampling-lib design estimate {d}")
    else:
        req = _write_request(run, d, extra)
        lines.append(f"pending: {req} ({run.pending_pairs():,} pairs); its scores go to "
                     f"{_scores_path(d, run.pending['stage'])}, then sampling-lib design next {d}")
    emit("\n".join(lines) + "\n", None)


def _estimate(args):
    from ..correct import estimate
    from ..io import ranks_from_table
    from ._estimate import show_table

    d = _folder(args)
    run, _ = _load(d)
    if run.models is None:
        raise CLIError(f"{d}: no stage has been scored yet (the request is {d}/request-1.*)")
    if not run.done:
        print(f"{run.__class__.__name__ and ''}note: the design is not complete (stage {run.pending['stage']} is "
              "pending): estimating on the stages scored so far (valid: who went on depended on observed ranks "
              "only), less precise than planned", file=sys.stderr)
    check_output(args)
    ranks = run.ranks_table()
    out = estimate(ranks_from_table(ranks), metrics=args.metric or run.config["metrics"], method=args.method,
                   n_boot=args.n_boot, rng=run.config["seed"] if args.seed is None else args.seed,
                   confidence_level=args.ci, progress=progress_on(args))
    if len(run.models) == 1 and args.format == "table":
        out = out.drop(columns="model")
    show_table(out, args, (int(ranks.n_items.min()), int(ranks.n_items.max())),
               (int(ranks.sample_size.min()), int(ranks.sample_size.max())),
               run.config["seed"] if args.seed is None else args.seed)


def cmd_design(args):
    """``sampling-lib design ACTION DIR``."""
    return {"init": _init, "next": _next, "status": _status, "estimate": _estimate}[args.action](args)
