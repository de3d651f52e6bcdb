"""What a design costs when several models share its added items, and which rungs to run before re-planning.

Part of :mod:`sampling_lib.design`.

References
----------
TORS24 (Li, Jin, Liu, Ren, Gao, Liu, ACM TORS 2024) Sec 6: Algorithm 1 (the ladder) and eq 44 (its cost for
one model); the full references are in the package's docstring (:mod:`sampling_lib.design`).
"""
from __future__ import annotations

import numpy as np

from .._validation import check_float, check_int, check_scheme
from ..estimators import GRID_N_MAX, prior_masses, spline_grid
from ..sampling import Design, size_ladder
from ._law import _count_cdf, _log_survive

__all__ = ["shared_cost", "first_rungs", "later_stages"]


def shared_cost(design, priors, pilot, *, scheme="binomial", grid_n=None, dependence=None):
    """Expected items scored per user when several models share a design's added items.

    A user goes on when *any* model needs it (the added items are shared, so
    that ``compare`` stays paired): the cost is that of the union of the
    users each model sends on, at least the largest single model's
    (:func:`predict`'s ``cost``) and at most their sum.

    Parameters
    ----------
    design : Design
    priors : sequence of LogsplineResult
        Each model's fitted prior (as :func:`predict`), all on 1..N.
    pilot : array_like of int, shape (M, len(priors)), or None
        The users' first-stage sampled ranks at ``design.n``, one column per
        model, a row per user (the same users for every model). None (e.g. a
        pilot of rank counts, which does not pair the models' ranks): the
        models are taken as independent.
    scheme : {"binomial", "hypergeometric"}, keyword-only
    grid_n : int, optional, keyword-only
        As :func:`predict`.
    dependence : float in [0, 1], optional, keyword-only
        lambda below (default: the pilot's own; 0 without a pilot).

    Returns
    -------
    float
        Expected items scored per user, held-out item included.

    Notes
    -----
    The second stage's decisions are the pilot's own: a threshold design
    extends the share of users with some model at rank <= t, exactly. A
    ladder's later rungs need the models' joint ranks at sizes the pilot has
    not seen. A model at rank 1 at size n stays at rank 1 at size s > n with
    probability c_m(s) = P_m(r_s = 1) / P_m(r_n = 1) under its prior (the
    sets are nested: a rank never falls). With a_m = 1{r_{n,m} = 1} c_m(s)
    the user goes on at s with probability between max_m a_m (the models go
    on together: comonotone) and 1 - prod_m (1 - a_m) (independently). The
    pilot shows where the models lie between the two at the first stage:
    lambda = (I - U) / (I - X), with U the share of users with some model at
    rank 1, I = 1 - prod_m (1 - p_m) and X = max_m p_m for the models'
    shares p_m; the later rungs take (1 - lambda) (1 - prod_m (1 - a_m)) +
    lambda max_m a_m. At the second stage this is the pilot's own union;
    beyond, an assumption (the same dependence at every rung), checked
    against stage-by-stage simulations of two models sharing the added items
    (tests/test_design.py; N = 5,000, n = 50, ladder to 1,600, 20,000 users):
    independent models 358 items per user predicted against 380 simulated
    (each model's own predicted cost was 7% low there), correlated ranks 281
    against 267, comonotone 245 against 245; the largest single model's
    cost was 213-231. On real scores run through the stages
    (:func:`sampling_lib.studies.shared_design_on_scores`, notebook 12; the
    command line on Last.fm 2K, benchmarks/README.md): Last.fm ALS and
    item-KNN 1,238 against 1,174 scored, MovieLens 100K popularity and ALS
    91.1 against 96.5, synthetic ratings 178.1 against 186.9 (the largest
    model alone: 1,064, 72.8, 164.4); where it is low, so are the models'
    own cost predictions, which extrapolate the top of P(R) from the pilot.

    References
    ----------
    TORS24 Algorithm 1 (the ladder) and eq 44 (its cost for one model).

    Examples
    --------
    >>> from sampling_lib import design, estimators, rankdist, sampling
    >>> R = rankdist.draw_global_ranks(rankdist.synthetic_models(5000)["beta_a0.35"], 2000, rng=0)
    >>> r = np.c_[sampling.sample_ranks(R, 5000, 50, rng=1), sampling.sample_ranks(R, 5000, 50, rng=2)]
    >>> fits = [estimators.logspline_fit(r[:, k], 5000, 50) for k in range(2)]
    >>> predict = design.predict
    >>> d = Design("ladder", 50, n_max=800)
    >>> one = max(predict(d, f, "recall@10", M=2000).cost[0] for f in fits)
    >>> bool(one <= shared_cost(d, fits, r) <= 2 * one)
    True
    """
    scheme = check_scheme(scheme)
    priors = list(priors)
    if not priors:
        raise ValueError("priors must hold at least one model's fitted prior")
    Ns = {int(p.weights_grid.N) for p in priors}
    if len(Ns) != 1:
        raise ValueError(f"the priors must share one N; got {sorted(Ns)}")
    N = design.check(Ns.pop())
    n = design.n
    if pilot is not None:
        pilot = np.asarray(pilot)
        if pilot.ndim != 2 or pilot.shape[1] != len(priors) or pilot.shape[0] < 1:
            raise ValueError(f"pilot must be an (M, {len(priors)}) array of first-stage ranks, a column per "
                             f"prior; got shape {pilot.shape}")
        if not np.issubdtype(pilot.dtype, np.integer) or pilot.min() < 1 or pilot.max() > n:
            raise ValueError(f"pilot must hold sampled ranks in 1..n={n}")
    if dependence is not None:
        dependence = check_float(dependence, "dependence", 0.0, 1.0)
    if design.kind in ("single", "full_subset"):
        return float(n if design.kind == "single" else (1.0 - design.fraction) * n + design.fraction * N)
    if design.kind == "threshold" and pilot is not None:      # the pilot's own union
        return float(n + design.n2 * np.mean((pilot <= design.threshold).any(axis=1)))
    grid_n = min(n, GRID_N_MAX) if grid_n is None else check_int(grid_n, "grid_n", low=2, high=N)
    grids = [(spline_grid(N, grid_n, p.knot_spacing, None, scheme), p) for p in priors]
    masses = [(prior_masses(p.beta, grid), grid.mid) for grid, p in grids]
    if design.kind == "threshold":
        p = np.array([g @ _count_cdf([design.threshold - 1], n - 1, R, N, 0, scheme)[:, 0] for g, R in masses])
        return float(n + design.n2 * (1.0 - np.prod(1.0 - p)))
    sizes = size_ladder(n, design.n_max, design.growth)
    # per model: P(r = 1 at each rung's size | prior)
    survive = np.array([[g @ np.exp(_log_survive(R, N, int(s) - 1, scheme)) for s in sizes[:-1]] for g, R in masses])
    if pilot is None:                   # independent models: the priors' own rank-1 shares
        top, lam = np.ones((1, len(priors)), bool), 0.0 if dependence is None else dependence
        first = survive[:, 0]
    else:
        top = pilot == 1
        lam = _rank_one_dependence(top) if dependence is None else dependence
        first = np.ones(len(priors))
    cost = float(n)
    for j in range(1, sizes.size):
        ratio = np.divide(survive[:, j - 1], survive[:, 0], out=np.zeros(len(priors)), where=survive[:, 0] > 0)
        c = top * (first * ratio)[None, :]
        go = (1.0 - lam) * (1.0 - np.prod(1.0 - c, axis=1)) + lam * c.max(axis=1)
        cost += (int(sizes[j]) - int(sizes[j - 1])) * float(go.mean())
    return cost


