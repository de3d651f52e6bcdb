"""The decisions of a staged evaluation: what to run after each plan, and which users each stage extends.

:func:`sampling_lib.evaluate` and ``sampling-lib design`` run a nested design
stage by stage; every decision they take comes from here (and from
:func:`sampling_lib.design.plan`), so the loop and the file route decide
alike, and ``result.design`` records each decision with its reason:

* :func:`first_stage_sizes` -- stage 1: n items per user, or all N_u when
  N_u <= n (the user is then ranked in full: cheaper than any sample);
* :func:`after_plan` -- from the design a plan chose, the :class:`Run` that
  follows: its sets up to a size, and whether to re-plan when it ends. A
  ladder chosen on a first stage below resolution runs its first rungs
  (:func:`sampling_lib.design.first_rungs`) and re-plans on their merged
  ranks, as README's "Resolving a metric below resolution" prescribes
  (re-planned half-widths within 20% of the realized in 58 of 58 benchmark
  cells, against 45 from the first stage); a re-planned ladder that reaches
  more than about 8x above the sets run runs further rungs and re-plans
  again (at most :data:`REPLANS_MAX` re-plans);
* :func:`replan_candidates` -- the designs a re-plan scores: ladders that
  continue the rungs already run (nothing scored is wasted);
* :func:`next_sizes` -- the users that go on at the next stage of a run
  and their new set sizes (TORS24 Algorithm 1 for a ladder: a user goes on
  while some model ranks its held-out item first), capped at each user's
  N_u: a user whose next set would hold N_u items or more is ranked in full.

Every rule looks at the ranks observed so far only, so the design is
ignorable and the likelihood of a user's data is the kernel at its final
(n_u, r_u) (:func:`sampling_lib.design.design_law`, notebook 12).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Sec 6 (Algorithm 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_int
from .sampling import Design, next_ladder_size, size_ladder

__all__ = ["Run", "REPLANS_MAX", "first_stage_sizes", "after_plan", "replan_candidates", "next_sizes",
           "below_resolution"]

#: At most this many re-plans after the first (each after further rungs of the ladder).
REPLANS_MAX = 3


@dataclass(frozen=True)
class Run:
    """What runs after a plan: the stages of ``design`` up to sets of ``run_to`` items, then a re-plan
    when ``replan``; ``design`` None: nothing more (estimate). ``reason`` says why, in words."""

    design: Design | None
    run_to: int
    replan: bool
    reason: str


def first_stage_sizes(n, n_items):
    """Stage 1's set sizes: n, or N_u for a user with N_u <= n (ranked in full).

    Examples
    --------
    >>> first_stage_sizes(100, np.array([5000, 80])).tolist()
    [100, 80]
    """
    n = check_int(n, "n", low=2)
    return np.minimum(n, np.asarray(n_items, dtype=np.int64))


def below_resolution(metrics_K, N, n):
    """The cutoffs K of ``metrics_K`` below resolution at a first stage of n among N items (K < (N-1)/(n-1))."""
    w = (N - 1) / (n - 1)
    return [K for K in metrics_K if K < w]


def after_plan(best, *, n, first_stage=True, ran_to=None, below=(), max_size=None, replans=0, meets=True):
    """The :class:`Run` that follows a plan's chosen design ``best``.

    Parameters
    ----------
    best : Design or None
        The plan's choice (None: no candidate met the target and no budget bounded them).
    n : int
        The first stage's set size.
    first_stage : bool
        The plan was on the first stage (else on the merged ranks of the rungs run to ``ran_to``).
    ran_to : int, optional
        The largest ladder size run so far (re-plans).
    below : sequence
        The metrics below resolution at the first stage (a first-stage plan of a ladder then runs the
        ladder's first rungs and re-plans).
    max_size : int, optional
        The largest set a user can take (the largest N_u).
    replans : int
        Re-plans done so far.
    meets : bool
        Whether ``best`` meets the target (False: what a budget buys).

    Examples
    --------
    >>> r = after_plan(Design("ladder", 100, n_max=12800), n=100, below=["recall@10"])
    >>> r.run_to, r.replan
    (1600, True)
    >>> after_plan(Design("ladder", 100, n_max=12800), n=100, first_stage=False, ran_to=1600).run_to
    12800
    """
    budget = "" if meets else " (no design within the budget meets the target: the most precise within it)"
    if best is None:
        return Run(None, n, False, "no candidate design meets the target: the stages run so far are estimated")
    if best.kind != "ladder":
        if best.kind == "single" and best.n == n:
            return Run(None, n, False, f"{best.describe()}: the first stage alone suffices{budget}")
        top = {"single": best.n, "threshold": best.n + best.n2, "full_subset": n}[best.kind]
        return Run(best, top, False, f"run {best.describe()}{budget}")
    from .design import first_rungs

    ladder = size_ladder(best.n, best.n_max, best.growth)
    want = first_rungs(n, best.growth, max_size, n_max=best.n_max)
    if first_stage:
        k = min(want.size, ladder.size - 1)         # never the whole ladder
        if below and k >= 2:
            top = int(ladder[k - 1])
            return Run(best, top, True,
                       f"{best.describe()} chosen on the first stage, below resolution for {', '.join(below)}: "
                       f"run its first rungs ({n:,} -> {top:,}) and re-plan on their merged ranks (the first "
                       "stage's predictions extrapolate the top of P(R))" + budget)
        return Run(best, best.n_max, False, f"run {best.describe()}{budget}")
    if ran_to is not None and want[-1] > ran_to and replans < REPLANS_MAX and want[-1] < best.n_max:
        top = int(want[-1])
        return Run(best, top, True,
                   f"{best.describe()} reaches {best.n_max / ran_to:.1f}x the largest set run ({ran_to:,}): run "
                   f"its rungs to {top:,} (design.first_rungs: an eighth of its top, at least 4n) and re-plan "
                   "again" + budget)
    return Run(best, best.n_max, False, f"run {best.describe()}{budget}")


def replan_candidates(n, ran_to, max_size, growth=2.0):
    """The designs a re-plan after ladder rungs n -> ``ran_to`` scores: the ladders of the same growth from
    n that continue them (every candidate of :func:`sampling_lib.design.candidate_designs` reaching at least
    ``ran_to``, and the ladder that stops at ``ran_to``: the rungs already run suffice).

    Examples
    --------
    >>> [d.n_max for d in replan_candidates(100, 400, 1000)]
    [400, 500, 600, 700, 800, 1000]
    """
    from .design import candidate_designs

    out = [d for d in candidate_designs(max_size, n, growths=(growth,))
           if d.kind == "ladder" and d.n_max >= ran_to]
    if not any(d.n_max == ran_to for d in out):
        out.insert(0, Design("ladder", n, n_max=int(ran_to), growth=growth))
    return sorted(out, key=lambda d: d.n_max)


def next_sizes(run, sizes, best_rank, first_best, n_items, *, rng=None):
    """The set sizes after the next stage of ``run``, from the current sizes and ranks (no user shrinks).

    Parameters
    ----------
    run : Run
    sizes : ndarray of int, shape (M,)
        Current set sizes n_u (held-out item included; N_u when ranked in full).
    best_rank : ndarray of int, shape (M,)
        Each user's best current sampled rank over the models (a user goes on when any model needs it).
    first_best : ndarray of int, shape (M,)
        The same at the first stage (a threshold design decides on it).
    n_items : ndarray of int, shape (M,)
        N_u: a new size is capped at it (the user is then ranked in full).
    rng : numpy.random.Generator, keyword-only
        Picks the users of a ``full_subset`` design.

    Returns
    -------
    ndarray of int64
        New sizes; equal to ``sizes`` for every user when the run has no further stage.

    Examples
    --------
    >>> run = Run(Design("ladder", 10, n_max=80), 80, False, "")
    >>> next_sizes(run, np.array([10, 10, 20]), np.array([1, 3, 1]), np.array([1, 3, 1]),
    ...            np.array([500, 500, 30])).tolist()
    [20, 10, 30]
    """
    d = run.design
    sizes = np.asarray(sizes, dtype=np.int64)
    items = np.asarray(n_items, dtype=np.int64)
    open_ = sizes < items                        # not yet ranked in full
    if d is None:
        return sizes.copy()
    if d.kind == "ladder":
        go = open_ & (best_rank == 1) & (sizes < run.run_to)
        new = np.where(go, next_ladder_size(np.maximum(sizes, d.n), run.run_to, d.growth), sizes)
    elif d.kind == "threshold":
        new = np.where(open_ & (first_best <= d.threshold), np.maximum(sizes, d.n + d.n2), sizes)
    elif d.kind == "single":
        new = np.where(open_, np.maximum(sizes, d.n), sizes)
    else:
        pick = np.zeros(sizes.size, bool)
        idx = np.flatnonzero(open_)
        if idx.size:
            k = max(1, int(round(d.fraction * sizes.size)))
            pick[np.random.default_rng(rng).choice(idx, min(k, idx.size), replace=False)] = True
        new = np.where(pick, items, sizes)
    return np.minimum(new, items).astype(np.int64)
