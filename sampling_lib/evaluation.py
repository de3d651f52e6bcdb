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
import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from ._evaluation_result import (EvaluationResult, StageNegatives, _cost_table, _design_table, _notes,
                                 _unmet_notes)
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
             head=None, tail_n=None, tail_n_max=None, head_ladder=None):
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
        stratified cells (:func:`sampling_lib.estimators.strata_estimate`). Without ``tail_n_max`` the
        design is **planned**: a pilot of :func:`sampling_lib.design.pilot_size` users (max(300, 10%),
        drawn from the seed) runs the head, the first tail sample and the tail ladder to resolution (one
        sampled item per K tail items or fewer, K the smallest cutoff; within ``max_cost``);
        :func:`sampling_lib.design.plan_strata` then predicts on its cells the cost and precision of every
        head size up to ``head`` (:func:`sampling_lib.design.head_candidates`: ``head``, half and a
        quarter of it), every tail ladder (its top bisected between the doubling rungs for ``head``), and
        the uniform designs. The cells price the uniform ladder off its own planner's price (low behind a good
        head, high behind popularity on Last.fm 2K), so the pilot plans again with the uniform designs priced on
        a uniform first stage of n items
        per pilot user (a share of its head and the first items of its tail, the rest scored as the pilot's
        last stage), when that stage costs at most 5% of the other users' cost at the pilot's pairs per
        user (:data:`sampling_lib.stratarun.UNIFORM_STAGE_SHARE`) and ``max_cost`` leaves room for it
        (``result.config["uniform_priced_on"]``). If a uniform design is predicted
        cheaper for ``target_ratio`` (or more precise within ``max_cost``: a proxy too weak to pay for its
        head), the other users run the uniform ladder (planned on their own first stage) and the table
        combines the two parts' estimates by their users' shares; else they run the stratified design with
        the planned head, re-planning the tail's top after their first tail sample on the pilot's cells
        (its head items beyond a smaller planned head read as a tail block scored exactly) and theirs, and
        one estimate takes every user's cells (with a smaller head, the two parts' estimates are combined
        by their users' shares). Then **the precision check**: while the estimate's own precision ratio is
        above ``target_ratio``, the tail ladder's top is raised 1.5-fold and the users whose ladder stopped
        at it without a sampled tail item above go on (within ``max_cost``; :func:`_precision_check`), since
        the top planned after the other users' first tail sample can be optimistic; one note says what it
        did (``result.config["check_share"]``: the pairs it scored, as a share of full ranking).
        ``result.notes`` says which, and ``result.parts`` holds the two parts ("pilot", "rest"). A
        stratified evaluation keeps no ``workdir``.
    head, tail_n, tail_n_max : int, optional, keyword-only
        With ``proxy``: the head size (default ``n``), the first tail sample (default ``n``) and the
        largest (default: planned; given, the design is fixed and ``target_ratio`` / ``max_cost`` do not
        apply). A planned design takes ``head`` as the pilot's head and the largest it may choose. Left
        out in a planned design with the head ladder, **the pilot's head climbs**: its ladder (``n``
        halved down to K, then doubled: 13, 25, 50, 100, 200, ... for n = 100) goes on from its first
        rung while its last rung paid for itself, i.e. the users it settled would each have needed a tail
        ladder to resolution of at least T_u / K items (K the smallest cutoff), and those items sum to at
        least the rung's pairs (:func:`sampling_lib.design.head_climb_pays`); the pilot's head is the last
        rung scored (below ``n`` or above it), the plan chooses the other users' head among it and its
        halves, and the head's decision says each rung's verdict (``result.config["head_climb"]``). The
        heads are asked of the proxy again at each rung past ``n`` (a callable proxy must rank the same
        way each time; if it does not, the climb stops and says so).
    head_ladder : bool, optional, keyword-only
        With ``proxy`` (default True): score each user's head in rungs, ``head`` halved down to the largest
        K of the metrics, smallest first (:func:`sampling_lib.design.head_rungs`), and leave a user out of
        the rungs after the first where every model ranks K or more of its head items at or above the
        held-out item (its metrics are then 0). The estimate is the one of the whole head, item for item;
        only the cost falls, by up to the share of users the head settles. A planned design's pilot runs it
        too: its outcomes up to each user's last rung price the smaller heads and their ladders exactly
        (:func:`sampling_lib.design.head_ladder_cost`); the head items of its uniform first stage beyond a
        user's last rung are scored with that stage. False: one stage for the whole head (fewer round
        trips).

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
    scorers = _scorers(score)
    if isinstance(proxy, dict):
        if set(proxy) != set(scorers):
            raise ValueError(f"proxy as a dict gives one proxy per model of score, keyed like it ({sorted(scorers)}); "
                             f"got the keys {sorted(map(str, proxy))}")
        parts = {m: evaluate({m: f}, held_out, n_items, exclude=exclude, n=n, metrics=metrics, target_ratio=target_ratio,
                             max_cost=max_cost, seed=seed, ties=ties, batch_size=batch_size, progress=progress,
                             confidence_level=confidence_level, n_boot=n_boot, assurance=assurance, growth=growth,
                             workdir=workdir, proxy=proxy[m], head=head, tail_n=tail_n, tail_n_max=tail_n_max,
                             head_ladder=head_ladder)
                 for m, f in scorers.items()}
        return _merged(parts)
    batch = DEFAULT_BATCH_SIZE if batch_size is None else check_int(batch_size, "batch_size", low=1)
    n_boot = check_int(n_boot, "n_boot", low=0)
    config = dict(n=n, metrics=[metrics] if isinstance(metrics, str) else list(metrics), target_ratio=target_ratio,
                  max_cost=max_cost, seed=seed, ties=ties, assurance=assurance, growth=growth)
    if proxy is not None:
        if workdir is not None:
            raise ValueError("workdir does not apply with proxy: a stratified evaluation keeps no workdir yet")
        from .stratarun import StrataRun, check_proxy_settings

        if head_ladder is not None and not isinstance(head_ladder, (bool, np.bool_)):
            raise TypeError(f"head_ladder must be True or False; got {head_ladder!r}")
        config.update(head=n if head is None else head, tail_n=n if tail_n is None else tail_n, tail_n_max=tail_n_max,
                      head_ladder=True if head_ladder is None else bool(head_ladder),
                      head_climb=head is None)        # (a planned pilot with the head ladder: StrataRun)
        check_proxy_settings(config["head"], config["tail_n"], tail_n_max)
        if tail_n_max is None:                # planned: the tail's top, and the uniform ladder as the fall-back
            return _planned_strata(scorers, held_out, n_items, exclude, config, proxy, batch, progress, n_boot,
                                   confidence_level)
        given = [k for k, v in (("target_ratio", target_ratio), ("max_cost", max_cost)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} does not apply with a fixed tail_n_max: the stratified design runs the "
                             "head and tail ladder it is given (leave tail_n_max out to have it planned)")
        run = StrataRun(held_out, n_items, exclude, config=config, proxy=proxy)
    else:
        given = [k for k, v in (("head", head), ("tail_n", tail_n), ("tail_n_max", tail_n_max),
                                ("head_ladder", head_ladder)) if v is not None]
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
        _drive(run, scorers, batch, bar, where, workdir)
    finally:
        bar.close()
    if proxy is not None:
        table = run.estimate_table(n_boot=n_boot, confidence_level=confidence_level)
    else:
        table = _uniform_table(run, n_boot, confidence_level, progress)
    return _result(run, table, n_boot, confidence_level)


