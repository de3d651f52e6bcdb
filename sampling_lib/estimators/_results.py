"""Result types of the rank-distribution estimators (EM fits and MES fits).

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 18-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 31-36.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EMResult", "MESResult"]


@dataclass(frozen=True)
class EMResult:
    """Result of an EM fit of the rank distribution (:func:`mle_fit`,
    :func:`wmle_fit`, :func:`adaptive_mle_fit`).

    Attributes
    ----------
    pmf : ndarray, shape (N,)
        Estimated rank distribution pi (nonnegative, sums to 1).
    loglik : float
        (Weighted) log-likelihood at ``pmf``: sum_u w_u log P(r_u | pi)
        (AAAI21 eqs 19 and 22; w_u = 1 for :func:`mle`).
    loglik_trace : ndarray, shape (n_iter + 1,)
        Log-likelihood at the initial point and after every iteration; never
        decreases (EM and the monotone SQUAREM variant are ascent methods).
    n_iter : int
        Iterations done (EM updates, or SQUAREM cycles).
    n_estep : int
        E-step evaluations (one per EM update; up to four per SQUAREM cycle).
    gap : float
        Certified bound on the per-user log-likelihood suboptimality,
        max_R dl/dpi_R / W - 1 >= (l* - l(pi)) / W, where W is the total
        weight; 0 exactly at the maximum likelihood estimate.
    converged : bool
        ``gap <= tol`` (always False when ``tol`` is None, i.e. a fixed
        number of iterations was requested).
    tol : float or None
        The requested tolerance on ``gap``.
    method : str
        ``"em"`` or ``"squarem"``.
    """

    pmf: np.ndarray
    loglik: float
    loglik_trace: np.ndarray
    n_iter: int
    n_estep: int
    gap: float
    converged: bool
    tol: float | None
    method: str


@dataclass(frozen=True)
class MESResult:
    """Result of a maximal-entropy fit (:func:`mes_fit`).

    Attributes
    ----------
    pmf : ndarray, shape (N,)
        The maximizer pi of ``lam * H(pi) - E(pi)`` on the simplex.
    objective : float
        ``lam * H(pi) - E(pi)`` at ``pmf`` (the maximized objective of TORS24
        eq 36 / AAAI21 eq 26), evaluated by :func:`mes_objective`.
    entropy : float
        H(pi) = -sum_R pi_R log pi_R (natural logarithm).
    distance : float
        E(pi) = sum_r P~(r) (sum_R P(r|R) pi_R - P~(r))^2 (AAAI21 eq 25, TORS24 eq 35).
    lam : float
        Weight of the entropy: ``eta / n`` (form "tors") or ``eta`` (form "aaai").
    eta : float
    form : str
    solver : str
        ``"fast"`` or ``"cvxpy:<SOLVER>"``.
    n_iter : int
        Newton iterations (fast) or the solver's iteration count (cvxpy).
    objective_trace : ndarray
        Objective of the primal iterate after every Newton step (fast); the
        single final value (cvxpy).
    gap : float
        Duality gap certified by the fast solver (primal minus dual value,
        in units of the minimized ``E - lam H``); NaN for cvxpy.
    kkt_residual : float
        Fast solver: max_R |log pi_R + (dE/dpi_R) / lam - c|, the violation of
        the optimality condition pi = softmax(-grad E(pi) / lam) (<= 1e-9 on
        convergence unless rounding stops it earlier; never above 1e-6); NaN
        for cvxpy.
    converged : bool
    """

    pmf: np.ndarray
    objective: float
    entropy: float
    distance: float
    lam: float
    eta: float
    form: str
    solver: str
    n_iter: int
    objective_trace: np.ndarray
    gap: float
    kkt_residual: float
    converged: bool
