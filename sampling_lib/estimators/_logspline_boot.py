"""The batched bootstrap of the log-spline prior (:mod:`sampling_lib.estimators._logspline`).

Every bootstrap replicate of the default estimator refits the prior: all
replicates at once by quasi-Newton steps (BFGS) from the full-sample
coefficients, then batched Fisher scoring and single Newton fits for the few
that need them, then the posterior-mean estimate of every metric on the
compressed rank grid.

References
----------
.. [NW06] Nocedal, Wright. Numerical Optimization, 2nd ed. (2006), Sec 6.1 (BFGS).
.. [Efron16] Efron, B. Empirical Bayes deconvolution estimates. Biometrika 103(1), 2016.
"""
from __future__ import annotations

import warnings
import weakref

import numpy as np
from scipy import sparse

from ..counts import BOOT_CHUNK_ENTRIES, coarse_means, coarse_share
from ..exceptions import ConvergenceWarning
from ._logspline import (DEFAULT_KNOT_SPACING, DEFAULT_PENALTY, EXACT_RANKS, fit_counts_weight, grid_and_kernel,
                         posterior_cells, uses_cells)
from ._logspline_newton import (Q_MIN, _backtrack, gradient, hessian, hessian_cells, limit_beta, limit_ends, newton,
                                objective, penalty_matrix, prior_masses, quasi_newton, solve_psd)
from ._logspline_cells import cells_setup_surrogate

__all__ = ["logspline_bootstrap", "logspline_replicates", "logspline_cells_replicates", "coarse_draw_cells",
           "within_cell_share", "cell_influence"]


def logspline_bootstrap(counts_b, N, n, fit_beta, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                        knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS, F=None, max_iter=50,
                        tol=1e-6):
    """Refit the prior on bootstrap count vectors, batched; metric estimates (B, m).

    Each replicate runs quasi-Newton steps from the full-sample coefficients
    (:func:`quasi_newton`: BFGS started from the full-sample Hessian, one
    inverse-Hessian approximation per replicate, per-replicate backtracking)
    until its Newton decrement (about twice the distance to the optimum of the
    penalized log-likelihood) is below ``tol``, for at most ``max_iter``
    steps. Replicates that stall or reach ``max_iter`` restart from the
    full-sample coefficients with batched Fisher scoring, each with its own
    expected information, and any left after that run their own Newton fit
    (:func:`logspline_fit`'s solver, warm-started); a replicate that still does
    not converge is kept and counted in a ConvergenceWarning. Then
    it forms the posterior-mean estimate of every column of ``F`` (restricted
    to the grid cells: ranks 1..head are exact). The replicates agree with
    independent full refits within rtol 1e-3 (tests, penalties 7 to 700);
    about 3e-5 was measured at N = M = 10^4.

    References
    ----------
    Nocedal and Wright (2006), Numerical Optimization, 2nd ed., Sec 6.1 (BFGS).
    """
    grid, K = grid_and_kernel(int(N), int(n), float(knot_spacing), int(exact_ranks), scheme)
    P = penalty_matrix(grid.B.shape[1], penalty)
    return bootstrap_core(counts_b, K, grid, P, fit_beta, F, max_iter, tol)


