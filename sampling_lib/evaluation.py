"""Full-ranking precision in one call: :func:`evaluate` runs a planned sampled evaluation with your scorer.

You hold a model that scores (user, item) pairs -- a PyTorch module, a RecBole
model, an LLM reranker behind an API -- and want its global top-K metrics
with intervals, without scoring every item for every user. :func:`evaluate`:

1. draws stage 1 (each test user's held-out item and n - 1 uniform negatives
   outside its history) and scores it with ``score``;
2. plans a nested design on the first-stage ranks (:func:`sampling_lib.design.plan`:
   the cheapest design whose predicted precision ratio meets the target, or
   the most precise within a budget);
3. runs it stage by stage, each stage drawing and scoring only the users who
   need more items (a ladder: while some model ranks the held-out item first,
   TORS24 Algorithm 1), and re-plans after the ladder's first rungs when the
   first stage was below resolution (:mod:`sampling_lib.staged`);
4. estimates every model's metrics with the default estimator on the
   per-user set sizes and N_u (:func:`sampling_lib.estimate`).

The loop itself decides nothing: every decision comes from
:mod:`sampling_lib.design` and :mod:`sampling_lib.staged`, and
``result.design`` records it with its reason. The state is
:class:`sampling_lib.stagerun.StagedRun`, shared with the file route
``sampling-lib design init|next|status|estimate DIR`` for frameworks that
only read and write files.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Sec 6 (Algorithm 1: the ladder).
.. [Efron16] Efron. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016 (the default estimator).
"""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._validation import check_int, show_value
from .exceptions import ScoringError
from .stagerun import STATE_FILE, StagedRun

__all__ = ["evaluate", "EvaluationResult", "StageNegatives", "DEFAULT_BATCH_SIZE", "score_stage"]

#: Pairs per call of ``score`` when ``batch_size`` is None.
DEFAULT_BATCH_SIZE = 1 << 16


def _scorers(score):
    """{model name: callable} of a callable or a dict of them."""
    if callable(score) and not isinstance(score, dict):
        return {"model": score}
    if not isinstance(score, dict) or not score:
        raise TypeError("score must be a callable score(users, items) -> scores, or a non-empty dict {model name: "
                        f"callable}}; got {type(score).__name__}")
    for name, f in score.items():
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"score's model names must be non-empty strings; got {show_value(name)}")
        if not callable(f):
            raise TypeError(f"score[{name!r}] must be callable score(users, items) -> scores; got "
                            f"{type(f).__name__}")
    return dict(score)


def _call(f, model, users, items, stage, where):
    """One validated call of a scorer: a float array, one finite score per pair."""
    name = "score" if model is None else f"score[{model!r}]"
    try:
        out = f(users, items)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's code, named and chained
        raise ScoringError(f"{name} raised {type(exc).__name__}: {exc} (stage {stage}, a batch of {users.size:,} "
                           f"pairs){where}") from exc
    if hasattr(out, "detach"):                 # a torch tensor
        out = out.detach().cpu().numpy()
    try:
        arr = np.asarray(out, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"{name} must return one float score per pair; got {type(out).__name__} that is not "
                           f"numeric (stage {stage}){where}") from exc
    if arr.shape != (users.size,):
        raise ScoringError(f"{name} must return one score per pair, an array of shape ({users.size},) for a batch "
                           f"of {users.size:,}; got shape {arr.shape} (stage {stage}){where}")
    bad = ~np.isfinite(arr)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ScoringError(f"{name} returned {arr[j]} for user {show_value(users[j])}, item {show_value(items[j])}: "
                           f"every score must be finite (stage {stage}){where}")
    return arr