def _drive(run, scorers, batch, bar, where="", workdir=None, label=""):
    """Score ``run``'s stages until it is done, saying each stage's decisions (the state saved to
    ``workdir`` after each)."""
    while not run.done:
        stage = run.pending["stage"]
        pairs = score_stage(run, scorers, batch, bar, where)
        run.finish_stage()
        bar.say(f"{label}stage {stage}: {pairs:,} pairs scored" + "".join(
            f"; {d['action']}: {d['decision']}" for d in run.decisions if d["after_stage"] == len(run.stages)
            and d["action"] != "done"))
        bar.total(_predicted_total(run))
        if workdir is not None:
            run.save(workdir)


def _uniform_table(run, n_boot, confidence_level, progress):
    """The default estimator on a uniform run's merged ranks."""
    from .correct import estimate
    from .io import ranks_from_table

    return estimate(ranks_from_table(run.ranks_table()), metrics=run.config["metrics"], rng=run.config["seed"],
                    n_boot=n_boot, confidence_level=confidence_level, progress=progress)


def _result(run, table, n_boot, confidence_level):
    """The EvaluationResult of one run and its table."""
    return EvaluationResult(table=table, cost=_cost_table(run), design=_design_table(run), ranks=run.ranks_table(),
                            negatives=StageNegatives(run), plans=list(run.plans), notes=_notes(run, table),
                            config=dict(run.config, confidence_level=confidence_level, n_boot=n_boot))