def bootstrap_core(counts_b, K, grid, P, fit_beta, F, max_iter, tol, info=None, start=None, H=None):
    """The batched refit of :func:`logspline_bootstrap` on counts (B, C) and kernel K (G, C).

    ``start`` (B, df), default ``fit_beta`` for every replicate, is where each replicate's
    iteration starts; the convergence test (Newton decrement on these counts and this K below
    ``tol``) is the same whatever the start. With ``F`` None only the coefficients are
    returned (``None`` in place of the estimates). ``H``: the curvature every replicate's
    quasi-Newton iteration starts from (default: ``info`` at ``fit_beta`` on the mean counts).
    """
    # the fit's weights; a row scaled as a whole leaves its posterior means (below) unchanged
    c = fit_counts_weight(counts_b)
    beta = (np.broadcast_to(fit_beta, (c.shape[0], fit_beta.size)) if start is None else start).copy()
    if H is None:
        H = (hessian if info is None else info)(fit_beta, c.mean(axis=0), K, grid, P)
    # a replicate at a limit takes it (a resample that left out the few users off the grid's end: Newton hit
    # its iteration limit on 93 of 256 replicates of a stratified fit on Last.fm, their estimates equal to
    # the limit's to 6 digits)
    ends = limit_ends(c, K)
    for end in np.unique(ends[ends >= 0]):
        beta[ends == end] = limit_beta(grid, end)
    f, g, q = objective(beta, c, K, grid, P)
    # replicates the quasi-Newton iteration did not converge: their own curvature
    rest = quasi_newton(np.flatnonzero(ends < 0), H, beta, f, g, q, c, K, grid, P, tol, max_iter)
    if rest.size:
        # ... restarted from the full-sample fit: where BFGS stopped (stalled, or still moving along
        # directions only the penalty constrains) Fisher scoring converged slowly or not at all
        # (M = 5 x 10^7, penalty 7: 136 iterations on average and 70% converged from there, against
        # 39 and 100% from the full-sample fit)
        beta[rest] = fit_beta
        f[rest], g[rest], q[rest] = objective(beta[rest], c[rest], K, grid, P)
    if rest.size and info is None:
        # one (N, n): batched Fisher scoring, each replicate with its own expected information
        rest = _fisher_batched(rest, beta, f, g, q, c, K, grid, P, tol)
    failed = []
    for i in rest:
        beta[i], f[i], g[i], q[i], _, conv = newton(c[i], K, grid, P, beta[i], info=info)
        if not conv:
            failed.append(int(i))
    if failed:
        warnings.warn(f"log-spline bootstrap: {len(failed)} of {c.shape[0]} replicates did not converge "
                      "(Newton iteration limit); their estimates are kept", ConvergenceWarning, stacklevel=3)
    if F is None:
        return None, beta
    Fc = cell_metric(F, grid)
    nc = _head_cells(Fc)
    return posterior_cells(c, K[:nc], g[:, :nc], q) @ Fc[:nc], beta


def _head_cells(Fc):
    """The number of leading grid cells a metric matrix Fc (G, m) sees (0 beyond them)."""
    return int(np.flatnonzero(np.any(Fc != 0, axis=1)).max(initial=-1)) + 1


def _fisher_batched(idx, beta, f, g, q, c, K, grid, P, tol, max_iter=50):
    """Fisher scoring on the replicates ``idx`` at once (in place), each with its own
    expected information M J' diag(1/q) J + P (:func:`fisher`), backtracking per replicate;
    stops a replicate when its Newton decrement is below ``tol``. Returns the replicates
    that did not converge (iteration limit or no decrease along the step)."""
    act = np.asarray(idx)
    failed = []
    for _ in range(max_iter):
        if act.size == 0:
            break
        ca, ga, qa = c[act], g[act], q[act]
        grad = gradient(beta[act], ca, K, grid, P, ga, qa)
        Bbar = ga @ grid.B                                        # (b, df)
        Jq = np.matmul(K.T, ga[:, :, None] * grid.B) - qa[:, :, None] * Bbar[:, None, :]
        # cells rarer than Q_MIN add about q to the information (J is O(q) there): left out, as 1 / q overflows
        inv_q = np.divide(1.0, qa, out=np.zeros_like(qa), where=qa >= Q_MIN)
        H = np.matmul(np.swapaxes(Jq, 1, 2), (ca.sum(axis=1, keepdims=True) * inv_q)[:, :, None] * Jq) + P
        step = solve_psd(H, grad)
        dec = np.einsum("ij,ij->i", grad, step)
        keep = dec > tol
        act, step, dec = act[keep], step[keep], dec[keep]
        if act.size == 0:
            break
        good = _backtrack(act, step, beta, f, g, q, c, K, grid, P, halvings=40, armijo=1e-4 * dec)
        failed.append(act[~good])      # no decrease along the step: left to the caller; the others go on
        act = act[good]
    return np.sort(np.concatenate([act] + failed))


