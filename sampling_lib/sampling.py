"""Sampled ranks from global ranks: fixed-size and adaptive item sampling.

Given a user's held-out item at global rank R among N items, sampling n-1 other
items and ranking the held-out item among the n gives the sampled rank
r = 1 + X, with X ~ Binomial(n-1, (R-1)/(N-1)) when the n-1 items are drawn
with replacement and X ~ Hypergeometric(N-1, R-1, n-1) without replacement
(KDD20 Sec 2.2). Both are simulated exactly and vectorized over users.

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation.
   KDD 2020, Sec 2.2.
.. [TORS24] Li et al. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Sec 6.1, Algorithm 1 (adaptive sampling).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._draws import log_prob_all_distinct, sample_added_negatives, sample_negatives
from ._validation import check_float, check_int, check_n_items, check_N_n, check_ranks, check_scheme

__all__ = ["SHORT_FIRST_STAGE", "sample_ranks", "adaptive_sample_ranks", "DESIGN_KINDS", "Design", "sample_design", "size_ladder",
           "next_ladder_size",
           "adaptive_stop_distribution",
           "sampling_efficiency", "SamplingEfficiency",
           "sample_negatives", "next_stage_sizes", "sample_added_negatives", "log_prob_all_distinct"]


def _items_and_ranks(global_ranks, N, n):
    """(R, N as int or per-user array, n) with 1 <= R_u <= N_u and 2 <= n <= N_u."""
    if np.ndim(N) == 0:
        N, n = check_N_n(N, n)
        return check_ranks(global_ranks, N, name="global_ranks"), N, n
    n = check_int(n, "n", low=2)
    R = check_ranks(global_ranks, np.iinfo(np.int64).max, name="global_ranks")
    N = check_n_items(N, R.size)
    if isinstance(N, int):
        N, n = check_N_n(N, n)
        return check_ranks(R, N, name="global_ranks"), N, n
    if N.min() < n:
        raise ValueError(f"n must lie in 2..N_u for every user; got n={n} > min N_u={N.min()}")
    bad = np.flatnonzero(R > N)
    if bad.size:
        i = bad[0]
        raise ValueError(f"global_ranks must lie in 1..N_u; user index {i} has rank {R[i]} > "
                         f"N_u={N[i]}")
    return R, N, n


def sample_ranks(global_ranks, N, n, *, scheme="binomial", rng=None):
    """Simulate sampled ranks r_u in 1..n from global ranks R_u in 1..N.

    Parameters
    ----------
    global_ranks : array_like of int
        Global ranks R_u of the held-out items, in 1..N (1..N_u).
    N : int or array_like of int, shape (M,)
        Number of items, or per-user candidate counts N_u (the held-out item
        of user u is ranked among its own N_u candidates and the n - 1
        sampled items are drawn from the other N_u - 1; equal N_u give
        exactly the draws of the int).
    n : int
        Sample-set size: the held-out item plus n-1 sampled items, 2 <= n <= N.
    scheme : {"binomial", "hypergeometric"}, keyword-only
        With replacement (KDD20 eq 6) or without replacement.
    rng : None, int or numpy.random.Generator, keyword-only

    Returns
    -------
    ndarray of int64
        Sampled ranks in 1..n.

    Examples
    --------
    >>> sample_ranks([1, 1000], N=1000, n=100, rng=0)
    array([  1, 100])
    >>> sample_ranks([500, 500], N=[500, 1000], n=100, rng=0)[0]    # last of its own 500
    np.int64(100)
    """
    R, N, n = _items_and_ranks(global_ranks, N, n)
    check_scheme(scheme)
    rng = np.random.default_rng(rng)
    if scheme == "binomial":
        X = rng.binomial(n - 1, (R - 1) / (N - 1))
    else:
        X = rng.hypergeometric(R - 1, N - R, n - 1)
    return X.astype(np.int64) + 1


def adaptive_sample_ranks(global_ranks, N, n0, n_max, *, scheme="binomial", rng=None, growth=2.0):
    """Adaptive item sampling, TORS24 Algorithm 1.

    Every user starts with a sample set of size n_0 (n_0 - 1 sampled items).
    While the held-out item is ranked first (r_u = 1) and the set is smaller
    than n_max, the set size doubles: n_{j+1} = 2 n_j, i.e. n_j further items
    are sampled and added to the set (TORS24 Sec 6.1: "we sample another set of
    n_0 items"). The user's final rank r_u and size n_u are returned.

    Decision (TORS24 leaves it implicit): doubling stops at n_max, which need
    not be n_0 times a power of 2; the last step is truncated to n_max. Under
    ``"hypergeometric"`` the added items are drawn without replacement from
    the items not yet in the set, so the set is always a uniform sample of
    size n_u - 1 from the other N-1 items.

    Because r_u = 1 means all previously sampled items rank below the held-out
    item, the rank after adding items is 1 + (number of added items ranked
    above it), which is simulated directly.

    ``N`` may be per-user candidate counts N_u (as :func:`sample_ranks`;
    n_max <= min N_u).

    ``growth`` (default 2, TORS24's doubling) is the factor from one size to
    the next (:func:`size_ladder`): a factor below 2 stops each user closer
    to the size where its first sampled item ranks above the held-out one,
    for more rounds of scoring. Every stopping rule that depends only on the
    ranks seen keeps the likelihood the kernel at the final (n_u, r_u)
    (:func:`sampling_lib.estimators.logspline_fit`, Notes).

    Returns
    -------
    sampled_ranks : ndarray of int64, in 1..n_u
    sample_sizes : ndarray of int64, in n_0..n_max

    Examples
    --------
    >>> r, nu = adaptive_sample_ranks([1, 500, 1000], N=1000, n0=10, n_max=80, rng=1)
    >>> nu.tolist()[0], r.tolist()[0]            # the top item doubles up to n_max
    (80, 1)
    """
    R, N, n0 = _items_and_ranks(global_ranks, N, n0)
    n_max = check_int(n_max, "n_max", low=n0, high=N if isinstance(N, int) else int(N.min()))
    growth = check_growth(growth)
    check_scheme(scheme)
    rng = np.random.default_rng(rng)
    size = np.full(R.size, n0, dtype=np.int64)
    r = sample_ranks(R, N, n0, scheme=scheme, rng=rng)
    active = (r == 1) & (size < n_max)
    while np.any(active):
        idx = np.flatnonzero(active)
        new_size = next_ladder_size(size[idx], n_max, growth)
        extra = new_size - size[idx]
        Ri = R[idx]
        Ni = N if isinstance(N, int) else N[idx]
        if scheme == "binomial":
            above = rng.binomial(extra, (Ri - 1) / (Ni - 1))
        else:
            # the size[idx]-1 items already drawn all rank below the held-out item
            bad_left = (Ni - Ri) - (size[idx] - 1)
            above = rng.hypergeometric(Ri - 1, bad_left, extra)
        r[idx] = 1 + above
        size[idx] = new_size
        active = (r == 1) & (size < n_max)
    return r, size



#: The kinds of :class:`Design`.
DESIGN_KINDS = ("single", "threshold", "ladder", "full_subset")
#: A first-stage set of at least this share of the design's n counts as a first stage a few items short:
#: NCF's published ``*.test.negative`` lines that list the held-out item among their 99 negatives give
#: sets of 99 (or 98) beside 100 (156 of 6,040 users of ml-1m). Such users are at the ladder's first rung
#: and go on to its next size like the others; the estimator takes their own n_u.
SHORT_FIRST_STAGE = 0.9


@dataclass(frozen=True)
class Design:
    """A sampled-evaluation design (module docstring).

    Attributes
    ----------
    kind : {"single", "threshold", "ladder", "full_subset"}
    n : int
        First-stage set size, held-out item included (the size, for "single").
    threshold : int
        "threshold": users with first-stage rank <= threshold get the second stage.
    n2 : int
        "threshold": items added in the second stage.
    n_max : int
        "ladder": the largest set size (sizes n, 2n, 4n, ..., n_max).
    fraction : float
        "full_subset": share of the users ranked in full (the others at n).
    growth : float, default 2.0
        "ladder": the factor from one set size to the next (:func:`size_ladder`;
        2 is TORS24's doubling).

    Examples
    --------
    >>> Design("threshold", 100, threshold=1, n2=900).describe()
    'stage 2: +900 items for the users at rank <= 1 of 100'
    """

    kind: str
    n: int
    threshold: int = 1
    n2: int = 0
    n_max: int = 0
    fraction: float = 0.0
    growth: float = 2.0

    def __post_init__(self):
        if self.kind not in DESIGN_KINDS:
            raise ValueError(f"kind must be one of {DESIGN_KINDS}; got {self.kind!r}")
        check_int(self.n, "n", low=2)
        if self.kind == "threshold":
            check_int(self.threshold, "threshold", low=1, high=self.n)
            check_int(self.n2, "n2", low=1)
        if self.kind == "ladder":
            check_int(self.n_max, "n_max", low=self.n)
            check_growth(self.growth)
        elif self.growth != 2:
            raise ValueError(f"growth applies to a ladder; a {self.kind} design got growth={self.growth!r}")
        if self.kind == "full_subset":
            check_float(self.fraction, "fraction", 0.0, 1.0, low_open=True)

    def check(self, N):
        """Raise unless every set fits in N items."""
        N = check_int(N, "N", low=2)
        top = {"single": self.n, "threshold": self.n + self.n2, "ladder": self.n_max,
               "full_subset": self.n}[self.kind]
        if top > N:
            raise ValueError(f"the design's largest set ({top} items) exceeds N={N}")
        return N

    def describe(self):
        """One line for tables."""
        if self.kind == "single":
            return f"single n = {self.n}"
        if self.kind == "threshold":
            return f"stage 2: +{self.n2} items for the users at rank <= {self.threshold} of {self.n}"
        if self.kind == "ladder":
            step = "double" if self.growth == 2 else f"x{self.growth:g}"
            return f"ladder {self.n} -> {self.n_max} ({step} while at rank 1)"
        return f"{self.fraction:.0%} of users ranked in full, the others at n = {self.n}"



def sample_design(global_ranks, N, design, *, scheme="binomial", rng=None):
    """Final sampled ranks and set sizes of users evaluated under a :class:`Design`.

    The stages are drawn as a framework would run them: a first stage of
    ``design.n`` items (held-out item included); then, for
    ``"threshold"``, ``design.n2`` more items for the users at rank <=
    ``design.threshold`` (their new rank: the old one plus the added items
    ranked above); for ``"ladder"``, :func:`adaptive_sample_ranks` to
    ``design.n_max``; for ``"full_subset"``, a random share
    ``design.fraction`` of the users ranked in full (set size N_u, rank R_u).
    Without replacement the added items are drawn from the items not yet in
    the set.

    Parameters
    ----------
    global_ranks : array_like of int, shape (M,)
    N : int or array_like of int, shape (M,)
        Items (or per-user N_u).
    design : Design
    scheme : {"binomial", "hypergeometric"}, keyword-only
    rng : keyword-only

    Returns
    -------
    sampled_ranks, sample_sizes : ndarray of int64, shape (M,)

    Examples
    --------
    >>> r, s = sample_design([1, 2, 900], 1000, Design("threshold", 10, threshold=1, n2=90), rng=0)
    >>> s.tolist()[:2], int(s[2]) in (10, 100)
    ([100, 100], True)
    """
    if not isinstance(design, Design):
        raise TypeError(f"design must be a sampling_lib.sampling.Design; got {type(design).__name__}")
    scheme = check_scheme(scheme)
    rng = np.random.default_rng(rng)
    R, NN, n = _items_and_ranks(global_ranks, N, design.n)
    Nu = np.full(R.size, NN, dtype=np.int64) if isinstance(NN, int) else NN
    design.check(int(Nu.min()))
    if design.kind == "ladder":
        return adaptive_sample_ranks(R, NN, n, design.n_max, scheme=scheme, rng=rng, growth=design.growth)
    r = sample_ranks(R, NN, n, scheme=scheme, rng=rng)
    size = np.full(R.size, n, dtype=np.int64)
    if design.kind == "threshold":
        idx = np.flatnonzero(r <= design.threshold)
        Ri, Ni, ri = R[idx], Nu[idx], r[idx]
        if scheme == "binomial":
            above = rng.binomial(design.n2, (Ri - 1) / (Ni - 1))
        else:   # r - 1 of the n - 1 drawn items rank above, n - r below: draw n2 of the rest
            above = rng.hypergeometric(Ri - ri, (Ni - Ri) - (n - ri), design.n2)
        r[idx] = ri + above
        size[idx] = n + design.n2
    elif design.kind == "full_subset":
        full = rng.random(R.size) < design.fraction
        r[full], size[full] = R[full], Nu[full]
    return r, size


def check_growth(growth):
    """A ladder's growth factor as a float in (1, 1024]."""
    return check_float(growth, "growth", 1.0, 1024.0, low_open=True)


def next_ladder_size(size, n_max, growth=2.0):
    """The ladder's next set size after ``size``: ceil(growth x size), at least size + 1, at most n_max.

    Exact for an integer growth (2: TORS24's doubling) while growth x size stays below 2^53.

    Examples
    --------
    >>> next_ladder_size(np.array([17, 26, 39]), 50, 1.5).tolist()
    [26, 39, 50]
    """
    size = np.asarray(size, dtype=np.int64)
    up = np.ceil(np.round(growth * size, 9)).astype(np.int64)     # rounded first: 1.1 x 10 is 11.000000000000002
    return np.minimum(np.maximum(up, size + 1), n_max)


def size_ladder(n0, n_max, growth=2.0):
    """The sample-set sizes of adaptive sampling: n_0, 2 n_0, 4 n_0, ... up to n_max (TORS24 Alg 1).

    The last step is truncated to n_max (see :func:`adaptive_sample_ranks`).
    With a ``growth`` other than 2, each size is :func:`next_ladder_size` of
    the one before.

    Examples
    --------
    >>> size_ladder(100, 700).tolist()
    [100, 200, 400, 700]
    >>> size_ladder(100, 700, growth=1.5).tolist()
    [100, 150, 225, 338, 507, 700]
    """
    n0 = check_int(n0, "n0", low=1)
    n_max = check_int(n_max, "n_max", low=n0)
    growth = check_growth(growth)
    ladder = [n0]
    while ladder[-1] < n_max:
        ladder.append(int(next_ladder_size(ladder[-1], n_max, growth)))
    return np.array(ladder, dtype=np.int64)


def adaptive_stop_distribution(pmf, n0, n_max):
    """Exact distribution of where adaptive sampling stops, sampling with replacement.

    A user with global rank R has r = 1 at size s with probability
    ``(1 - (R-1)/(N-1))^(s-1)`` (all s - 1 sampled items rank below the held-out
    item). Under TORS24 Algorithm 1 the user moves to the next size of the
    :func:`size_ladder` while r = 1, so the share of users stopping at n_j is
    ``S(n_{j-1}) - S(n_j)`` with ``S(s) = sum_R P(R) (1 - (R-1)/(N-1))^(s-1)``
    (S(n_{-1}) = 1), and the share still at r = 1 at n_max is ``S(n_max)``.

    Parameters
    ----------
    pmf : array_like, shape (N,)
        Distribution P(R) of the users' global ranks.
    n0, n_max : int

    Returns
    -------
    sizes : ndarray of int
        The ladder.
    stop : ndarray
        Share of users resolved (r > 1) at each size.
    capped : float
        Share of users with r = 1 at n_max.

    References
    ----------
    TORS24 Algorithm 1, eq 44.

    Examples
    --------
    >>> sizes, stop, capped = adaptive_stop_distribution(np.full(100, 0.01), 10, 40)
    >>> sizes.tolist(), round(float(stop.sum() + capped), 12)
    ([10, 20, 40], 1.0)
    """
    w = np.asarray(pmf, dtype=float)
    N = w.size
    sizes = size_ladder(n0, n_max)
    q = 1.0 - np.arange(N) / (N - 1)                     # 1 - theta_R
    surv = np.array([w @ q ** (s - 1) for s in sizes])    # P(r = 1 at size s)
    stop = np.concatenate([[1.0], surv[:-1]]) - surv
    return sizes, stop, float(surv[-1])

# ---------------------------------------------------------------------------
# Sampling efficiency of adaptive sampling (TORS24 Sec 6.3, eq 44, Fig 9)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SamplingEfficiency:
    """Per-step counts and average cost C_j of adaptive sampling (TORS24 eq 44).

    Attributes
    ----------
    sizes : ndarray of int
        The size ladder n_0 < n_1 = 2 n_0 < ... < n_t = n_max (last step truncated).
    entering : ndarray of int
        Users still at r_u = 1 when step j starts: M - sum_{p<j} m_p (M for j = 0).
    finished : ndarray of int
        m_j: users whose final size is n_j and whose final rank is r_u > 1.
    cost : ndarray of float
        C_0 = M n_0 / m_0 and C_j = entering_j (n_j - n_{j-1}) / m_j: the average
        number of items sampled per user resolved (r_u > 1) at step j; ``inf``
        where m_j = 0.
    capped : int
        Users still at r_u = 1 at n_max (not counted in any m_j).
    N : int or None
        Number of items, if given (for ``sizes / N``).
    """

    sizes: np.ndarray
    entering: np.ndarray
    finished: np.ndarray
    cost: np.ndarray
    capped: int
    N: int | None = None

    def n_max_for(self, max_cost):
        """Largest n_j such that C_i <= max_cost for every i <= j (n_0 if none)."""
        ok = np.cumprod(self.cost <= max_cost).astype(bool)
        return int(self.sizes[np.flatnonzero(ok)[-1]]) if ok.any() else int(self.sizes[0])

    def knee(self, rel_increase=0.25):
        """Terminal size at the knee of the cost curve (a reproducible reading of TORS24 Fig 9).

        When the top of the rank distribution follows a power law, C_j grows in
        proportion to n_j (each doubling costs twice as much per resolved
        user), so the knee is where the *relative* cost C_j / n_j starts to
        rise. Returns the largest n_j, j >= 1, such that every
        C_i / n_i (1 <= i <= j) is at most (1 + rel_increase) times the
        smallest C_k / n_k seen so far (1 <= k <= i). C_0 is excluded: it
        also counts the n_0 items every user gets. Returns n_0 if the ladder
        has one size, n_1 if C_1 is infinite.

        Examples
        --------
        >>> eff = SamplingEfficiency(np.array([10, 20, 40, 80]), np.array([100, 40, 30, 20]),
        ...                          np.array([60, 10, 10, 5]), np.array([16.7, 40.0, 60.0, 320.0]), 15)
        >>> eff.knee(0.25)      # C/n = 2.0, 1.5, 4.0 from j = 1: the knee is at n = 40
        40
        """
        if self.sizes.size == 1:
            return int(self.sizes[0])
        rel = self.cost[1:] / self.sizes[1:]
        best = np.minimum.accumulate(rel)
        ok = np.cumprod(rel <= (1.0 + rel_increase) * best).astype(bool)
        return int(self.sizes[1 + np.flatnonzero(ok)[-1]]) if ok.any() else int(self.sizes[1])


def sampling_efficiency(sampled_ranks, sample_sizes, n0=None, n_max=None, *, N=None):
    """Sampling efficiency curve C_j of adaptive sampling, TORS24 eq 44 (Fig 9).

    Run :func:`adaptive_sample_ranks` with a large terminal size (TORS24: n_max
    close to N), then for each size n_j of the ladder count the m_j users who
    stop there and compute

        C_0 = M n_0 / m_0,
        C_j = (M - sum_{p<j} m_p) (n_j - n_{j-1}) / m_j,

    the average number of extra items sampled to resolve one user (r_u > 1) at
    step j. A sharp rise of C_j marks the terminal size n_max beyond which
    doubling buys little (TORS24 chooses ~12.4% of N on yelp).

    Decision (eq 44 states C_j for j != t only): at the terminal size, m_t
    counts only users whose final rank is r_u > 1, so the same formula applies
    to j = t; users still at r_u = 1 at n_max are reported as ``capped``.

    Parameters
    ----------
    sampled_ranks, sample_sizes : array_like of int
        The output of :func:`adaptive_sample_ranks`.
    n0, n_max : int, optional
        Initial and terminal sizes (default: min and max of ``sample_sizes``).
    N : int, optional, keyword-only
        Number of items (only stored, for plotting n_j / N).

    Returns
    -------
    SamplingEfficiency

    References
    ----------
    TORS24 Sec 6.3, eq 44, Fig 9.

    Examples
    --------
    >>> r, nu = adaptive_sample_ranks(np.arange(1, 1001), N=1000, n0=10, n_max=640, rng=0)
    >>> eff = sampling_efficiency(r, nu, 10, 640, N=1000)
    >>> eff.sizes.tolist()
    [10, 20, 40, 80, 160, 320, 640]
    >>> int(eff.finished.sum() + eff.capped)
    1000
    """
    sizes_u = np.asarray(sample_sizes)
    if sizes_u.ndim != 1 or sizes_u.size == 0:
        raise ValueError(f"sample_sizes must be a non-empty 1-D array; got shape {sizes_u.shape}")
    sizes_u = check_ranks(sizes_u, np.iinfo(np.int64).max, name="sample_sizes", upper_name="max")
    n0 = int(sizes_u.min()) if n0 is None else check_int(n0, "n0", low=2)
    n_max = int(sizes_u.max()) if n_max is None else check_int(n_max, "n_max", low=n0)
    if sizes_u.min() < n0 or sizes_u.max() > n_max:
        raise ValueError(
            f"sample_sizes must lie in n0..n_max={n0}..{n_max}; "
            f"got min {sizes_u.min()} and max {sizes_u.max()}"
        )
    r = check_ranks(sampled_ranks, n_max, name="sampled_ranks", upper_name="n_max")
    if r.size != sizes_u.size:
        raise ValueError(
            f"sampled_ranks and sample_sizes must have the same length; got {r.size} and {sizes_u.size}"
        )
    if N is not None:
        N = check_int(N, "N", low=n_max)
    ladder = size_ladder(n0, n_max)
    bad = ~np.isin(sizes_u, ladder)
    if bad.any():
        raise ValueError(
            f"sample_sizes must lie on the ladder {ladder.tolist()}; got {int(sizes_u[bad][0])}"
        )
    M = r.size
    resolved = r > 1
    finished = np.array([np.sum(resolved & (sizes_u == s)) for s in ladder], dtype=np.int64)
    entering = M - np.concatenate([[0], np.cumsum(finished)[:-1]])
    step = np.diff(ladder, prepend=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.where(finished > 0, entering * step / np.maximum(finished, 1), np.inf)
    capped = int(np.sum(~resolved & (sizes_u == n_max)))
    return SamplingEfficiency(ladder, entering, finished, cost.astype(float), capped, N)


def next_stage_sizes(sampled_ranks, sample_sizes, design, *, N=None, rng=None):
    """Each user's set size after the next stage of a nested design, decided from the ranks so far.

    The rule of :func:`sample_design`, applied to the ranks a framework
    observed on the current sets of one or more models. Several models share
    one set of added items per user (so that their comparison stays paired):
    a user goes on when *any* model needs it.

    Parameters
    ----------
    sampled_ranks : array_like, shape (M,) or (M, k)
        Current sampled ranks (held-out item among its current set, 1 = first)
        of the M users under each of k models; NaN where a model has no rank
        for the user.
    sample_sizes : array_like of int, shape (M,)
        Current set sizes n_u (held-out item included).
    design : Design
        ``"threshold"``: the second stage (every n_u = ``design.n``, or a few
        items short of it, :data:`SHORT_FIRST_STAGE`): the users at rank <=
        ``design.threshold`` go to ``design.n + design.n2`` items.
        ``"ladder"`` (TORS24 Algorithm 1): every n_u on
        :func:`size_ladder` (``design.n``, ``design.n_max``); a user at rank
        1 below ``n_max`` goes to the next size (its size doubled, or times
        ``design.growth``; the last step truncated to n_max), any stage. ``"single"``: every user from a
        common smaller size to ``design.n``. ``"full_subset"``: the second
        stage: a random ``design.fraction`` of the users (round(fraction M),
        at least one) is ranked in full (n_u = N_u).
    N : int or array_like of int, shape (M,), optional, keyword-only
        Items N_u: required by ``"full_subset"``; otherwise every new size
        must fit (checked when given).
    rng : None, int or Generator, keyword-only
        Picks the users of ``"full_subset"``.

    Returns
    -------
    ndarray of int64, shape (M,)
        The new set sizes (a user that stops keeps its size).

    References
    ----------
    TORS24 Sec 6.1, Algorithm 1 (the ladder).

    Examples
    --------
    >>> ranks = [[1, 4], [3, 2], [7, 9]]                 # 3 users, 2 models, first stage of 10
    >>> next_stage_sizes(ranks, [10, 10, 10], Design("threshold", 10, threshold=2, n2=90)).tolist()
    [100, 100, 10]
    >>> next_stage_sizes([[1, 4], [3, 2], [7, 9]], [10, 10, 10], Design("ladder", 10, n_max=80)).tolist()
    [20, 10, 10]
    """
    if not isinstance(design, Design):
        raise TypeError(f"design must be a sampling_lib.sampling.Design; got {type(design).__name__}")
    r = np.asarray(sampled_ranks, dtype=float)
    if r.ndim == 1:
        r = r[:, None]
    if r.ndim != 2 or r.shape[0] == 0:
        raise ValueError(f"sampled_ranks must have shape (M,) or (M, models) with M >= 1; got shape {r.shape}")
    size = check_ranks(sample_sizes, np.iinfo(np.int64).max, name="sample_sizes", upper_name="max")
    if size.size != r.shape[0]:
        raise ValueError(f"sample_sizes must have one size per user ({r.shape[0]}); got {size.size}")
    have = ~np.isnan(r)
    if not have.any(axis=1).all():
        i = int(np.flatnonzero(~have.any(axis=1))[0])
        raise ValueError(f"user index {i} has no rank under any model")
    bad = have & ((r < 1) | (r > size[:, None]) | (r != np.round(r)))
    if bad.any():
        i, m = map(int, np.argwhere(bad)[0])
        raise ValueError(f"sampled_ranks must be whole numbers in 1..n_u; user index {i} has rank {r[i, m]:g} "
                         f"(model {m}) with n_u = {size[i]}")
    best = np.where(have, r, np.inf).min(axis=1)            # the rank of the model that needs the most
    items = None
    if N is not None:
        items = check_n_items(N, size.size)
        items = np.full(size.size, items, np.int64) if isinstance(items, int) else items
        if (size > items).any():
            i = int(np.flatnonzero(size > items)[0])
            raise ValueError(f"sample_sizes must be <= N_u; user index {i} has n_u = {size[i]} > N_u = {items[i]}")
    kind = design.kind
    short = (size < design.n) & (size >= SHORT_FIRST_STAGE * design.n)     # a first stage a few items short
    if kind in ("threshold", "full_subset") and ((size != design.n) & ~short).any():
        i = int(np.flatnonzero((size != design.n) & ~short)[0])
        raise ValueError(f"a {kind} design has one stage after the first, of n = {design.n}; user index {i} has "
                         f"n_u = {size[i]} already")
    if kind == "threshold":
        new = np.where(best <= design.threshold, design.n + design.n2, size)
    elif kind == "ladder":
        ladder = size_ladder(design.n, design.n_max, design.growth)
        off = ~np.isin(size, ladder) & ~short
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ValueError(f"the sizes of a ladder are {ladder.tolist()}; user index {i} has n_u = {size[i]}")
        rung = np.maximum(size, design.n)           # a short first stage is at the first rung
        new = np.where((best == 1) & (rung < design.n_max), next_ladder_size(rung, design.n_max, design.growth),
                       size)
    elif kind == "single":
        if np.unique(size).size != 1 or size[0] >= design.n:
            raise ValueError(f"a single design of n = {design.n} extends sets of one common smaller size; "
                             f"got sizes {np.unique(size)[:5].tolist()}")
        new = np.full(size.size, design.n, np.int64)
    else:
        if items is None:
            raise ValueError("a full_subset design needs N (the items N_u each chosen user is ranked among)")
        pick = np.random.default_rng(rng).choice(size.size, max(1, int(round(design.fraction * size.size))),
                                                 replace=False)
        new = size.copy()
        new[pick] = items[pick]
    new = np.asarray(new, dtype=np.int64)
    if items is not None and (new > items).any():
        i = int(np.flatnonzero(new > items)[0])
        raise ValueError(f"the next stage would give user index {i} a set of {new[i]} items, more than its "
                         f"N_u = {items[i]}")
    return new
