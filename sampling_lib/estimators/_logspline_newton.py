"""The penalized log-likelihood of the log-spline prior (:mod:`._logspline`) and its solvers.

The objective -sum_c c_c log q_c + beta' P beta / 2 with q = g K and g = softmax(B beta + log w), its
gradient, Fisher and observed information, the damped Newton fit, the batched quasi-Newton (BFGS) of the
bootstrap replicates, and the limits at the grid's ends where the penalized likelihood has no maximum.
Shared by the one-N fit, the cells path, the bootstrap and the stratified fit.

References
----------
.. [EM96] Eilers, P. H. C. and Marx, B. D. Flexible smoothing with B-splines and penalties. Statistical
   Science 11(2), 1996 (the second-difference penalty).
.. [NW06] Nocedal, J. and Wright, S. J. Numerical Optimization, 2nd ed., 2006 (Sec 6.1: BFGS; Sec 3.1:
   backtracking).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

_RIDGE = 1e-8          # fixes the flat direction (softmax is shift invariant)


@lru_cache(maxsize=64)
def penalty_matrix(df, lam):
    """2 lam D'D + the ridge on the coefficients' mean (D: second differences), read-only."""
    D = np.diff(np.eye(df), 2, axis=0)
    one = np.ones((1, df)) / df
    P = 2.0 * lam * (D.T @ D) + 2.0 * _RIDGE * (one.T @ one)
    P.setflags(write=False)
    return P


def prior_masses(beta, grid):
    """Prior masses g of the grid cells (rows sum to 1) for coefficients beta of shape (..., df)."""
    eta = beta @ grid.B.T + grid.logw
    eta = eta - eta.max(axis=-1, keepdims=True)
    g = np.exp(eta)
    return g / g.sum(axis=-1, keepdims=True)


#: Smallest marginal probability q_r of an observed sampled rank that the fit may pass through: a
#: step to coefficients under which an observed cell is rarer than this is refused like one to q_r = 0
#: (:func:`objective` is +inf there). Without it, a Newton step on data with nearly every user at one
#: end of the ranks (10^5 users at sampled rank 1 and 231 elsewhere) jumped to a prior whose q_r of
#: the other users underflowed to ~1e-310, where c / q overflowed and the next step's eigenvalues
#: did not converge. 1e-100, not less: the observed Hessian divides by q_r^2 (:func:`hessian_cells`;
#: at 1e-200 that underflowed on merged ladder ranks). A cell that rare costs 230 nats a user, so no
#: optimum of data a smooth prior reproduces lies there (:func:`_warn_unreproduced`).
Q_MIN = 1e-100
_LOG_Q_MIN = float(np.log(Q_MIN))


def objective(beta, c, K, grid, P):
    """Penalized negative log-likelihood, gradient pieces; batched over rows of c.

    +inf where an observed cell's marginal probability is below :data:`Q_MIN` (or 0)."""
    g = prior_masses(beta, grid)
    q = g @ K
    seen = c > 0
    # log q only where c > 0 (0 elsewhere: 0 log 0 = 0); q = 0 under c > 0 gives -inf, i.e. f = +inf
    with np.errstate(divide="ignore"):
        logq = np.log(q, out=np.zeros(np.broadcast_shapes(np.shape(c), q.shape)), where=seen)
    ll = np.einsum("...i,...i->...", c, logq)
    pen = 0.5 * np.einsum("...i,ij,...j->...", beta, P, beta)
    f = -ll + pen
    rare = logq.min(axis=-1) < _LOG_Q_MIN            # logq is 0 on the cells not observed
    if rare.any():
        f = np.where(rare, np.inf, f)
    return f, g, q


def gradient(beta, c, K, grid, P, g, q):
    M = c.sum(axis=-1, keepdims=True)
    ratio = np.divide(c, q, out=np.zeros_like(c), where=c > 0)
    rho = g * (ratio @ K.T)                      # posterior expected counts per cell
    return -((rho - M * g) @ grid.B) + beta @ P


def fisher(beta, c, K, grid, P):
    """Expected information M J^T diag(1/q) J + P of one fit (df, df)."""
    g = prior_masses(beta, grid)
    q = g @ K
    Bbar = g @ grid.B
    Jq = K.T @ (g[:, None] * grid.B) - np.outer(q, Bbar)   # (n, df) dq/dbeta
    ok = q >= Q_MIN          # a rarer cell adds about q (J is O(q) there), and 1 / q may overflow
    M = c.sum()
    return M * (Jq[ok].T / q[ok]) @ Jq[ok] + P