def cell_metric(F, grid):
    """Average of F over each grid cell, (G, m) -- exact on the head cells.

    ``F`` may hold only ranks 1..H (H <= N rows) of a metric that is 0 beyond
    H (a top-K metric, K <= H): cells starting after H get 0 and the cell
    straddling H sums its ranks up to H, so no length-N array is formed (the
    result equals that of F padded with zeros to N).
    """
    F = np.asarray(F, dtype=float)
    width = grid.hi - grid.lo + 1
    H = F.shape[0]
    if H > grid.N:
        raise ValueError(f"F must have at most N={grid.N} rows; got {H}")
    nc = int(np.searchsorted(grid.lo, H, side="right"))   # cells with lo <= H
    out = np.zeros((grid.lo.size,) + F.shape[1:])
    out[:nc] = np.add.reduceat(F, grid.lo[:nc] - 1, axis=0) / width[:nc].reshape((-1,) + (1,) * (F.ndim - 1))
    return out


def logspline_replicates(counts_b, N, n, beta, F, *, scheme="binomial", penalty=DEFAULT_PENALTY,
                         knot_spacing=DEFAULT_KNOT_SPACING, exact_ranks=EXACT_RANKS):
    """Bootstrap replicates (B, m) of the metrics ``F`` (the registry's batched bootstrap)."""
    est, _ = logspline_bootstrap(counts_b, N, n, beta, scheme=scheme, penalty=penalty,
                                 knot_spacing=knot_spacing, exact_ranks=exact_ranks, F=F)
    return est


#: The corrected one-step replicates of a fit on many cells (:func:`logspline_cells_replicates`)
#: are used when the exact refits of the
#: :data:`ONE_STEP_CHECKS` replicates farthest from the fit (Newton distance) in its first bootstrap
#: chunk differ from them by at most this many bootstrap standard deviations: the Monte Carlo
#: standard error of a 95% percentile endpoint from 1,000 replicates, sqrt(0.025 x 0.975 / 1000) /
#: phi(1.96) = 0.084 (the bootstrap's own error at its default size); else every replicate of the
#: fit is refitted exactly.
ONE_STEP_TOL = float(np.sqrt(0.025 * 0.975 / 1000) / (np.exp(-0.5 * 1.959964 ** 2) / np.sqrt(2 * np.pi)))
#: Replicates of the first chunk refitted exactly to check the one-step replicates.
ONE_STEP_CHECKS = 4
_ONE_STEP_CACHE = {}