def _subset_inputs(inputs, idx):
    """The checked inputs (:func:`sampling_lib.stagerun.check_inputs`) of the users at positions ``idx``
    (sorted) of ``inputs``."""
    ptr = inputs["ptr"]
    lens = np.diff(ptr)[idx]
    starts = np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)
    sel = np.repeat(ptr[idx] - starts, lens) + np.arange(int(lens.sum()))
    return dict(inputs, users=inputs["users"][idx], held=inputs["held"][idx], ptr=np.r_[0, np.cumsum(lens)].astype(
        np.int64), bad=inputs["bad"][sel], n_items=inputs["n_items"][idx], unused_exclude_users=0)


def _proxy_of(proxy, users):
    """The proxy of a subset of the users: a top-m table keeps their rows, the other forms are per item."""
    if isinstance(proxy, pd.DataFrame) and "user" in proxy.columns:
        return proxy[proxy["user"].isin(users)]
    return proxy


def _planned_strata(scorers, held_out, n_items, exclude, config, proxy, batch, progress, n_boot, confidence_level):
    """A stratified evaluation whose tail ladder is planned, with the uniform ladder as the fall-back.

    A pilot of :func:`sampling_lib.design.pilot_size` users, drawn from the seed, runs first: its heads, its
    first tail samples and its tail ladder to resolution (:meth:`sampling_lib.stratarun.StrataRun._pilot_ladder`);
    its cells then plan the others (:func:`sampling_lib.design.plan_strata`). If that plan predicts the proxy
    pays (its cheapest stratified design meeting the target costs less than the uniform designs), the other
    users run the stratified design, re-planning their tail after their first tail sample on the pilot's
    cells and theirs, and one estimate takes every user's cells. Otherwise they run the uniform ladder
    (planned on their own first stage) and the two estimates are combined by their users' shares
    (:func:`_combined`). Either way nothing is scored twice and every rule looks at observed data only."""
    from .design import pilot_size
    from .stagerun import check_inputs
    from .stratarun import StrataRun

    inputs = check_inputs(held_out, n_items, exclude)
    N_u = inputs["n_items"]
    head_share = float(np.minimum(1 + int(config["head"]), N_u).sum() / N_u.sum())
    if config["max_cost"] is not None and config["max_cost"] < head_share:
        raise ValueError(f"max_cost={config['max_cost']:g} is below the head's own cost ({head_share:.2%} of full "
                         f"ranking: the held-out item and head={config['head']} per user): raise max_cost or lower "
                         "head")
    M = int(inputs["users"].size)
    P = pilot_size(M)
    seq = np.random.SeedSequence(config["seed"]).spawn(4)
    pick = np.sort(np.random.default_rng(seq[3]).permutation(M)[:P])
    rest = np.setdiff1d(np.arange(M), pick)
    users = inputs["users"]
    # a pilot that decides for other users also holds a uniform first stage, on which the fall-back is priced,
    # where a budget leaves room for it beside the head (else the fall-back is priced on the pilot's cells)
    room = config["max_cost"] is None or int(config["head"]) + config["n"] <= config["max_cost"] * float(N_u.mean())
    run_p = StrataRun(None, None, None, config=dict(config, plan_users=M, uniform_first=bool(rest.size) and room),
                      inputs=_subset_inputs(inputs, pick), proxy=_proxy_of(proxy, users[pick]))
    bar = _Bar(progress, _predicted_total(run_p))
    if rest.size:
        bar.say(f"a pilot of {P:,} of {M:,} users first (drawn from the seed): its cells plan the tail and decide "
                "whether the proxy pays")
    try:
        _drive(run_p, scorers, batch, bar, label="pilot " if rest.size else "")
        run_r = None
        if rest.size:
            pl = run_p.strata_plan
            sub = _subset_inputs(inputs, rest)
            rest_seed = int(np.random.SeedSequence([config["seed"], 1]).generate_state(1)[0])
            if pl is None or pl.kind == "stratified":
                # the others run the planned head and re-plan their tail after their first tail samples, on the
                # pilot's cells (seen as the planned head's) and theirs
                head = config["head"] if pl is None or pl.head is None else pl.head
                run_r = StrataRun(None, None, None, config=dict(config, seed=rest_seed, plan_users=M, tail_n_max=None,
                                                                head=head, pilot_cells=_pilot_cells(run_p, head)),
                                  inputs=sub, proxy=_proxy_of(proxy, users[rest]))
            else:
                from .stagerun import StagedRun

                run_r = StagedRun(None, None, None, inputs=sub, config={
                    k: v for k, v in dict(config, seed=rest_seed).items()
                    if k not in ("head", "tail_n", "tail_n_max", "head_ladder", "head_climb")})
            bar.total(_predicted_total(run_p) + _predicted_total(run_r))
            _drive(run_r, scorers, batch, bar, label="other users' ")
    finally:
        bar.close()
    table_p = run_p.estimate_table(n_boot=n_boot, confidence_level=confidence_level)
    notes = run_p.input_notes()
    unused = inputs["unused_exclude_users"]
    if unused:
        notes.append(f"exclude: {unused:,} users without a held-out item were not used")
    pl = run_p.strata_plan
    if run_r is None:                   # the pilot is every user: the plan's verdict, nothing fell back
        res_p = _result(run_p, table_p, n_boot, confidence_level)
        return dataclasses.replace(res_p, notes=notes + [x for x in res_p.notes if x not in notes],
                                   config=dict(res_p.config, proxy_pays=pl is None or pl.kind == "stratified"))
    stratified = isinstance(run_r, StrataRun)
    checked, check_share = [], float("nan")
    if stratified:
        h_p, h_r = run_p.config["head"], run_r.config["head"]
        table, table_p, table_r, checked, check_share = _precision_check(
            run_p, run_r, table_p, scorers, batch, progress, n_boot, confidence_level)
        if h_r == h_p:
            how = (f"the proxy pays: the pilot's {P:,} users and the other {M - P:,} ran the same stratified design; "
                   "one estimate takes every user's cells")
        else:
            how = (f"the proxy pays: the pilot's {P:,} users ran the stratified design with a head of {h_p:,}, the "
                   f"other {M - P:,} with the planned head of {h_r:,}; the table combines the two parts' estimates by "
                   "their users' shares (normal approximation of each interval's two sides)")
    else:
        table_r = _uniform_table(run_r, n_boot, confidence_level, progress)
        table = _combined(table_p, table_r, P, M - P, confidence_level)
        how = (f"the proxy does not pay: the pilot's {P:,} users ran the stratified design, the other {M - P:,} the "
               "uniform ladder; the table combines the two estimates by their users' shares (normal "
               "approximation of each interval's two sides)")
    # (after the precision check, which may have reopened the pilot)
    res_p, res_r = _result(run_p, table_p, n_boot, confidence_level), _result(run_r, table_r, n_boot, confidence_level)
    parts = {"pilot": res_p, "rest": res_r}
    notes.append(how)
    notes += checked
    notes += [f"{k}: {x}" for k, r in parts.items() for x in r.notes
              if x not in notes and not x.startswith("no design")] + _unmet_notes([run_p, run_r], table)
    with_part = lambda f, k: f.assign(part=k)[["part"] + [c for c in f.columns if c != "part"]]   # noqa: E731
    return EvaluationResult(
        table=table, cost=_cost_table([run_p, run_r]),
        design=pd.concat([with_part(r.design, k) for k, r in parts.items()], ignore_index=True),
        ranks=pd.concat([with_part(r.ranks, k) for k, r in parts.items()], ignore_index=True),
        negatives={k: r.negatives for k, r in parts.items()}, plans=[], notes=notes,
        config=dict(run_p.config, confidence_level=confidence_level, n_boot=n_boot, parts="pilot and rest",
                    proxy_pays=stratified, planned_head=run_r.config["head"] if stratified else None,
                    check_share=check_share, **_uniform_price(run_p)),
        parts=parts)