def solve_psd(H, g):
    """Solve H x = g for symmetric positive semi-definite H (one (df, df) or a batch (b, df, df),
    g of shape (df,) or (b, df)) by LU; a numerically singular H (e.g. n = 2: the information
    has rank 1 and the penalty leaves the linear direction of beta free) is solved with its
    eigenvalues floored at 1e-8 of the largest, as :func:`hessian` does."""
    try:
        return np.linalg.solve(H, g[..., None])[..., 0]
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(H)
        w = np.maximum(w, 1e-8 * np.maximum(1.0, np.abs(w).max(axis=-1, keepdims=True)))
        return np.einsum("...ij,...j->...i", V, np.einsum("...ji,...j->...i", V, g) / w)


def hessian(beta, c, K, grid, P):
    """Observed Hessian of the penalized objective at ``beta`` (central differences of the
    analytic gradient), symmetrised; positive definite at a minimum."""
    df = beta.size
    h = 1e-5 * np.maximum(1.0, np.abs(beta))
    E = np.diag(h)
    pts = np.concatenate([beta + E, beta - E])
    _, g, q = objective(pts, np.broadcast_to(c, (2 * df, c.size)), K, grid, P)
    G = gradient(pts, np.broadcast_to(c, (2 * df, c.size)), K, grid, P, g, q)
    H = (G[:df] - G[df:]) / (2.0 * h[:, None])
    H = 0.5 * (H + H.T)
    w, V = np.linalg.eigh(H)
    floor = 1e-8 * max(1.0, float(np.max(np.abs(w))))
    return (V * np.maximum(w, floor)) @ V.T


def newton(c, K, grid, P, beta0, max_iter=200, tol=1e-8, info=None):
    """Newton / Fisher scoring; ``info`` is the curvature (default the expected information
    :func:`fisher`, which needs every sampled rank of one (N, n) as a column of K; cells of
    several (N_u, n_u) use the observed Hessian :func:`hessian`)."""
    info = fisher if info is None else info
    beta = beta0.copy()
    f, g, q = objective(beta, c, K, grid, P)
    if not np.isfinite(f) and np.any(beta):
        # a start under which an observed cell is impossible (a warm start fitted to other cells: with one N
        # = max N_u, every user at the last sampled rank put the prior beyond the other users' N_u) starts
        # from the flat prior instead
        beta = np.zeros_like(beta)
        f, g, q = objective(beta, c, K, grid, P)
    it = 0
    converged = False
    for it in range(1, max_iter + 1):
        grad = gradient(beta, c, K, grid, P, g, q)
        if np.max(np.abs(grad)) <= tol * max(1.0, c.sum()):
            converged = True
            it -= 1
            break
        H = info(beta, c, K, grid, P)
        step = solve_psd(H, grad)
        t = 1.0
        while True:
            nb = beta - t * step
            nf, ng, nq = objective(nb, c, K, grid, P)
            if np.isfinite(nf) and nf <= f + 1e-4 * t * (grad @ -step):
                break
            t *= 0.5
            if t < 1e-10:
                nb, nf, ng, nq = beta, f, g, q
                break
        if nf >= f and t < 1e-10:
            if info is fisher:
                # no decrease along the Fisher step: the expected information weighs each sampled rank by
                # its probability under the fit, and misses the curvature of an observed rank that the fit
                # makes far rarer than it is (1,999 users at sampled rank 1 and one at rank 2: the first
                # step put all prior mass at R = 1, the information there is singular, and the fit stopped
                # at f = 8,497 where the optimum is 8.63). Newton goes on with the observed Hessian.
                info = hessian
                continue
            # stopped: converged where the gradient is small, or where the fit presses observed users against
            # Q_MIN (the optimum lies on that bound, and _fit_from warns that the prior does not reproduce them)
            converged = np.max(np.abs(grad)) <= 1e-5 * max(1.0, c.sum()) or _unreproduced(c, q).size > 0
            break
        beta, f, g, q = nb, nf, ng, nq
        if t < _STALL_T and float(grad @ step) <= _DECREMENT_TOL:
            # at the optimum up to rounding: the gradient stays above its tolerance, and only steps shortened
            # ten times or more still pass the line search (on 40 users, 200 iterations of ~30 halvings each)
            converged = True
            break
    else:
        # max_iter steps without meeting the gradient tolerance (Fisher scoring converges linearly
        # along weakly identified directions): converged if the Newton decrement is below the
        # bootstrap's tolerance 1e-6, i.e. within about 5e-7 of the optimum in log-likelihood
        grad = gradient(beta, c, K, grid, P, g, q)
        converged = (float(grad @ solve_psd(info(beta, c, K, grid, P), grad)) <= _DECREMENT_TOL
                     or _unreproduced(c, q).size > 0)
    return beta, f, g, q, it, converged