def logspline_cells_replicates(counts_b, n_items, sizes, ranks, beta, F, *, scheme="binomial",
                               penalty=DEFAULT_PENALTY, knot_spacing=DEFAULT_KNOT_SPACING,
                               exact_ranks=EXACT_RANKS, max_iter=50, tol=1e-6, setup=None, counts=None,
                               coarse=False):
    """Bootstrap replicates (B, m) on cells: :func:`logspline_bootstrap` for count vectors (B, C).

    ``setup`` is the (grid, likelihood columns, surrogate, surrogate coefficients) of the
    full-sample fit, reused (else rebuilt and refitted).

    Many cells (a :class:`~sampling_lib.estimators._logspline_cells.CellsSurrogate` exists, e.g.
    10^5 users with thousands of distinct N_u) and the full-sample ``counts`` given: an exact
    refit costs O(grid x cells) per likelihood evaluation, so the replicates are built instead as

        T_b = T1_b + (Ts_b - Ts1_b),

    with T1_b the one-step estimate on the exact cells (:func:`one_step_replicates`: one Newton
    step from the full-sample fit, the estimate to first order; O(cells x df) per replicate), and
    Ts_b - Ts1_b the same one-step error measured on the surrogate (its exact refit minus its own
    one-step estimate, on the same replicate's counts; the surrogate has a few bins x n cells).
    The two likelihoods differ only in the binning of N_u, so their nonlinear remainders nearly
    cancel: on 10^5 users with 2,295 distinct N_u the replicates were within 0.018 bootstrap
    standard deviations of exact refits, the one-step values alone within 0.27
    (``benchmarks/bench_peruser.py``, penalties 7 to 700). They are
    checked once per fit: in the first chunk (at least :data:`ONE_STEP_CHECKS` + 1 replicates)
    the :data:`ONE_STEP_CHECKS` replicates farthest from the fit (Newton distance) are refitted
    exactly and replace their values; if any differs by more than :data:`ONE_STEP_TOL` of the
    chunk's bootstrap standard deviation, every replicate of that fit is refitted exactly, in this
    chunk and every later one.

    ``coarse=True``: ``counts_b`` are counts (B, C_c) of the surrogate's coarse cells, spread over the
    exact cells in proportion to ``counts`` (:func:`coarse_draw_cells`); the exact one-step
    products are then taken on the surrogate's cells (the same values: they are linear in the
    counts), and only the replicates refitted exactly are spread out.

    Exact refits (few cells, no ``counts``, or a failed check) run the batched quasi-Newton
    iteration of :func:`bootstrap_core` to its Newton-decrement test ``tol``. With a surrogate each
    replicate is refitted on the surrogate first (from its full-sample optimum ``beta_s``), and the
    exact iteration starts at that refit plus ``beta - beta_s`` (closer than the one-step
    coefficients where the likelihood is far from quadratic, e.g. with a weak penalty).
    """
    cb = np.asarray(counts_b, dtype=float)
    if setup is None:
        _, grid, K, P, _, _, sur = cells_setup_surrogate(n_items, sizes, ranks, cb.mean(axis=0), scheme, penalty,
                                                          knot_spacing, exact_ranks)
        beta_s = None if sur is None else newton(fit_counts_weight(sur.counts(cb.mean(axis=0))), sur.K,
                                                 sur.grid, P, beta, info=hessian_cells)[0]
    else:
        grid, K, sur, beta_s = setup
        P = penalty_matrix(grid.B.shape[1], penalty)
    if coarse and (sur is None or counts is None):
        raise ValueError("coarse counts need the fit's surrogate and the full-sample counts")
    if coarse and cb.shape[-1] != sur.n_coarse:
        raise ValueError(f"coarse counts_b must have one column per coarse cell ({sur.n_coarse}); "
                         f"got {cb.shape[-1]}")
    spread = _spread_counts(sur, counts) if coarse else (lambda x: x)
    start = H = None
    if sur is not None and counts is not None:
        b1, est, pre = one_step_replicates(cb, counts, K, grid, P, beta, F, coarse=sur.index if coarse else None)
        H = pre["H"]
        # the one-step error, estimated on the surrogate: its refits minus its own one-step values
        # (the refits start at the surrogate's one-step coefficients: its first quasi-Newton step)
        cs = sur.fold_counts(cb) if coarse else sur.counts(cb)
        b1s, est1s, pre_s = one_step_replicates(cs, sur.counts(counts), sur.K, sur.grid, P, beta_s, F)
        est_s, bs = bootstrap_core(cs, sur.K, sur.grid, P, beta_s, F, max_iter, tol, info=hessian_cells,
                                   H=pre_s["H"], start=b1s)
        est += est_s - est1s
        b1 = b1 + (bs - b1s)
        if pre["verdict"] is None and cb.shape[0] > ONE_STEP_CHECKS:
            d = b1 - beta
            pick = np.argsort(np.einsum("bi,ij,bj->b", d, H, d))[-ONE_STEP_CHECKS:]
            exact, _ = bootstrap_core(spread(cb[pick]), K, grid, P, beta, F, max_iter, tol, info=hessian_cells,
                                      start=b1[pick], H=H)
            err = np.max(np.abs(exact - est[pick]) / np.maximum(est.std(axis=0, ddof=1), 1e-300), axis=0)
            pre["verdict"], pre["error"] = bool(np.all(err <= ONE_STEP_TOL)), err
            est[pick] = exact
        if pre["verdict"]:
            return est
        start = b1
    if start is None and sur is not None:
        _, refit = bootstrap_core(sur.counts(cb), sur.K, sur.grid, P, beta_s, None, max_iter, tol,
                                  info=hessian_cells)
        start = refit + (beta - beta_s)
    # exact refits, in blocks of replicates whose (replicates x exact cells) arrays stay within
    # BOOT_CHUNK_ENTRIES (the chunk was sized by the cells drawn, which may be the coarse ones)
    step = max(1, BOOT_CHUNK_ENTRIES // K.shape[1])
    if H is None:      # bootstrap_core's default, once for every block (the spread is linear in the counts)
        H = hessian_cells(beta, fit_counts_weight(spread(cb.mean(axis=0, keepdims=True)))[0], K, grid, P)
    return np.concatenate([
        bootstrap_core(spread(cb[a:a + step]), K, grid, P, beta, F, max_iter, tol, info=hessian_cells,
                       start=None if start is None else start[a:a + step], H=H)[0]
        for a in range(0, cb.shape[0], step)])


def _spread_fractions(index, counts, n_coarse):
    """Each exact cell's share of its coarse cell's count (0 in a coarse cell of no users)."""
    c = np.asarray(counts, dtype=float)
    tot = np.bincount(index, weights=c, minlength=n_coarse)[index]
    return np.divide(c, tot, out=np.zeros(c.size), where=tot > 0)


def _spread_counts(sur, counts):
    """``spread(cs)``: coarse-cell counts (B, C_c) spread over the exact cells (B, C) in proportion
    to the full-sample ``counts`` (the conditional expectation of an exact multinomial draw)."""
    frac = _spread_fractions(sur.index, counts, sur.n_coarse)
    return lambda cs: np.asarray(cs, dtype=float)[:, sur.index] * frac


def one_step_replicates(counts_b, counts, K, grid, P, beta, F, coarse=None):
    """One-step bootstrap replicates: (coefficients (B, df), estimates (B, m), the fit's record).

    The record (a dict) holds the fit's quantities below (``"H"``: the Hessian) and the
    check's ``"verdict"`` (None until :func:`logspline_cells_replicates` checked them).

    With per-cell scores s_c = d log q_c / d beta at the full-sample fit beta (its gradient
    vanishes: S' w = P beta) and the observed Hessian H of the penalized objective, replicate
    counts w_b give the Newton step from beta

        beta_b = beta + H^-1 S' (w_b - w),

    and the posterior-mean estimate T_b = (1/M_b) sum_c c_bc phi_c(beta_b) is taken to first order,
    phi_c(beta) + grad phi_c . (beta_b - beta), with phi_c = sum_R g_R K_Rc F_R / q_c the cell's
    posterior mean. Both are linear in the counts: O(cells x df) per replicate. The error is of
    second order in beta_b - beta, i.e. O(1/sqrt(M)) of a standard error; the caller checks it
    (:func:`logspline_cells_replicates`). The per-fit quantities (S, H, phi, grad phi) are
    computed once per (fit, metrics) and reused by every chunk.

    ``coarse``: the coarse cell of every exact cell; ``counts_b`` are then counts (B, C_s) of the
    coarse cells, spread over their exact cells in proportion to ``counts``. Everything above is
    linear in the counts, so the products are taken with the per-fit quantities summed over each
    coarse cell with those proportions (O(C_s x df) per replicate; the same values as on the
    spread counts).

    References
    ----------
    Efron and Tibshirani (1993), An Introduction to the Bootstrap, Sec 21.3 (the one-step
    bootstrap); van der Vaart (1998), Asymptotic Statistics, Sec 5.7 (one-step estimators).
    """
    pre = one_step_record(counts, K, grid, P, beta, F)
    cb = np.asarray(counts_b, dtype=float)
    df, m = pre["S"].shape[1], pre["phi"].shape[1]
    Zm = pre["Z"]
    if coarse is not None:
        idx = np.asarray(coarse, dtype=np.int64)
        if pre.get("coarse") is None or not np.array_equal(pre["coarse"][0], idx):
            frac = _spread_fractions(idx, counts, cb.shape[1])
            spread = sparse.csr_matrix((frac, (idx, np.arange(idx.size))), shape=(cb.shape[1], idx.size))
            pre["coarse"] = (idx, np.asarray(spread @ pre["Z"]))
        Zm = pre["coarse"][1]
    Z = cb @ Zm                                 # one pass over the counts: [S | phi | grad phi_j ...]
    w = fit_counts_weight(cb)                   # the counts themselves up to FIT_USERS_MAX users
    wS = Z[:, :df] if w is cb else w @ Zm[:, :df]
    dbeta = solve_psd(pre["H"], wS - pre["wS_hat"])
    lin = np.einsum("bjd,bd->bj", Z[:, df + m:].reshape(cb.shape[0], m, df), dbeta)
    est = (Z[:, df:df + m] + lin) / cb.sum(axis=1, keepdims=True)
    return beta + dbeta, est, pre


def one_step_record(counts, K, grid, P, beta, F):
    """The per-fit quantities of :func:`one_step_replicates` (a dict), computed once per (fit, metrics).

    ``"S"`` the cells' scores (C, df), ``"H"`` the fit's Hessian, ``"wS_hat"`` S' w at the fit,
    ``"phi"`` the cells' posterior means (C, m), ``"Z"`` [S | phi | grad phi_j ...] (C, df + m + m
    df), the check's ``"verdict"`` / ``"error"`` (set by :func:`logspline_cells_replicates`) and, once
    asked for, ``"psi"`` (:func:`cell_influence`).
    """
    F = np.asarray(F, dtype=float)
    key = (id(K), K.shape, beta.tobytes(), np.asarray(counts, dtype=float).tobytes(), F.tobytes())
    pre = _ONE_STEP_CACHE.get(key)
    if pre is not None and pre["K"]() is not K:       # another array at a freed K's address
        pre = None
    if pre is None:
        g = prior_masses(beta, grid)
        q = g @ K
        gB = g[:, None] * grid.B
        KgB = K.T @ gB                                               # (C, df)
        S = KgB / q[:, None] - (grid.B.T @ g)[None, :]                # scores d log q_c / d beta
        w_hat = fit_counts_weight(counts)
        H = hessian_cells(beta, w_hat, K, grid, P, KgB=KgB)
        Fc = cell_metric(F, grid)
        nc = _head_cells(Fc)
        Kh = K[:nc]
        phi = (Kh.T @ (g[:nc, None] * Fc[:nc])) / q[:, None]          # (C, m)
        dphi = np.stack([(Kh.T @ (gB[:nc] * Fc[:nc, j][:, None]) - phi[:, j, None] * KgB) / q[:, None]
                         for j in range(Fc.shape[1])])               # (m, C, df)
        Z = np.concatenate([S, phi, np.concatenate(list(dphi), axis=1)], axis=1)
        pre = {"S": S, "H": H, "wS_hat": w_hat @ S, "phi": phi, "Z": Z, "verdict": None, "error": None,
               "K": weakref.ref(K)}
        if len(_ONE_STEP_CACHE) >= 6:          # a fit and its two alternatives, exact and surrogate
            _ONE_STEP_CACHE.pop(next(iter(_ONE_STEP_CACHE)))
        _ONE_STEP_CACHE[key] = pre
    return pre


#: Largest share of any metric's (linearized) bootstrap variance that may lie *within* the
#: surrogate's cells for the bootstrap to draw on those cells (:func:`coarse_draw_cells`). At
#: 0.01 the replicates' standard deviation is at least sqrt(0.99) = 0.995 of the exact draws'
#: (first order), so a 95% percentile endpoint moves by at most 1.96 x 0.005 = 0.01 bootstrap
#: standard deviations: an eighth of the endpoint's own Monte Carlo error at 1,000 replicates
#: (:data:`ONE_STEP_TOL`, 0.084). 0 switches coarse draws off.
COARSE_DRAW_MAX_SHARE = 0.01


def cell_influence(pre, counts):
    """First-order influence values psi (C, m) of the cells on the metric estimates of a fit.

    To first order (the one-step expansion of :func:`one_step_replicates`, record ``pre``), a
    multinomial replicate w_b of the counts w (M users) gives the estimate

        T_b - T = (1/M) sum_c (w_bc - w_c) psi_c,   psi_c = phi_c + M a S_c H^-1 G',

    with phi_c the cell's posterior means, S_c its scores, H the Hessian of the fit, G = (1/M)
    sum_c w_c grad phi_c (m, df) and a the fit's weight per user (:func:`fit_counts_weight`).
    psi is kept in the record for these counts (the coarse draws' share and the paired bootstrap's
    check both ask for it).
    """
    c = np.asarray(counts, dtype=float)
    if pre.get("psi") is None or not np.array_equal(pre["psi"][0], c):
        M = c.sum()
        S, phi = pre["S"], pre["phi"]
        C, df = S.shape
        m = phi.shape[1]
        a = fit_counts_weight(c).sum() / M
        G = np.einsum("c,cjd->jd", c, pre["Z"][:, df + m:].reshape(C, m, df)) / M
        pre["psi"] = c.copy(), phi + (M * a) * (S @ solve_psd(pre["H"], G).T)
    return pre["psi"][1]


def within_cell_share(pre, counts, index, n_coarse):
    """Share (m,) of each metric's bootstrap variance that lies within the coarse cells ``index``.

    The replicate's first-order variance is Var_p(psi) / M (:func:`cell_influence`; p = w / M).
    Drawing the coarse cells' counts and spreading each over its exact cells in proportion to w
    (the conditional expectation given the coarse counts) leaves the variance Var_p(psi_bar) / M,
    psi_bar the p-weighted mean of psi over each coarse cell; the share returned is 1 -
    Var_p(psi_bar) / Var_p(psi) (law of total variance; :func:`sampling_lib.counts.coarse_share`).
    """
    c = np.asarray(counts, dtype=float)
    psi = cell_influence(pre, c)
    bar = coarse_means(psi, c, index, n_coarse)[index]
    return coarse_share(psi, bar, c / c.sum()).clip(0.0, 1.0)


def _surrogate_record(fitted):
    """(the :func:`one_step_record` of a fit on many cells, its surrogate), or None for a fit without
    a :class:`~sampling_lib.estimators._logspline_cells.CellsSurrogate`."""
    if not isinstance(fitted.state, tuple):
        return None
    beta, grid, K, sur, _ = fitted.state
    if sur is None:
        return None
    P = penalty_matrix(grid.B.shape[1], fitted.estimator.options.get("penalty", DEFAULT_PENALTY))
    return one_step_record(fitted.counts.counts, K, grid, P, beta, fitted.F), sur


def fit_influence(fitted):
    """The registry's ``cell_influence`` of the log-spline prior: :func:`cell_influence` of a fit on
    many cells (one with a surrogate, the fits :func:`coarse_draw_cells` may draw coarsely), else None."""
    rec = _surrogate_record(fitted)
    return None if rec is None else cell_influence(rec[0], fitted.counts.counts)


def coarse_draw_cells(fitted):
    """The registry's ``draw_cells`` of the log-spline prior: (index, number of coarse cells, shares) or None.

    A fit on many cells (per-user N_u: 10^5 users with thousands of distinct N_u give tens of
    thousands of cells (N_u, n_u, r)) has a :class:`~sampling_lib.estimators._logspline_cells.CellsSurrogate`
    whose cells merge the N_u of a log-bin (width 0.1). A multinomial bootstrap draw over the exact
    cells costs O(cells) per replicate (1.4 s of 1,000 replicates over 21,000 cells); over the
    coarse cells it is 20x cheaper. The bootstrap then draws the coarse cells' counts and spreads
    each over its exact cells in proportion to the observed counts: the conditional expectation of
    the exact draw given the coarse one (:func:`sampling_lib.correct.estimate`). The replicates keep
    every first-order effect that differs between coarse cells and lose only the part of the
    variance that lies within them, which :func:`within_cell_share` computes for this fit; coarse
    draws are used only when that share is at most :data:`COARSE_DRAW_MAX_SHARE` for every metric
    (else None: exact draws). The point estimate is unchanged.
    """
    rec = None if COARSE_DRAW_MAX_SHARE <= 0 else _surrogate_record(fitted)
    if rec is None:
        return None
    pre, sur = rec
    if sur.n_coarse == sur.index.size:      # one N (a nested design's sizes): nothing to merge
        return None
    share = within_cell_share(pre, fitted.counts.counts, sur.index, sur.n_coarse)
    if not np.all(share <= COARSE_DRAW_MAX_SHARE):
        return None
    return sur.index, sur.n_coarse, share


def counts_replicates(fitted, Cb, coarse=False):
    """The registry's ``replicates``: refits of the prior on bootstrap counts Cb (B, cells), (B, m);
    ``coarse``: Cb counts the coarse cells of :func:`coarse_draw_cells`."""
    st, est = fitted.counts, fitted.estimator
    items = st.n_items if st.n_items is not None else np.full(st.ranks.size, fitted.N)
    if uses_cells(items, st.sizes, est.scheme):
        beta, grid, K, sur, beta_s = fitted.state
        return logspline_cells_replicates(Cb, items, st.sizes, st.ranks, beta, fitted.F, scheme=est.scheme,
                                          setup=(grid, K, sur, beta_s), counts=st.counts, coarse=coarse,
                                          **est.options)
    if coarse:
        raise ValueError("coarse counts need a fit on many cells (coarse_draw_cells)")
    n = int(st.size_values[0])
    counts = np.zeros((Cb.shape[0], n))
    counts[:, st.ranks - 1] = Cb
    return logspline_replicates(counts, fitted.N, n, fitted.state, fitted.F, scheme=est.scheme,
                                **est.options)
