"""The global rank distribution: MLE, WMLE, MES (AAAI21; TORS24 Sec 4; notebook 03).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import check_int
from ..metrics import metric_values
from ..rankdist import draw_global_ranks
from ..sampling import sample_ranks

__all__ = [
    "mle_mse_identifiable",
    "mle_consistency",
    "RANK_DISTRIBUTION_ESTIMATORS",
    "rank_distribution_study",
    "mes_solver_check",
]


# ----------------------------------------------------------------------------
# the global rank distribution: MLE, WMLE, MES (AAAI21, TORS24 Sec 4, notebook 03)
# ----------------------------------------------------------------------------
def mle_mse_identifiable(pmf, M_values, repeats, *, rng=None):
    """Mean squared error of the MLE when n = N (identifiable), simulated and by formula.

    With n = N the kernel K is invertible and the MLE is asymptotically normal:
    ``E||pi_hat - P||^2 ~ tr(K^-T Cov(P~) K^-1) / M`` with ``Cov = diag(q) - q q^T``,
    ``q = K^T P``. Each repeat draws the sampled-rank counts of M users from
    Multinomial(M, q) and runs the converged MLE (SQUAREM, tol 1e-10; the
    repeats of one M as one batch, :func:`sampling_lib.estimators.em_core_batch`).

    Returns
    -------
    pandas.DataFrame
        Columns ``M, mse_sim, se, mse_formula``.

    References
    ----------
    TORS24 eq 34; AAAI21 eq 18.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = mle_mse_identifiable(synthetic_models(4)["beta_a0.50"], [100_000], 20, rng=0)
    >>> bool(abs(d.mse_sim[0] - d.mse_formula[0]) < 4 * d.se[0])
    True
    """
    from ..estimators import em_core_batch
    from ..kernels import kernel

    P = np.asarray(pmf, dtype=float)
    N = P.size
    K = kernel(N, N)
    q = P @ K
    cov = np.diag(q) - np.outer(q, q)
    trace_term = np.trace(np.linalg.solve(K.T, np.linalg.solve(K.T, cov).T))   # tr(K^-T cov K^-1)
    rng = np.random.default_rng(rng)
    rows = []
    for M in M_values:
        # the repeats' sampled-rank counts, then their MLEs (mle's SQUAREM, to a certified gap of 1e-10)
        # all at once: for N = n = 6 the cost is Python per E-step, paid once per step for the batch
        counts = np.stack([rng.multinomial(M, q) for _ in range(repeats)])
        fits = em_core_batch(K, counts, tol=1e-10, max_iter=100_000, accelerate="squarem")
        sq = np.array([np.sum((f.pmf - P) ** 2) for f in fits])
        rows.append(dict(M=M, mse_sim=sq.mean(), se=sq.std(ddof=1) / np.sqrt(repeats),
                         mse_formula=trace_term / M))
    return pd.DataFrame(rows)


def mle_consistency(pmf, n, M_values, repeats, *, conv_tol=1e-4, metric="recall@10", rng=None):
    """The MLE as the number of users grows, N > n: fitted sampled-rank law and metric error.

    For every M and repeat, M users are drawn from ``pmf`` with their sampled
    ranks, and two MLEs are fitted: the papers' 100 EM iterations and the
    converged one (SQUAREM to certified gap ``conv_tol``, warnings silenced).
    Recorded: ``q_error`` = ||K^T pi_hat - K^T P||_1 (the sampled-rank law,
    which is identifiable) and the relative error of ``metric``.

    Returns
    -------
    pandas.DataFrame
        Columns ``M, estimator, q_error, rel_error``.

    References
    ----------
    AAAI21 eq 18; TORS24 eq 34.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> d = mle_consistency(synthetic_models(300)["beta_a0.35"], 30, [500], 1, rng=0)
    >>> d.estimator.tolist()
    ['MLE (EM, 100 it.)', 'MLE* (gap <= conv_tol)']
    """
    import warnings

    from ..estimators import mle
    from ..exceptions import ConvergenceWarning
    from ..kernels import kernel

    P = np.asarray(pmf, dtype=float)
    N = P.size
    K = kernel(N, n)
    q = P @ K
    F = metric_values(metric, N)
    rng = np.random.default_rng(rng)
    rows = []
    for M in M_values:
        for _ in range(check_int(repeats, "repeats", low=1)):
            r = sample_ranks(draw_global_ranks(P, M, rng=rng), N, n, rng=rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fits = {"MLE (EM, 100 it.)": mle(r, N, n),
                        "MLE* (gap <= conv_tol)": mle(r, N, n, tol=conv_tol, max_iter=20_000, accelerate="squarem")}
            for lab, p_hat in fits.items():
                rows.append(dict(M=M, estimator=lab, q_error=np.abs(p_hat @ K - q).sum(),
                                 rel_error=abs(p_hat @ F - P @ F) / (P @ F)))
    return pd.DataFrame(rows)


#: The estimators of AAAI21 Tables 2-4 (and the converged MLE*), in table order.
RANK_DISTRIBUTION_ESTIMATORS = ("CLS", "BV 0.1", "BV 0.01", "MLE", "WMLE", "MES", "MLE*")


def rank_distribution_study(ranks, truth, n, repeats, *, metrics=("recall", "ndcg", "ap"), K_values=(10,),
                            eta=0.01, C=10, conv_tol=1e-4, K_curve=50, rng=None):
    """AAAI21's main experiment: P(R) estimators over repeated item samplings.

    For every model (``ranks``: its users' global ranks; ``truth``: the P(R)
    the metrics are computed from) and repeat, the users' sampled ranks are
    drawn and :data:`RANK_DISTRIBUTION_ESTIMATORS` are fitted: CLS, BV with
    gamma 0.1 and 0.01, MLE (100 EM iterations), WMLE (NDCG weight, constant C),
    MES (TORS24 form, entropy weight ``eta``) and MLE* (SQUAREM to gap
    ``conv_tol``). MLE and WMLE of one model's repeats are fitted as one batch
    (:func:`sampling_lib.estimators.em_core_batch`, the same EM
    iterations as ``mle_fit`` / ``wmle_fit``). Each estimate of ``metric@K`` is ``w @ F``; for MLE, WMLE and
    MES also the mean relative errors of P(R) and of its CDF over R <= K_curve.
    CLS is solved for R <= max(K_values) only (``cls(max_rank=...)``): exact CLS
    for every top-K metric of the results, at max(K_values) small problems
    instead of N (the cost of a large ``data_path`` catalogue).

    Returns
    -------
    dict
        ``results``: DataFrame ``model, repeat, estimator, metric, K, estimate,
        truth`` (metrics ``_pmf_err`` / ``_cdf_err`` hold those relative errors);
        ``mean_pmf``: {(model, estimator): P(R) averaged over the repeats};
        ``min_em_step``: smallest relative step of every (weighted) EM
        log-likelihood trace (MLE, WMLE, MLE*; >= 0 when EM ascends);
        ``first_ranks``: {model: sampled ranks of repeat 0}.

    References
    ----------
    AAAI21 eqs 19-27, Tables 2-4, Fig 2; TORS24 Sec 4.

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models
    >>> P = synthetic_models(200)["beta_a0.35"]
    >>> out = rank_distribution_study({"a": draw_global_ranks(P, 300, rng=0)}, {"a": P}, 20, 1, rng=1)
    >>> sorted(out["results"].estimator.unique()) == sorted(RANK_DISTRIBUTION_ESTIMATORS)
    True
    """
    import warnings

    from ..estimators import bv, cls, mes, mle_fit, wmle_weights
    from ..estimators import em_core_batch
    from ..exceptions import ConvergenceWarning
    from ..kernels import kernel

    rng = np.random.default_rng(rng)
    repeats = check_int(repeats, "repeats", low=1)
    F = {(m, K): metric_values(f"{m}@{K}", len(next(iter(truth.values())))) for m in metrics for K in K_values}
    rows, mean_pmf, min_step, first = [], {}, np.inf, {}
    for mod, R in ranks.items():
        N, P = truth[mod].size, truth[mod]
        cdf = np.cumsum(P)[:K_curve]
        ok = P[:K_curve] > 0
        samples = [sample_ranks(R, N, n, rng=rng) for _ in range(repeats)]
        first[mod] = samples[0]
        # MLE and WMLE (100 EM steps from uniform, mle_fit / wmle_fit's defaults) of all repeats at once:
        # the same iterations, one matrix product per step (em_core_batch; equal to rounding)
        counts = np.stack([np.bincount(r - 1, minlength=n) for r in samples]).astype(float)
        Kfull = kernel(N, n)
        f_mles = em_core_batch(Kfull, counts)
        f_wmles = em_core_batch(Kfull, counts * wmle_weights(n, "ndcg", C))
        for rep, r in enumerate(samples):
            f_mle, f_wmle = f_mles[rep], f_wmles[rep]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                f_star = mle_fit(r, N, n, tol=conv_tol, max_iter=20_000, accelerate="squarem")
            for t in (f_mle.loglik_trace, f_wmle.loglik_trace, f_star.loglik_trace):
                if t.size > 1:
                    min_step = min(min_step, float(np.min(np.diff(t) / np.abs(t[1:]))))
            W = dict(zip(RANK_DISTRIBUTION_ESTIMATORS,
                         (cls(r, N, n, max_rank=min(N, max(K_values))), bv(r, N, n, 0.1), bv(r, N, n, 0.01),
                          f_mle.pmf, f_wmle.pmf, mes(r, N, n, eta), f_star.pmf)))
            for e, w in W.items():
                mean_pmf[(mod, e)] = mean_pmf.get((mod, e), 0) + w / repeats
                rows += [(mod, rep, e, m, K, w @ Fm, P @ Fm) for (m, K), Fm in F.items()]
                if e in ("MLE", "WMLE", "MES"):
                    rows.append((mod, rep, e, "_pmf_err", K_curve,
                                 np.mean(np.abs(w[:K_curve][ok] - P[:K_curve][ok]) / P[:K_curve][ok]), 0.0))
                    rows.append((mod, rep, e, "_cdf_err", K_curve,
                                 np.mean(np.abs(np.cumsum(w)[:K_curve] - cdf) / cdf), 0.0))
    results = pd.DataFrame(rows, columns=["model", "repeat", "estimator", "metric", "K", "estimate", "truth"])
    return dict(results=results, mean_pmf=mean_pmf, min_em_step=min_step, first_ranks=first)


def mes_solver_check(sampled_ranks, N, n, eta, *, form="tors"):
    """The fast MES solver against cvxpy, and its optimality (KKT) condition.

    Solves MES (:func:`sampling_lib.estimators.mes_fit`) with the dual-Newton
    solver and with cvxpy, and evaluates the stationarity condition of the
    fast solution, ``log pi_R + (dE/dpi_R) / lam = const`` with
    ``E = ||K^T pi - P~||^2`` (TORS24 eq 36).

    Returns
    -------
    dict
        ``form, eta, lam, fast_objective, cvxpy_objective, rel_diff, max_abs_dpi,
        newton_steps, fast_s, cvxpy_s, cvxpy_solver, kkt_deviation``.

    References
    ----------
    AAAI21 eqs 24-27; TORS24 eqs 35-36.
    """
    from ..estimators import mes_fit
    from ..kernels import kernel

    r = np.asarray(sampled_ranks)
    t0 = time.perf_counter()
    fast = mes_fit(r, N, n, eta, form=form)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = mes_fit(r, N, n, eta, form=form, solver="cvxpy")
    t_ref = time.perf_counter() - t0
    K = kernel(N, n)
    p_tilde = np.bincount(r - 1, minlength=n) / r.size
    stat = np.log(fast.pmf) + K @ (2 * p_tilde * (fast.pmf @ K - p_tilde)) / fast.lam
    return dict(form=form, eta=eta, lam=fast.lam, fast_objective=fast.objective, cvxpy_objective=ref.objective,
                rel_diff=abs(fast.objective - ref.objective) / abs(ref.objective),
                max_abs_dpi=float(np.abs(fast.pmf - ref.pmf).max()), newton_steps=fast.n_iter,
                fast_s=t_fast, cvxpy_s=t_ref, cvxpy_solver=ref.solver,
                kkt_deviation=float(np.abs(stat - np.average(stat, weights=fast.pmf)).max()))
