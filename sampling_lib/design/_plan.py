"""The planner: candidate designs scored on a pilot, the cheapest that meets a target chosen (:func:`plan`).

Part of :mod:`sampling_lib.design`.

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 6 (Algorithm 1, eq 44: cost).

The package's docstring (:mod:`sampling_lib.design`) lists every reference of the planner.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .._progress import progress as progress_bar, stage
from .._threads import one_blas_thread
from .._validation import check_float, check_int, check_n_items, check_scheme
from ..estimators import GRID_N_MAX, spline_grid
from ..metrics import parse_metrics
from ..sampling import SHORT_FIRST_STAGE, Design, check_growth
from . import _law
from ._cost import later_stages, shared_cost
from ._law import design_law
from ._predict import _judged, _predict_columns, assurance_margin

__all__ = ["plan", "PlanResult", "candidate_designs", "choose_design", "judged_column"]


@dataclass(frozen=True)
class PlanResult:
    """The candidate designs of :func:`plan`, scored, and the one chosen.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (design, metric) as :func:`predict`, with ``kind``,
        ``stages`` (rounds of scoring after the first stage,
        :func:`later_stages`), ``margin`` (:func:`assurance_margin`), ``meets`` (the design's
        predicted ratio or half-width times its margin meets the target for
        every metric), ``within_budget``
        (its cost share is at most ``max_cost``; True without a budget) and
        ``chosen``. Several models: a row per (model, design, metric), the
        ``model`` first; ``meets`` for every model; ``cost_all_models``, the
        cost of the union of the users the models send on
        (:func:`shared_cost`), by which the design is priced and budgeted.
    best : Design or None
        The cheapest design within the budget that meets the target; with a
        budget that no such design fits, the most precise within it (its
        ``meets`` is False); else None (:func:`choose_design`).
    prior : LogsplineResult or dict
        The prior the predictions use (fitted to the pilot); several models:
        {model: prior}.
    target : str
        The target, in words.
    """

    table: pd.DataFrame
    best: Design | None
    prior: object
    target: str

    def designs(self):
        """One row per design: kind, description, stages, cost, cost_share, the worst ratio, meets,
        within_budget, chosen."""
        t = self.table
        if "cost_all_models" in t.columns:
            t = t.assign(cost=t.cost_all_models, cost_share=t.cost_all_models * t.cost_share / t.cost)
        return (t.groupby(["design", "kind"], sort=False)
                .agg(stages=("stages", "first"), cost=("cost", "first"), cost_share=("cost_share", "first"),
                     ratio=("ratio", "max"),
                     halfwidth=("halfwidth", "max"), meets=("meets", "first"),
                     within_budget=("within_budget", "first"), chosen=("chosen", "first"))
                .reset_index())


def candidate_designs(N, n, *, thresholds=(1, 2, 5), factors=None, fractions=(0.05, 0.1, 0.2, 0.3, 0.5),
                      growths=(2.0,)):
    """The designs :func:`plan` scores, from a first-stage size n (all sets fit in N items: with
    per-user N_u, pass the smallest).

    Larger single n (n x each factor), a second stage of n2 = n x factor items
    for the users at rank <= each threshold, the ladder to n x factor, and full
    ranking of each fraction of the users (the others at n). The default
    factors are 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four to an
    octave, 2^k x 1, 1.25, 1.5 and 1.75: steps of at most x1.25 from 4 on)
    up to N / n, so that the sets reach the whole catalogue whatever N / n (a
    fixed top factor of 1,024 left Recall@10 below resolution at N / n =
    10^4: w = 10 at the largest set, and no candidate met the target). With
    two to an octave (x1.5, x4/3) the cheapest design meeting the target
    could cost up to 1.5 times the cheapest set size that does: Last.fm 2K's
    ALS at n = 18 took the ladder to 3,456 (5.5% of full ranking) where
    2,880 (4.9%) met it too (``benchmarks/README.md``).

    ``growths`` are the ladders' growth factors (:class:`Design`; default
    TORS24's doubling alone): a ladder of each for every top size. A factor
    below 2 stops the users that leave the ladder closer to the size where
    an item first ranks above the held-out one (less overshoot), for more
    rounds of scoring; the users still at rank 1 at n_max cost the same.

    Examples
    --------
    >>> [d.describe() for d in candidate_designs(1000, 100, factors=(4,), thresholds=(1,), fractions=(0.1,))]
    ['single n = 100', 'single n = 400', 'stage 2: +400 items for the users at rank <= 1 of 100', 'ladder 100 -> 400 (double while at rank 1)', '10% of users ranked in full, the others at n = 100']
    """
    N = check_int(N, "N", low=2)
    n = check_int(n, "n", low=2, high=N)
    growths = [check_growth(g) for g in (growths if np.iterable(growths) and not isinstance(growths, str)
                                         else [growths])]
    if factors is None:
        factors = sorted(f for f in {2, 3} | {m << k for k in range(63) for m in (4, 5, 6, 7)} if n * f <= N)
    out = [Design("single", n)]
    out += [Design("single", n * f) for f in factors if n * f <= N]
    out += [Design("threshold", n, threshold=t, n2=n * f) for f in factors for t in thresholds
            if t < n and n + n * f <= N]
    out += [Design("ladder", n, n_max=n * f, growth=g) for g in growths for f in factors if n * f <= N]
    out += [Design("full_subset", n, fraction=f) for f in fractions]
    return out


@one_blas_thread      # small matrices: one BLAS thread unless the user set one (sampling_lib._threads)
def plan(pilot=None, N=None, n=None, *, M=None, guess=None, metrics=("recall@10", "ndcg@10"),
         target_ratio=1.3, target_halfwidth=None, confidence_level=0.95, scheme=None,
         designs=None, robust=False, max_size=None, rng=0, progress=False, sample_sizes=None,
         max_cost=None, paired=True, first_ranks=None, assurance=0.9, ranges=True):
    """Score candidate designs on a pilot and pick the cheapest that meets a target.

    Parameters
    ----------
    pilot : array_like of int, dict {model: array_like of int}, or SampledRanks, optional
        First-stage sampled ranks (1..n) of the users: the prior is the
        default estimator's log-spline fitted to them. Without a pilot,
        ``guess`` is required. A :class:`~sampling_lib.io.SampledRanks`
        (e.g. ``io.ranks_from_table("merged.csv")``, the table that
        ``sampling-lib ranks`` writes) brings its models, per-user sample
        sizes, ``first_rank`` column and scheme; then N defaults to the
        median of its per-user N_u, ``max_size`` to their smallest, n to
        the smallest sample size, and ``paired`` to whether every model
        ranks every user. Several models (a dict): each is planned on
        its own ranks, a design meets the target when it does for every
        model, and it is priced by the union of the users the models send on
        (they share the added items, so that ``compare`` stays paired;
        :func:`shared_cost`, with the models' dependence from their paired
        ranks, see ``paired``).
    N : int or array_like of int
        Items. One int (the median N_u when users differ, as the command line
        passes), or the pilot users' own N_u (one per user, aligned with the
        pilot; several models: the same users for each): the prior is then
        fitted on the per-user kernels, lives on 1..max N_u (the
        estimator's pooled metric) and the predictions use N = max N_u.
    n : int
        First-stage set size (held-out item included).
    M : int, optional, keyword-only
        Users of the evaluation (default: the pilot's).
    guess : float or array_like, optional, keyword-only
        Without a pilot: a guessed Recall@10 (a power law P(R) ~ R^-a on 1..N
        with that Recall@10), or a pmf on 1..N; a pilot of M users is drawn
        from it at n (``rng``) and fitted.
    metrics : str or sequence of str, keyword-only
    target_ratio : float, default 1.3, keyword-only
        Largest precision ratio (interval width over full ranking's) for
        every metric.
    target_halfwidth : float, optional, keyword-only
        Largest interval half-width for every metric (instead of the ratio).
    assurance : float in [0.5, 1), default 0.9, keyword-only
        A design meets the target when its predicted ratio (or half-width)
        times :func:`assurance_margin` does: the planner's measured
        prediction error, so that the chosen design realizes the target
        with about this probability. The table's ``margin`` column holds
        the factor. 0.5 judges by the prediction itself (on the benchmark's
        58 cells, 48 chosen that way realized a ratio <= 1.3: the cheapest
        design predicted to meet a target sits at it, and its realized
        ratio lands on either side).
    confidence_level : float, keyword-only
    scheme : {"binomial", "hypergeometric"}, optional, keyword-only
        Default: the pilot's record (a SampledRanks' ``scheme``), else
        binomial (:func:`sampling_lib.correct.estimate`).
    designs : sequence of Design, optional, keyword-only
        Candidates (default :func:`candidate_designs` of ``max_size`` and n;
        ``candidate_designs(max_size, n, growths=(2, 1.5))`` adds ladders
        that grow by x1.5, as ``sampling-lib plan --growth 2 1.5``).
    max_size : int, optional, keyword-only
        The largest set a design may give a user (default N; with per-user
        N_u the smallest N_u, so that every user's sets fit).
    max_cost : float in (0, 1], optional, keyword-only
        A budget: the largest expected scoring cost as a share of full
        ranking (items scored per user / N; e.g. 0.05 for a twentieth).
        Designs above it are never chosen. If no design within it meets the
        target, the most precise design within it is chosen (smallest worst
        ratio, or half-width with ``target_halfwidth``, over the metrics) and
        its ``meets`` stays False: what the budget buys. Default: no budget
        (the cheapest design meeting the target, else none).
    sample_sizes : array_like of int, or dict {model: array_like}, optional, keyword-only
        The pilot's per-user set sizes n_u (held-out item included) when the
        pilot is a design already run in part: e.g. the merged ranks after
        the first rungs of a ladder or a second stage. The prior is then the
        default fitted on the per-user sizes (the nested design's likelihood,
        :func:`design_law`), which sees the top of P(R) that a first stage far
        below resolution cannot; the candidates still start from the first
        stage's size ``n``. In ``benchmarks/bench_design.py --workflow
        replan`` (58 cells, the default assurance), re-planning after the
        rungs n -> 4n put the predicted half-width within 20% of the
        realized one in 54 cells, against 45 from the first stage alone; for
        MovieLens 100K's popularity model (n = 17, w = 95; the first stage
        put Recall@10 at 0.044, truth 0.086) NDCG@10's went from 0.63x to
        1.09x.
    progress : bool, default False, keyword-only
        Show progress over the candidates on stderr (a bar on a terminal,
        throttled lines elsewhere; at N = 10^5, n = 100 and 10^4 users the
        176 candidates took 12 s on a 2-core machine).
    robust : bool, default False, keyword-only
        Judge designs by the high end of their predicted range (the pilot's
        prior refitted with the penalty divided and multiplied by
        :data:`sampling_lib.estimators.SENSITIVITY_FACTOR`: the top of P(R),
        inside the pilot's first sampled bin, is an extrapolation) instead of
        the prediction under the default's own fit; times the assurance
        margin, as the prediction is.
    ranges : bool, default True, keyword-only
        Predict every design under the alternative priors too (the pilot's
        prior refitted with the penalty divided and multiplied by
        SENSITIVITY_FACTOR): the columns ``halfwidth_low/high`` and
        ``ratio_high``. False skips those two fits and their predictions (two
        thirds of the planner's time; the choice, by ``ratio`` or
        ``halfwidth``, is the same) and leaves the columns NaN; ``robust``
        needs them. :func:`sampling_lib.evaluate` plans without them.
    rng : keyword-only
        Draws the pilot of a ``guess``.
    paired : bool, default True, keyword-only
        Several models: whether the arrays pair the models' ranks user by
        user (the same users in the same order; a counts table does not).
        Then their dependence at the first stage prices the union; else (or
        with ``sample_sizes`` and no ``first_ranks``) the models are taken as
        independent.
    first_ranks : dict {model: array_like of int}, optional, keyword-only
        Several models with ``sample_sizes`` (a pilot of merged ranks): each
        user's rank within the first stage's n items, in the pilot's user
        order (the ``first_rank`` column that ``sampling-lib ranks`` writes
        for stage files). They pair the models' first stages, so the union is
        priced with the models' dependence as for a first-stage pilot; at
        most the merged rank (the sets are nested).

    Returns
    -------
    PlanResult

    Examples
    --------
    >>> res = plan(None, 5000, 50, M=2000, guess=0.2, metrics="recall@10",
    ...            designs=candidate_designs(5000, 50, factors=(4, 16, 64), thresholds=(1,), fractions=(0.2,)))
    >>> res.best.kind in ("threshold", "ladder") and bool(res.designs().chosen.sum() == 1)
    True
    """
    from ..correct import input_scheme
    from ..io import SampledRanks

    scheme = check_scheme(input_scheme(scheme, pilot))
    if isinstance(pilot, SampledRanks):
        pilot, N, n, sample_sizes, first_ranks, max_size, paired = _sampled_ranks_pilot(
            pilot, N, n, sample_sizes, first_ranks, max_size, paired)
    several = isinstance(pilot, Mapping)
    if not several and first_ranks is not None:
        raise ValueError("first_ranks applies to several models' pilots (a dict): they pair the models' first "
                         "stages to price the union of the users the models send on")
    pilots = dict(pilot) if several else {None: pilot}
    if not pilots:
        raise ValueError("pilot must map at least one model to its first-stage ranks")
    if several and isinstance(sample_sizes, Mapping) and set(sample_sizes) != set(pilots):
        raise ValueError(f"sample_sizes must name the models of pilot ({list(pilots)}); got {list(sample_sizes)}")
    # 1. the priors: each model's default estimator fitted to its pilot (and its two alternative penalties)
    with stage(progress, f"plan: fit the pilot's prior ({len(pilots)} model{'s' if len(pilots) > 1 else ''})"):
        if robust and not ranges:
            raise ValueError("robust=True judges designs by the high end of their range: it needs ranges=True")
        fits = {m: _fit_pilot(r, N, n, M=M, guess=guess, scheme=scheme, rng=rng,
                              sample_sizes=sample_sizes[m] if isinstance(sample_sizes, Mapping) else sample_sizes,
                              ranges=ranges)
                for m, r in pilots.items()}
    N, n, M = next(iter(fits.values()))[2:]
    # 2. the target and the candidates
    target, col, bound = _target(target_ratio, target_halfwidth, robust, assurance)
    max_size = N if max_size is None else check_int(max_size, "max_size", low=n, high=N)
    if max_cost is not None:
        max_cost = check_float(max_cost, "max_cost", 0.0, 1.0, low_open=True)
    cands = list(candidate_designs(max_size, n) if designs is None else designs)
    # 3. every candidate's predictions for every model (the design's law computed once per design)
    table = _predict_designs(cands, fits, n, metrics=metrics, M=M, confidence_level=confidence_level, scheme=scheme,
                             col=col, bound=bound, margin=assurance_margin(metrics, assurance), progress=progress)
    # 4. several models: the cost of the union of the users they send on, and "meets" for every model
    if several:
        pairs = _pairs(pilots, fits, n, sample_sizes, first_ranks, paired)
        priors = [f[0] for f in fits.values()]
        union = ({d.describe(): shared_cost(d, priors, pairs, scheme=scheme) for d in cands} if len(priors) > 1
                 else None)
        table["cost_all_models"] = table.cost if union is None else table.design.map(union)
        table["meets"] = table.groupby("design", sort=False).meets.transform("all")
    else:
        table = table.drop(columns="model")
    # 5. the budget and the choice
    cost = "cost_all_models" if several else "cost"
    share = table.cost_all_models * table.cost_share / table.cost if several else table.cost_share
    table["within_budget"] = True if max_cost is None else share <= max_cost
    name = choose_design(table.assign(worst=_judged(table, col)).groupby("design", sort=False).agg(
        cost=(cost, "first"), meets=("meets", "first"), within_budget=("within_budget", "first"),
        worst=("worst", "max")))
    best = None if name is None else cands[[d.describe() for d in cands].index(name)]
    table["chosen"] = table.design == name
    prior = {m: f[0] for m, f in fits.items()} if several else fits[None][0]
    return PlanResult(table, best, prior, target)


def _fit_pilot(pilot, N, n, *, M, guess, scheme, rng, sample_sizes, ranges=True):
    """(prior, alternative priors, N, n, M) of one model's pilot: the default estimator's log-spline fitted to
    the first-stage ranks (or the merged ranks with their ``sample_sizes``; per-user N_u when N is an array;
    a pilot drawn from ``guess`` when there is none), and its fits with the penalty divided and multiplied
    by SENSITIVITY_FACTOR."""
    from ..counts import rank_counts
    from ..estimators import logspline_cells_fit, logspline_fit, sensitivity_penalties

    per_user = np.ndim(N) > 0
    if per_user:
        if pilot is None:
            raise ValueError("per-user N_u (N as an array) apply to a pilot's users; a guess takes one N")
        N_u = check_n_items(N, np.size(pilot))
        per_user = np.ndim(N_u) > 0
        N = int(np.max(N_u))             # the prior lives on 1..max N_u (the estimator's pooled metric)
    N = check_int(N, "N", low=2)
    n = check_int(n, "n", low=2, high=N)
    if pilot is None:
        if guess is None:
            raise ValueError("plan needs a pilot (first-stage sampled ranks) or a guess (a Recall@10 or a pmf)")
        if M is None:
            raise ValueError("M (the number of users) is required with a guess")
        pilot = _pilot_from_guess(guess, N, n, check_int(M, "M", low=1), scheme, rng)
    pilot = np.asarray(pilot)
    M = pilot.size if M is None else check_int(M, "M", low=1)
    if sample_sizes is None and not per_user:
        prior = logspline_fit(pilot, N, n, scheme=scheme)
        alts = ([logspline_fit(pilot, N, n, scheme=scheme, penalty=p) for p in sensitivity_penalties(prior.penalty)]
                if ranges else None)
        return prior, alts, N, n, M
    sizes = np.full(pilot.size, n) if sample_sizes is None else sample_sizes
    st = rank_counts(pilot, sample_sizes=sizes, n_items=N_u if per_user else np.full(pilot.size, N))
    if int(st.sizes.min()) < SHORT_FIRST_STAGE * n:
        raise ValueError(f"sample_sizes must be >= the first stage's n={n} (the candidates start there; a few "
                         f"items short, down to {SHORT_FIRST_STAGE:g} n, e.g. NCF's sets of 99 beside 100); got "
                         f"{int(st.sizes.min())}")
    cells = (st.n_items, st.sizes, st.ranks, st.counts)
    prior = logspline_cells_fit(*cells, scheme=scheme)
    alts = ([logspline_cells_fit(*cells, scheme=scheme, penalty=p) for p in sensitivity_penalties(prior.penalty)]
            if ranges else None)
    return prior, alts, N, n, M


def _target(target_ratio, target_halfwidth, robust, assurance):
    """(the target in words, the judged column, its bound)."""
    if target_halfwidth is not None:
        target_halfwidth = check_float(target_halfwidth, "target_halfwidth", low=0.0, low_open=True)
        text = f"interval half-width <= {target_halfwidth:g} (assurance {float(assurance):g})"
        return text, judged_column(target_halfwidth, robust), target_halfwidth
    target_ratio = check_float(target_ratio, "target_ratio", low=1.0)
    text = f"precision ratio <= {target_ratio:g} (assurance {float(assurance):g})"
    return text, judged_column(None, robust), target_ratio


def _predict_designs(cands, fits, n, *, metrics, M, confidence_level, scheme, col, bound, margin, progress):
    """One row per (model, design, metric): :func:`predict`'s, with kind, stages, margin and meets. The
    law of each design on a prior's grid is computed once and shared by the models fitted on that grid."""
    z = stats.norm.ppf(0.5 + 0.5 * check_float(confidence_level, "confidence_level", 0.0, 1.0,
                                                low_open=True, high_open=True))
    parsed = parse_metrics(metrics)
    grid_n = min(n, GRID_N_MAX)
    grids = {}
    for m, (prior, _, N, _, _) in fits.items():
        key = (int(prior.weights_grid.N), prior.knot_spacing)
        if key not in grids:
            grids[key] = spline_grid(key[0], grid_n, key[1], None, scheme)
    cols = {}
    bar = progress_bar(len(cands), progress, "plan: predicting", unit="designs")
    try:
        with _law.stage_cache():    # the stages' laws shared between candidates (design._law._binned_counts)
            for d in cands:
                if bar is not None:
                    bar.update(1)
                for name, v in _predict_design(d, grids, fits, parsed, M, z, scheme, n, col, bound,
                                               margin).items():
                    cols.setdefault(name, []).extend(v)
    finally:
        if bar is not None:
            bar.close()
    order = ["model", "design", "kind", "stages", "metric", "value", "cost", "cost_share", "halfwidth",
             "halfwidth_low", "halfwidth_high", "full_halfwidth", "ratio", "ratio_high", "margin", "meets"]
    return pd.DataFrame({c: np.concatenate(cols[c]) for c in order})


def _predict_design(d, grids, fits, parsed, M, z, scheme, n, col, bound, margin):
    """The rows of one candidate for every model (:func:`_predict_designs`), as a dict of columns."""
    laws = {key: design_law(d, key[0], grid.mid, scheme)[3] for key, grid in grids.items()}
    cols = {}
    for m, (prior, alts, _, _, _) in fits.items():
        key = (int(prior.weights_grid.N), prior.knot_spacing)
        t = _predict_columns(d, laws[key], grids[key], prior, alts, parsed, M, z, scheme)
        k = len(parsed)
        judged = np.asarray(t[col]) * margin
        extra = {"model": [m] * k, "kind": [d.kind] * k, "stages": [later_stages(d, n)] * k, "margin": margin,
                 "meets": [bool((judged <= bound).all())] * k}
        for name, v in {**t, **extra}.items():
            cols.setdefault(name, []).append(np.asarray(v))
    return cols


def _pairs(pilots, fits, n, sample_sizes, first_ranks, paired):
    """The models' first-stage ranks side by side (M, models), which pair them for :func:`shared_cost`, or
    None (then the models are priced as independent)."""
    ranks = [None if r is None else np.asarray(r) for r in pilots.values()]
    if sample_sizes is not None and first_ranks is None and max(
            np.max(v) for v in (sample_sizes.values() if isinstance(sample_sizes, Mapping) else [sample_sizes])) <= n:
        sample_sizes = None          # a first stage with short sets (NCF's 99 beside 100): its ranks pair the models
    if first_ranks is not None:
        if sample_sizes is None:
            raise ValueError("first_ranks applies with sample_sizes (a pilot of merged ranks); a pilot without "
                             "them is the first stage itself")
        if not paired:
            raise ValueError("first_ranks pair the models' first stages user by user; paired=False says the "
                             "pilot's arrays do not")
        ranks = _check_first_ranks(first_ranks, pilots, n)
    if (paired and (sample_sizes is None or first_ranks is not None)
            and all(r is not None and r.ndim == 1 for r in ranks) and len({r.size for r in ranks}) == 1):
        return np.stack(ranks, axis=1)
    return None


def _sampled_ranks_pilot(sr, N, n, sample_sizes, first_ranks, max_size, paired):
    """:func:`plan`'s inputs from a SampledRanks pilot: (pilot, N, n, sample_sizes, first_ranks, max_size,
    paired); one model gives arrays, several give dicts."""
    if sample_sizes is not None or first_ranks is not None:
        raise ValueError("a SampledRanks pilot carries its own sample sizes and first ranks: give neither "
                         "sample_sizes nor first_ranks")
    models = sr.models
    ranks = {m: sr.for_model(m)[0] for m in models}
    sizes = {m: sr.for_model(m)[1] for m in models}
    items = [it for it in (sr.items_for_model(m) for m in models) if it is not None]
    if N is None:
        if not items:
            raise ValueError("N is required: the pilot has no n_items (per-user N_u)")
        N = int(np.median(np.concatenate(items)))
    if max_size is None and items:
        max_size = int(min(it.min() for it in items))    # every user's sets must fit in its own N_u
    if any(s is None for s in sizes.values()):
        if n is None:
            raise ValueError("n is required: the pilot has no sample sizes")
        sizes = None
    else:
        if n is None:
            n = int(min(s.min() for s in sizes.values()))
        if all((s == n).all() for s in sizes.values()):
            sizes = None                                 # every user at n: the first stage itself
    firsts = None
    if sizes is not None and sr.first_ranks is not None:
        firsts = {m: sr.first_for_model(m) for m in models}
    if paired:
        paired = not bool(sr.ranks.isna().to_numpy().any())     # every model ranks every user: rows pair them
    if len(models) == 1:
        m = models[0]
        return ranks[m], N, n, None if sizes is None else sizes[m], None, max_size, paired
    return ranks, N, n, sizes, firsts, max_size, paired


def _check_first_ranks(first_ranks, pilots, n):
    """The first-stage ranks of a merged pilot, one array per model in the pilot's order, checked."""
    if not isinstance(first_ranks, Mapping) or set(first_ranks) != set(pilots):
        raise ValueError(f"first_ranks must map the models of pilot ({list(pilots)}) to first-stage ranks; got "
                         f"{list(first_ranks) if isinstance(first_ranks, Mapping) else type(first_ranks).__name__}")
    out = []
    for m, r in pilots.items():
        f = np.asarray(first_ranks[m])
        merged = np.asarray(r)
        if f.shape != merged.shape or not np.issubdtype(f.dtype, np.integer):
            raise ValueError(f"first_ranks of model {m!r} must be integer ranks, one per user of its pilot "
                             f"({merged.shape[0]}); got {f.dtype} of shape {f.shape}")
        if f.size and (f.min() < 1 or f.max() > n or (f > merged).any()):
            raise ValueError(f"first_ranks of model {m!r} must lie in 1..n={n} and at most the merged rank "
                             "(the sets are nested)")
        out.append(f)
    return out


def judged_column(target_halfwidth=None, robust=False):
    """The column of :func:`predict` a plan's target bounds: ``ratio`` (or ``halfwidth`` with a
    half-width target), its high end ``*_high`` with ``robust``.

    Examples
    --------
    >>> judged_column(), judged_column(0.01, robust=True)
    ('ratio', 'halfwidth_high')
    """
    return ("halfwidth" if target_halfwidth is not None else "ratio") + ("_high" if robust else "")


def choose_design(per):
    """The design :func:`plan` chooses from one row per design (index: its description).

    ``per`` has ``cost``, ``meets``, ``within_budget`` and ``worst`` (the worst
    predicted ratio or half-width over the metrics times its
    :func:`assurance_margin`, the quantity the target bounds). The cheapest design within the budget that meets the target; if
    none does, the one within the budget with the smallest ``worst`` when a
    budget excluded some design (what the budget buys), else None.

    Examples
    --------
    >>> per = pd.DataFrame({"cost": [100, 400, 900], "meets": [False, True, True],
    ...                     "within_budget": [True, True, False], "worst": [2.0, 1.2, 1.0]},
    ...                    index=["a", "b", "c"])
    >>> choose_design(per), choose_design(per.assign(within_budget=[True, False, False]))
    ('b', 'a')
    """
    inside = per[per.within_budget]
    ok = inside[inside.meets]
    if len(ok):
        return ok.cost.idxmin()
    if len(inside) and not per.within_budget.all():
        return inside.worst.idxmin()
    return None


def _pilot_from_guess(guess, N, n, M, scheme, rng):
    """First-stage sampled ranks of M users drawn from a guessed P(R)."""
    from ..rankdist import draw_global_ranks
    from ..sampling import sample_ranks

    if np.ndim(guess) == 0:
        r10 = check_float(guess, "guess", 0.0, 1.0, low_open=True, high_open=True)
        R = np.arange(1, N + 1, dtype=float)

        def recall10(a):
            w = R ** -a
            return w[:10].sum() / w.sum()

        lo, hi = 0.0, 20.0
        if not recall10(lo) <= r10 <= recall10(hi):
            raise ValueError(f"guess={r10} is not the Recall@10 of a power law on 1..N={N}")
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if recall10(mid) < r10 else (lo, mid)
        pmf = R ** -lo
        pmf /= pmf.sum()
    else:
        pmf = np.asarray(guess, dtype=float)
        if pmf.shape != (N,) or np.any(pmf < 0) or not np.isclose(pmf.sum(), 1.0):
            raise ValueError(f"guess must be a Recall@10 in (0, 1) or a pmf of length N={N}")
    g = np.random.default_rng(rng)
    return sample_ranks(draw_global_ranks(pmf, M, rng=g), N, n, scheme=scheme, rng=g)