#: Newton's stop on a Newton decrement (about twice the distance to the optimum in log-likelihood)
#: where the gradient test is out of reach: after max_iter steps, or after a step that the line search
#: shortened below _STALL_T (rounding, not curvature, limits the descent there).
_DECREMENT_TOL = 1e-6
_STALL_T = 1e-3
#: Largest change of one spline coefficient per quasi-Newton step (:func:`quasi_newton`).
_MAX_STEP = 1.0


def quasi_newton(idx, H, beta, f, g, q, c, K, grid, P, tol, max_iter):
    """Batched quasi-Newton (BFGS) descent of the replicates ``idx``, in place.

    Every replicate starts from the shared curvature ``H`` (for bootstrap
    replicates the full-sample Hessian: they are close to the full-sample fit;
    for the exact solve of a fit on many cells, one row, the surrogate's
    Hessian at its optimum: :func:`_cells_fit_from`) and updates its own
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


#: A fit that gives an observed cell a probability below this does not reproduce the data (the optimum
#: presses against :data:`Q_MIN`): :func:`_warn_unreproduced` says so.
Q_UNREPRODUCED = 1e-50


def _unreproduced(c, q):
    """Observed cells (c > 0) of one fit whose probability q is below :data:`Q_UNREPRODUCED`."""
    return np.flatnonzero((np.asarray(c) > 0) & (np.asarray(q) < Q_UNREPRODUCED))


def limit_ends(c, K):
    """Per row of counts c (B, cells): the grid end (0 or G - 1) where the penalized fit on kernel K (G, cells)
    has no maximum, else -1. Every user then sits in a cell whose likelihood column peaks at that end alone
    (all at sampled rank 1, or all at the last one; in the stratified tail coordinate, no tail item above):
    each log-likelihood term is largest under all prior mass there, and a linear trend of the coefficients,
    which the penalty (second differences and the mean) does not see, approaches it without end. The
    supremum is that point mass (:func:`limit_beta`)."""
    c = np.atleast_2d(c)
    out = np.full(c.shape[0], -1)
    some = c.sum(axis=1) > 0
    for end, others in ((0, K[1:]), (K.shape[0] - 1, K[:-1])):
        peak = K[end] > others.max(axis=0, initial=0.0)
        out[some & ~(c[:, ~peak] > 0).any(axis=1)] = end
    return out


def limit_beta(grid, end):
    """Coefficients of all prior mass at grid cell ``end`` (0 or the last; :func:`limit_ends`): a linear trend
    steep enough that the other masses are 0 in double precision, at no penalty."""
    df = grid.B.shape[1]
    ramp = (df - 1) / 2.0 - np.arange(df)
    for steep in (1e2, 1e3, 1e4, 1e5):
        beta = steep * (ramp if end == 0 else -ramp)
        if prior_masses(beta, grid)[end] == 1.0:
            break
    return beta


def hessian_cells(beta, c, K, grid, P, KgB=None):
    """Analytic observed Hessian of the penalized objective for any likelihood columns.

    With g = softmax(eta), eta = B beta + log w, q_c = g . K_c, a = sum_c c_c K_c / q_c,
    v = g (a - M) and J = B^T (g (K - q)) (df x C):
    -d2 ll / dbeta2 = J diag(c / q^2) J^T - B^T (diag(v) - v g^T - g v^T) B; plus the penalty P.
    Eigenvalues are floored as in :func:`hessian` (positive definite). ``KgB``: K^T (g B) (C, df)
    at this beta when the caller has it (the one-step quantities), the costliest product here.
    """
    g = prior_masses(beta, grid)
    q = g @ K
    ok = c > 0
    Kc, qc, cc = (K, q, c) if ok.all() else (K[:, ok], q[ok], c[ok])
    v = g * ((Kc @ (cc / qc)) - cc.sum())
    Bg, Bv = grid.B.T @ g, grid.B.T @ v
    if KgB is None:
        J = (grid.B.T * g) @ Kc - np.outer(Bg, qc)     # B' (g (K - q)) without a (G, C) temporary
    else:
        J = (KgB if ok.all() else KgB[ok]).T - np.outer(Bg, qc)
    H = (J * (cc / qc ** 2)) @ J.T - (grid.B.T * v) @ grid.B + np.outer(Bv, Bg) + np.outer(Bg, Bv) + P
    H = 0.5 * (H + H.T)
    w, V = np.linalg.eigh(H)
    floor = 1e-8 * max(1.0, float(np.max(np.abs(w))))
    return (V * np.maximum(w, floor)) @ V.T