#: The precision check (:func:`_precision_check`) raises the tail ladder's top by this factor at a time.
CHECK_GROWTH = 1.5


def _strata_parts_table(run_p, run_r, table_p, n_boot, confidence_level):
    """(the table, the other users' own table) of a pilot and the other users who ran the stratified design.
    With the same head, one estimate takes every user's cells; with a smaller planned head, each part is
    estimated on its own design and the two combined by their users' shares: the pilot's cells read as the
    smaller head's (a known tail block) pull a smooth prior of the tail rank towards the block's exact
    offsets (benchmarks/README.md, "The head chosen by the plan")."""
    table_r = run_r.estimate_table(n_boot=n_boot, confidence_level=confidence_level)
    if run_r.config["head"] == run_p.config["head"]:
        c = run_p.config
        table = _joint_strata_table([run_p.cells(), run_r.cells()], run_r.models, c["metrics"], n_boot,
                                    confidence_level, c["seed"])
    else:
        table = _combined(table_p, table_r, run_p.M, run_r.M, confidence_level)
    return table, table_r


def _precision_check(run_p, run_r, table_p, scorers, batch, progress, n_boot, confidence_level):
    """The stratified estimate of a pilot and the other users, checked against the target.

    While some metric's estimated precision ratio (the table's ``precision_ratio``) is above ``target_ratio``,
    the tail ladder's top is raised :data:`CHECK_GROWTH`-fold, starting from the other users' planned top,
    and every user, the pilot's and the others', whose ladder stopped below that top without a sampled tail
    item above the held-out one goes on climbing (:meth:`sampling_lib.stratarun.StrataRun.extend_tail`; a
    pilot's users join once the top passes the pilot's own, resolving top). It stops when the target is met,
    when no user can go on (every tail resolved or exhausted), or before a top at which the users it would
    reopen could leave ``max_cost`` if each climbed to it. Each step is a decision of the run it reopens; one
    note says what the check saw first, its steps, the pairs they scored and why it stopped. Returns (the
    table, the pilot's table, the other users' table, notes, the pairs the check scored as a share of full
    ranking: ``result.config["check_share"]``).

    Why: the other users' top is planned after their first tail sample, on the pilot's cells and theirs
    (:func:`sampling_lib.design.plan_strata`), and that prediction can be optimistic. On Gowalla (ALS-64,
    item-KNN head of 200, 10 draws) the planned top left the estimate's ratio above 1.3 in 3 draws
    (1.37-1.40; the realized ratios against full ranking's own interval 1.38-1.42), each a draw whose
    planned top was low (0.48-0.57% of full ranking against a predicted 0.31-0.41%; benchmarks/README.md,
    "The precision check"). The check looks at the estimate's own interval, observed data only, so the
    design stays ignorable: a user's final cell (s, r) keeps its hypergeometric kernel whatever rule chose
    s (the samples are nested prefixes of one uniform order of its tail)."""
    c = run_r.config
    runs = {"pilot ": run_p, "other users' ": run_r}
    table, table_r = _strata_parts_table(run_p, run_r, table_p, n_boot, confidence_level)
    target = float(c["target_ratio"])
    total = float(run_p.inputs["n_items"].sum() + run_r.inputs["n_items"].sum())
    pairs = lambda: sum(st["pairs"] for r in runs.values() for st in r.stages)     # noqa: E731
    before, top, steps, first, stop = pairs(), int(c["tail_n_max"]), [], None, ""
    while True:
        worst = table.loc[table.precision_ratio.idxmax()] if table.precision_ratio.notna().any() else None
        if worst is None or not worst.precision_ratio > target:
            break
        why = (f"the precision check: the estimate's precision ratio {worst.precision_ratio:.2f} ({worst.metric}, "
               f"{worst.model}) is above the target {target:g}")
        first = first or why
        # the next top at which some user goes on (a pilot's users only above the pilot's own top)
        opens = {k: r.open_tails() for k, r in runs.items()}
        reach = max([int(r.tails[opens[k]].max()) for k, r in runs.items() if opens[k].any()], default=0)
        go = {}
        while True:                   # (at the current top only a pilot below it can go on)
            for k, r in runs.items():
                open_ = opens[k] & (r.tail_sizes < np.minimum(top, r.tails))
                if top > int(r.config["tail_n_max"]) and open_.any():
                    go[k] = float((np.minimum(top, r.tails[open_]) - r.tail_sizes[open_]).sum())
            if go or top >= reach:
                break
            top = int(np.ceil(CHECK_GROWTH * top))
        if not go:
            stop = "every user's tail ladder is resolved or exhausted"
            run_r._decide("check", f"{why}; {stop}: the design stays as it is")
            break
        if c["max_cost"] is not None and pairs() + sum(go.values()) > c["max_cost"] * total:
            stop = f"a tail ladder to {top:,} could leave max_cost = {c['max_cost']:g}"
            run_r._decide("check", f"{why}; {stop}: the design stays as it is")
            break
        for k in go:
            r = runs[k]
            steps.append((top, r.extend_tail(top, why), k.strip()))
            bar = _Bar(progress, _predicted_total(r))
            try:
                _drive(r, scorers, batch, bar, label=k)
            finally:
                bar.close()
        if "pilot " in go:
            table_p = run_p.estimate_table(n_boot=n_boot, confidence_level=confidence_level)
        table, table_r = _strata_parts_table(run_p, run_r, table_p, n_boot, confidence_level)
    more, notes = pairs() - before, []
    if first is not None:                 # one note: what the check saw, what it did, and why it stopped
        said = []
        if steps:
            who = "; ".join(f"{name} {next(u for _, u, w in steps if w == k):,} users to "
                            + ", ".join(f"{t:,}" for t, _, w in steps if w == k)
                            for k, name in (("other users'", "the other users'"), ("pilot", "the pilot's"))
                            if any(w == k for _, _, w in steps))
            said.append(f"the tail ladder went on in {len(steps)} step{'s' * (len(steps) > 1)} ({who}), scoring "
                        f"{more:,} pairs per model ({more / total:.2%} of full ranking) beyond the planned design; "
                        f"the ratio is now {table.precision_ratio.max():.2f}")
        if stop:
            said.append(f"it stopped: {stop}")
        notes.append(f"{first}: " + "; ".join(said))
    return table, table_p, table_r, notes, more / total


