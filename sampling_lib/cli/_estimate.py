"""``sampling-lib estimate`` and ``compare``: the commands and their output (compact view, --wide, csv/json, --plot)."""
from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np
import pandas as pd

from ._common import PROG, CLIError, boot_count, check_output, emit, progress_on, write
from ._inputs import (CascadeTable, common_size_only, is_popularity, load_ranks, model_items, pick_models,
                      popularity_logs, size_arg)

__all__ = ["cmd_estimate", "cmd_compare", "cmd_ranks", "show_table"]

def _check_output_options(args):
    """--wide applies to the table format only (an option that does not apply is an error)."""
    if getattr(args, "wide", False) and args.format != "table":
        raise CLIError(f"--wide applies to --format table (the compact view); --format {args.format} always "
                        "has every column")


def _show(out, args, kind, *, n_items=None, sample_size=None):
    """Print an estimate or compare table: the compact view (default), every column (--wide) or csv/json.

    ``n_items``/``sample_size`` are the (smallest, largest) N_u and n_u behind the table, for the
    header and the resolution note. With csv/json the notes the compact view shows as a legend go to
    stderr (the data stay clean).
    """
    from .. import _display

    if args.format != "table":
        write(out, args.format, args.output)
        if kind == "estimate" and "below_resolution" in out.columns and out.below_resolution.any():
            below = out[out.below_resolution]
            w = _display.resolution_width(n_items[1], sample_size[0]) if n_items and sample_size else None
            widened = "sensitivity_low" in below.columns and bool(below.sensitivity_low.notna().all())
            kind = _display.table_kind(out)
            print(_display.wrap("note: " + _display.resolution_note(
                list(dict.fromkeys(below.metric)), w, widened=widened, popularity=kind["popularity"],
                stratified=kind["stratified"], design=kind["design"])), file=sys.stderr)
        return
    if args.wide:
        text = _display.wide_view(out)
    elif kind == "estimate":
        text = _display.estimate_view(out, n_items=n_items, sample_size=sample_size, seed=args.seed)
    else:
        text = _display.compare_view(out, n_items=n_items, sample_size=sample_size, seed=args.seed)
    emit(text, args.output)


def show_table(out, args, n_items, sample_size, seed):
    """Print an estimate table as ``sampling-lib estimate`` does (``design estimate``): compact view, --wide or
    csv/json; ``n_items`` / ``sample_size`` the (smallest, largest) N_u and n_u, ``seed`` the bootstrap's."""
    args.seed = seed
    _check_output_options(args)
    _show(out, args, "estimate", n_items=n_items, sample_size=sample_size)


def _check_plot(args):
    """--plot FILE: matplotlib installed and a format it writes, checked before the work starts."""
    if not getattr(args, "plot", None):
        return
    from pathlib import Path

    from .._extras import require

    require("matplotlib", "--plot")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(args.plot).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise CLIError(f"--plot {args.plot}: the file name must end in one of "
                        f"{', '.join('.' + f for f in sorted(formats))}; got {('.' + suffix) if suffix else 'no suffix'}")


def _plot(out, args, *, n_items=None, sample_size=None):
    """--plot FILE: sampling_lib.plotting.plot_estimates of the estimate table."""
    if not getattr(args, "plot", None):
        return
    from ..plotting import plot_estimates

    fig = plot_estimates(out, n_items=n_items, sample_size=sample_size)
    fig.savefig(args.plot, dpi=150, bbox_inches="tight")
    print(f"{PROG}: figure written to {args.plot}", file=sys.stderr)


#: how :func:`sampling_lib.correct.estimate` names the model of unnamed ranks (an array per call)
_UNNAMED = "model 'model'"


