"""The planner of a stratified design: the tail ladder sized from a pilot, and the uniform ladder beside it.

Part of :mod:`sampling_lib.design`. A stratified evaluation (:mod:`sampling_lib.stratarun`) scores each
user's proxy head of m_u candidates, then samples the tail: ``tail_n`` items, doubled while no sampled tail
item ranks above the held-out one, up to ``tail_n_max``. Its estimate is
:func:`sampling_lib.estimators.strata_estimate`: one log-spline prior of the tail rank per group of head
counts x. After a pilot (the head and the first tail sample of some users), :func:`predict_strata` gives
the expected cost and interval half-width of that estimate under any ``tail_n_max``, by the same delta
method as :func:`sampling_lib.design.predict` (the influence function of the posterior-mean estimate with
every group's prior refitted), and :func:`plan_strata` chooses the cheapest head size and ``tail_n_max``
that meet a target, beside the uniform ladder that :func:`sampling_lib.design.plan` would choose for the
same pilot: when the uniform ladder is cheaper, the proxy does not pay. A head smaller than the pilot's is
priced on the pilot's cells seen as that head's (:func:`smaller_head_cells`: the head items beyond it
become a tail block scored exactly, which the estimator takes as ``known_tail``).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, Sec 6 (Algorithm 1: the ladder, here within the tail).
.. [vdV98] van der Vaart. Asymptotic Statistics (1998), ch. 20 (the delta method, influence functions).
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments. CIKM 2006
   (sampling with known inclusion probabilities: statAP / infAP).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .._validation import check_float, check_int
from ..estimators import (StrataFit, cell_metric, logspline_strata_fit, penalty_matrix,
                          prior_masses, sensitivity_penalties)
from ..kernels import strata_ladder_blocks, tail_ladder_sizes
from ..metrics import parse_metrics
from ._plan import _predict_designs, _target, candidate_designs, choose_design
from ._predict import assurance_margin, influence_cells, sensitivity_factors, union_interval

__all__ = ["predict_strata", "plan_strata", "StrataPlan", "tail_candidates", "pilot_size", "describe_strata",
           "head_candidates", "smaller_head_cells", "head_rungs", "head_ladder_cost"]

#: The pilot of a stratified plan: at least this many users (all of them when there are fewer).
PILOT_MIN_USERS = 300
#: ... and at least this share of the users.
PILOT_SHARE = 0.1
#: The smaller heads a plan prices beside the pilot's own (:func:`head_candidates`): the head divided by these.
HEAD_DIVISORS = (1, 2, 4)
#: A plan's tail ladder top is bisected between the doubling rungs to within this fraction of it (1/8).
TAIL_TOP_STEPS = 8


def pilot_size(M):
    """Users in the pilot of a planned stratified evaluation: max(300, 10% of M), at most M.

    Examples
    --------
    >>> pilot_size(943), pilot_size(29858), pilot_size(120)
    (300, 2986, 120)
    """
    M = check_int(M, "M", low=1)
    return int(min(M, max(PILOT_MIN_USERS, int(np.ceil(PILOT_SHARE * M)))))


def head_candidates(head):
    """The head sizes a plan prices from a pilot run with head ``head``: ``head`` divided by
    :data:`HEAD_DIVISORS` (rounded up), largest first. A pilot's head outcomes price any smaller head
    (:func:`smaller_head_cells`), never a larger one.

    Examples
    --------
    >>> head_candidates(50), head_candidates(3)
    ([50, 25, 13], [3, 2, 1])
    """
    head = check_int(head, "head", low=1)
    return sorted({-(-head // d) for d in HEAD_DIVISORS}, reverse=True)


def _head_counts(flags, heads, name):
    """Per-user prefix counts of head outcomes: a function ``at -> `` the items at or above the held-out item
    among each user's first ``at`` head items (``flags``: users in order, m_u = ``heads`` entries each; one
    cumulative sum, read at any prefix)."""
    flags = np.asarray(flags, dtype=bool)
    if flags.shape != (int(heads.sum()),):
        raise ValueError(f"{name} must hold one entry per head item ({int(heads.sum())}, users in order); got shape "
                         f"{flags.shape}")
    start = np.r_[0, np.cumsum(heads)][:-1]
    cs = np.r_[0, np.cumsum(flags, dtype=np.int64)]
    return lambda at: cs[start + at] - cs[start]


def head_rungs(head, k_max):
    """The head ladder's rungs: ``head`` halved (rounded up) while the half holds at least ``k_max`` items,
    smallest first. A user leaves the ladder at the first rung where every model ranks ``k_max`` or more of
    the proxy's first items at or above the held-out item: its top-``k_max`` metrics are then 0 whatever
    the rest of the head holds (:class:`sampling_lib.stratarun.StrataRun`, ``head_ladder``). The rungs
    double, as the tail ladder's samples do (TORS24 Algorithm 1), and halve from ``head`` so that a smaller
    head's rungs (:func:`head_candidates`) are the larger head's.

    Examples
    --------
    >>> head_rungs(100, 10), head_rungs(200, 10), head_rungs(8, 10)
    ([13, 25, 50, 100], [13, 25, 50, 100, 200], [8])
    """
    head = check_int(head, "head", low=1)
    k_max = check_int(k_max, "k_max", low=1)
    out = [head]
    while -(-out[-1] // 2) >= k_max and -(-out[-1] // 2) < out[-1]:
        out.append(-(-out[-1] // 2))
    return out[::-1]


def head_climb_top(head, n_candidates, k_min, room=None):
    """The largest head a pilot's head ladder may climb to (:func:`head_climb_pays`; its rungs are
    :func:`head_rungs` of this top, so ``head``'s halves and doublings): ``head`` doubled up to the first size
    at least 4 max C_u / k_min, and within ``room`` items per user (a budget); never below ``head``. A rung
    a -> 2a is climbed only after the rung a/2 -> a paid, which needs a/2 <= T_u / k_min for some user it
    scored (the rung cost a/2 per user, a settled user saves at most T_u / k_min), so no climbed rung ends
    above 4 max T_u / k_min.

    Examples
    --------
    >>> head_climb_top(100, [17631, 900], 10), head_climb_top(100, [1681], 10), head_climb_top(100, [1681], 10, 250)
    (12800, 800, 200)
    """
    head = check_int(head, "head", low=1)
    k_min = check_int(k_min, "k_min", low=1)
    C = int(np.max(np.asarray(n_candidates, dtype=np.int64), initial=0))
    top = head
    while top < 4 * C / k_min and (room is None or 2 * top <= room):
        top *= 2
    return top


def head_climb_pays(rung_pairs, settled_tails, k_min):
    """Whether a pilot's last head rung paid for itself, so that its head ladder climbs one rung more.

    The rung scored ``rung_pairs`` head items and settled the users whose tails (T_u items each, beyond the
    rung) are ``settled_tails``: each of them would otherwise have needed a tail ladder to resolution, at
    least T_u / k_min sampled items (:meth:`sampling_lib.stratarun.StrataRun._pilot_ladder`). The rung
    pays when sum T_u / k_min >= rung_pairs. This prices the pilot's own tail, an upper bound on what a
    planned tail costs the other users, so the climb leans to larger heads; the plan then chooses among
    the pilot's head and its halves on their exact costs (:func:`head_candidates`,
    :func:`plan_strata`). The rung that does not pay is kept (it is scored).

    Examples
    --------
    >>> head_climb_pays(1000, [5000, 6000], 10), head_climb_pays(1000, [5000], 10)
    (True, False)
    """
    k_min = check_int(k_min, "k_min", low=1)
    return float(np.sum(np.asarray(settled_tails, dtype=float))) / k_min >= float(rung_pairs)


def head_ladder_cost(head_above, heads, head, k_max):
    """Head items the head ladder scores per user (:func:`head_rungs`): the first rung, capped at the user's
    head, at which every model has ``k_max`` or more head items at or above the held-out item; the whole
    head (``min(head, m_u)``) for the others.

    Parameters
    ----------
    head_above : dict {model: array_like of bool}
        Per model, every head item's outcome, users in order and each head in the proxy's order (m_u entries
        per user; :attr:`sampling_lib.stratarun.StrataRun.head_above`). Outcomes of a head ladder (False
        beyond a user's last rung) give the same costs for any head whose rungs are among its own (the heads
        of :func:`head_candidates`): a user settled at rung rho is settled there under any head >= rho, and
        under a smaller head at none of its rungs.
    heads : array_like of int
        The m_u of those heads.
    head : int >= 1
        The head size whose ladder is priced (at most the heads scored: ``min(head, m_u)`` per user).
    k_max : int >= 1
        The largest cutoff K of the metrics.

    Returns
    -------
    ndarray of int64
        Per user, the head items scored.

    Examples
    --------
    >>> flags = {"a": [1] * 12 + [0] * 13 + [0, 1, 1]}         # users of 25 and 3 head items
    >>> head_ladder_cost(flags, [25, 3], 25, 10).tolist(), head_ladder_cost(flags, [25, 3], 25, 5).tolist()
    ([13, 3], [7, 3])
    """
    m = np.asarray(heads, dtype=np.int64)
    head = check_int(head, "head", low=1)
    if not isinstance(head_above, dict) or not head_above:
        raise ValueError("head_above must map each model to its head outcomes")
    h = np.minimum(head, m)
    counts = [_head_counts(flags, m, f"head_above[{mdl!r}]") for mdl, flags in head_above.items()]
    cost = h.copy()
    settled = np.zeros(m.size, bool)
    for rung in head_rungs(head, k_max):
        at = np.minimum(rung, h)
        now = np.logical_and.reduce([count(at) >= k_max for count in counts])
        new = now & ~settled
        cost[new] = at[new]
        settled |= now
    return cost


def smaller_head_cells(cells, head_above, head):
    """A pilot's stratified cells seen as those of a smaller head: the head's items beyond the first
    ``head`` become a tail block scored exactly.

    Parameters
    ----------
    cells : tuple (n_items, heads, above, tail_sizes, ranks) of array_like of int
        The pilot's cells, one entry per user (:meth:`sampling_lib.stratarun.StrataRun.cells`).
    head_above : array_like of bool
        Per head item, users in order and each user's head in the proxy's order (m_u entries per user):
        whether the model ranks it at or above the held-out item
        (:attr:`sampling_lib.stratarun.StrataRun.head_above`).
    head : int >= 1
        The smaller head m'.

    Returns
    -------
    tuple (n_items, heads, above, tail_sizes, ranks, known, known_above) of ndarray of int
        Per user: m'_u = min(m', m_u), x'_u its head items above, the tail sample and rank as they were,
        and the tail block of k_u = m_u - m'_u items scored exactly with y_u = x_u - x'_u above (the
        ``known_tail`` of :func:`sampling_lib.estimators.logspline_strata_fit`). The head m' is what a
        user run with it would have (the proxy's first m' items), so its tail rank is y_u + 1 + (the
        sampled rest's items above) and the pilot's sample, uniform on the rest, keeps its kernel.

    Examples
    --------
    >>> c = smaller_head_cells(([100, 100], [3, 2], [2, 0], [10, 10], [1, 2]), [1, 0, 1, 0, 0], 1)
    >>> [a.tolist() for a in c]
    [[100, 100], [1, 1], [1, 0], [10, 10], [1, 2], [2, 1], [1, 0]]
    """
    N, m, x, s, r = (np.asarray(a, dtype=np.int64) for a in cells)
    flags = np.asarray(head_above, dtype=bool)
    head = check_int(head, "head", low=1)
    count = _head_counts(flags, m, "head_above")
    if not np.array_equal(count(m), x):
        raise ValueError("head_above must sum to each user's head count (above)")
    h = np.minimum(head, m)
    xh = count(h)
    return N, h, xh, s, r, m - h, x - xh


def tail_candidates(tail_n, tails):
    """The tail ladder's rungs: ``tail_n`` doubled while under the smallest tail T, and T itself (the tail
    ranked in full for the users who reach it); :func:`plan_strata` scores them in turn up to the first
    that meets the target (or leaves the budget), then bisects the top between that rung and the one
    before.

    Examples
    --------
    >>> tail_candidates(100, 1000)
    [100, 200, 400, 800, 1000]
    """
    T = check_int(tails, "tails", low=1)
    return tail_ladder_sizes(T, check_int(tail_n, "tail_n", low=1), T)      # the ladder to the whole tail


def _shifted(F, x):
    """F(x + c) for c = 1..len(F) - x (a top-K metric is 0 beyond its rows)."""
    return F[x:] if x < F.shape[0] else np.zeros((1, F.shape[1]))


def predict_strata(fit, tail_n, tail_n_max, metrics=("recall@10", "ndcg@10"), *, M=None, confidence_level=0.95,
                   penalty=None):
    """Expected cost and interval half-width of the stratified estimate under a tail ladder.

    Parameters
    ----------
    fit : StrataFit
        The pilot's fit (:func:`sampling_lib.estimators.logspline_strata_fit`, ``coordinate="tail"``): its
        groups' priors of the tail rank and its users' head counts x are taken as the evaluation's.
    tail_n, tail_n_max : int
        The tail ladder: the first tail sample and the largest (:class:`sampling_lib.stratarun.StrataRun`).
    metrics : str or sequence of str
        Each K at most the fit's ``k_max``.
    M : int, optional, keyword-only
        Users of the evaluation (default the pilot's); each group holds its pilot share of them.
    confidence_level : float, keyword-only
    penalty : float, optional, keyword-only
        The estimator's penalty (default the fit's): with a fit at another penalty (``fit.refit(p)``) as the
        truth, the prediction for the estimator that keeps its own.

    Returns
    -------
    pandas.DataFrame
        One row per metric: ``design``, ``metric``, ``value`` (the metric under the priors), ``cost``
        (expected items scored per user: the held-out item, the head, the tail samples), ``halfwidth``,
        ``se`` (the standard error at the fitted penalty), ``full_halfwidth`` (full ranking's:
        z sqrt(Var F / M)), ``ratio`` (halfwidth / full_halfwidth), ``below_resolution``.

    Notes
    -----
    Every user's tail has T = (the fit's grid) - 1 items and the law of its final cell (s, r) given the
    tail rank c = R - x is :func:`sampling_lib.kernels.strata_ladder_law` (the same for every x: the tail
    coordinate). In group g (prior g_g, M_g users, head counts x with shares w_x) the estimate
    (1/M) sum_u E[F(x_u + c) | d_u] has the influence function
    IF(d; x) = phi_x(d) + A_g (I_g + Pen/M_g)^{-1} s(d), with phi_x(d) = E[F(x + c) | d], s the score of the
    spline coefficients, I_g = E[s s'] and A_g = sum_x w_{x|g} E[Cov(F(x + c), B(c) | d)]
    (:func:`sampling_lib.design._predict.influence_parts`). Users with x >= k_max have F = 0 and IF = 0.
    Var(T_hat) ~ (E[IF^2] - E[IF]^2) / M over all users. Below resolution (K < x + T / tail_n_max for some
    x < K present) the interval is the union of those at the penalty divided and multiplied by
    SENSITIVITY_FACTOR, each centred on its fit's shift -A_g (M_g I_g + Pen_k)^{-1} Pen_k beta_g summed over
    groups, as :func:`sampling_lib.estimators.strata_estimate` does; the union's half-width is predicted.
    The pilot's groups (formed at its own size) are kept; the evaluation's, on more users, are finer.

    References
    ----------
    [vdV98] ch. 20; TORS24 Sec 6.
    """
    return _predict_many([fit], tail_n, tail_n_max, metrics, M=M, confidence_level=confidence_level,
                         penalty=penalty)[0]


def _predict_many(fits, tail_n, tail_n_max, metrics, *, M, confidence_level, penalty):
    """:func:`predict_strata` for several fits on one grid (a fit and its refits at other penalties): the
    ladder's law, the costly part, is computed once for all of them."""
    for fit in fits:
        if not isinstance(fit, StrataFit) or fit.coordinate != "tail":
            raise TypeError("fit must be a StrataFit with coordinate='tail' (logspline_strata_fit); got "
                            f"{type(fit).__name__}" + (f" with coordinate={fit.coordinate!r}"
                                                       if isinstance(fit, StrataFit) else ""))
    first = fits[0]
    if any(f.grid is not first.grid for f in fits[1:]):
        raise ValueError("fits must share one grid (a fit and its refits)")
    parsed, F = first.metric_matrix(metrics)
    z = stats.norm.ppf(0.5 + 0.5 * check_float(confidence_level, "confidence_level", 0.0, 1.0,
                                                low_open=True, high_open=True))
    M = first.users if M is None else check_int(M, "M", low=1)
    T = int(first.grid.N) - 1
    tail_n = check_int(tail_n, "tail_n", low=1)
    tail_n_max = check_int(tail_n_max, "tail_n_max", low=tail_n)
    Ks = np.array([p[2] for p in parsed])
    xs_all = np.unique(first.above[first.group >= 0])
    w_tail = T / min(tail_n_max, T)
    below = np.array([bool(np.any((xs_all < K) & (xs_all + w_tail > K))) for K in Ks]) if T > tail_n_max \
        else np.zeros(Ks.size, bool)
    factors = sensitivity_factors(below)
    m = len(parsed)
    P = penalty_matrix(first.grid.B.shape[1], first.penalty if penalty is None else check_float(
        penalty, "penalty", low=0.0))
    per_fit = []
    for fit in fits:
        groups = []
        for gr in fit.groups:
            xs, inv = np.unique(fit.above[gr.cells], return_inverse=True)
            wx = np.bincount(inv, weights=fit.counts[gr.cells]) / fit.users         # shares of all users
            Fs = [_shifted(F, int(x)) for x in xs]
            groups.append(dict(gr=gr, xs=xs, wx=wx, wg=float(wx.sum()), g=prior_masses(gr.fit.beta, gr.grid),
                               Fc=np.concatenate([cell_metric(f, gr.grid) for f in Fs], axis=1),  # (G, m * nx)
                               F2c=np.concatenate([cell_metric(f * f, gr.grid) for f in Fs], axis=1),
                               cells=[], info=0.0, phiEB=0.0, cost=0.0))
        per_fit.append(groups)
    # the ladder's final cells in blocks (a ladder to s_max has ~2 s_max cells: never all of the law at once);
    # per group, the per-cell pieces are kept and the information and E[phi E[B | d]'] summed
    for sizes, _, D in strata_ladder_blocks(first.grid.mid, T + 1, 0, 0, tail_n, tail_n_max):
        for groups in per_fit:
            for k in groups:
                q, s, phi, EB = influence_cells(k["g"], k["gr"].grid.B, D, k["Fc"])
                k["cells"].append((q, s, phi))
                k["info"] = k["info"] + (s * q) @ s.T
                k["phiEB"] = k["phiEB"] + (phi * q) @ EB.T
                k["cost"] += k["wg"] * float((k["g"] @ D) @ sizes)
    return [_moments_table(fit, groups, parsed, factors, below, P, M, z, tail_n, tail_n_max)
            for fit, groups in zip(fits, per_fit)]


def _moments_table(fit, groups, parsed, factors, below, P, M, z, tail_n, tail_n_max):
    """One fit's table of :func:`predict_strata` from its groups' summed pieces."""
    m = len(parsed)
    m1 = {f: np.zeros(m) for f in factors}
    m2 = {f: np.zeros(m) for f in factors}
    shift = {f: np.zeros(m) for f in factors}
    value, second = np.zeros(m), np.zeros(m)
    for k in groups:
        g, B, xs, wx, wg = k["g"], k["gr"].grid.B, k["xs"], k["wx"], k["wg"]
        Mg = max(M * wg, 1.0)
        q, s, phi = (np.concatenate(a, axis=-1) for a in zip(*k["cells"]))
        A = (g[:, None] * k["Fc"]).T @ B - k["phiEB"]                                # (m * nx, df)
        Abar = np.einsum("j,jmd->md", wx / wg, A.reshape(xs.size, m, -1))
        phi = phi.reshape(xs.size, m, -1)
        value += wx @ (g @ k["Fc"]).reshape(xs.size, m)
        second += wx @ (g @ k["F2c"]).reshape(xs.size, m)
        for f in factors:
            Pk = f * P
            Ls = np.linalg.solve((k["info"] + Pk / Mg).T, Abar.T).T @ s             # (m, C)
            IF = phi + Ls[None]
            m1[f] += wx @ (IF @ q)
            m2[f] += wx @ ((IF * IF) @ q)
            shift[f] += wg * (-Abar @ np.linalg.solve(Mg * k["info"] + Pk, Pk @ k["gr"].fit.beta))
    per = {f: (shift[f], np.sqrt(np.maximum(m2[f] - m1[f] ** 2, 0.0) / M)) for f in factors}
    lo, hi = union_interval(per, below, z)
    hw = 0.5 * (hi - lo)
    fhw = z * np.sqrt(np.maximum(second - value ** 2, 0.0) / M)
    head = fit.head_mean
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = hw / fhw
    return pd.DataFrame({"design": describe_strata(head, tail_n, tail_n_max), "metric": [p[0] for p in parsed],
                         "value": value, "cost": 1.0 + head + sum(k["cost"] for k in groups), "halfwidth": hw,
                         "se": per[1.0][1], "full_halfwidth": fhw, "ratio": ratio, "below_resolution": below})


def describe_strata(head, tail_n, tail_n_max):
    """The design's name in the tables: "head 100 + tail 100..1,600"."""
    return f"head {int(round(head)):,} + tail {int(tail_n):,}..{int(tail_n_max):,}"


@dataclass(frozen=True)
class StrataPlan:
    """What :func:`plan_strata` chose, and why.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per (model, design, metric): ``kind`` ("stratified" or the uniform design's kind),
        ``design``, ``head`` and ``tail_n_max`` (stratified rows), ``metric``, ``cost`` (items per user),
        ``cost_share`` (cost / the users' mean N_u), ``ratio``, ``margin``, ``meets``, ``within_budget``,
        ``chosen``.
    kind : str
        "stratified" or "uniform": which family the chosen design belongs to.
    tail_n_max : int
        The cheapest tail ladder that meets the target (the most precise within the budget when none
        does): the design of the pilot's own users, whichever family is chosen.
    uniform : Design or None
        The uniform design chosen when ``kind`` is "uniform".
    meets : bool
        Whether the chosen design is predicted to meet the target.
    target : str
    head : int or None
        The head size of that stratified design (None: the pilot's own heads, when no head sizes were
        priced).
    uniform_on : str or None
        What the uniform designs were priced on: "first stage" (``first_ranks``), "cells", or None (not
        priced).
    """

    table: pd.DataFrame
    kind: str
    tail_n_max: int
    uniform: object
    meets: bool
    target: str
    head: object = None
    uniform_on: object = None

    def designs(self):
        """One row per design: kind, cost, cost_share, the worst ratio over models and metrics, meets, chosen."""
        return (self.table.groupby(["design", "kind"], sort=False)
                .agg(cost=("cost", "max"), cost_share=("cost_share", "max"), ratio=("ratio", "max"),
                     meets=("meets", "all"), within_budget=("within_budget", "first"), chosen=("chosen", "first"))
                .reset_index())

    def cheapest_uniform(self):
        """The row of :meth:`designs` of the cheapest uniform design predicted to meet the target, or None."""
        d = self.designs()
        d = d[(d.kind != "stratified") & d.meets]
        return d.sort_values("cost").iloc[0] if len(d) else None


def _pick(table):
    """(the design :func:`sampling_lib.design.choose_design` picks, one row per design)."""
    per = (table.assign(worst=table.ratio * table.margin).groupby("design", sort=False)
           .agg(cost=("cost", "max"), meets=("meets", "all"), within_budget=("within_budget", "first"),
                worst=("worst", "max")))
    return choose_design(per), per


def _pilot_arrays(pilots):
    """{model: [N, m, x, s, r, k, y]} as int64 arrays: a pilot's 5-tuples get an empty known tail (k = y = 0)."""
    out = {}
    for mdl, cells in pilots.items():
        if not isinstance(cells, (tuple, list)) or len(cells) not in (5, 7):
            raise ValueError(f"pilots[{mdl!r}] must be the cells (n_items, heads, above, tail_sizes, ranks), or with "
                             "a known tail (..., known, known_above)")
        a = [np.asarray(v, dtype=np.int64) for v in cells]
        out[mdl] = a if len(a) == 7 else a + [np.zeros_like(a[0]), np.zeros_like(a[0])]
    return out


def _uniform_rows(first_ranks, cells, N_u, *, n, M, metrics, target_ratio, assurance, confidence_level, max_size,
                  growth):
    """The uniform designs priced by :func:`sampling_lib.design.plan` on the pilot's uniform first stage
    (``first_ranks``), as the uniform route's planner prices its own (``StagedRun._plan``): rows of
    :func:`plan_strata`'s table, ``attrs["max_size"]`` the largest set."""
    from ._plan import plan

    n = check_int(n, "n", low=2)
    if not isinstance(first_ranks, dict) or set(first_ranks) != set(cells):
        raise ValueError(f"first_ranks must map the pilots' models {sorted(cells)} to their uniform first-stage "
                         "ranks")
    keep = N_u >= n
    if not keep.any():
        raise ValueError(f"first_ranks: no pilot user has n_items >= n = {n} (a uniform first stage below n is "
                         "full ranking)")
    ranks = {}
    for mdl, r in first_ranks.items():
        r = np.asarray(r)
        if r.shape != N_u.shape or not np.issubdtype(r.dtype, np.integer):
            raise ValueError(f"first_ranks[{mdl!r}] must hold one integer rank per pilot user ({N_u.size}); got "
                             f"shape {r.shape}, dtype {r.dtype}")
        if (r[keep] < 1).any() or (r[keep] > n).any():
            raise ValueError(f"first_ranks[{mdl!r}] must lie in 1..n = {n} (the uniform first stage's sampled "
                             "ranks)")
        ranks[mdl] = r[keep].astype(np.int64)
    size = int(N_u.max()) if max_size is None else check_int(max_size, "max_size", low=n)
    # the rows only (plan_strata judges the budget and the target on them itself)
    res = plan(ranks, N_u[keep], n, M=M, metrics=metrics, target_ratio=target_ratio,
               scheme="hypergeometric", max_size=size, assurance=assurance, confidence_level=confidence_level,
               designs=candidate_designs(size, n, growths=(growth,)), ranges=False)
    t = res.table
    if "model" not in t.columns:
        t = t.assign(model=next(iter(ranks)))
    out = t[["model", "design", "kind", "metric", "value", "cost", "halfwidth", "full_halfwidth", "ratio",
             "margin"]].assign(head=np.nan, tail_n_max=np.nan).reset_index(drop=True)
    out.attrs["max_size"] = size
    return out


def _fits_at(cells, k_max):
    """The pilot's fit on these cells (their known tail, if any) and its refits at the alternative penalties."""
    N, m, x, s, r, k, y = cells
    fit = logspline_strata_fit(N, m, x, s, r, k_max=k_max, known_tail=(k, y) if k.any() else None)
    return [fit] + [fit.refit(p) for p in sensitivity_penalties(fit.penalty)]


def _scan_tails(alts, h, tail_n, T_min, *, metrics, M, confidence_level, margin, bound, max_cost, Nbar, best,
                refine=True, head_shift=0.0):
    """The tail ladders of one head size, scored for :func:`plan_strata`: (rows, best), ``best`` the cost of
    the cheapest design meeting the target so far (over the head sizes).

    The doubling rungs in increasing order, up to the first ladder that meets the target for every model and
    metric, or whose cost leaves the budget or passes ``best`` (the law of a ladder grows with its top).
    Between that ladder and the one before, the top is then bisected on multiples of ``tail_n`` to within
    1/TAIL_TOP_STEPS of it: the cheapest top that meets the target, or within a budget the largest (the most
    precise); with ``refine`` False, the rungs only. On the Gowalla pilot of benchmarks/README.md a top of
    4,000 met the target at 1.47% of full ranking where the doubling rungs' 6,400 cost 2.17%."""
    rows = []

    def score(t_max):
        step = []
        for mdl, fs in alts.items():
            # judged under the fit and its two alternative penalties (the estimator's own kept): a group whose
            # users all sit at tail rank 1 puts a fit at its limit, under which every design looks exact
            ts = _predict_many(fs, min(tail_n, t_max), t_max, metrics, M=M, confidence_level=confidence_level,
                               penalty=fs[0].penalty)
            t = ts[0].assign(ratio=np.max([u.ratio for u in ts], axis=0),
                             cost=max(u.cost[0] for u in ts) + head_shift,
                             halfwidth=np.max([u.halfwidth for u in ts], axis=0))
            if h is not None:         # named by the setting (two settings' mean heads may round alike)
                t = t.assign(design=describe_strata(h, min(tail_n, t_max), t_max))
            step.append(t.assign(model=mdl, kind="stratified", head=np.nan if h is None else h, tail_n_max=t_max,
                                 margin=margin))
        rows.extend(step)
        step = pd.concat(step)
        cost = float(step.cost.max())
        return cost, bool((step.ratio * step.margin <= bound).all()), max_cost is None or cost / Nbar <= max_cost

    def bisect(lo, hi, upper):
        nonlocal best
        while refine and hi - lo > max(tail_n, hi // TAIL_TOP_STEPS):
            mid = int(round((lo + hi) / 2 / tail_n)) * tail_n
            if not lo < mid < hi:
                return
            cost, meets, within = score(mid)
            if meets and within:
                best = min(best, cost)
            lo, hi = (lo, mid) if upper(meets, within) else (mid, hi)

    prev = None                         # the last top scored: within the budget, not meeting the target
    for t_max in tail_candidates(tail_n, T_min):
        cost, meets, within = score(t_max)
        if meets and within:
            best = min(best, cost)
            if prev is not None:        # the cheapest top that meets it
                bisect(prev, t_max, lambda mt, w: mt and w)
            break
        if not within:
            if prev is not None:        # the largest top within the budget
                bisect(prev, t_max, lambda mt, w: not w)
            break
        if cost > best:
            break
        prev = t_max
    return rows, best


def plan_strata(pilots, *, n, tail_n, metrics=("recall@10", "ndcg@10"), M=None, n_items_mean=None,
                target_ratio=1.3, max_cost=None, assurance=0.9, confidence_level=0.95, uniform=True,
                max_size=None, heads=None, head_above=None, first_ranks=None, growth=2.0, head_costs=None):
    """Choose the head size and the tail ladder of a stratified evaluation from a pilot, and say whether the
    uniform ladder would cost less.

    Parameters
    ----------
    pilots : dict {model: (n_items, heads, above, tail_sizes, ranks[, known, known_above])}
        The pilot users' stratified cells after the head and the first tail sample (tail_sizes = tail_n,
        or 0 for users with x >= k_max for every model), or after more of the ladder, as arrays of one
        entry per pilot user; with ``known, known_above``, cells of a larger head seen as a smaller one's
        (:func:`smaller_head_cells`).
    n : int, keyword-only
        The uniform ladder's first stage (held-out item included) for the comparison.
    tail_n : int, keyword-only
        The first tail sample of the designs priced.
    metrics : keyword-only
    M : int, optional, keyword-only
        Users of the whole evaluation (default the pilot's).
    n_items_mean : float, optional, keyword-only
        The evaluation's mean N_u (the cost share's denominator; default the pilot's).
    target_ratio : float >= 1, default 1.3, keyword-only
    max_cost : float in (0, 1], optional, keyword-only
        A budget as a share of full ranking's scoring.
    assurance : float in [0.5, 1), keyword-only
        :func:`sampling_lib.design.assurance_margin` (measured on uniform designs; applied to both).
    uniform : bool, default True, keyword-only
        Also price the uniform designs of :func:`sampling_lib.design.candidate_designs`: with
        ``first_ranks``, by :func:`sampling_lib.design.plan` on them, as the uniform route's planner
        prices its first stage; without, on a prior of the global rank fitted to the stratified cells
        (one log-spline prior of R over all pilot users, ``coordinate="rank"``), which leans low (Notes).
    max_size : int, optional, keyword-only
        The largest uniform set (default: with ``first_ranks`` the pilot's largest N_u, as the uniform
        route's planner; else its smallest).
    heads : sequence of int, optional, keyword-only
        Head sizes to price (e.g. :func:`head_candidates`); each no larger than the pilot's is priced on
        the pilot's cells seen as that head's (:func:`smaller_head_cells`), which needs ``head_above``.
        Default: the pilot's own heads only.
    head_above : dict {model: array_like of bool}, optional, keyword-only
        Per model, each pilot head item's outcome (:attr:`sampling_lib.stratarun.StrataRun.head_above`).
    first_ranks : dict {model: array_like of int}, optional, keyword-only
        The pilot users' sampled ranks (1..n) in a uniform first stage of n items
        (:meth:`sampling_lib.stratarun.StrataRun.first_ranks`), one per pilot user; users with
        n_items < n are left out, as the uniform route's planner leaves out users ranked in full.
    growth : float > 1, default 2.0, keyword-only
        The uniform ladder's growth (with ``first_ranks``: :func:`candidate_designs`' ``growths``).
    head_costs : dict, optional, keyword-only
        The head items per user that each head size priced costs the users planned for, keyed by the sizes
        of ``heads`` (None: the pilot's own heads): a head ladder's (:func:`head_ladder_cost` on the pilot's
        outcomes, or the items a ladder run scored). Default: the whole head, the pilot's mean m_u.

    Returns
    -------
    StrataPlan

    Notes
    -----
    A design meets the target when its predicted ratio times the assurance margin is at most
    ``target_ratio`` for every model and metric. A stratified design's ratio is the worst over the pilot's
    fit and its refits with the penalty divided and multiplied by SENSITIVITY_FACTOR (each the truth in
    turn, the estimator keeping its own penalty): a group whose users all sit at tail rank 1 puts the fit
    at its limit, all mass at tail rank 1, under which every design looks exact. The uniform designs are
    judged by the fit alone, as the uniform route that would run them is (the uniform ladder's predictions
    are calibrated, :data:`sampling_lib.design.RATIO_PREDICTION_SD`; the stratified ones are not yet).

    *Which pilot prices the uniform ladder.* Its cost is set by the users whose rank R lies between 1 and
    about N / n (they climb its rungs). The stratified cells do not observe that range for the users the
    head settles (x >= k_max, no tail sample): their R is known only to exceed x, and a prior of R fitted
    to the cells fills it by smoothing. On the panel (ALS-64, pilots of item-KNN heads of 100) that priced
    the ladder at 0.72 (Last.fm, 10 draws) and 0.89 (MovieLens 100K) of what it then cost on the same
    draws, where :func:`sampling_lib.design.plan` on a uniform first stage of the same pilot users priced
    it at 1.03 (Last.fm); with a random head the cells priced it at 1.04 (benchmarks/README.md, "The
    uniform ladder priced on the pilot"). Hence ``first_ranks``, which
    :func:`sampling_lib.evaluate` supplies. Several models share the heads and the tails (a user goes on
    while any model needs it): a design is priced by its costliest model, a lower bound of the union's
    cost; the uniform designs are priced the same way. The tail ladders' tops are the doubling rungs
    (:func:`tail_candidates`) up to the first that meets the target, then, for the pilot's own head, tops
    between it and the rung before, bisected on multiples of ``tail_n`` to within an eighth
    (:data:`TAIL_TOP_STEPS`; a smaller head's at the rungs only). The chosen
    design is the cheapest within the budget that meets the target, else the most precise within the
    budget (:func:`sampling_lib.design.choose_design`).

    *A smaller head* m' is priced on the pilot's cells with their head items beyond the first m' as a tail
    block scored exactly (:func:`smaller_head_cells`; ``known_tail`` of
    :func:`sampling_lib.estimators.logspline_strata_fit`): its fit's groups are those of m' head counts and
    its prior lives on the tail of m', which is what :func:`predict_strata` needs. A larger head than the
    pilot's cannot be priced: the pilot never scored its items.
    """
    if not isinstance(pilots, dict) or not pilots:
        raise ValueError("pilots must map each model to its pilot cells (n_items, heads, above, tail_sizes, ranks)")
    parsed = parse_metrics(metrics)
    k_max = max(p[2] for p in parsed)
    target, _, bound = _target(target_ratio, None, False, assurance)
    if max_cost is not None:
        max_cost = check_float(max_cost, "max_cost", 0.0, 1.0, low_open=True)
    margin = assurance_margin(metrics, assurance)
    cells = _pilot_arrays(pilots)
    N_u, m_u = next(iter(cells.values()))[:2]
    own = m_u + next(iter(cells.values()))[5]                # the pilot's own heads (a known tail is theirs)
    sizes = [None]
    if heads is not None:
        if any(c[5].any() for c in cells.values()):
            raise ValueError("heads applies to a pilot's own cells (without a known tail)")
        sizes = sorted({check_int(h, "heads", low=1) for h in np.atleast_1d(heads)}, reverse=True)
        if any(np.any(np.minimum(h, own) < own) for h in sizes):
            if not isinstance(head_above, dict) or set(head_above) != set(cells):
                raise ValueError("head_above must give each model's head outcomes to price a head smaller than the "
                                 "pilot's (StrataRun.head_above)")
    P = N_u.size
    M = P if M is None else check_int(M, "M", low=1)
    Nbar = float(N_u.mean()) if n_items_mean is None else float(n_items_mean)
    rows = []
    seen = []
    best = np.inf                        # the cheapest stratified design that meets the target so far
    for h in sizes:
        mh = own if h is None else np.minimum(h, own)
        if any(np.array_equal(mh, v) for v in seen):              # the same heads as a larger size's
            continue
        seen.append(mh)
        at = {mdl: (c if h is None or np.array_equal(mh, own) else
                    list(smaller_head_cells(c[:5], head_above[mdl], h)))
              for mdl, c in cells.items()}
        alts = {mdl: _fits_at(c, k_max) for mdl, c in at.items()}
        T_all = N_u - 1 - mh
        T_min = int(T_all[T_all >= 1].min()) if (T_all >= 1).any() else 0
        if T_min < 1:
            continue
        # a smaller head's tails at the rungs only: its predictions lean either way (the pilot's cells read as
        # its own pull a smooth prior to the known block; on MovieLens 100K a head of 50 read from a pilot of
        # 100 was priced at 7.1% with a tail to 550, where the others' re-plan found none below 10.7%), and a
        # finer top would only sharpen a price that is not calibrated
        shift = 0.0
        if head_costs is not None:               # the head's cost as the users planned for pay it (a ladder)
            if h not in head_costs:
                raise ValueError(f"head_costs must give the cost of every head priced; {h!r} is missing")
            # (the predicted cost counts the cells' mean head: a known tail block is not the head's)
            mean_head = float(next(iter(at.values()))[1].mean())
            shift = check_float(head_costs[h], f"head_costs[{h!r}]", low=0.0) - mean_head
        found, best = _scan_tails(alts, h, tail_n, T_min, metrics=metrics, M=M, confidence_level=confidence_level,
                                  margin=margin, bound=bound, max_cost=max_cost, Nbar=Nbar, best=best,
                                  refine=bool(np.array_equal(mh, own)), head_shift=shift)
        rows += found
    if uniform and first_ranks is not None:
        rows.append(_uniform_rows(first_ranks, cells, N_u, n=n, M=M, metrics=metrics, target_ratio=target_ratio,
                                  assurance=assurance, confidence_level=confidence_level, max_size=max_size,
                                  growth=growth))
        size = int(rows[-1].attrs["max_size"])
    elif uniform:
        n = check_int(n, "n", low=2)
        size = int(N_u.min()) if max_size is None else check_int(max_size, "max_size", low=n)
        if n <= size:
            cands = candidate_designs(size, n)
            for mdl, (N_v, m_v, x, s, r, k, y) in cells.items():
                # the pilot's own cells (a known tail is part of their head)
                rank = logspline_strata_fit(N_v, m_v + k, x + y, s, r, k_max=int((x + y).max()) + 1,
                                            min_group_users=N_v.size + 1, coordinate="rank")
                # judged by the fit itself, as the uniform route's planner judges them (plan's default)
                t = _predict_designs(cands, {mdl: (rank.groups[0].fit, None, int(N_v.max()), n, M)}, n,
                                     metrics=metrics, M=M, confidence_level=confidence_level,
                                     scheme="hypergeometric", col="ratio", bound=bound, margin=margin,
                                     progress=False)
                rows.append(t[["model", "design", "kind", "metric", "value", "cost", "halfwidth", "full_halfwidth",
                               "ratio", "margin"]].assign(head=np.nan, tail_n_max=np.nan))
    if not rows:
        raise ValueError("no candidate design: the pilot's users have no tail and the uniform ladder does not fit")
    table = pd.concat(rows, ignore_index=True)
    table["cost_share"] = table.cost / Nbar
    table["meets"] = (table.ratio * table.margin <= bound) & table.ratio.notna()
    table["meets"] = table.groupby("design", sort=False).meets.transform("all")
    table["within_budget"] = True if max_cost is None else table.groupby("design", sort=False).cost_share.transform(
        "max") <= max_cost
    name, per = _pick(table)
    strat = table[table.kind == "stratified"]
    s_name, s_per = _pick(strat) if len(strat) else (None, None)
    if s_name is None and len(strat):             # no tail ladder meets the target: the most precise
        s_name = s_per.worst.idxmin()
    if name is None:                              # nor any design: the most precise tail ladder
        name = s_name if s_name is not None else per.worst.idxmin()
    table["chosen"] = table.design == name
    kind = "stratified" if (table.kind[table.chosen] == "stratified").all() else "uniform"
    mine = strat[strat.design == s_name].iloc[0] if s_name is not None else None
    t_max = int(mine.tail_n_max) if mine is not None else None
    head = int(mine["head"]) if mine is not None and np.isfinite(mine["head"]) else None
    uni = None
    if kind == "uniform":
        uni = next(d for d in candidate_designs(size, n, growths=(growth,)) if d.describe() == name)
    return StrataPlan(table=table[["model", "kind", "design", "head", "tail_n_max", "metric", "value", "cost",
                                   "cost_share", "halfwidth", "full_halfwidth", "ratio", "margin", "meets",
                                   "within_budget", "chosen"]],
                      kind=kind, tail_n_max=t_max, uniform=uni, meets=bool(per.loc[name, "meets"]), target=target,
                      head=head, uniform_on=None if not uniform else "first stage" if first_ranks is not None else
                      "cells")