def _uniform_price(run):
    """What a pilot's plan said of the uniform ladder: ``uniform_priced_on`` ("first stage": the pilot's uniform
    first stage; "cells": its stratified cells) and ``uniform_predicted_share`` (the cheapest uniform design
    predicted to meet the target, as a share of full ranking; NaN if none)."""
    pl = run.strata_plan
    uni = None if pl is None else pl.cheapest_uniform()
    return {"uniform_priced_on": None if pl is None else pl.uniform_on,
            "uniform_predicted_share": float("nan") if uni is None else float(uni.cost_share)}


def _pilot_cells(run, head):
    """A pilot's cells per model, as the cells of a run with ``head`` (a smaller head: its items beyond the first
    ``head`` as a tail block scored exactly, :func:`sampling_lib.design.smaller_head_cells`)."""
    from .design import smaller_head_cells

    cells = run.cells()
    if head >= run.config["head"]:
        return cells
    return {m: smaller_head_cells(c, run.head_above[m], head) for m, c in cells.items()}


def _joint_strata_table(parts, models, metrics, n_boot, confidence_level, seed):
    """:func:`sampling_lib.estimators.strata_estimate` on the cells of several sets of users of one design
    ({model: cells} each)."""
    from .estimators import strata_estimate

    out = []
    for m in models:
        cells = [np.concatenate(a) for a in zip(*[p[m] for p in parts])]
        out.append(strata_estimate(*cells, metrics=metrics, n_boot=n_boot, rng=seed,
                                   confidence_level=confidence_level, model=m))
    return pd.concat(out, ignore_index=True)