@contextlib.contextmanager
def _warnings_named(model, several):
    """Warnings of one model's estimate, re-issued with the model's name: the CLI estimates one model per call
    on its ranks alone, which the library calls 'model' ("model 'model': one user ..."); with ``several``
    models a warning that names none gets the model's name in front. Each distinct warning once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen = set()
    for w in caught:
        msg = str(w.message)
        if msg.startswith(_UNNAMED):
            msg = f"model {model!r}" + msg[len(_UNNAMED):]
        elif several and not msg.startswith(f"model {model!r}"):
            msg = f"model {model!r}: {msg}"
        if (w.category, msg) not in seen:
            seen.add((w.category, msg))
            warnings.warn_explicit(msg, w.category, w.filename, w.lineno)


def _cmd_estimate_popularity(args):
    from ..correct import estimate

    logs = popularity_logs(args)
    if args.model is not None:
        if args.model not in logs:
            raise CLIError(f"--model must be one of {list(logs)}; got {args.model!r}")
        logs = {args.model: logs[args.model]}
    out = estimate(logs, None, None, args.metric or ("recall@10", "ndcg@10"), method=args.method,
                   confidence_level=args.ci, n_boot=boot_count(args, True), rng=args.seed,
                   progress=progress_on(args))
    if len(logs) == 1 and args.format == "table":
        out = out.drop(columns="model")
    _show(out, args, "estimate")
    _plot(out, args)


def _cascade_n_items(args, c):
    """N_u of a cascade table: its n_items column (one value per user), --n-items or --n-items-file."""
    from .. import io

    given = [what for what, v in (("the n_items column", "n_items" in c.table.columns),
                                  ("--n-items", args.n_items is not None),
                                  ("--n-items-file", args.n_items_file is not None)) if v]
    if len(given) != 1:
        raise CLIError(f"{c.source}: give N_u (each user's candidates, the held-out item included) once: "
                       + (f"{' and '.join(given)} both give it" if given else
                          "--n-items N, --n-items-file FILE or an n_items column"))
    if args.n_items is not None:
        return int(args.n_items)
    if args.n_items_file is not None:
        from ..io._tables import _check_not_blank

        t = io.read_table(args.n_items_file, "n_items")
        _check_not_blank(t, ["user"], "n_items")
        t = pd.DataFrame({"user": io.id_text(t["user"]), "n_items": t["n_items"]})
    else:
        t = pd.DataFrame({"user": io.id_text(c.table["user"]), "n_items": c.table["n_items"]})
    per_user = t.drop_duplicates()
    twice = per_user["user"].duplicated()
    if twice.any():
        raise CLIError(f"user {per_user['user'][twice].iloc[0]!r} has two different n_items values: one N_u per user")
    return per_user.set_index("user")["n_items"].astype("int64")


def _cmd_estimate_cascade(args, c):
    """``estimate`` on a cascade's scores or rank table: :func:`sampling_lib.cascade.cascade_estimate`."""
    from .. import io
    from ..cascade import cascade_estimate
    from ..io._tables import _check_not_blank
    from ._names import DEFAULT_METHOD

    for opt, bad in (("--sample-size", args.sample_size is not None),
                     ("--common-size-only", args.common_size_only),
                     ("--method", args.method not in (None, DEFAULT_METHOD))):
        if bad:
            raise CLIError(f"{opt} does not apply to {c.what.split(' (')[0]} ({c.source}): each user's set is "
                           "the head, the tail sample and the held-out item, and the stratified estimator "
                           "corrects it")
    if args.scheme == "binomial" and args.scheme_stated:
        raise CLIError("--scheme binomial: a cascade's tail negatives are distinct items outside the head "
                       "(hypergeometric); omit --scheme")
    if args.ties == "random":
        raise CLIError("--ties random does not apply to a cascade's scores table: pessimistic (a negative "
                       "scored equal to the held-out item ranks above it) or optimistic")
    _check_not_blank(c.table, [k for k in ("user", "model") if k in c.table.columns], "cascade")
    table = c.table.assign(user=io.id_text(c.table["user"]))
    n_items = _cascade_n_items(args, c)
    table = table.drop(columns=[k for k in ("n_items",) if k in table.columns])
    if "model" in table.columns:
        table["model"] = table["model"].astype(str)
        models = list(dict.fromkeys(table["model"]))
        keep = pick_models(models, args.model)
        table = table[table["model"].isin(keep)]
    elif args.model is not None:
        raise CLIError(f"--model {args.model!r}: {c.source} has no model column (one model)")
    else:
        models = ["model"]
    out = cascade_estimate(table, n_items, metrics=args.metric or ("recall@10", "ndcg@10"),
                           n_boot=boot_count(args, False), rng=args.seed, confidence_level=args.ci,
                           ties=args.ties or "pessimistic")
    if len(models) == 1 and args.format == "table":
        out = out.drop(columns="model")
    N = np.asarray(n_items if np.ndim(n_items) else [n_items])
    if c.ranked:
        sizes = 1 + pd.to_numeric(table["head"]).to_numpy() + (pd.to_numeric(table["tail_size"]).to_numpy()
                                                               if "tail_size" in table.columns else 0)
    else:
        sizes = table.groupby(["user"] + (["model"] if "model" in table.columns else [])).size().to_numpy()
    ranges = {"n_items": (int(N.min()), int(N.max())), "sample_size": (int(sizes.min()), int(sizes.max()))}
    _show(out, args, "estimate", **ranges)
    _plot(out, args, **ranges)


def cmd_estimate(args):
    from ..correct import estimate

    check_output(args)
    _check_output_options(args)
    _check_plot(args)
    if is_popularity(args):
        return _cmd_estimate_popularity(args)
    sr = load_ranks(args)
    if isinstance(sr, CascadeTable):
        return _cmd_estimate_cascade(args, sr)
    if args.common_size_only:
        sr = common_size_only(sr)
    tables = []
    common = dict(metrics=args.metric or ("recall@10", "ndcg@10"), method=args.method,
                  confidence_level=args.ci, n_boot=boot_count(args, False), rng=args.seed,
                  scheme=args.scheme, progress=progress_on(args))
    items_seen, sizes_seen = [], []    # for the header and the resolution note (ranges of N_u and n_u)
    if isinstance(sr, dict):           # counts table: {model: RankCounts}
        all_models = list(sr)
        for m in pick_models(sr, args.model):
            if sr[m].n_items is None:
                raise CLIError("--n-items is required (the counts table has no n_items column)")
            with _warnings_named(m, len(all_models) > 1):
                t = estimate(sr[m], **common)
            items_seen.append(sr[m].n_items)
            sizes_seen.append(sr[m].sizes)
            t["model"] = m
            tables.append(t)
    else:
        all_models = sr.models
        for m in pick_models(sr.models, args.model):
            r, n, s = size_arg(sr, m, args.sample_size)
            items = model_items(sr, m, args.n_items)
            with _warnings_named(m, len(all_models) > 1):
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


