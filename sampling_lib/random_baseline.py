r"""AP@k under random rankings: exact mean and variance, references, simulation.

Definitions (AP25 Sec 3, eqs 3.1-3.2). A ranking shows items at positions
``1, 2, ...``; ``I_i = 1`` when the item at position ``i`` is relevant. With the
precision at ``i``, ``P@i = (1/i) sum_{j <= i} I_j``, the unnormalized sum is

.. math:: S_k = \sum_{i=1}^k P@i \, I_i ,

and AP@k divides it by a normalizer that depends on the evaluation model:

* **offline / without replacement (WOR)**, AP25 Sec 4, eq 3.2: exactly ``m`` of
  ``N`` items are relevant, their positions are a uniformly random ``m``-subset
  of ``1..N`` and ``AP@k = S_k / min(m, k)``. With ``m = 0`` there is nothing to
  retrieve and we define ``AP@k = 0`` (the normalizer would be 0; the paper does
  not treat this case).
* **online / with replacement (WR)**, AP25 Sec 5, eq 3.1: every position is
  relevant independently with probability ``p`` and ``AP@k = S_k / k``.

With one relevant item (``m = 1``, leave-one-out) the offline AP@k of a user
whose item sits at rank ``R`` is ``1/R`` if ``R <= k`` else 0, i.e.
:func:`sampling_lib.metrics.ap`.

How the closed forms are evaluated. Under WOR, ``E[I_{j_1} ... I_{j_r}]`` for
``r`` distinct positions is ``pi_r = (m)_r / (N)_r`` (falling factorials); under
WR it is ``p**r``. Writing the paper's constants (AP25 Thm 4.4) in terms of
``pi_1..pi_4`` (``pi_1 * A = pi_1 - 3 pi_2 + 2 pi_3 - (pi_1 - pi_2)^2`` etc., see
:func:`_wor_coefficients`) removes every division by ``N - 2`` and ``N - 3``.
The closed form is an algebraic identity in the ``pi_r``: a ``pi_r`` whose ``r``
distinct positions cannot fit in ``1..k`` has coefficient 0 in the raw double
sum, so the value given to ``pi_r`` when ``r > N`` is irrelevant (we use 0).
The coefficients are computed as exact fractions (Python integers) and then
rounded once, so the formula is exact to float rounding for every
``1 <= k <= N``, ``0 <= m <= N``, including ``N <= 3`` and ``m < 4`` where the
printed constants are 0/0. :func:`var_ap_wor_paper` is the literal transcription
of AP25 Thm 4.4 (defined for ``N >= 4``) kept for comparison.

Harmonic numbers are exact: compensated summation for ``k <= 4096``, and
``psi(k + 1) + gamma`` / ``zeta(2) - psi'(k + 1)`` beyond (relative error ~1e-16),
never the asymptotic ``ln k + gamma + 1/(2k)`` of AP25 Thm 4.2.

References
----------
.. [AP25] Manzhos, Ianevych, Melnyk. Average Precision at Cutoff k under Random
   Rankings: Expectation and Variance. 2025. Thm 4.2 (eq 4.1), Thm 4.4,
   Lemma 4.5, Thm 5.1 (eq 5.1), Thm 5.2, Tables 1-2.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import special

from ._validation import check_cutoffs, check_int, check_N_m, check_probability, scalar_or_array

__all__ = [
    "ap_from_patterns",
    "APMoments",
    "MAPBaseline",
    "MAPZTestResult",
    "APSimulationSummary",
    "harmonic_number",
    "expected_ap_wor",
    "var_ap_wor",
    "expected_ap_wr",
    "var_ap_wr",
    "simulate_ap",
    "simulate_ap_summary",
    "map_baseline",
    "map_baseline_wr",
    "map_ztest",
    "map_zscore",
]

_MODELS = ("wor", "wr")
_H_TABLE_SIZE = 4096


class APMoments(NamedTuple):
    """Mean and variance of AP@k (float or array over k)."""

    mean: object
    var: object


class MAPBaseline(NamedTuple):
    """Random-baseline mean and variance of MAP@k over ``n_users`` users.

    ``se`` is the standard deviation of MAP@k under random rankings.
    """

    mean: object
    var: object

    @property
    def se(self):
        return np.sqrt(self.var)


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=1)
def _harmonic_tables():
    """H_k and H_k^(2) for k = 0..4096 by Neumaier-compensated summation."""
    h1 = np.zeros(_H_TABLE_SIZE + 1)
    h2 = np.zeros(_H_TABLE_SIZE + 1)
    for order, out in ((1, h1), (2, h2)):
        s = c = 0.0
        for i in range(1, _H_TABLE_SIZE + 1):
            x = 1.0 / i**order
            t = s + x
            c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
            s = t
            out[i] = s + c
    h1.setflags(write=False)
    h2.setflags(write=False)
    return h1, h2


def harmonic_number(k, order=1):
    """Exact harmonic numbers ``H_k = sum_{i<=k} 1/i`` (order 1) or ``sum 1/i^2`` (order 2).

    Vectorized over integer ``k >= 0`` (``H_0 = 0``). Values are correctly
    summed (not the asymptotic expansion of AP25 Thm 4.2).

    Examples
    --------
    >>> harmonic_number([1, 2, 3])
    array([1.        , 1.5       , 1.83333333])
    >>> float(harmonic_number(10**7) - (np.log(10**7) + np.euler_gamma))  # ~ 1/(2k)
    5.0000...e-08
    """
    order = check_int(order, "order", low=1, high=2)
    k_arr = np.asarray(k)
    if k_arr.dtype == bool or not (np.issubdtype(k_arr.dtype, np.integer)
                                   or np.issubdtype(k_arr.dtype, np.floating)):
        raise TypeError(f"k must hold integers; got dtype {k_arr.dtype}")
    if np.issubdtype(k_arr.dtype, np.floating) and not np.all(
            np.isfinite(k_arr) & (k_arr == np.round(k_arr))):
        raise ValueError(f"k must hold whole numbers; got {k!r}")
    if k_arr.size and k_arr.min() < 0:
        raise ValueError(f"k must be >= 0; got min {k_arr.min()}")
    kk = k_arr.astype(np.int64)
    h1, h2 = _harmonic_tables()
    table = h1 if order == 1 else h2
    out = np.empty(kk.shape)
    small = kk <= _H_TABLE_SIZE
    out[small] = table[kk[small]]
    big = ~small
    if np.any(big):
        x = kk[big].astype(float) + 1.0
        if order == 1:
            out[big] = special.digamma(x) + np.euler_gamma
        else:
            out[big] = np.pi**2 / 6.0 - special.polygamma(1, x)
    return out if k_arr.ndim else float(out)


def _check_p(p, shape_of=None):
    """p as float array; every entry in [0, 1]."""
    a = np.asarray(p)
    if a.ndim == 0:
        return np.asarray(check_probability(p, "p")), True
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"p must hold real numbers; got dtype {a.dtype}")
    a = a.astype(float)
    if not np.all(np.isfinite(a)) or (a.size and (a.min() < 0 or a.max() > 1)):
        bad = a[~(np.isfinite(a) & (a >= 0) & (a <= 1))][0]
        raise ValueError(f"p must lie in [0, 1]; got {bad}")
    return a, False


def _falling_ratio(m, N, r):
    """pi_r = (m)_r / (N)_r as a Fraction; 0 when r > N (its coefficient is 0 then)."""
    if r > N:
        return Fraction(0)
    num = den = 1
    for j in range(r):
        num *= m - j
        den *= N - j
    return Fraction(num, den)


@lru_cache(maxsize=4096)
def _wor_coefficients(N, m):
    """Exact coefficients of the WOR closed forms, in terms of pi_r = (m)_r/(N)_r.

    Returns floats (pi1, pi2, q, A, B, C, D, E, F, G) where q = pi1 - pi2 and the
    letters equal (m/N) times AP25 Thm 4.4's constants:

    c_ii = A/i^2 + B/i + C,   c_il = D/(i l) + E/l + F/i + G   (i < l),

    A = pi1 - 3 pi2 + 2 pi3 - q^2,  B = 3 pi2 - 3 pi3 - 2 pi2 q,  C = pi3 - pi2^2,
    D = 2 pi2 - 5 pi3 + 3 pi4 - q^2, E = 3 pi3 - 3 pi4 - pi2 q,
    F = pi3 - pi4 - pi2 q,           G = pi4 - pi2^2.

    Also returned (as the last three entries) the exact combinations A - D,
    B - 2E and C + 2E - 2F - G that the closed form uses, to avoid cancellation.
    """
    p1, p2, p3, p4 = (_falling_ratio(m, N, r) for r in (1, 2, 3, 4))
    q = p1 - p2
    A = p1 - 3 * p2 + 2 * p3 - q * q
    B = 3 * p2 - 3 * p3 - 2 * p2 * q
    C = p3 - p2 * p2
    D = 2 * p2 - 5 * p3 + 3 * p4 - q * q
    E = 3 * p3 - 3 * p4 - p2 * q
    F = p3 - p4 - p2 * q
    G = p4 - p2 * p2
    exact = (p1, p2, q, A, B, C, D, E, F, G, A - D, B - 2 * E, C + 2 * E - 2 * F - G)
    return tuple(float(x) for x in exact)


# --------------------------------------------------------------------------- WOR


def expected_ap_wor(N, m, k):
    r"""Expected AP@k under a random ranking, offline model (AP25 Thm 4.2, eq 4.1).

    Exactly ``m`` of ``N`` items are relevant and their positions are a uniform
    random ``m``-subset (sampling without replacement);
    ``AP@k = (1/min(m, k)) sum_{i<=k} P@i I_i`` (AP25 eq 3.2), and ``AP@k = 0``
    when ``m = 0``. Then

    .. math:: E[AP@k] = \frac{m}{N \min(m, k)} \Big( \frac{m-1}{N-1} k
              + \frac{N-m}{N-1} H_k \Big),

    evaluated as ``(k pi_2 + (pi_1 - pi_2) H_k) / min(m, k)`` with
    ``pi_r = (m)_r/(N)_r`` (no division by ``N - 1`` when ``N = 1``).

    Parameters
    ----------
    N : int
        Number of ranked items, ``N >= 1``.
    m : int
        Number of relevant items, ``0 <= m <= N``.
    k : int or array_like of int
        Cutoffs, ``1 <= k <= N``.

    Returns
    -------
    float or ndarray
        ``E[AP@k]``, shaped like ``k``.

    References
    ----------
    AP25 Thm 4.2 (eq 4.1); AP25 eq 3.2 for the ``min(m, k)`` normalization.

    Examples
    --------
    Scenario A3 of AP25 Table 1 (printed 0.43550 in Table 2):

    >>> round(expected_ap_wor(50, 25, 40), 5)
    0.4355
    >>> expected_ap_wor(10, 1, [1, 2, 10])     # m = 1: H_k / N
    array([0.1       , 0.15      , 0.29289683])
    """
    N, m = check_N_m(N, m)
    ks, scalar = check_cutoffs(k, N)
    if m == 0:
        return scalar_or_array(np.zeros(ks.size), scalar)
    p1, p2, q = _wor_coefficients(N, m)[:3]
    kf = ks.astype(float)
    mean = (kf * p2 + q * harmonic_number(ks)) / np.minimum(m, ks)
    return scalar_or_array(mean, scalar)


def var_ap_wor(N, m, k):
    r"""Variance of AP@k under a random ranking, offline model (AP25 Thm 4.4, Lemma 4.5).

    Same model and normalization as :func:`expected_ap_wor`. With the
    covariances ``c_ii = Var(P@i I_i) = A/i^2 + B/i + C`` and
    ``c_il = D/(il) + E/l + F/i + G`` (``i < l``) and Lemma 4.5,

    .. math:: \mathrm{Var}(AP@k) = \frac{1}{\min(m,k)^2} \big[ k(C + 2(E - F)
              + (k-1) G) + H_k (B - 2(E - kF)) + D H_k^2 + (A - D) H_k^{(2)} \big],

    where ``A..G`` here are ``m/N`` times the paper's constants, written in
    ``pi_r = (m)_r/(N)_r`` and computed exactly (see the module docstring). This
    equals the printed theorem wherever that is defined (``N >= 4``) and stays
    exact for ``N <= 3`` and ``m < 4``. ``m = 0`` and ``m = N`` give 0.

    Parameters
    ----------
    N, m, k : see :func:`expected_ap_wor`.

    Returns
    -------
    float or ndarray
        ``Var(AP@k)``, shaped like ``k``.

    References
    ----------
    AP25 Thm 4.4 and Lemma 4.5. (The next-to-last display of the proof swaps
    the Lemma 4.5 sums multiplying E and F; the theorem's final expression,
    used here, is right.)

    Examples
    --------
    Scenario A3 of AP25 Table 1 (printed 0.00699 in Table 2):

    >>> round(var_ap_wor(50, 25, 40), 5)
    0.00699
    >>> var_ap_wor(3, 3, [1, 2, 3])            # all items relevant: AP@k = 1
    array([0., 0., 0.])
    """
    N, m = check_N_m(N, m)
    ks, scalar = check_cutoffs(k, N)
    if m == 0:
        return scalar_or_array(np.zeros(ks.size), scalar)
    (_, _, _, A, B, C, D, E, F, G, AmD, Bm2E, lin) = _wor_coefficients(N, m)
    kf = ks.astype(float)
    h = harmonic_number(ks)
    h2 = harmonic_number(ks, order=2)
    # k(C + 2E - 2F + (k-1)G) = k*lin + G k^2 with lin = C + 2E - 2F - G
    var_s = AmD * h2 + D * h * h + Bm2E * h + 2.0 * F * kf * h + kf * lin + G * kf * kf
    var = var_s / np.minimum(m, ks).astype(float) ** 2
    return scalar_or_array(np.maximum(var, 0.0), scalar)


# --------------------------------------------------------------------------- WR


def expected_ap_wr(p, k):
    r"""Expected AP@k under a random ranking, online model (AP25 Thm 5.1, eq 5.1).

    Every position is relevant independently with probability ``p``
    (Bernoulli / sampling with replacement) and ``AP@k = (1/k) sum_{i<=k} P@i I_i``
    (AP25 eq 3.1, normalization by ``k``). Then

    .. math:: E[AP@k] = p \big( p + (1 - p) H_k / k \big).

    Parameters
    ----------
    p : float or array_like
        Relevance probability in [0, 1]; broadcast against ``k``.
    k : int or array_like of int
        Cutoffs ``k >= 1``.

    References
    ----------
    AP25 Thm 5.1 (eq 5.1).

    Examples
    --------
    Scenario A3 of AP25 Table 1 (printed 0.27674):

    >>> round(expected_ap_wr(0.5, 40), 5)
    0.27674
    """
    pa, p_scalar = _check_p(p)
    ks, k_scalar = check_cutoffs(k)
    if not k_scalar:
        ks_b = ks.reshape(np.shape(k))
    else:
        ks_b = ks[0]
    kf = np.asarray(ks_b, dtype=float)
    h = harmonic_number(ks_b)
    out = pa * (pa + (1 - pa) * h / kf)
    return float(out) if (p_scalar and k_scalar) else np.asarray(out, dtype=float)


def var_ap_wr(p, k):
    r"""Variance of AP@k under a random ranking, online model (AP25 Thm 5.2).

    .. math:: \mathrm{Var}(AP@k) = \frac{5}{k} p^3 (1-p) + \frac{p(1-p)}{k^2}
              \big[ p(1-2p)(3H_k + H_k^2) + (1-p)(1-3p) H_k^{(2)} \big].

    Same model and arguments as :func:`expected_ap_wr`.

    References
    ----------
    AP25 Thm 5.2.

    Examples
    --------
    Scenario A3 of AP25 Table 1 (printed 0.00775):

    >>> round(var_ap_wr(0.5, 40), 5)
    0.00775
    >>> var_ap_wr([0.0, 1.0], 7)
    array([0., 0.])
    """
    pa, p_scalar = _check_p(p)
    ks, k_scalar = check_cutoffs(k)
    ks_b = ks[0] if k_scalar else ks.reshape(np.shape(k))
    kf = np.asarray(ks_b, dtype=float)
    h = harmonic_number(ks_b)
    h2 = harmonic_number(ks_b, order=2)
    q = 1 - pa
    out = (5.0 / kf * pa**3 * q
           + pa * q / kf**2 * (pa * (1 - 2 * pa) * (3 * h + h * h) + q * (1 - 3 * pa) * h2))
    out = np.maximum(out, 0.0)
    return float(out) if (p_scalar and k_scalar) else np.asarray(out, dtype=float)


# --------------------------------------------------------------------------- exact references


# --------------------------------------------------------------------------- Monte Carlo


def ap_from_patterns(I, ks, norm):
    """AP@k of relevance patterns: one row of the 0/1 matrix I per ranking, one column per cutoff.

    ``I[o, i - 1] = 1`` when position i of outcome o is relevant; ``ks`` are
    1-based cutoffs (int array) and ``norm`` the normaliser per cutoff
    (min(m, k) without replacement, k with replacement, AP25 eq 1); AP is 0
    where the normaliser is 0.

    Examples
    --------
    >>> ap_from_patterns(np.array([[1, 0, 1]]), np.array([1, 3]), np.array([1.0, 2.0])).round(4).tolist()
    [[1.0, 0.8333]]
    """
    I = I.astype(float)
    pos = np.arange(1, I.shape[1] + 1, dtype=float)
    S = np.cumsum(I * np.cumsum(I, axis=1) / pos, axis=1)
    out = S[:, ks - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norm > 0, out / np.where(norm > 0, norm, 1), 0.0)
    return out


def _check_model_args(model, N, m, p, ks_input):
    if model not in _MODELS:
        raise ValueError(f"model must be one of {_MODELS}; got {model!r}")
    if model == "wor":
        if N is None or m is None:
            raise ValueError("model='wor' needs N and m")
        if p is not None:
            raise ValueError("model='wor' takes N and m, not p")
        N, m = check_N_m(N, m)
        ks, scalar = check_cutoffs(ks_input, N)
        return N, m, None, ks, scalar
    if p is None:
        raise ValueError("model='wr' needs p")
    if N is not None or m is not None:
        raise ValueError("model='wr' takes p, not N and m")
    p = check_probability(p, "p")
    ks, scalar = check_cutoffs(ks_input)
    return None, None, p, ks, scalar


def _iter_ap_chunks(model, N, m, p, ks, n_sims, rng, chunk_elements):
    """Yield AP@k arrays of shape (rows, len(ks)); rows * max(k) <= chunk_elements."""
    K = int(ks.max())
    rows = max(1, chunk_elements // K)
    norm = (np.minimum(m, ks) if model == "wor" else ks).astype(float)
    done = 0
    while done < n_sims:
        n = min(rows, n_sims - done)
        if model == "wr":
            I = rng.random((n, K)) < p
        else:
            # the top-K block of a uniform m-subset of 1..N, position by position:
            # given c relevant items above position i, position i is relevant with
            # probability (m - c)/(N - i + 1) (exact; one uniform per entry)
            U = rng.random((n, K))
            I = np.empty((n, K), dtype=bool)
            c = np.zeros(n)
            for j in range(K):                 # 0-based position j = i - 1
                col = U[:, j] * (N - j) < (m - c)
                I[:, j] = col
                c += col
        yield ap_from_patterns(I, ks, norm)
        done += n


def simulate_ap(model, k, n_sims, *, N=None, m=None, p=None, rng=None, chunk_elements=2**20):
    """Monte Carlo draws of AP@k under a random ranking (vectorized, chunked).

    ``model="wor"`` (offline, AP25 Sec 4): a uniform ``m``-subset of ``1..N`` is
    relevant, ``AP@k = S_k / min(m, k)``. ``model="wr"`` (online, AP25 Sec 5):
    each position relevant with probability ``p``, ``AP@k = S_k / k``. Every
    draw gives AP@k for all requested cutoffs at once (the same ranking).

    Parameters
    ----------
    model : {"wor", "wr"}
    k : int or array_like of int
        Cutoffs (``<= N`` for WOR).
    n_sims : int
        Number of random rankings.
    N, m : int
        WOR model parameters.
    p : float
        WR model parameter.
    rng : None, int or numpy.random.Generator
        Keyword-only seed or generator (``np.random.default_rng(rng)``).
    chunk_elements : int
        Working arrays hold at most ``chunk_elements`` indicator entries
        (``rows * max(k)``), so memory beyond the output stays bounded.

    Returns
    -------
    ndarray
        Shape ``(n_sims,)`` for a scalar ``k``, else ``(n_sims, len(k))``.
        Use :func:`simulate_ap_summary` to avoid storing the draws.

    References
    ----------
    AP25 Figures 1-2 (histograms by simulation).

    Examples
    --------
    >>> x = simulate_ap("wor", 40, 1000, N=50, m=25, rng=0)
    >>> x.shape
    (1000,)
    >>> float(x.mean())   # doctest: +SKIP
    0.4393...  # may vary; E = 0.43550 (AP25 Table 2, A3)
    """
    N, m, p, ks, scalar = _check_model_args(model, N, m, p, k)
    n_sims = check_int(n_sims, "n_sims", low=1)
    chunk_elements = check_int(chunk_elements, "chunk_elements", low=1)
    rng = np.random.default_rng(rng)
    out = np.empty((n_sims, ks.size))
    pos = 0
    for chunk in _iter_ap_chunks(model, N, m, p, ks, n_sims, rng, chunk_elements):
        out[pos:pos + chunk.shape[0]] = chunk
        pos += chunk.shape[0]
    return out[:, 0] if scalar else out


@dataclass(frozen=True)
class APSimulationSummary:
    """Streaming Monte Carlo summary of AP@k (arrays over k, or floats).

    Attributes
    ----------
    n_sims : int
    mean, var : sample mean and unbiased sample variance of AP@k
    se_mean : standard error of ``mean`` (``sqrt(var / n)``)
    se_var : standard error of ``var``: ``sqrt((m4 - m2^2)/n + 2 var^2/(n(n-1)))`` with the
        sample central moments m2, m4 (the exact Var(s^2) with plug-in moments)
    """

    n_sims: int
    mean: object
    var: object
    se_mean: object
    se_var: object


def simulate_ap_summary(model, k, n_sims, *, N=None, m=None, p=None, rng=None, chunk_elements=2**20):
    """Mean, variance and their standard errors of AP@k by Monte Carlo, in bounded memory.

    Same model and arguments as :func:`simulate_ap`, but the draws are reduced
    chunk by chunk (shifted power sums up to order 4), so ``n_sims`` can be in
    the millions. The shift is the first chunk's mean (no use of the formulas).

    Returns
    -------
    APSimulationSummary

    Examples
    --------
    >>> s = simulate_ap_summary("wr", [5, 40], 20000, p=0.5, rng=1)
    >>> bool(np.all(np.abs(s.mean - expected_ap_wr(0.5, [5, 40])) < 4 * s.se_mean))
    True
    """
    N, m, p, ks, scalar = _check_model_args(model, N, m, p, k)
    n_sims = check_int(n_sims, "n_sims", low=2)
    chunk_elements = check_int(chunk_elements, "chunk_elements", low=1)
    rng = np.random.default_rng(rng)
    shift = None
    sums = np.zeros((4, ks.size))
    for chunk in _iter_ap_chunks(model, N, m, p, ks, n_sims, rng, chunk_elements):
        if shift is None:
            shift = chunk.mean(axis=0)
        d = chunk - shift
        d2 = d * d
        sums[0] += d.sum(axis=0)
        sums[1] += d2.sum(axis=0)
        sums[2] += (d2 * d).sum(axis=0)
        sums[3] += (d2 * d2).sum(axis=0)
    n = float(n_sims)
    e1, e2, e3, e4 = sums / n
    mean = shift + e1
    m2 = _max0(e2 - e1**2)
    mu4 = _max0(e4 - 4 * e3 * e1 + 6 * e2 * e1**2 - 3 * e1**4)
    var = m2 * n / (n - 1)
    se_mean = np.sqrt(var / n)
    # Var(s^2) = (mu4 - sigma^4)/n + 2 sigma^4/(n(n-1)); the first term is estimated by
    # m4 - m2^2 (>= 0 for sample moments), which keeps the second-order term when
    # mu4 = sigma^4 (e.g. AP@1 ~ Bernoulli(1/2), where (X - mu)^2 is constant)
    se_var = np.sqrt(_max0(mu4 - m2**2) / n + 2.0 * var**2 / (n * (n - 1)))
    f = (lambda a: float(a[0])) if scalar else (lambda a: a)
    return APSimulationSummary(n_sims, f(mean), f(var), f(se_mean), f(se_var))


def _max0(x):
    return np.maximum(x, 0.0)


# --------------------------------------------------------------------------- MAP@k


def map_baseline(N, m, k, n_users=None):
    """Random-baseline mean and variance of MAP@k (offline model) over users.

    MAP@k is the mean of per-user AP@k (AP25 eq 3.3). Under random rankings,
    independent across users, ``E[MAP@k] = mean_u E[AP@k_u]`` and
    ``Var(MAP@k) = sum_u Var(AP@k_u) / |U|^2`` (= ``Var(AP@k)/|U|`` for
    identical users).

    Parameters
    ----------
    N, m : int or array_like of int
        Items and relevant items, either scalars (identical users; then
        ``n_users`` is required) or one entry per user (broadcast together;
        ``n_users``, if given, must match).
    k : int or array_like of int
        Cutoffs (``<= min(N)``).
    n_users : int, optional
        Number of users ``|U|``.

    Returns
    -------
    MAPBaseline
        ``(mean, var)`` shaped like ``k``; ``.se`` is the standard deviation.

    References
    ----------
    AP25 eq 3.3, Thms 4.2 and 4.4.

    Examples
    --------
    >>> b = map_baseline(50, 25, 40, n_users=100)
    >>> round(b.mean, 5), round(b.var * 100, 5)
    (0.4355, 0.00699)
    >>> round(map_baseline([10, 10, 20], [1, 2, 1], 5).mean, 6)  # per-user N and m
    0.20034
    """
    N_a = np.asarray(N)
    m_a = np.asarray(m)
    per_user = N_a.ndim > 0 or m_a.ndim > 0
    if not per_user:
        if n_users is None:
            raise ValueError("n_users is required when N and m are scalars")
        n_users = check_int(n_users, "n_users", low=1)
        N_i, m_i = check_N_m(N, m)
        ks, _ = check_cutoffs(k, N_i)
        mean = expected_ap_wor(N_i, m_i, k)
        var = np.asarray(var_ap_wor(N_i, m_i, k)) / n_users
        return MAPBaseline(mean, float(var) if np.ndim(mean) == 0 else var)
    try:
        N_b, m_b = np.broadcast_arrays(N_a, m_a)
    except ValueError:
        raise ValueError(f"N and m must broadcast to one entry per user; got shapes "
                         f"{N_a.shape} and {m_a.shape}") from None
    N_b = N_b.reshape(-1)
    m_b = m_b.reshape(-1)
    if n_users is not None:
        n_users = check_int(n_users, "n_users", low=1)
        if n_users != N_b.size:
            raise ValueError(f"n_users must equal the number of per-user entries {N_b.size}; got {n_users}")
    U = N_b.size
    if U == 0:
        raise ValueError("N and m must not be empty")
    pairs, counts = np.unique(np.stack([N_b, m_b], axis=1), axis=0, return_counts=True)
    ks, scalar = check_cutoffs(k, int(pairs[:, 0].min()), upper_name="min(N)")
    mean = np.zeros(ks.size)
    var = np.zeros(ks.size)
    for (Ni, mi), c in zip(pairs, counts):
        Ni, mi = check_N_m(Ni, mi)
        mean += c * expected_ap_wor(Ni, mi, ks)
        var += c * var_ap_wor(Ni, mi, ks)
    return MAPBaseline(scalar_or_array(mean / U, scalar), scalar_or_array(var / U**2, scalar))


def map_baseline_wr(p, k, n_users):
    """Random-baseline mean and variance of MAP@k, online model: ``(E, Var/|U|)`` (AP25 Thms 5.1-5.2).

    Examples
    --------
    >>> b = map_baseline_wr(0.5, 40, n_users=100)
    >>> round(b.mean, 5), round(b.var * 100, 5)
    (0.27674, 0.00775)
    """
    n_users = check_int(n_users, "n_users", low=1)
    mean = expected_ap_wr(p, k)
    var = var_ap_wr(p, k)
    return MAPBaseline(mean, var / n_users)


@dataclass(frozen=True)
class MAPZTestResult:
    """z-test of an observed MAP@k against the random baseline.

    Attributes
    ----------
    statistic : z = (observed - null_mean) / null_se
    pvalue : normal-approximation p-value for ``alternative``
    observed, null_mean, null_se : the inputs of the statistic
    n_users : int
    alternative : {'two-sided', 'less', 'greater'}
    """

    statistic: object
    pvalue: object
    observed: object
    null_mean: object
    null_se: object
    n_users: int
    alternative: str


def map_ztest(observed_map, N, m, k, n_users=None, *, alternative="greater"):
    """How far an observed MAP@k lies above chance: z-score and p-value (offline model).

    ``z = (MAP@k_obs - E0[MAP@k]) / sd0(MAP@k)`` with the random-baseline mean
    and standard deviation of :func:`map_baseline` (AP25 Thms 4.2, 4.4; the
    standard deviation of MAP@k is ``sqrt(Var(AP@k)/|U|)``). The p-value uses
    the normal approximation (central limit theorem over users); it is
    unreliable for few users when AP@k is very skewed (small ``m/N`` and ``k``).
    When the null variance is 0 (``m = 0`` or ``m = N``) the statistic is
    ``+-inf`` (or ``nan`` if the observation equals the baseline).

    Parameters
    ----------
    observed_map : float or array_like
        Observed MAP@k (one per cutoff, broadcast against ``k``).
    N, m, k, n_users : as in :func:`map_baseline`.
    alternative : {'greater', 'two-sided', 'less'}
        'greater' tests "better than chance".

    Returns
    -------
    MAPZTestResult

    Examples
    --------
    >>> res = map_ztest(0.05, N=1000, m=1, k=10, n_users=500)
    >>> round(res.null_mean, 6)        # H_10 / 1000
    0.002929
    >>> res.statistic > 10, res.pvalue < 1e-12
    (True, True)
    """
    from .inference import check_alternative, pvalue_from_z

    alternative = check_alternative(alternative)
    obs = np.asarray(observed_map, dtype=float)
    if not np.all(np.isfinite(obs)) or (obs.size and (obs.min() < 0 or obs.max() > 1)):
        raise ValueError(f"observed_map must lie in [0, 1]; got {observed_map!r}")
    base = map_baseline(N, m, k, n_users)
    U = n_users if n_users is not None else int(np.broadcast(np.asarray(N), np.asarray(m)).size)
    mean = np.asarray(base.mean, dtype=float)
    se = np.sqrt(np.asarray(base.var, dtype=float))
    diff = obs - mean
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.sign(diff) * np.inf)
        z = np.where((se == 0) & (diff == 0), np.nan, z)
    pv = pvalue_from_z(z, alternative)
    scal = z.ndim == 0
    f = (lambda a: float(a)) if scal else (lambda a: np.asarray(a, dtype=float))
    return MAPZTestResult(f(z), f(pv), f(obs) if obs.ndim == 0 else obs, f(mean), f(se), int(U), alternative)


def map_zscore(observed_map, N, m, k, n_users=None):
    """z-score of an observed MAP@k against chance: ``map_ztest(...).statistic``.

    Examples
    --------
    >>> round(map_zscore(0.45, 50, 25, 40, n_users=100), 2)
    1.74
    """
    return map_ztest(observed_map, N, m, k, n_users).statistic
