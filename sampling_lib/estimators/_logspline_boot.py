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

import numpy as np

from ..exceptions import ConvergenceWarning
from ._logspline import (DEFAULT_KNOT_SPACING, DEFAULT_PENALTY, EXACT_RANKS, cells_setup, gradient,
                         grid_and_kernel, hessian, hessian_cells, newton, objective, penalty_matrix,
                         fit_counts_weight, posterior_cells, solve_psd, uses_cells)

__all__ = ["logspline_bootstrap", "logspline_replicates", "logspline_cells_replicates"]

_MAX_STEP = 1.0        # largest change of one spline coefficient per batched Newton step


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


def bootstrap_core(counts_b, K, grid, P, fit_beta, F, max_iter, tol, info=None):
    """The batched refit of :func:`logspline_bootstrap` on counts (B, C) and kernel K (G, C)."""
    # the fit's weights; a row scaled as a whole leaves its posterior means (below) unchanged
    c = fit_counts_weight(counts_b)
    beta = np.broadcast_to(fit_beta, (c.shape[0], fit_beta.size)).copy()
    H = (hessian if info is None else info)(fit_beta, c.mean(axis=0), K, grid, P)
    f, g, q = objective(beta, c, K, grid, P)
    # replicates the quasi-Newton iteration did not converge: their own curvature
    rest = quasi_newton(np.arange(c.shape[0]), H, beta, f, g, q, c, K, grid, P, tol, max_iter)
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
    cell_w = posterior_cells(c, K, g, q)
    Fc = cell_metric(F, grid)
    return cell_w @ Fc, beta


def quasi_newton(idx, H, beta, f, g, q, c, K, grid, P, tol, max_iter):
    """Batched quasi-Newton (BFGS) descent of the replicates ``idx``, in place.

    Every replicate starts from the shared curvature ``H`` (the full-sample
    Hessian; replicates are close to the full-sample fit) and updates its own
    inverse-Hessian approximation from its gradients (BFGS; Nocedal and
    Wright (2006), eq 6.17), which costs O(df^2) per replicate and step
    instead of the O(G n df) of a Fisher information. A replicate stops when
    its Newton decrement grad' H_b^-1 grad (about twice the distance to the
    optimum, in log-likelihood units) is below ``tol``; steps are capped at
    ``_MAX_STEP`` per coefficient and backtracked per replicate. An update
    whose curvature y's is not positive is skipped (the objective need not be
    convex in beta), so every H_b^-1 stays positive definite.
    """
    act = np.asarray(idx)
    stalled = []
    Hinv = np.broadcast_to(np.linalg.solve(H, np.eye(H.shape[0])), (act.size,) + H.shape).copy()
    grad = gradient(beta[act], c[act], K, grid, P, g[act], q[act])
    for _ in range(max_iter):
        step = np.einsum("bij,bj->bi", Hinv, grad)
        keep = np.einsum("ij,ij->i", grad, step) > tol
        act, step, grad, Hinv = act[keep], step[keep], grad[keep], Hinv[keep]
        if act.size == 0:
            break
        # trust region: at most _MAX_STEP per coefficient (log-scale of the prior)
        step *= np.minimum(1.0, _MAX_STEP / np.max(np.abs(step), axis=1))[:, None]
        old = beta[act]
        good = _backtrack(act, step, beta, f, g, q, c, K, grid, P, halvings=30)
        # a replicate with no decrease along the step has stalled: not converged
        stalled.append(act[~good])
        act, grad, Hinv, old = act[good], grad[good], Hinv[good], old[good]
        if act.size == 0:
            break
        new_grad = gradient(beta[act], c[act], K, grid, P, g[act], q[act])
        s, y = beta[act] - old, new_grad - grad
        ys = np.einsum("ij,ij->i", y, s)
        ok = ys > 1e-12 * np.sqrt(np.einsum("ij,ij->i", y, y) * np.einsum("ij,ij->i", s, s))
        if ok.any():
            Hi, s_, y_ = Hinv[ok], s[ok], y[ok]
            rho = 1.0 / ys[ok]
            Hy = np.einsum("bij,bj->bi", Hi, y_)
            coef = (rho * rho * np.einsum("ij,ij->i", y_, Hy) + rho)[:, None, None]
            Hinv[ok] = (Hi - rho[:, None, None] * (s_[:, :, None] * Hy[:, None, :]
                                                 + Hy[:, :, None] * s_[:, None, :])
                        + coef * s_[:, :, None] * s_[:, None, :])
        grad = new_grad
    return np.sort(np.concatenate([act] + stalled))


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
        inv_q = np.divide(1.0, qa, out=np.zeros_like(qa), where=qa > 0)
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