class _Bar:
    """Pairs scored, against the predicted total (on stderr)."""

    def __init__(self, enabled, total):
        from ._progress import progress

        self.bar = progress(total, enabled, "evaluate: scoring", unit="pairs")
        self.enabled = enabled

    def update(self, k):
        if self.bar is not None:
            self.bar.update(k)

    def total(self, t):
        if self.bar is not None:
            self.bar.total = max(int(t), getattr(self.bar, "n", 0))
            if hasattr(self.bar, "refresh"):
                self.bar.refresh()

    def say(self, text):
        if not self.enabled:
            return
        if self.bar is not None and hasattr(self.bar, "write"):
            self.bar.write(f"sampling-lib: {text}", file=sys.stderr)
        else:
            print(f"sampling-lib: {text}", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


_END = object()


def _prefetched(batches):
    """The items of the generator ``batches``, each drawn on one worker thread while the caller scores the one
    before: drawing is numpy work that releases the GIL, so the next batch's negatives are drawn on another
    core while ``score`` runs. The worker is the only thread that advances ``batches``; it draws at most one
    batch ahead, and an exception in either thread ends both (the worker's own is raised here)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sampling-lib-draw") as pool:
        ahead = pool.submit(next, batches, _END)
        while True:
            item = ahead.result()
            if item is _END:
                return
            ahead = pool.submit(next, batches, _END)
            yield item


def score_stage(run, scorers, batch_size, bar=None, where=""):
    """Score the pending stage of ``run`` with ``scorers`` in batches of ``batch_size`` pairs; the pairs scored."""
    users = run.inputs["users"].to_numpy()
    ids = run.inputs["ids"]
    single = list(scorers) == ["model"]
    stage = run.pending["stage"]
    done = 0
    for u, it, held in _prefetched(run.chunks(batch_size)):
        uid, iid = users[u], (it if ids is None else ids.to_numpy()[it])
        scores = {m: _call(f, None if single else m, uid, iid, stage, where) for m, f in scorers.items()}
        run.absorb(u, it, held, scores)
        done += u.size
        if bar is not None:
            bar.update(u.size)
    return done


def _open_workdir(workdir, run):
    """Resume the state in ``workdir`` or start a new one there (a new or empty folder)."""
    folder = Path(workdir)
    if (folder / STATE_FILE).exists():
        return run.restore(folder), True
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"workdir {str(folder)!r} is not a staged evaluation's folder (no {STATE_FILE}) and is "
                         "not empty: give a new or empty folder (nothing in it is overwritten)")
    folder.mkdir(parents=True, exist_ok=True)
    run.save(folder)
    return run, False


def evaluate(score, held_out, n_items, *, exclude=None, metrics=("recall@10", "ndcg@10"), target_ratio=None,
             max_cost=None, n=100, batch_size=None, seed=0, progress=True, ties="pessimistic",
             confidence_level=0.95, n_boot=1000, assurance=0.9, growth=2.0, workdir=None, proxy=None,
             head=None, tail_n=None, tail_n_max=None):
    """Global top-K metrics with intervals at about full ranking's precision, scoring a few percent of it.

    Parameters
    ----------
    score : callable or dict {model name: callable}
        ``score(users, items) -> scores``: two equal-length arrays in (user ids as in ``held_out``, item ids
        as in ``n_items``), one float array of the same length out (higher = ranked higher; a torch tensor
        is taken). A dict scores several models on the same negatives (their comparison stays paired; a user
        goes on when any model needs it).
    held_out : Series or dict {user: item}, or DataFrame with columns user, item
        The held-out item of each test user.
    n_items : int or array_like
        The catalogue: items 0..n_items-1, or an array of item ids.
    exclude : DataFrame with columns user, item, or dict {user: items}, optional, keyword-only
        Items never drawn and never ranked against (each user's history): user u's held-out item competes
        with N_u = n_items - |history_u| items. Users without a held-out item are not used (counted in
        ``result.notes``); a held-out item listed here is an error.
    metrics : str or sequence of str, keyword-only
        The metrics estimated and targeted ("recall@10", "ndcg@10", "ap@10", ...).
    target_ratio : float >= 1, optional, keyword-only
        The precision ratio (interval width over full ranking's for the same users) the design aims for,
        with the planner's assurance margin (:func:`sampling_lib.design.assurance_margin`). Default 1.3; with
        ``max_cost`` and no target, the most precise design within the budget.
    max_cost : float in (0, 1], optional, keyword-only
        A budget: the largest expected share of full ranking's scoring (pairs scored / sum of N_u). If no
        design within it meets the target, the most precise one within it runs, and ``result.notes`` and the
        table's ``precision_ratio`` say what precision it reached. Below the first stage's own share: an
        error.
    n : int, default 100, keyword-only
        The first stage's set size, held-out item included (users with N_u <= n are ranked in full).
    batch_size : int, optional, keyword-only
        Pairs per ``score`` call (default :data:`DEFAULT_BATCH_SIZE`). ``score`` is called from the calling
        thread, one batch at a time; the next batch's negatives are drawn meanwhile on one worker thread.
    seed : int, default 0, keyword-only
        Every random choice (the negatives, random ties, the bootstrap) follows from it: the same seed gives
        the same result.
    progress : bool, default True, keyword-only
        Pairs scored against the predicted total, and each decision, on stderr.
    ties : {"pessimistic", "optimistic", "random"}, keyword-only
        Where a negative scored equal to the held-out item ranks (:func:`sampling_lib.ranking.ranks_from_scores`).
    confidence_level, n_boot : keyword-only
        The intervals (:func:`sampling_lib.estimate`).
    assurance : float in [0.5, 1), default 0.9, keyword-only
        The planner's assurance (:func:`sampling_lib.design.plan`).
    growth : float, default 2.0, keyword-only
        The ladders' growth factor (2: TORS24's doubling).
    workdir : path, optional, keyword-only
        A folder that keeps the state after every stage: if ``score`` fails (or the process is stopped), the
        same call with the same folder resumes after the last stage scored. A new or empty folder, or one
        an earlier call with the same inputs and settings wrote.
    proxy : array_like, callable or DataFrame, optional, keyword-only
        A cheap proxy ranker for a **stratified** design (:mod:`sampling_lib.stratarun`): one proxy score
        per catalogue item (e.g. popularity counts), a callable ``proxy(users, items) -> scores`` scored on
        every candidate of each user, or a retriever's top-m table ``user, item[, rank]``
        (:mod:`sampling_lib.proxy`); or a dict keyed like ``score``, one proxy per model (each model is then
        evaluated on its own heads and tails, so no pair is shared: :attr:`EvaluationResult.parts`). Each
        user's proxy top ``head`` candidates are scored by ``score`` (the head items above the held-out
        item are then known exactly), then, for the users whose metrics the
        head does not settle, ``tail_n`` of the other candidates drawn uniformly, doubled while no sampled
        tail item ranks above, up to ``tail_n_max``. The estimate is the default estimator on the
        stratified cells (:func:`sampling_lib.estimators.strata_estimate`). No planner chooses ``head`` and
        the tail yet: ``target_ratio`` and ``max_cost`` do not apply (an error), nor does ``workdir``.
    head, tail_n, tail_n_max : int, optional, keyword-only
        With ``proxy``: the head size (default ``n``), the first tail sample (default ``n``) and the
        largest (default 8 ``tail_n``).

    Returns
    -------
    EvaluationResult

    Raises
    ------
    ScoringError
        ``score`` raised, or returned the wrong length, a non-number, NaN or inf (names the model, the pair
        and the stage).

    Notes
    -----
    Each user's candidates are ordered once at random from the seed (:mod:`sampling_lib.nested`): its set of
    size s is the first s - 1 of them, so the sets are nested, uniform without replacement, and no pair is
    ever scored twice. Every rule deciding who goes on looks at the ranks observed so far only, so the
    likelihood of a user's data is the kernel at its final (n_u, r_u) and the default estimator takes the
    merged ranks as they are (TORS24 Sec 6; notebook 12).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> quality = rng.random(500)                              # item 0..499; a popularity-like model
    >>> held = {u: int(rng.choice(500, p=quality / quality.sum())) for u in range(200)}
    >>> res = evaluate(lambda users, items: quality[items], held, 500, n=20, n_boot=200, progress=False)
    >>> res.table[["metric", "method", "users"]].to_string(index=False)  # doctest: +NORMALIZE_WHITESPACE
    '   metric    method  users\\nrecall@10 logspline    200\\n  ndcg@10 logspline    200'
    """
    from .correct import estimate

    scorers = _scorers(score)
    if isinstance(proxy, dict):
        if set(proxy) != set(scorers):
            raise ValueError(f"proxy as a dict gives one proxy per model of score, keyed like it ({sorted(scorers)}); "
                             f"got the keys {sorted(map(str, proxy))}")
        parts = {m: evaluate({m: f}, held_out, n_items, exclude=exclude, n=n, metrics=metrics, target_ratio=target_ratio,
                             max_cost=max_cost, seed=seed, ties=ties, batch_size=batch_size, progress=progress,
                             confidence_level=confidence_level, n_boot=n_boot, assurance=assurance, growth=growth,
                             workdir=workdir, proxy=proxy[m], head=head, tail_n=tail_n, tail_n_max=tail_n_max)
                 for m, f in scorers.items()}
        return _merged(parts)
    batch = DEFAULT_BATCH_SIZE if batch_size is None else check_int(batch_size, "batch_size", low=1)
    n_boot = check_int(n_boot, "n_boot", low=0)
    config = dict(n=n, metrics=[metrics] if isinstance(metrics, str) else list(metrics), target_ratio=target_ratio,
                  max_cost=max_cost, seed=seed, ties=ties, assurance=assurance, growth=growth)
    if proxy is not None:
        given = [k for k, v in (("target_ratio", target_ratio), ("max_cost", max_cost), ("workdir", workdir))
                 if v is not None]
        if given:
            raise ValueError(f"{given[0]} does not apply with proxy: a stratified design runs the head, tail_n and "
                             "tail_n_max it is given (no planner chooses them yet), and keeps no workdir")
        from .stratarun import StrataRun

        config.update(head=n if head is None else head, tail_n=n if tail_n is None else tail_n, tail_n_max=tail_n_max)
        run = StrataRun(held_out, n_items, exclude, config=config, proxy=proxy)
    else:
        given = [k for k, v in (("head", head), ("tail_n", tail_n), ("tail_n_max", tail_n_max)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} applies with proxy (a stratified design); without one, evaluate plans a "
                             "uniform ladder")
        run = StagedRun(held_out, n_items, exclude, config=config)
    resumed = False
    if workdir is not None:
        run, resumed = _open_workdir(workdir, run)
        if run.models is not None and run.models != list(scorers):
            raise ValueError(f"workdir {str(workdir)!r} holds an evaluation of the models {run.models}; score names "
                             f"{list(scorers)}")
    where = "" if workdir is None else f"; the stages scored so far are kept in {str(workdir)!r}: the same call resumes"
    bar = _Bar(progress, _predicted_total(run))
    if resumed:
        bar.say(f"resuming {workdir} after stage {len(run.stages)}")
    try:
        while not run.done:
            stage = run.pending["stage"]
            pairs = score_stage(run, scorers, batch, bar, where)
            run.finish_stage()
            bar.say(f"stage {stage}: {pairs:,} pairs scored" + "".join(
                f"; {d['action']}: {d['decision']}" for d in run.decisions if d["after_stage"] == len(run.stages)
                and d["action"] != "done"))
            bar.total(_predicted_total(run))
            if workdir is not None:
                run.save(workdir)
    finally:
        bar.close()
    ranks = run.ranks_table()
    if proxy is not None:
        table = run.estimate_table(n_boot=n_boot, confidence_level=confidence_level)
    else:
        from .io import ranks_from_table

        table = estimate(ranks_from_table(ranks), metrics=run.config["metrics"], rng=run.config["seed"],
                         n_boot=n_boot, confidence_level=confidence_level, progress=progress)
    return EvaluationResult(table=table, cost=_cost_table(run), design=_design_table(run), ranks=ranks,
                            negatives=StageNegatives(run), plans=list(run.plans), notes=_notes(run, table),
                            config=dict(run.config, confidence_level=confidence_level, n_boot=n_boot))


def _merged(parts):
    """One EvaluationResult of the models' own stratified evaluations (one proxy per model)."""
    first = next(iter(parts.values()))
    with_model = lambda f, m: f.assign(model=m)[["model"] + [c for c in f.columns if c != "model"]]   # noqa: E731
    return EvaluationResult(
        table=pd.concat([p.table for p in parts.values()], ignore_index=True),
        cost=pd.concat([with_model(p.cost, m) for m, p in parts.items()], ignore_index=True),
        design=pd.concat([with_model(p.design, m) for m, p in parts.items()], ignore_index=True),
        ranks=pd.concat([p.ranks for p in parts.values()], ignore_index=True),
        negatives={m: p.negatives for m, p in parts.items()}, plans=[],
        notes=[f"model {m!r}: {x}" for m, p in parts.items() for x in p.notes],
        config=dict(first.config, proxy="one per model"), parts=parts)


def _predicted_total(run):
    """Pairs scored so far plus the pending stage, or the last plan's prediction for the whole design."""
    done = sum(st["pairs"] for st in run.stages)
    if run.predicted is None or run.done:
        return done + run.pending_pairs()
    return max(done + run.pending_pairs(), int(round(run.predicted * run.M)))


def _cost_table(run):
    """One row: users, pairs scored (per model), items per user, share of full ranking; the plans' predictions."""
    N_u = run.inputs["n_items"]
    pairs = int(run.sizes.sum())
    pred = [d for d in run.decisions if "predicted_items_per_user" in d]
    first = pred[0]["predicted_items_per_user"] if pred else np.nan
    last = pred[-1]["predicted_items_per_user"] if pred else np.nan
    return pd.DataFrame([{
        "users": run.M, "models": len(run.models or []), "pairs_per_model": pairs,
        "items_per_user": pairs / run.M, "share_of_full": pairs / float(N_u.sum()),
        "predicted_items_per_user": last, "predicted_share": last * run.M / float(N_u.sum()),
        "first_plan_items_per_user": first, "stages": len(run.stages),
        "users_ranked_in_full": int((run.sizes == N_u).sum())}])


def _design_table(run):
    """The stages table with the decision taken after each stage."""
    t = run.stages_table()
    dec = pd.DataFrame(run.decisions)
    if dec.empty:
        t["decision"] = ""
        return t
    text = dec.groupby("after_stage").decision.agg("; ".join)
    t["decision"] = t.stage.map(text).fillna("")
    for col in ("chosen", "predicted_items_per_user", "predicted_ratio"):
        if col in dec.columns:
            last = dec.dropna(subset=[col]).groupby("after_stage")[col].last()
            t[col] = t.stage.map(last)
    return t


def _notes(run, table):
    notes = run.input_notes()
    unmet = [d for d in run.decisions if d.get("meets") is False]
    if unmet:
        d = unmet[-1]
        reached = table.groupby("metric", sort=False).precision_ratio.max()
        notes.append(f"no design within the budget met the target: {d['chosen']} ran (predicted ratio "
                     f"{d['predicted_ratio']:.2f}); it reached precision ratios "
                     + ", ".join(f"{v:.2f} ({m})" for m, v in reached.items()))
    return notes


class StageNegatives:
    """Every stage's negatives, regenerated from the seed on demand (nothing is stored).

    ``len()`` stages; ``[j]`` the DataFrame ``user, item`` of stage j + 1 (users in input order, each user's
    items in draw order); ``to_frame()`` all of them with a ``stage`` column.
    """

    def __init__(self, run):
        self._run = run

    def __len__(self):
        return len(self._run.stages)

    def __getitem__(self, j):
        if not -len(self) <= j < len(self):
            raise IndexError(f"stage index {j} out of range ({len(self)} stages)")
        j %= len(self)
        u, it = self._run.stage_negatives(j)
        users = self._run.inputs["users"].to_numpy()[u]
        ids = self._run.inputs["ids"]
        return pd.DataFrame({"user": users, "item": it if ids is None else ids.to_numpy()[it]})

    def __iter__(self):
        return (self[j] for j in range(len(self)))

    def to_frame(self):
        return pd.concat([f.assign(stage=j + 1) for j, f in enumerate(self)], ignore_index=True)[
            ["stage", "user", "item"]]

    def __repr__(self):
        pairs = [st["pairs"] - (self._run.M if st["stage"] == 1 else 0) for st in self._run.stages]
        return f"<StageNegatives: {len(self)} stages, {sum(pairs):,} negatives ({', '.join(f'{p:,}' for p in pairs)})>"


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns.

    Attributes
    ----------
    table : pandas.DataFrame
        :func:`sampling_lib.estimate`'s table: one row per model and metric (``estimate``, ``ci_low/high``,
        ``precision_ratio``, ...).
    cost : pandas.DataFrame
        One row: ``pairs_per_model`` scored (held-out items included), ``items_per_user``,
        ``share_of_full`` (pairs / sum of N_u), the last plan's ``predicted_items_per_user`` and
        ``predicted_share``, the first plan's prediction, ``stages``, ``users_ranked_in_full``.
    design : pandas.DataFrame
        One row per stage: the design it ran, users, pairs, set sizes, users ranked in full, share of full
        ranking, and the decision taken after it (a plan, a re-plan, the end) with the chosen design and its
        predictions.
    ranks : pandas.DataFrame
        The merged ranks, the table ``sampling-lib ranks`` writes (user, model, rank, sample_size, n_items,
        first_rank, scheme): ``sampling_lib.estimate(io.ranks_from_table(ranks), ...)`` re-estimates with
        another method.
    negatives : StageNegatives
        Every stage's negatives.
    plans : list of PlanResult
        Every plan's candidate table.
    notes : list of str
        What the run says beside the table (a budget that bounded the design, unused ids).
    parts : dict or None
        With one proxy per model (``proxy={model: proxy}``): each model's own evaluation (its own heads
        and tails); then ``cost`` and ``design`` have a ``model`` column, ``negatives`` is a dict
        {model: StageNegatives} and ``save`` writes one folder per model.
    """

    table: pd.DataFrame
    cost: pd.DataFrame
    design: pd.DataFrame
    ranks: pd.DataFrame
    negatives: StageNegatives
    plans: list = field(repr=False)
    notes: list
    config: dict = field(repr=False)
    parts: dict = field(default=None, repr=False)

    def save(self, folder, file_format="negatives"):
        """Write the evaluation into a new (or empty) ``folder``, nothing overwritten.

        ``held_out.csv`` (user, item), ``n_items.csv`` (user, n_items), each stage's negatives
        (``stage-K.csv`` as ``sampling-lib negatives`` writes them; ``file_format="ncf"``: NCF's
        ``stage-K.test.negative``; ``"elliot"``: ``stage-K.tsv``), ``ranks.csv``, ``estimate.csv``,
        ``design.csv`` and ``cost.csv``. Scored again, the stage files give the same ranks: ``sampling-lib
        estimate stage-1.csv ... --input-format negatives --held-out held_out.csv --scores SCORES.csv
        --n-items-file n_items.csv --scheme hypergeometric --seed SEED`` prints this table.

        A stratified evaluation (``proxy=``) is not a sequence of uniform stages, so its stage files would
        be misread as one: it writes ``candidates.csv`` instead (``user, item, label, stratum``: each
        user's held-out item, label 1; its proxy head, stratum "head"; every tail item drawn, stratum
        "tail"). Scored again (a ``score`` column added), that file is a cascade's scores table:
        ``sampling-lib estimate SCORED.csv --n-items-file n_items.csv --seed SEED`` prints this table
        (the tail ladder's final cell is all its likelihood needs: notebook 14).

        Returns the folder's path.
        """
        from .io import STAGE_FORMATS, id_text, write_stage_negatives

        if file_format not in STAGE_FORMATS:
            raise ValueError(f"file_format must be one of {STAGE_FORMATS}; got {show_value(file_format)}")
        folder = Path(folder)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise ValueError(f"folder {str(folder)!r} exists and is not empty: give a new or empty folder (nothing "
                             "is overwritten)")
        if self.parts is not None:            # one proxy per model: one folder per model
            for m, part in self.parts.items():
                part.save(folder / m, file_format)
            return folder
        run = self.negatives._run
        stratified = hasattr(run, "head_items")
        if stratified and file_format != "negatives":
            raise ValueError(f"file_format={file_format!r} does not apply to a stratified evaluation (proxy=): it is "
                             "saved as one candidates table (candidates.csv, a cascade's layout), not as stage files")
        folder.mkdir(parents=True, exist_ok=True)
        users = run.inputs["users"].to_numpy()
        ids = run.inputs["ids"]
        held = run.inputs["held"] if ids is None else ids.to_numpy()[run.inputs["held"]]
        pd.DataFrame({"user": users, "item": held}).to_csv(folder / "held_out.csv", index=False)
        pd.DataFrame({"user": users, "n_items": run.inputs["n_items"]}).to_csv(folder / "n_items.csv", index=False)
        if stratified:
            parts = [pd.DataFrame({"user": users, "item": held, "label": 1, "stratum": "head"})]
            parts += [neg.assign(label=0, stratum="head" if j == 0 else "tail") for j, neg in enumerate(self.negatives)]
            order = pd.Series(np.arange(users.size), index=users)
            cand = pd.concat(parts, ignore_index=True)
            cand = cand.iloc[np.lexsort((-cand["label"].to_numpy(), order[cand["user"]].to_numpy()))]
            cand.to_csv(folder / "candidates.csv", index=False)
        else:
            ext = {"negatives": "csv", "ncf": "test.negative", "elliot": "tsv"}[file_format]
            hold = pd.Series(id_text(held), index=id_text(users))
            for j, neg in enumerate(self.negatives):
                write_stage_negatives(neg, folder / f"stage-{j + 1}.{ext}", file_format, held_out=hold)
        self.ranks.to_csv(folder / "ranks.csv", index=False)
        self.table.to_csv(folder / "estimate.csv", index=False)
        self.design.to_csv(folder / "design.csv", index=False)
        self.cost.to_csv(folder / "cost.csv", index=False)
        return folder

    def compare(self, metrics=None, **kwargs):
        """Pairwise differences of the models' corrected metrics, paired (:func:`sampling_lib.compare` on
        the merged ranks; the same seed as the table unless ``rng`` is given)."""
        from .correct import compare
        from .io import ranks_from_table

        if "sample_size" not in self.ranks.columns:
            raise ValueError("compare takes the ranks of a uniform design; a stratified evaluation's (proxy=) "
                             "cells are not paired sampled ranks: compare its models' tables instead")
        kwargs.setdefault("rng", self.config["seed"])
        kwargs.setdefault("n_boot", self.config["n_boot"] or 1000)
        return compare(ranks_from_table(self.ranks), metrics=metrics or self.config["metrics"], **kwargs)

    def summary(self):
        """The table, the cost and the design as text (what ``print(result)`` shows)."""
        from ._display import estimate_view

        if self.parts is not None:
            return "\n\n".join(f"== model {m!r} (its own proxy)\n{part.summary()}" for m, part in self.parts.items())
        c = self.cost.iloc[0]
        t = self.table
        r = self.ranks
        scored = r.sample_size if "sample_size" in r.columns else 1 + r["head"] + r.tail_size    # stratified cells
        head = estimate_view(t.drop(columns="model") if t.model.nunique() == 1 else t,
                             n_items=(int(r.n_items.min()), int(r.n_items.max())),
                             sample_size=(int(scored.min()), int(scored.max())), seed=self.config["seed"])
        predicted = "" if np.isnan(c.predicted_share) else f" (predicted {c.predicted_share:.2%})"
        cost = (f"cost: {int(c.pairs_per_model):,} pairs per model, {c.items_per_user:,.0f} items per user, "
                f"{c.share_of_full:.2%} of full ranking{predicted}; {int(c.stages)} stages, "
                f"{int(c.users_ranked_in_full):,} users ranked in full")
        design = "\n".join(f"  after stage {r.stage}: {r.decision}" for r in self.design.itertuples() if r.decision)
        return "\n".join([head.rstrip(), "", cost, "design:", design] + [f"note: {x}" for x in self.notes])

    def __str__(self):
        return self.summary()
