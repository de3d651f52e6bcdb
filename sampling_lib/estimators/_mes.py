"""Maximal entropy with a squared distribution distance (MES): the rank distribution P(R).

Solves max_pi lam H(pi) - E(pi) on the simplex, E the squared distance
between the model's sampled-rank law and the observed one (AAAI21 eqs 24-27,
TORS24 eqs 35-36), by a dedicated dual Newton method (:func:`mes_fit`,
``solver="fast"``), a batched version of it for bootstrap replicates
(:func:`mes_batch`), or the reference conic formulation in cvxpy.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 24-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 35-36.
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg, special

from .._validation import check_float, check_int, check_pmf, check_scheme
from ..counts import check_sampled
from ..exceptions import ConvergenceWarning
from ..kernels import DEFAULT_N_ITEMS_TOL, em_grid, kernel_columns
from ._em import observed_block, rank_histogram
from ._linalg import OUTER_MAX, batched_gram, grid_outer
from ._mes_kernel import pooled_block
from ._results import MESResult

__all__ = ["mes", "mes_fit", "mes_objective"]


_ETA_DEFAULT = {"tors": 0.01, "aaai": 0.001}


def mes_lambda(eta, form, n):
    if form not in _ETA_DEFAULT:
        raise ValueError(f"form must be 'tors' or 'aaai'; got {form!r}")
    eta = _ETA_DEFAULT[form] if eta is None else check_float(eta, "eta", low=0.0, low_open=True)
    return eta, (eta / n if form == "tors" else eta)


def _mes_parts(pi, Kb, p, size=None):
    """(E, H): squared distance on the observed ranks and the entropy of pi.

    With grid multiplicities ``size``, pi holds bin masses spread uniformly
    over their bins: H = -sum_j pi_j log(pi_j / size_j).
    """
    d = pi @ Kb - p
    E = float(p @ (d * d))
    H = float(-special.xlogy(pi, pi).sum())
    if size is not None:
        H += float(pi @ np.log(size))
    return E, H


def mes_objective(pmf, sampled_ranks, N, n, eta=None, *, form="tors", scheme="binomial"):
    """The MES objective lam * H(pi) - E(pi) to be maximized.

    E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25, TORS24
    eq 35), H the entropy in nats, lam = eta / n (TORS24 eq 36, ``form="tors"``)
    or lam = eta (AAAI21 eq 26, ``form="aaai"``). With per-user item counts
    ``N`` (array), P(r|R) is the pooled kernel of :func:`mes_fit` (exact, no
    binning).

    Returns
    -------
    float

    Examples
    --------
    >>> pi = np.full(4, 0.25)
    >>> round(mes_objective(pi, [1, 2], 4, 2, eta=0.2, form="tors"), 12)  # E = 0, H = log 4
    0.138629436112
    """
    r, N, n = check_sampled(sampled_ranks, N, n)
    check_scheme(scheme)
    eta, lam = mes_lambda(eta, form, n)
    if isinstance(N, int):
        pmf = check_pmf(pmf, N)
        Kb, cb = observed_block(N, n, rank_histogram(r, n), scheme)
    else:
        pmf = check_pmf(pmf, int(N.max()))
        Kb, cb = pooled_block(r, N, n, scheme, 0.0)
    E, H = _mes_parts(pmf, Kb, cb / cb.sum())
    return lam * H - E


_KKT_TOL = 1e-9


def _mes_dual_newton(Kb, p, lam, tol, max_iter, size=None):
    """Dual Newton method for min_{pi in simplex} E(pi) - lam H(pi).

    With s = sqrt(p) and B = Kb * s (N x k), E(pi) = ||s * (Kb^T pi - p)||^2 =
    max_y y.(s*(Kb^T pi - p)) - ||y||^2 / 4, and min_pi a.pi - lam H(pi) =
    -lam logsumexp(-a / lam) at pi = softmax(-a / lam). Hence the dual

        g(y) = -||y||^2 / 4 - y.(s*p) - lam logsumexp(-B y / lam),

    a smooth, strongly concave function of k <= n variables, maximized by a
    damped Newton method (Armijo backtracking). The primal iterate is
    pi(y) = softmax(-B y / lam); f(pi(y)) - g(y) >= 0 is the duality gap.

    Stopping: damped Newton until the gap <= tol * (E + lam H) (or rounding
    stops the line search), then up to 5 full "polishing" Newton steps while
    the optimality residual max_R |log pi_R + dE/dpi_R / lam - c| (c its
    pi-average) decreases, until it is <= 1e-9. Converged means gap <=
    max(tol, 1e-9) relative and residual <= 1e-6. The gap alone is not enough
    for small lam: it is quadratic in y - y*, while the residual is
    (B (y* - y))_R / lam.

    On the compressed grid (``size``: ranks per bin, all rows of a bin equal)
    the rows are the bins and pi(y) = softmax(-B y / lam + log size) holds
    the bin masses: min over pi of a.pi - lam H(pi) sums exp(-a_R / lam) over
    the size_j equal ranks of each bin.
    """
    N, k = Kb.shape
    s = np.sqrt(p)
    B = Kb * s
    sp = s * p
    logsize = 0.0 if size is None else np.log(size)

    def dual(y):
        z = -(B @ y) / lam + logsize
        lse = special.logsumexp(z)
        pi = np.exp(z - lse)
        return -0.25 * (y @ y) - y @ sp - lam * lse, pi

    def primal(pi):
        E, H = _mes_parts(pi, Kb, p, size)
        return E - lam * H, E, H

    def kkt(y, pi):
        # log pi + grad E / lam = (B (2 s (q - p) - y)) / lam + const
        v = (B @ (2.0 * s * (pi @ Kb - p) - y)) / lam
        return float(np.abs(v - pi @ v).max())

    def newton_direction(y, pi):
        m = B.T @ pi
        grad = -0.5 * y - sp + m
        Cm = (B.T * pi) @ B - np.outer(m, m)  # B^T (diag(pi) - pi pi^T) B
        Hn = Cm / lam
        Hn[np.diag_indices_from(Hn)] += 0.5
        try:
            d = linalg.solve(Hn, grad, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            d = linalg.lstsq(Hn, grad)[0]
        return d, float(grad @ d)

    y = np.zeros(k)
    gval, pi = dual(y)
    trace = []
    converged = False
    it = 0
    while True:
        f, E, H = primal(pi)
        trace.append(-f)
        gap = f - gval
        scale = E + lam * H
        res = kkt(y, pi)
        if gap <= tol * scale:
            break
        if it >= max_iter:
            break
        it += 1
        d, slope = newton_direction(y, pi)
        t = 1.0
        g_new = -np.inf
        while slope > 0:
            g_new, pi_new = dual(y + t * d)
            if g_new >= gval + 0.25 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if slope <= 0 or g_new <= gval:
            break  # rounding stops the line search; the polish below decides
        y = y + t * d
        gval, pi = g_new, pi_new
    # Polish: near the optimum full Newton steps converge quadratically; the
    # line search on g cannot see progress below its rounding level, the
    # optimality residual can. Keep steps while the residual drops (at most 5).
    for _ in range(5):
        if res <= _KKT_TOL or it >= max_iter:
            break
        d, _ = newton_direction(y, pi)
        g_new, pi_new = dual(y + d)
        res_new = kkt(y + d, pi_new)
        if not res_new < res:
            break
        it += 1
        y = y + d
        gval, pi, res = g_new, pi_new, res_new
        f, E, H = primal(pi)
        trace.append(-f)
        gap = f - gval
        scale = E + lam * H
    converged = bool(gap <= max(tol, 1e-9) * scale and res <= 1e-6)
    return pi, it, np.asarray(trace), float(gap), float(res), converged, y


def mes_batch(Kb, P, lam, size, q0, p0, tol=1e-13, max_iter=50, outer=None):
    """MES bin masses for B sampled-rank distributions at once (bootstrap replicates).

    The dual Newton method of :func:`_mes_dual_newton` run on all rows of
    ``P`` (B, k) together, with the same kernel columns ``Kb`` (G, k) (the
    full sample's observed ranks; a replicate's unobserved rank has P = 0 and
    drops out of E). Warm start at the full-sample solution: pi(y) depends
    on y through B y = Kb (s y), and the full-sample optimum has
    s0 y0 = 2 p0 (q0 - p0) (optimality y* = 2 s (q - p)), so the start
    y_b = 2 p0 (q0 - p0) / s_b (0 where s_b = 0) gives every replicate the
    full-sample pi. Each replicate
    takes damped Newton steps (its own Hessian, batched solves, Armijo
    backtracking on its own dual) until its duality gap is <= tol (E + lam H)
    and its optimality residual <= 1e-9 (the criteria of the one-fit
    solver), or until no step improves its dual, when it is accepted under
    the one-fit solver's convergence test (gap <= max(tol, 1e-9) relative,
    residual <= 1e-6); the others have ``done`` False so that the caller
    refits them one by one. ``outer`` caches :func:`grid_outer` (``Kb``).

    Returns
    -------
    pi : ndarray (B, G)
    done : ndarray of bool (B,)
    """
    P = np.asarray(P, dtype=float)
    Bn, k = P.shape
    logsize = np.log(size)
    S = np.sqrt(P)
    SP = S * P
    u0 = 2.0 * p0 * (q0 - p0)
    y = np.divide(u0[None, :], S, out=np.zeros_like(S), where=S > 0)

    def dual(y, idx):
        z = -((y * S[idx]) @ Kb.T) / lam + logsize
        lse = special.logsumexp(z, axis=1)
        pi = np.exp(z - lse[:, None])
        return -0.25 * np.einsum("bk,bk->b", y, y) - np.einsum("bk,bk->b", y, SP[idx]) - lam * lse, pi

    def primal(pi, idx):
        d = pi @ Kb - P[idx]
        E = np.einsum("bk,bk->b", P[idx], d * d)
        H = -special.xlogy(pi, pi).sum(axis=1) + pi @ logsize
        return E - lam * H, E + lam * H, d

    act = np.arange(Bn)
    g, pi = dual(y, act)
    out = np.empty((Bn, Kb.shape[0]))
    done = np.zeros(Bn, dtype=bool)
    stalled = np.zeros(Bn, dtype=bool)

    def residual(y, pi, d, Sa):
        # optimality residual of the one-fit solver: v = B (2 s (q - p) - y) / lam
        v = ((2.0 * Sa * d - y) * Sa) @ Kb.T / lam
        return np.abs(v - np.einsum("bg,bg->b", pi, v)[:, None]).max(axis=1)

    for _ in range(max_iter + 1):
        f, scale, d = primal(pi, act)
        Sa = S[act]
        res = residual(y, pi, d, Sa)
        gap = f - g
        ok = (gap <= tol * scale) & (res <= _KKT_TOL)
        ok |= stalled & (gap <= max(tol, 1e-9) * scale) & (res <= 1e-6)
        out[act[ok]] = pi[ok]
        done[act[ok]] = True
        keep = ~(ok | stalled)            # stalled and not certified: refitted by the caller
        act, y, g, pi, Sa, res = act[keep], y[keep], g[keep], pi[keep], Sa[keep], res[keep]
        if act.size == 0:
            break
        m = (pi @ Kb) * Sa
        grad = -0.5 * y - SP[act] + m
        C = batched_gram(pi, Kb, outer)
        qa = pi @ Kb
        C -= qa[:, :, None] * qa[:, None, :]
        H = C * (Sa[:, :, None] * Sa[:, None, :]) / lam
        H[:, np.arange(k), np.arange(k)] += 0.5
        step = np.linalg.solve(H, grad[..., None])[..., 0]
        slope = np.einsum("bk,bk->b", grad, step)
        t = np.ones(act.size)
        gn, pn = dual(y + step, act)
        # an increase below the rounding level of the dual cannot be seen by the
        # line search: those replicates go to the polish below
        tiny = slope <= 1e-13 * np.maximum(1.0, np.abs(g))
        for _ in range(30):
            bad = (gn < g + 0.25 * t * slope) & ~tiny
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
            gb, pb = dual(y[bad] + t[bad, None] * step[bad], act[bad])
            gn[bad], pn[bad] = gb, pb
        moved = (gn > g) & ~tiny
        stalled = np.zeros(act.size, dtype=bool)
        if (~moved).any():
            # no increase along the step (rounding): try the full Newton step, the
            # one-fit solver's polish, and keep it if the residual drops
            sel = np.flatnonzero(~moved)
            yf = y[sel] + step[sel]
            gf, pf = dual(yf, act[sel])
            _, _, df = primal(pf, act[sel])
            better = residual(yf, pf, df, Sa[sel]) < res[sel]
            y[sel[better]], g[sel[better]], pi[sel[better]] = yf[better], gf[better], pf[better]
            stalled[sel[~better]] = True
        y = np.where(moved[:, None], y + t[:, None] * step, y)
        g = np.where(moved, gn, g)
        pi = np.where(moved[:, None], pn, pi)
    return out, done


def _mes_cvxpy(Kb, p, lam, solver, size=None):
    from .._extras import require

    cp = require("cvxpy", "mes(solver='cvxpy') (solver='fast' needs no extra)")
    installed = cp.installed_solvers()
    if solver is None:
        if "CLARABEL" in installed:
            solver = "CLARABEL"
        elif "SCS" in installed:
            warnings.warn(
                "Clarabel is not installed; falling back to SCS, a first-order solver "
                "whose accuracy is lower (about 1e-4-1e-6 relative)",
                UserWarning,
                stacklevel=4,
            )
            solver = "SCS"
        else:
            raise ImportError(
                "mes(solver='cvxpy') needs the Clarabel or SCS solver for the exponential cone; "
                f"installed: {installed}; use solver='fast'"
            )
    elif solver not in installed:
        raise ValueError(f"cvxpy_solver {solver!r} is not installed; installed: {installed}")
    N = Kb.shape[0]
    s = np.sqrt(p)
    x = cp.Variable(N)
    # Minimize (E - lam H) / lam: same minimizer, objective of order log N,
    # which suits the solvers' absolute tolerances.
    resid = cp.multiply(s, Kb.T @ x - p)
    # grid: bin masses x_j over size_j equal ranks, H = sum entr(x) + x . log(size)
    ent = cp.sum(cp.entr(x)) + (0.0 if size is None else x @ np.log(size))
    obj = cp.Minimize(cp.sum_squares(resid) / lam - ent)
    prob = cp.Problem(obj, [cp.sum(x) == 1, x >= 0])
    opts = {}
    if solver == "CLARABEL":
        opts = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    elif solver == "SCS":
        opts = dict(eps_abs=1e-9, eps_rel=1e-9, max_iters=200_000)
    prob.solve(solver=solver, **opts)
    if prob.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        raise RuntimeError(f"cvxpy solver {solver} failed on the MES problem: status {prob.status}")
    pi = np.clip(np.asarray(x.value, dtype=float), 0.0, None)
    pi /= pi.sum()
    stats = prob.solver_stats
    n_iter = int(stats.num_iters) if stats is not None and stats.num_iters is not None else -1
    return pi, n_iter, solver, prob.status == "optimal"


def mes_fit(
    sampled_ranks,
    N,
    n,
    eta=None,
    *,
    form="tors",
    solver="auto",
    scheme="binomial",
    tol=1e-13,
    max_iter=200,
    cvxpy_solver=None,
    n_items_tol=DEFAULT_N_ITEMS_TOL,
    grid_tol=None,
):
    """Maximal-entropy rank distribution with squared distribution distance (MES).

    Solves

        max_pi  lam * H(pi) - E(pi)   s.t.  pi_R >= 0,  sum_R pi_R = 1,

    with E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25,
    TORS24 eq 35) and H the entropy (natural logarithm). The objective is
    strictly concave, so the solution is unique (and has full support).

    Parameters
    ----------
    sampled_ranks : array_like of int in 1..n
    N : int or array_like of int, shape (M,)
        Number of items, or per-user candidate counts N_u (see Notes).
    n : int
    eta : float, optional
        Entropy weight. Default 0.01 for ``form="tors"`` (TORS24 Sec 8.3) and
        0.001 for ``form="aaai"`` (AAAI21 Tables 2-4).
    form : {"tors", "aaai"}, default "tors"
        ``"tors"``: lam = eta / n (TORS24 eq 36, also the authors' code, which
        minimizes n E - eta H); ``"aaai"``: lam = eta (AAAI21 eq 26).
    solver : {"auto", "fast", "cvxpy"}, default "auto"
        ``"fast"``: damped Newton on the k-dimensional dual (k = number of
        distinct observed sampled ranks <= n; O(N k^2) per step), stopped on
        the certified duality gap and the optimality residual (see
        :class:`MESResult`); raises ``RuntimeError`` if it does not converge
        in ``max_iter`` steps. ``"cvxpy"``: the reference conic
        formulation (exponential cone) solved by Clarabel; if Clarabel is not
        installed, SCS with a warning (lower accuracy); ImportError if neither.
        ``"auto"``: the fast solver, and if it does not converge, a
        :class:`sampling_lib.exceptions.ConvergenceWarning` with its
        diagnostics and the cvxpy solution (``solver`` of the result tells
        which one was used).
    scheme : {"binomial", "hypergeometric"}
    tol : float, default 1e-13
        Fast solver: stop when the duality gap <= tol * (E + lam H). Newton
        converges quadratically, so the default costs one or two steps more
        than 1e-10 and makes the optimality condition hold to ~1e-9 (the gap
        is quadratic in the distance to the optimum). If rounding stops all
        progress first, a gap <= 1e-9 relative is accepted.
    max_iter : int, default 200
        Fast solver: maximum Newton steps.
    cvxpy_solver : str, optional
        Force a cvxpy solver name (e.g. "SCS").
    n_items_tol : float in [0, 1), default :data:`sampling_lib.kernels.DEFAULT_N_ITEMS_TOL`
        Per-user N only: bin tolerance of the item counts (as :func:`mle_fit`).
    grid_tol : float in [0, 1) or None, default None (exact)
        Solve on the compressed kernel K' of
        :func:`sampling_lib.kernels.rank_grid` (one N; the registry's ``mes``
        uses :data:`sampling_lib.kernels.DEFAULT_GRID_TOL`). The rows of K'
        are equal within a bin, so the (unique, full-support) MES solution
        on K' is uniform within each bin (its optimality condition
        pi = softmax(-grad E / lam) is), and the problem is the G-atom one
        with the entropy -sum_j p_j log(p_j / size_j): solved exactly as
        that, O(G k^2) per Newton step. What the TV bound gives: for every
        pi, sum_r |q'_r - q_r| <= 2 grid_tol (q = pi K, q' = pi K') and
        |E'(pi) - E(pi)| = |sum_r P~(r) (q'_r - q_r)(q'_r + q_r - 2 P~(r))|
        <= eps := 4 grid_tol max_r P~(r), uniformly in pi; hence the grid
        solution is 2 eps-optimal for the exact objective, and since
        lam H is lam-strongly concave in the l1 norm (Pinsker), it lies
        within l1 distance 2 sqrt(eps / lam) of the exact solution: any
        metric 0 <= F <= 1 moves by at most sqrt(eps / lam) (rigorous but
        loose; the tests check the 2 eps objective gap).

    Returns
    -------
    MESResult

    Notes
    -----
    *Per-user item counts* (sampling-lab; model of :func:`mle_fit`). The
    squared distance compares the pooled sampled-rank distribution P~(r) with
    its model q(r) = (1/M) sum_u sum_{R <= N_u} pi_R P(r | R; N_u, n) =
    sum_R pi_R Kbar(r | R), linear in pi with the pooled kernel
    Kbar(r | R) = (1/M) sum_u P(r | R; N_u, n) 1[R <= N_u]; the solver is
    unchanged. Equal N_u give exactly the result of the int. The registry's
    bootstrap replicates do not rebuild Kbar
    (:func:`sampling_lib.estimators._mes_pooled.pooled_replicates`).

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.

    Examples
    --------
    >>> r = [1, 1, 2, 3, 3, 5]
    >>> res = mes_fit(r, 30, 5)
    >>> res.converged, res.pmf.shape, round(float(res.pmf.sum()), 12)
    (True, (30,), 1.0)
    >>> bool(abs(res.objective - mes_objective(res.pmf, r, 30, 5)) < 1e-12)
    True
    """
    r, N, n = check_sampled(sampled_ranks, N, n)
    scheme = check_scheme(scheme)
    eta, lam = mes_lambda(eta, form, n)
    if solver not in ("auto", "fast", "cvxpy"):
        raise ValueError(f"solver must be 'auto', 'fast' or 'cvxpy'; got {solver!r}")
    tol = check_float(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", low=1)
    grid = em_grid(N, n, scheme, grid_tol) if isinstance(N, int) else None
    size = None
    if grid is not None:
        c = rank_histogram(r, n)
        cols = np.flatnonzero(c > 0)
        Kb, p, size = np.ascontiguousarray(grid[1][:, cols]), c[cols] / c.sum(), grid[0].size
    elif isinstance(N, int):
        c = rank_histogram(r, n)
        Kb, cb = observed_block(N, n, c, scheme)
        p = cb / c.sum()
    else:
        Kb, cb = pooled_block(r, N, n, scheme, check_float(n_items_tol, "n_items_tol", 0.0, 1.0, high_open=True))
        p = cb / cb.sum()
    if solver in ("auto", "fast"):
        pi, it, trace, gap, res, converged, _ = _mes_dual_newton(Kb, p, lam, tol, max_iter, size)
        msg = (f"MES fast solver did not converge: duality gap {gap:.3g}, optimality residual "
               f"{res:.3g} after {it} Newton steps (tol={tol:g} relative, lam={lam:g})")
        if not converged and solver == "fast":
            raise RuntimeError(msg + "; try solver='cvxpy' (or 'auto') or a larger eta")
        if not converged:
            warnings.warn(msg + "; using the cvxpy reference solver", ConvergenceWarning,
                          stacklevel=3)
            solver = "cvxpy"
        name = "fast"
    if solver == "cvxpy":
        pi, it, name, converged = _mes_cvxpy(Kb, p, lam, cvxpy_solver, size)
        name = f"cvxpy:{name}"
        gap = float("nan")
        res = float("nan")
        trace = None
    E, H = _mes_parts(pi, Kb, p, size)
    obj = lam * H - E
    if trace is None:
        trace = np.array([obj])
    if grid is not None:
        pi = grid[0].expand(pi)
    return MESResult(
        pmf=pi, objective=float(obj), entropy=H, distance=E, lam=lam, eta=eta, form=form,
        solver=name, n_iter=int(it), objective_trace=trace, gap=gap, kkt_residual=res,
        converged=bool(converged),
    )


def mes(sampled_ranks, N, n, eta=None, *, form="tors", solver="auto", scheme="binomial",
        tol=1e-13, max_iter=200, cvxpy_solver=None, n_items_tol=DEFAULT_N_ITEMS_TOL, grid_tol=None):
    """MES estimate of the rank distribution (TORS24 eq 36 / AAAI21 eq 26).

    Same parameters as :func:`mes_fit`; returns the length-N probability vector.

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.

    Examples
    --------
    >>> pi = mes([1, 2, 2, 4], N=25, n=4, eta=0.01)
    >>> pi.shape, bool(pi.min() > 0)
    ((25,), True)
    """
    return mes_fit(
        sampled_ranks, N, n, eta, form=form, solver=solver, scheme=scheme, tol=tol,
        max_iter=max_iter, cvxpy_solver=cvxpy_solver, n_items_tol=n_items_tol, grid_tol=grid_tol,
    ).pmf


# ----------------------------------------------------------------------------
# bootstrap replicates, batched
# ----------------------------------------------------------------------------
_MES_BLOCK_ELEMS = 1 << 22       # B x G elements per batched-MES block


def _batch_rows(Kb):
    """Replicates per :func:`mes_batch` call for kernel columns Kb (G, k): bounded temporaries, the
    (rows, G) arrays and the (rows, k, k) Hessians."""
    return max(1, min(_MES_BLOCK_ELEMS // Kb.shape[0], (1 << 23) // Kb.shape[1] ** 2))


def mes_replicate_atoms(grid, N, n, scheme, st, Cb, w, opts, fitted=None):
    """MES fits (bin masses, (B, G); or (B, N) without a grid) of bootstrap counts Cb, batched.

    The batched dual Newton method (:func:`mes_batch`) warm-started from the
    full-sample fit ``w``; replicates it does not certify are refitted one by
    one with :func:`mes_fit`. None for the cvxpy solver or per-user N.
    """
    if opts.get("solver", "auto") not in ("auto", "fast") or (
            st.n_items is not None and np.unique(st.n_items).size > 1) or st.size_values.size != 1:
        return None
    _, lam = mes_lambda(opts.get("eta"), opts.get("form", "tors"), n)
    if grid is not None:
        g, Kg = grid
        Kb, size, p0 = np.ascontiguousarray(Kg[:, st.ranks - 1]), g.size.astype(float), g.bin_sums(w)
    else:
        Kb, size, p0 = kernel_columns(N, n, st.ranks, scheme), np.ones(N), np.asarray(w, dtype=float)
    q0 = p0 @ Kb
    outer = None
    if fitted is not None:          # outer products of the columns, kept across bootstrap chunks
        if fitted._mes_outer is None and Kb.shape[0] * Kb.shape[1] * (Kb.shape[1] + 1) // 2 <= OUTER_MAX:
            fitted._mes_outer = grid_outer(Kb)
        outer = fitted._mes_outer
    P = Cb / Cb.sum(axis=1, keepdims=True)
    out = np.empty((Cb.shape[0], Kb.shape[0]))
    step = _batch_rows(Kb)
    tol = opts.get("tol", 1e-13)
    for a in range(0, Cb.shape[0], step):
        pi, done = mes_batch(Kb, P[a:a + step], lam, size, q0, st.counts / st.counts.sum(), tol=tol,
                              max_iter=opts.get("max_iter", 200), outer=outer)
        for i in np.flatnonzero(~done):
            r_b = np.repeat(st.ranks, Cb[a + i].astype(np.int64))
            refit = mes_fit(r_b, N, n, scheme=scheme, **{k: v for k, v in opts.items()}).pmf
            pi[i] = grid[0].bin_sums(refit) if grid is not None else refit
        out[a:a + step] = pi
    return out
