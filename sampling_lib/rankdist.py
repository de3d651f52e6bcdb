"""Synthetic global rank distributions P(R), R = 1..N, with a known truth.

KDD20 (Sec 4.1, Fig 3) observes that the empirical global rank distribution
W_R of real recommenders is well fitted by a discretized Beta(a, 1) law with
a < 1 (mass concentrated at the top ranks). The defaults of every notebook use
such distributions, and mixtures of them, so that the exact global metric is
known and the suite runs without external data.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 4.1 (Beta(a, 1) fit of W_R), Fig 3, Table 2.
"""
from __future__ import annotations

import numpy as np
from scipy import special

from ._validation import check_float, check_int, check_pmf, check_ranks

__all__ = [
    "beta_rank_pmf",
    "mixture_rank_pmf",
    "draw_global_ranks",
    "empirical_pmf",
    "synthetic_models",
    "dominates",
    "recall_curve",
    "random_rank_pmf",
    "random_dominating_pair",
]


def beta_rank_pmf(N, a, b=1.0):
    """Discretized Beta(a, b) on ranks 1..N: P(R) = F(R/N) - F((R-1)/N).

    F is the Beta(a, b) CDF (``scipy.special.betainc``); for b = 1, F(x) = x^a,
    the model of KDD20 Sec 4.1. Differences of the CDF are formed from the
    upper tail where it is more accurate, and the result is renormalised.

    Examples
    --------
    >>> beta_rank_pmf(4, 1.0)               # a = b = 1 is uniform
    array([0.25, 0.25, 0.25, 0.25])
    >>> p = beta_rank_pmf(1000, 0.3); bool(p[0] > p[1] > p[-1])
    True
    """
    N = check_int(N, "N", low=1)
    a = check_float(a, "a", low=0.0, low_open=True)
    b = check_float(b, "b", low=0.0, low_open=True)
    i = np.arange(N + 1)
    # lower half from the CDF, upper half from the survival function 1 - F(x) = I_{1-x}(b, a)
    # with 1 - x = (N - i) / N exact; each only where its differences are used (the incomplete
    # beta function is the cost: betainc and betaincc on all of 0..1 took 5-20x longer, and
    # betaincc was slow near 1 for some (a, b))
    h = N // 2 + 1                                              # i / N <= 0.5 exactly for i < h
    lo = np.diff(special.betainc(a, b, i[:h] / N))              # P(R), R = 1..h-1
    hi = -np.diff(special.betainc(b, a, (N - i[h - 1:]) / N))   # P(R), R = h..N
    p = np.concatenate([lo, hi])
    p = np.clip(p, 0.0, None)
    return p / p.sum()


def mixture_rank_pmf(N, components, weights):
    """A mixture sum_j weights[j] * components[j] of rank pmfs over 1..N.

    ``components`` is a list of length-N pmfs (or of (a, b) tuples for
    :func:`beta_rank_pmf`); ``weights`` are nonnegative and are normalised.

    Examples
    --------
    >>> mixture_rank_pmf(2, [[1.0, 0.0], [0.0, 1.0]], [3, 1])
    array([0.75, 0.25])
    """
    N = check_int(N, "N", low=1)
    w = np.asarray(weights, dtype=float)
    if len(components) != w.size or w.size == 0:
        raise ValueError(f"weights must have one entry per component ({len(components)}); got {w.size}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be finite, nonnegative, not all 0; got {w}")
    out = np.zeros(N)
    for wj, c in zip(w / w.sum(), components):
        c = beta_rank_pmf(N, *c) if isinstance(c, tuple) else check_pmf(c, N, name="components[j]")
        out += wj * c
    return out / out.sum()


def draw_global_ranks(pmf, M, *, rng=None):
    """Draw M global ranks in 1..N i.i.d. from ``pmf``.

    Examples
    --------
    >>> draw_global_ranks([0.5, 0.5, 0.0], 5, rng=0)   # doctest: +SKIP
    array([2, 1, 1, 1, 2])  # may vary
    """
    p = check_pmf(pmf)
    M = check_int(M, "M", low=1)
    rng = np.random.default_rng(rng)
    # inverse-CDF sampling: O(N + M log N), fine for N = 10^6
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(M), side="right").astype(np.int64) + 1