def first_rungs(n, growth=2.0, max_size=None, *, n_max=None):
    """The sizes of a ladder's first rungs, run before re-planning on their merged ranks: the ladder's own
    sizes from n up to the largest of at most max(4n, n_max / 8), at most ``max_size``.

    The re-plan fits the prior on the merged ranks and predicts the chosen ladder from it, extrapolating the
    top of P(R) from the largest size run to n_max. Rungs to 4n alone leave that factor at n_max / 4n: about
    5 where the planner's ladders end near N / 5 and N / n is about 100 (MovieLens 100K, Last.fm 2K), where
    the re-planned half-widths held, but over 200 at N / n of about 4,000, where they missed by up to 31%
    (``benchmarks/README.md``). Rungs to n_max / 8 bound it at 8 whatever N / n (the last three doublings
    are left to the plan). They cost nothing extra when the re-planned ladder continues them, as a ladder of
    the same growth to at least n_max / 8 does.

    Parameters
    ----------
    n : int
        The first stage's set size.
    growth : float, default 2.0
        The ladder's growth factor (:class:`Design`).
    max_size : int, optional
        The largest set any user can take (the smallest N_u; the ladder's last size is truncated at it).
    n_max : int, optional
        The top of the ladder the plan chose on the first stage (or a guess): the rungs reach n_max / 8
        when that is above 4n. Without it, n -> 4n.

    Examples
    --------
    >>> first_rungs(100).tolist(), first_rungs(100, 1.5).tolist(), first_rungs(100, max_size=300).tolist()
    ([100, 200, 400], [100, 150, 225, 338], [100, 200, 300])
    >>> first_rungs(10, n_max=8960).tolist()         # N / n = 4,096: the ladder 10 -> 8,960 up to 1,120
    [10, 20, 40, 80, 160, 320, 640]
    """
    n = check_int(n, "n", low=2)
    reach = 4 * n
    top = 8 * n
    if n_max is not None:
        n_max = check_int(n_max, "n_max", low=n)
        reach = max(reach, n_max / 8)
        top = min(n_max, max(top, 2 * int(reach)))
    if max_size is not None:
        top = min(top, check_int(max_size, "max_size", low=n))
    sizes = size_ladder(n, top, growth)       # the ladder's own sizes (its last step truncated at the top)
    return sizes[sizes <= reach]


def later_stages(design, n):
    """Rounds of scoring after a first stage of n items that a design's users may go through.

    A ladder takes one per size above n (:func:`size_ladder`, with the
    design's growth); a second stage, a larger single set and full ranking
    of a subset take one; the first stage alone none.

    Examples
    --------
    >>> from sampling_lib.sampling import Design
    >>> d2, d15 = Design("ladder", 18, n_max=3456), Design("ladder", 18, n_max=3456, growth=1.5)
    >>> later_stages(d2, 18), later_stages(d15, 18), later_stages(Design("single", 18), 18)
    (8, 13, 0)
    """
    if design.kind == "ladder":
        return int(size_ladder(design.n, design.n_max, design.growth).size - 1)
    return int(not (design.kind == "single" and design.n == n))


def _rank_one_dependence(top):
    """lambda in [0, 1]: where the share of users with some model at rank 1 lies between the models'
    independence (0) and their largest possible overlap (1)."""
    p = top.mean(axis=0)
    any_ = top.any(axis=1).mean()
    indep, most = 1.0 - np.prod(1.0 - p), p.max()
    return float(np.clip((indep - any_) / (indep - most), 0.0, 1.0)) if indep - most > 1e-12 else 0.0


# ----------------------------------------------------------------------------
# prediction: cost and the variance of the default estimator
# ----------------------------------------------------------------------------