def cmd_compare(args):
    from ..correct import compare

    check_output(args)
    _check_output_options(args)
    if is_popularity(args):
        logs = popularity_logs(args)
        if len(logs) < 2:
            raise CLIError(f"compare needs a 'model' column with at least 2 models; got {list(logs)}")
        out = compare(logs, None, None, args.metric or ("recall@10", "ndcg@10"), method=args.method,
                      confidence_level=args.ci, n_boot=boot_count(args, True), rng=args.seed, alpha=args.alpha,
                      adjust=args.adjust, progress=progress_on(args))
        _show(out, args, "compare")
        return
    sr = load_ranks(args)
    if isinstance(sr, CascadeTable):
        sr.refuse("compare")
    if args.common_size_only:
        sr = common_size_only(sr)
    common = dict(metrics=args.metric or ("recall@10", "ndcg@10"), method=args.method,
                  confidence_level=args.ci, n_boot=boot_count(args, False), rng=args.seed,
                  alpha=args.alpha, adjust=args.adjust, scheme=args.scheme,
                  progress=progress_on(args))
    if isinstance(sr, dict):           # counts table: unpaired
        if len(sr) < 2:
            raise CLIError(f"compare needs a 'model' column with at least 2 models; got {list(sr)}")
        for st in sr.values():
            if st.n_items is None:
                raise CLIError("--n-items is required (the counts table has no n_items column)")
        print("note: counts carry no pairing of users; the bootstrap resamples each model's users "
              "independently (unpaired)", file=sys.stderr)
        out = compare(sr, **common)
        ranges = _ranges([st.n_items for st in sr.values()], [st.sizes for st in sr.values()])
    else:
        if len(sr.models) < 2:
            raise CLIError(f"compare needs a 'model' column with at least 2 models; got {sr.models}")
        d, sizes, items = {}, {}, {}
        n_common = args.sample_size
        for m in sr.models:
            r, n, s = size_arg(sr, m, args.sample_size)
            d[m], sizes[m] = r, s
            items[m] = model_items(sr, m, args.n_items)
            if n is not None:
                if n_common is not None and n != n_common:
                    raise CLIError(f"models have different sample sizes ({n_common} and {n})")
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



def cmd_ranks(args):
    """``sampling-lib ranks``: the per-user sampled ranks of any estimate input, as one CSV table."""
    check_output(args)
    args.item_weights = args.weight_exponent = args.method = None       # ranks: no popularity logs
    if {"q", "label", "item"} <= _header_of(args.ranks[0]):
        raise CLIError(f"{args.ranks[0]} holds popularity-sampled negatives (a q column): their ranks are not "
                       "ranks among uniform negatives; estimate them with --item-weights")
    sr = load_ranks(args)
    if isinstance(sr, CascadeTable):
        sr.refuse("ranks")
    if isinstance(sr, dict):
        raise CLIError(f"{args.ranks[0]} is a counts table already (rank, count): it has no per-user ranks")
    cols = {"rank": sr.ranks}
    if sr.sample_sizes is not None:
        cols["sample_size"] = sr.sample_sizes
    if sr.n_items is not None:
        cols["n_items"] = sr.n_items
    if sr.first_ranks is not None:          # the merged ranks of stage files: each user's first-stage rank too
        cols["first_rank"] = sr.first_ranks
    out = pd.concat({k: v.stack(future_stack=True) for k, v in cols.items()}, axis=1)
    out = out[out["rank"].notna()].reset_index()
    out = out.rename(columns={out.columns[0]: "user", out.columns[1]: "model"})
    if "sample_size" not in out.columns:
        if args.sample_size is None:
            raise CLIError("-n is required: the input has no sample sizes")
        out["sample_size"] = args.sample_size
    if "n_items" not in out.columns and args.n_items is not None:
        out["n_items"] = args.n_items
    out = out[["user", "model", "rank", "sample_size"] + [c for c in ("n_items", "first_rank") if c in out.columns]]
    if args.scheme_stated is not None:      # given or read: recorded, so estimate, compare and plan follow it
        out["scheme"] = args.scheme_stated
    emit(out.to_csv(index=False), args.output)


def _header_of(path):
    try:
        return set(pd.read_csv(path, nrows=0, encoding="utf-8-sig").columns)
    except (OSError, ValueError, UnicodeDecodeError):
        return set()