def empirical_pmf(ranks, N):
    """W_R = (1/M) #{u : R_u = R} for R = 1..N (KDD20 eq 2).

    Examples
    --------
    >>> empirical_pmf([1, 1, 3, 4], 4)
    array([0.5 , 0.  , 0.25, 0.25])
    """
    R = check_ranks(ranks, N, name="ranks")
    return np.bincount(R - 1, minlength=N) / R.size


def recall_curve(pmf):
    """HR@K for K = 1..N: the CDF of the rank distribution (KDD20 eq 7)."""
    return np.cumsum(check_pmf(pmf))


def dominates(pmf1, pmf2, atol=1e-12):
    """True when HR1@K >= HR2@K for every K (the hypothesis of KDD20 Thm 2.1).

    Examples
    --------
    >>> dominates(beta_rank_pmf(100, 0.3), beta_rank_pmf(100, 0.6))
    True
    """
    c1, c2 = recall_curve(pmf1), recall_curve(pmf2)
    if c1.size != c2.size:
        raise ValueError(f"pmf1 and pmf2 must have the same length; got {c1.size} and {c2.size}")
    return bool(np.all(c1 >= c2 - atol))


# Beta(a, 1) exponents in the range KDD20 Table 2 reports for real models, plus a
# mixture with a heavier tail; distinct enough that their curves separate.
_DEFAULT_MODELS = {
    "beta_a0.25": [((0.25, 1.0), 1.0)],
    "beta_a0.35": [((0.35, 1.0), 1.0)],
    "beta_a0.50": [((0.50, 1.0), 1.0)],
    "mixture": [((0.15, 1.0), 0.6), ((1.0, 1.0), 0.4)],
}


def synthetic_models(N, names=None):
    """A few realistic, distinct "model" rank distributions over 1..N.

    Returns a dict name -> pmf. The Beta(a, 1) exponents 0.25-0.5 lie in the
    range KDD20 Table 2 fits to real recommenders; ``"mixture"`` mixes a strong
    head (a = 0.15) with a uniform tail, so its recall curve crosses those of
    the pure Beta models (no dominance).

    Examples
    --------
    >>> sorted(synthetic_models(100))
    ['beta_a0.25', 'beta_a0.35', 'beta_a0.50', 'mixture']
    """
    N = check_int(N, "N", low=2)
    names = list(_DEFAULT_MODELS) if names is None else list(names)
    out = {}
    for name in names:
        if name not in _DEFAULT_MODELS:
            raise ValueError(f"names must be among {sorted(_DEFAULT_MODELS)}; got {name!r}")
        comps = _DEFAULT_MODELS[name]
        out[name] = mixture_rank_pmf(N, [c for c, _ in comps], [w for _, w in comps])
    return out


def random_rank_pmf(N, *, rng=None, n_components=3):
    """A random, realistic rank pmf: a mixture of discretized Beta(a, b) laws.

    Exponents a ~ U(0.1, 1.5), b ~ U(0.8, 3) and Dirichlet(1) weights, so that
    most mass sits at the top ranks with varied tails.
    """
    N = check_int(N, "N", low=1)
    n_components = check_int(n_components, "n_components", low=1)
    rng = np.random.default_rng(rng)
    comps = [(float(rng.uniform(0.1, 1.5)), float(rng.uniform(0.8, 3.0))) for _ in range(n_components)]
    return mixture_rank_pmf(N, comps, rng.dirichlet(np.ones(n_components)))


def random_dominating_pair(N, *, rng=None):
    """Two rank pmfs whose recall curves satisfy HR1@K >= HR2@K for all K.

    Draws two random pmfs (:func:`random_rank_pmf`) and takes the pointwise
    maximum and minimum of their CDFs, which are again CDFs (nondecreasing,
    ending at 1). The pair usually touches or nearly touches somewhere, which
    makes it a sharp test of KDD20 Thm 2.1.

    Examples
    --------
    >>> p1, p2 = random_dominating_pair(200, rng=0)
    >>> dominates(p1, p2)
    True
    """
    rng = np.random.default_rng(rng)
    ca = np.cumsum(random_rank_pmf(N, rng=rng))
    cb = np.cumsum(random_rank_pmf(N, rng=rng))
    out = []
    for c in (np.maximum(ca, cb), np.minimum(ca, cb)):
        c[-1] = 1.0
        p = np.clip(np.diff(c, prepend=0.0), 0.0, None)
        out.append(p / p.sum())
    return out[0], out[1]