def _backtrack(act, step, beta, f, g, q, c, K, grid, P, *, halvings, armijo=0.0):
    """Per-replicate step halving for the replicates ``act`` along ``-step``: accept the
    first step length t with objective <= f - t * armijo (relative slack 1e-12); updates
    beta, f, g, q in place and returns the mask of replicates that accepted a step. Each
    halving evaluates only the replicates still without an accepted step."""
    armijo = np.broadcast_to(np.asarray(armijo, dtype=float), act.shape)
    t = np.ones(act.size)
    good = np.zeros(act.size, dtype=bool)
    pend = np.arange(act.size)
    for _ in range(halvings):
        i = act[pend]
        nb = beta[i] - t[pend, None] * step[pend]
        nf, ng, nq = objective(nb, c[i], K, grid, P)
        ok = np.isfinite(nf) & (nf <= f[i] + 1e-12 * np.abs(f[i]) - t[pend] * armijo[pend])
        j = i[ok]
        beta[j], f[j], g[j], q[j] = nb[ok], nf[ok], ng[ok], nq[ok]
        good[pend[ok]] = True
        pend = pend[~ok]
        if pend.size == 0:
            break
        t[pend] *= 0.5
    return good


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


def logspline_cells_replicates(counts_b, n_items, sizes, ranks, beta, F, *, scheme="binomial",
                               penalty=DEFAULT_PENALTY, knot_spacing=DEFAULT_KNOT_SPACING,
                               exact_ranks=EXACT_RANKS, max_iter=50, tol=1e-6, setup=None):
    """Bootstrap replicates (B, m) on cells: :func:`logspline_bootstrap` for count vectors (B, C).

    ``setup`` is the (grid, likelihood columns) of the full-sample fit, reused (else rebuilt).
    """
    cb = np.asarray(counts_b, dtype=float)
    if setup is None:
        _, grid, K, P, _, _ = cells_setup(n_items, sizes, ranks, cb.mean(axis=0), scheme, penalty,
                                           knot_spacing, exact_ranks)
    else:
        grid, K = setup
        P = penalty_matrix(grid.B.shape[1], penalty)
    est, _ = bootstrap_core(cb, K, grid, P, beta, F, max_iter, tol, info=hessian_cells)
    return est


def counts_replicates(fitted, Cb):
    """The registry's ``replicates``: refits of the prior on bootstrap counts Cb (B, cells), (B, m)."""
    st, est = fitted.counts, fitted.estimator
    items = st.n_items if st.n_items is not None else np.full(st.ranks.size, fitted.N)
    if uses_cells(items, st.sizes, est.scheme):
        beta, grid, K = fitted.state
        return logspline_cells_replicates(Cb, items, st.sizes, st.ranks, beta, fitted.F, scheme=est.scheme,
                                          setup=(grid, K), **est.options)
    n = int(st.size_values[0])
    counts = np.zeros((Cb.shape[0], n))
    counts[:, st.ranks - 1] = Cb
    return logspline_replicates(counts, fitted.N, n, fitted.state, fitted.F, scheme=est.scheme,
                                **est.options)