def _combined(t1, t2, M1, M2, confidence_level):
    """One table of two estimates on disjoint users (M1 and M2 of them): T = w1 T1 + w2 T2, w = M_i / M; each
    interval side sqrt(sum (w_i d_i)^2) from the estimate, d_i the part's distance to that side (independent
    parts, normal approximation of each side); ``se`` likewise; ``full_halfwidth`` from the parts' Var F and
    means (the pooled variance of all users); ``naive`` and the sensitivity band weighted."""
    from .inference import z_critical

    M = M1 + M2
    w1, w2 = M1 / M, M2 / M
    key = ["model", "metric"]
    a = t1.set_index(key)
    b = t2.set_index(key).reindex(a.index)
    out = b.copy()
    est = w1 * a.estimate + w2 * b.estimate
    out["estimate"] = est
    out["naive"] = w1 * a.naive + w2 * b.naive
    for lo, hi in (("ci_low", "ci_high"), ("naive_ci_low", "naive_ci_high")):
        e1, e2 = (a.estimate, b.estimate) if lo == "ci_low" else (a.naive, b.naive)
        centre = w1 * e1 + w2 * e2
        out[lo] = centre - np.hypot(w1 * (e1 - a[lo]), w2 * (e2 - b[lo]))
        out[hi] = centre + np.hypot(w1 * (a[hi] - e1), w2 * (b[hi] - e2))
    out["se"] = np.hypot(w1 * a.se, w2 * b.se)
    for c in ("sensitivity_low", "sensitivity_high"):
        out[c] = w1 * a[c] + w2 * b[c]
    z = z_critical(confidence_level)
    v1, v2 = (a.full_halfwidth / z) ** 2 * M1, (b.full_halfwidth / z) ** 2 * M2
    pooled = (M1 * v1 + M2 * v2 + M1 * M2 / M * (a.estimate - b.estimate) ** 2) / M
    out["full_halfwidth"] = z * np.sqrt(pooled / M)
    out["precision_ratio"] = (out.ci_high - out.ci_low) / (2 * out.full_halfwidth)
    out["users"] = M
    out["method"] = f"{a.method.iloc[0]} ({M1:,} users) + {b.method.iloc[0]} ({M2:,} users)"
    out["below_resolution"] = a.below_resolution.astype(bool) | b.below_resolution.astype(bool)
    out["clipped"] = a.clipped.astype(bool) | b.clipped.astype(bool)
    out["N"] = out["n"] = pd.array([pd.NA] * len(out), dtype="Int64")     # the parts' designs differ
    out["bound_low"] = out["bound_high"] = np.nan
    out["scheme"] = [x if x == y else f"{y} + {x}" for x, y in zip(b.scheme, a.scheme)]
    return out.reset_index()[list(t2.columns)]


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
