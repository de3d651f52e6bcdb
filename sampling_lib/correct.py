"""Correct your own sampled evaluation: global metrics with bootstrap CIs.

The practitioner entry point. You ran a sampled evaluation (every test user's
held-out item ranked among itself and n - 1 sampled negatives, e.g. n = 100
as in NCF or RecBole's ``uni100``) and kept each user's *sampled rank* r_u in
1..n. This module turns those ranks into estimates of the *global* top-K
metrics (rank among all N items) with confidence intervals, and compares
models on the same users:

* :func:`estimate` -- one tidy table: naive sampled metric, corrected
  estimate, bootstrap CI, for every requested metric;
* :func:`compare` -- pairwise differences of corrected metrics between
  models with paired bootstrap CIs and Holm-adjusted decisions.

Both take every input kind the library reads -- per-user sampled ranks, a
counts table or :class:`~sampling_lib.counts.RankCounts`, per-user sample
sizes and item counts, popularity-sampled scores tables or
:class:`~sampling_lib.popularity.PopularityLog` -- and return one table
schema whatever the input (:data:`ESTIMATE_COLUMNS`, :data:`COMPARE_COLUMNS`:
a column that does not apply holds a documented value). The sufficient
statistic and its bootstrap are :mod:`sampling_lib.counts`; every estimator
(popularity ones included) comes from the registry
(:func:`sampling_lib.estimators.get_estimator`).

Readers of rank and score tables are in :mod:`sampling_lib.io`, tie rules and
ranks from scores in :mod:`sampling_lib.ranking`, a fixed negatives file in
:func:`sampling_lib.sampling.sample_negatives`, the estimators (by name) in
:func:`sampling_lib.estimators.get_estimator`, and the coverage / accuracy
simulations of these functions in :mod:`sampling_lib.studies`.

Conventions (README, "Conventions of evaluation frameworks"): n counts the
held-out item (RecBole ``uniN`` gives n = N + 1, NCF's 99 negatives n = 100);
N is the number of items the held-out item competes with in the full ranking,
itself included, which for frameworks that exclude the user's history is
N_u = items outside that history; negatives drawn with replacement keep the
binomial kernel exact when every draw is counted (a framework's own sampled
metric often collapses repeats: then use the per-user number of distinct
negatives and ``scheme="hypergeometric"``).

Everything works on the *sufficient statistic* of the sampled ranks: the
number of users per (sample size, sampled rank) cell (:class:`RankCounts`).
A bootstrap resample of the M users is then one multinomial draw of the count
vector, Multinomial(M, counts / M), so a replicate costs O(number of cells),
not O(M).

References
----------
.. [KR20] Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020.
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024 (estimators Secs 2.5, 4-6; Sec 7.2 for
   multiple comparisons).
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 13
   (percentile interval).
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import sparse

from ._compare_inputs import check_same_users, counts_inputs, model_inputs
from ._estimate_rows import (ESTIMATE_COLUMNS, POPULARITY_DEFAULT, _cell_draws, _cells_of, _check_ci,
                             _check_method, _clip_to_range, _estimate_one, _fit, _metric_head, _metric_range,
                             _n_items_of, _resolution, _tuple_draws)
from ._progress import stage
from ._threads import one_blas_thread
from ._validation import check_float, check_int, check_ranks, check_scheme
from .counts import bootstrap_loop, rank_counts, statistics
from .metrics import parse_metrics
from .popularity import is_popularity_input

__all__ = ["estimate", "compare"]

#: The columns of :func:`compare`'s table, for every input. ``users`` is -1 when unpaired models
#: have different numbers of users.
COMPARE_COLUMNS = (
    "metric", "K", "model_a", "model_b", "estimate_a", "estimate_b", "difference", "se", "statistic",
    "pvalue", "pvalue_adjusted", "reject", "decision", "ci_low", "ci_high", "ci_level", "n_comparisons",
    "adjust", "alpha", "method", "scheme", "users", "n_boot", "paired", "below_resolution",
)



# ----------------------------------------------------------------------------
# estimate
# ----------------------------------------------------------------------------
@one_blas_thread      # small matrices: one BLAS thread unless the user set one (sampling_lib._threads)
def estimate(sampled_ranks, N=None, n=None, metrics=("recall@10", "ndcg@10"), *, method=None,
             confidence_level=0.95,
             n_boot=1000, rng=None, sample_sizes=None, scheme=None, options=None,
             refit_prior=True, progress=False, item_weights=None, exclude=None):
    """Corrected global top-K metrics with bootstrap confidence intervals.

    From the sampled ranks r_u (rank of user u's held-out item among itself and
    n - 1 sampled negatives) estimate the global metric T = mean_u F(R_u) of
    the rank R_u among all N items (TORS24 eq 3), for every requested metric.

    Parameters
    ----------
    sampled_ranks : array_like of int, shape (M,), ranks table, counts table, RankCounts, SampledRanks, or popularity input
        Sampled ranks in 1..n (1 = the held-out item scored highest); a
        ranks table, the CLI's input as a DataFrame: columns ``user, rank``
        [+ ``model``, ``sample_size``, ``n_items``, ``first_rank``,
        ``scheme``], one row per user and model, read as
        :func:`sampling_lib.io.ranks_from_table` reads it (e.g.
        ``estimate(pd.read_csv("examples/ranks.csv"), N=3706, n=100)``); the
        output of a reader of :mod:`sampling_lib.io` (:class:`~sampling_lib.io.SampledRanks`:
        one or more models, e.g. from a scores table or a TREC run, with their
        per-user sample sizes and item counts when the file has them); or the
        sufficient statistic: a counts table (DataFrame with columns ``rank,
        count`` [+ ``sample_size``, ``n_items``], one model; see
        :func:`sampling_lib.counts.counts_from_frame`) or a
        :class:`~sampling_lib.counts.RankCounts`. Counts and the per-user
        ranks they count give identical tables (same ``rng``). Or
        popularity-sampled input (see ``item_weights``).
    N : int or array_like of int, shape (M,)
        Number of candidates of the global ranking: one int, or per-user
        counts N_u (the user's held-out item is ranked among its own N_u
        candidates, e.g. N_u = items - |history_u| when history items are
        excluded; see Notes). Optional when the counts table has an
        ``n_items`` column.
    n : int, optional
        Sample-set size (held-out item + n - 1 negatives; 100 for NCF's "99
        negatives", 101 for RecBole's ``uni100``, which draws 100). Required
        unless ``sample_sizes`` is given.
    metrics : str or sequence of str, default ("recall@10", "ndcg@10")
        Names like "recall@10", "ndcg@20", "ap@10", "precision@5", "mrr@10"
        (recall@K is the hit ratio HR@K).
    method : str, optional, keyword-only
        Estimator: "logspline" (empirical Bayes with a smooth log-spline prior
        on log R, the default, see below), "mle", "wmle", "mes"
        (rank-distribution estimators, AAAI21 eqs 18-27, TORS24 eqs 31-36),
        "bv", "bv_mle", "bv_mes" (Krichene-Rendle BV with uniform / MLE / MES
        prior, KR20, TORS24 eqs 8-10), "mn", "mn_mle", "mn_mes" (multinomial
        estimator, TORS24 eq 42), "cls" (KR20, TORS24 eq 7), "adaptive_mle"
        (users with different sample sizes, TORS24 eq 43); every name of
        :data:`sampling_lib.estimators.METHODS`. Default
        :data:`sampling_lib.estimators.DEFAULT_METHOD` ("logspline"), whatever
        the sample sizes: it takes per-user sample sizes (nested and adaptive
        designs) and users ranked in full; a method that cannot take them
        raises and names those that can (no method is switched silently).
    confidence_level : float in (0, 1), default 0.95, keyword-only
        Level of the two-sided percentile bootstrap interval.
    n_boot : int, default 1000, keyword-only
        Bootstrap replicates; 0 skips the bootstrap (NaN intervals).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, keyword-only
        Randomness of the bootstrap; an int seed makes the table reproducible.
        Several models: with an int, a SeedSequence or None, each model's
        bootstrap draws from its own ``numpy.random.default_rng(rng)``, so a
        model's rows do not depend on the other models given with it: they
        equal ``estimate`` of that model alone (what ``sampling-lib estimate
        --seed`` computes, one model at a time). A Generator is shared: the
        models draw from it one after the other, in their order.
    sample_sizes : array_like of int, shape (M,), optional, keyword-only
        Per-user sample sizes n_u (adaptive sampling, TORS24 Algorithm 1; a
        second stage for some users, :mod:`sampling_lib.design`): each user's
        final set size and rank are all the estimator needs (the design is
        ignorable, see :func:`sampling_lib.estimators.logspline_fit`). A user
        with n_u = N_u was ranked in full.
    scheme : {"binomial", "hypergeometric"}, optional, keyword-only
        Negatives drawn with replacement (the papers' model, binomial kernel)
        or without (distinct negatives, e.g. :func:`sampling_lib.sampling.sample_negatives`). For
        n << N the two agree closely; at a nested design's top sets they do
        not. Default: the scheme the input records
        (:attr:`~sampling_lib.io.SampledRanks.scheme`, the ``scheme`` column
        of a ranks table that ``sampling-lib ranks --scheme`` writes), else
        binomial. A scheme that contradicts the input's record is an error.
    options : dict, optional, keyword-only
        Extra keyword arguments of the estimator (e.g. ``{"gamma": 0.1}`` for
        BV, ``{"eta": 0.01}`` for MES, ``{"weight": "ap"}`` for WMLE,
        ``{"tol": 1e-8, "max_iter": 10000, "accelerate": "squarem"}`` for a
        converged MLE).
    refit_prior : bool, default True, keyword-only
        For bv_mle, bv_mes, mn_mle, mn_mes (``False`` raises for the other
        estimators, which have no fitted prior): re-fit the prior on every bootstrap
        replicate (one EM or MES fit and one n x n solve per replicate).
        ``False`` keeps the prior fixed at the full-sample fit, which makes a
        replicate one matrix product but ignores the prior's own sampling
        variability: MN and BV are shrunk towards their prior, so their
        fixed-prior bootstrap standard errors are too small (measured: about
        half the refitted ones for NDCG@10 with MN_MLE, N = 1000, n = 50,
        M = 800). Plain "bv" and "mn" (uniform prior) are always matrix
        products.
    progress : bool, keyword-only
        Show progress on stderr: the fit and the bootstrap as a tqdm bar on a
        terminal (or in Jupyter), otherwise as plain lines, throttled, for
        runs under nohup or CI (:mod:`sampling_lib._progress`).
    item_weights, exclude : optional, keyword-only
        **Popularity-sampled negatives** (RecBole ``popN``): when
        ``item_weights`` is given, or the first argument is a
        :class:`sampling_lib.popularity.PopularityLog` (a dict of them) or a
        scores table with the logged ``q`` column, the input is
        popularity-sampled: the first argument is then the scores table
        ``user, item, score, label[, model]`` (DataFrame or path) read with
        :func:`sampling_lib.popularity.popularity_logs_from_table`,
        ``exclude`` the users' history (``user, item``), ``method`` one of
        :data:`sampling_lib.estimators.POPULARITY_METHODS` (default
        "pop_mle"), ``options`` their options (``tol``, ``max_iter``,
        ``grid_size``). ``N``, ``n`` and ``sample_sizes`` do not apply (each
        user's N_u and n_u come from the data) and raise, as do
        ``scheme="hypergeometric"`` (without replacement is not supported)
        and ``refit_prior=False``. ``exclude`` without popularity input raises.

    Returns
    -------
    pandas.DataFrame
        The columns :data:`ESTIMATE_COLUMNS`, whatever the input, one row per
        (model, metric): ``model`` ("model" unless the input names its models,
        e.g. a popularity table with a ``model`` column), ``metric, K``,
        ``naive`` (the metric computed on the sampled ranks as if they were
        global ranks, what most papers report) with its bootstrap interval
        ``naive_ci_low, naive_ci_high``, ``estimate`` (the corrected global
        metric), ``se`` (the bootstrap standard deviation), ``ci_low,
        ci_high``, ``method``, ``scheme`` (the kernel's: the argument or the
        input's record), ``users``, ``N`` and ``n`` (nullable integers:
        <NA> when they vary per user), ``confidence_level, n_boot``,
        ``sensitivity_low/high`` (the range of the estimate under the
        estimator's alternative tuning: the default's prior-sensitivity band;
        NaN for estimators without one), ``bound_low/high`` (popularity input
        with item weights: the metric's bounds from the sampled ranks and the
        weights alone, :func:`sampling_lib.estimators.popularity_bounds`.
        They are point bounds: the range of the metric over rankings
        compatible with the *fitted* distribution of popularity mass, with
        no sampling uncertainty, so on a finite sample the truth can fall
        outside them (13 of 54 on unseen data, benchmarks/README.md); NaN otherwise), ``below_resolution`` (K < w, the metric lies inside
        the first sampled bin and is an extrapolation; w = (N - 1)/(n - 1)
        with the largest N_u and smallest n_u, see Notes), ``clipped``
        (the estimator's value fell outside the metric's range and was
        clipped into it, see Notes), ``full_halfwidth`` (the half-width of
        the interval full ranking of the same users would give, estimated
        from the fit: z sqrt(Var F(R) / M)) and ``precision_ratio``
        (the interval's width over twice that: the precision ratio
        :func:`sampling_lib.design.plan` targets; about 1 for full ranking,
        2-3 and more for one stage far below resolution; NaN without a
        bootstrap). Its denominator is estimated, so the column reads the
        realized ratio (over full ranking's own interval) within 4% once a
        ladder resolves the metric, and 16% below to 30% above it on one
        stage below resolution, where Var F(R) is the prior's
        extrapolation (benchmarks/README.md, "The precision-ratio column").

    Notes
    -----
    **What the interval covers.** Users are resampled with replacement and the
    whole estimator is re-run on every replicate (the default refits its prior
    on every replicate), so the percentile interval reflects both sources of
    randomness in the data: which users are in the test set (user sampling)
    and which negatives each user drew (item sampling). It does not see the
    estimator's bias, and below resolution the bias is what matters: with
    w = (N - 1)/(n - 1), global ranks R < w almost always give sampled rank 1,
    so a metric at K < w is extrapolated from the assumed shape of P(R) inside
    the first sampled bin. For the default, a metric below resolution
    (``below_resolution``) therefore gets the union of three percentile
    bootstrap intervals on the same draws: the log-spline prior with its
    penalty, and with the penalty divided and multiplied by 10 -- priors the
    sampled ranks cannot tell apart there. A resolved metric (K >= w, or some
    users ranked in full) gets the default's own percentile interval: the
    data identify it, and the union only widened it (benchmarks/README.md, two-stage designs: a ladder
    designs resolving Recall@10 on MovieLens 100K gave intervals 1.12-1.23x
    full ranking's with the union, 0.99-1.02x without, both covering in
    every draw; single-stage resolved metrics, Recall and NDCG at K = 20
    and 50 with N/n = 16-18 on six real populations, 20 draws each, covered
    in 90-100% of draws without it, 98.5% on average). The columns
    ``sensitivity_low/high`` give the range of the three point estimates
    (the prior-sensitivity band) for every metric. Coverage on the
    real-data panel, per data set x model family, with widths next to the MLE
    bootstrap interval's: notebook 10 (section 6) and ``benchmarks/README.md``.
    Estimators without alternatives (all the published ones) get the plain
    bootstrap interval, whose
    coverage drops as M grows (the standard error shrinks like 1/sqrt(M), the
    bias does not; notebook 09). The ``below_resolution`` column and the
    CLI's note say where this applies; to resolve such a metric, raise n or
    sample adaptively (TORS24 Algorithm 1, :func:`sampling_lib.sampling.sampling_efficiency`).

    **Estimates outside the metric's range.** The linear estimators (BV, MN,
    CLS and their fitted-prior variants) return weight vectors with negative
    entries, so their value can fall outside the range of the metric
    [min_R F(R), max_R F(R)] (e.g. ``estimate([1], 200, 10, method="bv")``
    gives 1.134 for recall@10). Such a value is not a possible metric value:
    the estimate, and every bootstrap replicate, is clipped into the range
    (which can only bring it closer to the truth, as the truth lies in the
    range), and the column ``clipped`` says that it happened (rounding errors
    below 1e-12 of the range are clipped silently). The distribution
    estimators (MLE, WMLE, MES, adaptive MLE) always lie in the range.

    **Per-user item counts.** With N an array, user u's sampled rank has
    kernel P(r | R; N_u, n_u) for R <= N_u (0 beyond) and the estimate is
    of the pooled metric over ranks 1..max N_u (model of
    :func:`sampling_lib.estimators.mle_fit`); users are grouped by
    (N_u, n_u) so that kernels are shared, and N_u that differ by less than
    the option ``n_items_tol`` (default
    :data:`sampling_lib.kernels.DEFAULT_N_ITEMS_TOL`, a bound on the total
    variation change of every kernel row, :func:`sampling_lib.kernels.n_items_tv_bound`)
    share one kernel. The methods of
    :data:`sampling_lib.estimators.PERUSER_METHODS` have a per-user
    likelihood in N_u; the others (BV, MN, CLS and their fitted-prior
    variants) are fitted per group of users with the same N_u bin and
    averaged with the groups' user shares (exactly the per-user form of BV and
    MN when every group holds one N_u; MN's M is the evaluation's number of
    users in every group, as the averaged estimate's variance is that of M
    users). Equal per-user values give the result
    of the int, exactly. The sufficient statistic has a cell per
    (N_u, n_u, r), so many distinct N_u make the bootstrap cost grow with the
    number of cells. With many cells the default draws on coarse cells (N_u
    in log-bins of width 0.1) and spreads each draw over its exact cells in
    proportion to their counts (the conditional expectation of the exact
    draw), when the share of the bootstrap variance this leaves out is at
    most 1% for every metric, computed per fit
    (the log-spline's ``draw_cells``, :data:`sampling_lib.estimators.COARSE_DRAW_MAX_SHARE`).

    **Bootstrap computation.** A replicate is a Multinomial(M, counts / M)
    draw of the per-(sample size, rank) counts (:func:`bootstrap_counts`).
    Linear estimators with a fixed prior (BV, MN with the uniform prior, and
    BV/MN with an MLE/MES prior when ``refit_prior=False``) keep the prior
    (and, for MN, M) fixed at the full-sample fit, so all replicates are one
    matrix product of the resampled count matrix with the fixed (n x m)
    sampled-metric matrix.
    MLE / WMLE / adaptive MLE are by default "100 EM steps from the uniform
    distribution" (the papers' code): this protocol is rerun on all
    replicates at once as batched matrix products (a warm start would change
    the estimator). With ``options={"tol": ...}`` they are solved to
    convergence and each replicate is warm-started from the full-sample
    solution. MES (fast dual Newton, about 5 steps) is refitted on all
    replicates at once, warm-started; CLS is linear in the sampled-rank
    distribution. The default's replicates are refitted all at once by a
    batched Newton iteration warm-started at the full-sample prior. With
    per-user N_u (README, "Per-user candidate counts"): the EM family's
    replicates come from a checked surrogate; CLS per group of N_u stays
    exactly linear; MES replicates are exact in the rank histogram (on a
    checked grid surrogate) and first order in the pooled kernel; MN with a
    fitted prior is first order in the prior (not checked per fit; the
    compact view says so); BV with a fitted prior keeps the prior's full
    effect and interpolates in N_u between nodes in log N (checked per fit,
    every replicate refitted if the check fails).

    **Choice of the default** ("logspline"). Measured on real rank
    distributions, and tuned by leave-one-dataset-out (
    ``benchmarks/bench_accuracy.py``, tables in ``benchmarks/README.md``,
    "Accuracy on real rank distributions"; notebook 10 a lighter version):
    29 recommender populations (popularity, item-KNN with 10 / all
    neighbours, EASE up to 6,000 items, ALS at a weak and a strong setting)
    on MovieLens 100K, Last.fm 2K (two catalogues: one family), Gowalla and
    Yelp2018 (LightGCN preprocessing, ~30,000 users x ~40,000 items), n in
    {20, 50, 100, 500}, M in {300, 1000, all}, 3 draws per cell (960
    evaluations), every estimator on the same draws against the users' true
    Recall/NDCG@1..50. For each held-out family the penalty and knot spacing
    were chosen among 7 x 3 settings on the other families (geometric mean
    of the error over the best published estimator's); held out, Recall /
    NDCG mean relative error (%), against the best published estimator:
    MovieLens 8.3 / 12.1 (penalty 200, spacing 0.25) vs 11.4 / 13.9;
    Last.fm 10.6 / 16.1 (70, 0.4) vs 17.0 / 25.7; Gowalla 28.4 / 44.0
    (70, 0.4) vs 37.8 / 48.3; Yelp2018 46.5 / 68.2 (70, 0.4) vs 37.2 /
    44.2 (MN_MLE / MN_MES). The shipped (70, 0.4) is the choice on all four
    families and on three of the four without one. It loses on Yelp2018
    because of one model: item-KNN with 10 neighbours leaves most held-out
    items tied at the bottom of the catalogue (median R 37,998 of 38,048),
    a point mass a smooth prior in log R does not follow below resolution;
    on the other four Yelp2018 models its Recall error is below every
    published estimator's. A split-half oracle (the prior from the other
    half of the users' true ranks) is at 2-3.5% on every family: below
    resolution the unknown shape of P(R), not the tuning, limits every
    estimator. The interval's factor (``SENSITIVITY_FACTOR`` = 10, below
    resolution only) covered 96.7-100% of the held-out families' Recall@10
    and NDCG@10 (leave-one-dataset-out would pick 3: 93.3-97.6%). It returns
    a proper distribution (estimates lie in the metric's range, Recall@K is
    monotone in K) and its bootstrap refits the prior in a batched Newton
    iteration.

    References
    ----------
    TORS24 eqs 3, 7-10, 31-36, 42-43; AAAI21 eqs 14, 18-27; Efron (2016),
    Biometrika 103(1) (g-modeling); Efron and Tibshirani (1993) ch. 13
    (percentile interval).

    Examples
    --------
    >>> from sampling_lib.rankdist import synthetic_models, draw_global_ranks
    >>> from sampling_lib.sampling import sample_ranks
    >>> pmf = synthetic_models(1000)["beta_a0.35"]
    >>> R = draw_global_ranks(pmf, 500, rng=0)
    >>> r = sample_ranks(R, 1000, 100, rng=1)
    >>> t = estimate(r, N=1000, n=100, metrics=["recall@10"], n_boot=200, rng=0)
    >>> print(t[["metric", "K", "method", "users", "below_resolution"]].to_string(index=False))
       metric  K    method  users  below_resolution
    recall@10 10 logspline    500              True
    >>> bool(t.ci_low[0] <= t.estimate[0] <= t.ci_high[0])
    True
    """
    if item_weights is None:
        sampled_ranks = _ranks_frame(sampled_ranks, N, n, "sampled_ranks")
    scheme = input_scheme(scheme, sampled_ranks)
    stats = statistics(sampled_ranks, N, n, sample_sizes, item_weights, exclude, scheme)
    ci = _check_ci(confidence_level)
    n_boot = check_int(n_boot, "n_boot", low=0)
    parsed = parse_metrics(metrics)
    methods = {m: _check_method(method, st, refit_prior, scheme) for m, st in stats.items()}
    generator = _model_generators(rng)
    tables = [_estimate_one(m, st, methods[m], parsed, scheme, options, refit_prior, ci, n_boot, generator(),
                            progress)
              for m, st in stats.items()]
    return pd.concat(tables, ignore_index=True)


def _model_generators(rng):
    """A function giving each model's bootstrap Generator: a new ``default_rng(rng)`` per model for a seed
    (an int, a SeedSequence, None), so that a model's interval is the same alone or with others (the CLI
    estimates one model per call); the caller's Generator itself when one is given (shared, in model order).

    Examples
    --------
    >>> g = _model_generators(0)
    >>> bool(g().random() == g().random())
    True
    >>> shared = np.random.default_rng(0)
    >>> g = _model_generators(shared)
    >>> g() is shared and g() is shared
    True
    """
    if isinstance(rng, np.random.Generator):
        return lambda: rng
    np.random.default_rng(rng)               # a bad rng fails here, before any fit
    return lambda: np.random.default_rng(rng)


def _ranks_frame(data, N, n, name):
    """A ranks table given as a DataFrame (``user, rank`` [+ ``model``, ``sample_size``, ``n_items``,
    ``first_rank``, ``scheme``], the CLI's input) read as :func:`sampling_lib.io.ranks_from_table` reads it;
    any other input as it is (counts and popularity-sampled scores tables included)."""
    if not isinstance(data, pd.DataFrame) or is_popularity_input(data):
        return data
    cols = set(map(str, data.columns))
    if "count" in cols or not {"user", "rank"} <= cols:
        return data
    from .io import ranks_from_table

    if N is not None and (isinstance(N, dict) or np.ndim(N) != 0):
        raise ValueError("N must be one int with a ranks table (per-user N_u go in its n_items column); got "
                         f"{type(N).__name__}")
    return ranks_from_table(data, n=n, N=N)


def input_scheme(scheme, data):
    """The kernel's scheme for ``data``: ``scheme`` when given, else the one the input records
    (:attr:`sampling_lib.io.SampledRanks.scheme`), else "binomial".

    A given scheme that contradicts the input's record raises ValueError: one of the two statements
    about how the negatives were drawn is wrong, and the kernels differ where a set is a sizeable share
    of the catalogue.

    Examples
    --------
    >>> input_scheme(None, [1, 2, 3]), input_scheme("hypergeometric", [1, 2, 3])
    ('binomial', 'hypergeometric')
    """
    from .io import SampledRanks

    recorded = data.scheme if isinstance(data, SampledRanks) else None
    if scheme is None:
        return recorded or "binomial"
    scheme = check_scheme(scheme)
    if recorded is not None and scheme != recorded:
        raise ValueError(f"scheme={scheme!r} contradicts the ranks' own record: their scheme column says "
                         f"{recorded} (how the negatives were drawn). Omit scheme to use it, or drop the column "
                         "to read the ranks otherwise")
    return scheme


# ----------------------------------------------------------------------------
# compare
# ----------------------------------------------------------------------------
@one_blas_thread
def compare(ranks, N=None, n=None, metrics=("recall@10", "ndcg@10"), *, method=None,
            confidence_level=0.95, n_boot=1000, rng=None, sample_sizes=None, alpha=0.05, adjust="holm",
            scheme=None, options=None, refit_prior=True, progress=False, item_weights=None,
            exclude=None, paired=None):
    """Pairwise differences of corrected metrics with paired bootstrap CIs and Holm.

    Several models evaluated on the **same users** (row u of every model is
    the same user): the users are resampled jointly (a paired bootstrap: one
    multinomial draw over the distinct tuples of per-model cells), every
    model is re-estimated on the replicate, and each pairwise difference of
    corrected metrics gets a bootstrap standard error. With per-user N_u
    (many cells) the tuples of the default's coarse cells are drawn instead
    when that moves the first-order variance of no difference by more than
    1% (the coarse draws of :func:`estimate`; 10^5 users and 2 models: 4.2 s
    -> 1.9 s).

    Parameters
    ----------
    ranks : dict {model: sampled ranks}, DataFrame (one column per model), ranks table, SampledRanks, counts table or dict {model: RankCounts}
        Per-user sampled ranks of every model (same users, same order; a
        ranks table ``user, model, rank[, ...]`` as :func:`estimate` takes
        it pairs the models by user), or
        per-model counts (a counts table with a ``model`` column, see
        :func:`counts_from_frame`): counts carry no pairing, so they are
        compared with an unpaired bootstrap (``paired=False``).
    N : int, array_like of int (M,), or dict {model: N}
        Number of candidates, or per-user counts N_u (as :func:`estimate`);
        optional with SampledRanks or counts that carry ``n_items``.
    n, metrics, method, confidence_level, n_boot, rng, sample_sizes, scheme, options, refit_prior, progress
        As :func:`estimate` (``sample_sizes`` may be a dict per model).
    item_weights, exclude : optional, keyword-only
        Popularity-sampled negatives, as :func:`estimate` (a scores table with
        a ``model`` column or a dict of logs of the same users in the same
        order; default method "pop_mle").
    alpha : float in (0, 1), keyword-only
        Family-wise error rate of the decisions (family = all model pairs, per metric).
    adjust : {"holm", "bonferroni", "none"}, keyword-only
        Multiple-comparison adjustment (:func:`sampling_lib.inference.adjust_pvalues`).
    paired : bool, optional, keyword-only
        Default True for per-user ranks (users resampled jointly) and False
        for counts (each model's users resampled independently, one
        multinomial draw per model in sorted-name order; valid for
        independent user sets and conservative when the models' errors on
        the same users are positively correlated). ``paired=True`` with
        counts is an error.

    Returns
    -------
    pandas.DataFrame
        The columns :data:`COMPARE_COLUMNS`, whatever the input, one row per
        (metric, pair): ``metric, K, model_a, model_b, estimate_a,
        estimate_b, difference, se, statistic, pvalue, pvalue_adjusted,
        reject, decision, ci_low, ci_high, ci_level, n_comparisons, adjust,
        alpha, method, scheme, users, n_boot, paired, below_resolution`` (``users`` is
        -1 when unpaired models have different numbers of users;
        ``below_resolution`` is True when the metric is below resolution for
        either model, as in :func:`estimate`).

    Notes
    -----
    The interval and the test come from one construction, the percentile
    bootstrap of the difference: ``ci_low, ci_high`` is its percentile
    interval at the Bonferroni level 1 - (1 - confidence_level) / k,
    simultaneous over the k = n_models (n_models - 1) / 2 pairs of a metric,
    and ``pvalue`` is the test that interval inverts
    (:func:`sampling_lib.inference.percentile_pvalue`: the smallest level at
    which the percentile interval excludes 0). So with ``adjust="bonferroni"``
    (or ``"none"``) and ``alpha = 1 - confidence_level`` a pair is decided
    exactly when its interval excludes 0. The default ``adjust="holm"``
    (TORS24 Sec 7.2 uses Bonferroni; Holm's step-down is uniformly more
    powerful at the same family-wise level) can decide a pair whose
    Bonferroni interval still touches 0; the terminal view says so on such
    rows. ``statistic`` is z = difference / se with the bootstrap standard
    error, for reference (earlier versions took the p-value from it, a normal
    approximation that could contradict the interval). A p-value of 0 means
    every replicate lies on one side of 0; p-values below about 1 / n_boot
    are not resolved by the replicates.
    The intervals cover user and item sampling, not the estimators' bias
    (which largely cancels in differences of models with similar rank
    distributions, but not in general).

    Unlike :func:`estimate`, compare does not clip estimates into the
    metric's range (two models both clipped to 1 would show no difference);
    a point estimate outside the range raises a ``RuntimeWarning`` naming the
    model and the metric.

    References
    ----------
    TORS24 Sec 7.2; Holm (1979), Scand. J. Statist. 6:65-70.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = {"A": rng.integers(1, 30, 400), "B": rng.integers(1, 101, 400)}
    >>> t = compare(r, N=2000, n=100, metrics="recall@50", n_boot=200, rng=0)
    >>> print(t[["model_a", "model_b", "decision"]].to_string(index=False))
    model_a model_b decision
          A       B    A > B
    """
    from .inference import ADJUSTMENTS, bootstrap_pairwise_rows
    if isinstance(ranks, pd.DataFrame) and {"user", "rank"} <= set(map(str, ranks.columns)):
        ranks = _ranks_frame(ranks, N, n, "ranks")     # a ranks table (long), not one column per model
    scheme = input_scheme(scheme, ranks)
    stats_, cell_of_user = {}, {}
    if item_weights is not None or is_popularity_input(ranks):
        stats_ = statistics(ranks, N, n, sample_sizes, item_weights, exclude, scheme)
        check_same_users(stats_)
        cell_of_user = {m: np.arange(lg.M) for m, lg in stats_.items()}    # a log: one cell per user
        paired = True if paired is None else bool(paired)
    else:
        if exclude is not None:
            raise ValueError("exclude applies to popularity-sampled input only (with item_weights, or a "
                             "scores table with the logged q); these are sampled ranks")
        cd = counts_inputs(ranks, N, n, sample_sizes)
        if cd is not None:
            if paired:
                raise ValueError("paired=True needs per-user ranks (the same users for every model); "
                                 "counts carry no pairing")
            paired = False
            stats_ = cd
        else:
            paired = True if paired is None else bool(paired)
    ci = _check_ci(confidence_level)
    n_boot = check_int(n_boot, "n_boot", low=2)
    alpha = check_float(alpha, "alpha", 0.0, 1.0, low_open=True, high_open=True)
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust must be one of {ADJUSTMENTS}; got {adjust!r}")
    parsed = parse_metrics(metrics)
    rng = np.random.default_rng(rng)
    if not stats_:
        for m, (r, s, Nm) in model_inputs(ranks, sample_sizes, N).items():
            rr = check_ranks(r, np.iinfo(np.int64).max, name=f"ranks[{m!r}]")
            stats_[m], cell_of_user[m] = rank_counts(rr, n, sample_sizes=s, n_items=Nm, return_inverse=True)
    if len(stats_) < 2:
        raise ValueError(f"compare needs at least 2 models; got {list(stats_)}")
    names = list(stats_)
    Nmax = max(int(_n_items_of(st).max()) for st in stats_.values())
    F, _ = _metric_head(parsed, Nmax)    # ranks 1..min(Nmax, max K): memory independent of N
    F_range = _metric_range(F, Nmax)
    fits = {}
    meth = None
    with stage(progress, f"fit {method or 'the default method'} ({len(names)} models)"):
        for m in names:
            st = stats_[m]
            mm = _check_method(method, st, refit_prior, scheme)
            if meth is not None and mm != meth:
                raise ValueError(f"models need the same method; got {meth!r} and {mm!r}")
            meth = mm
            # weights on 1..N_m (replicates use the metric on 1..N_m, a prefix of F)
            fits[m] = _fit(meth, st, int(_n_items_of(st).max()), parsed, scheme, options, refit_prior, F)
    point = {m: fits[m].estimate for m in names}
    for m in names:
        flag = _clip_to_range(point[m], F_range)[1]
        if flag.any():
            j = int(np.flatnonzero(flag)[0])
            warnings.warn(f"model {m!r}: the {meth} estimate of {parsed[j][0]} is {point[m][j]:.4g}, "
                          "outside the metric's range; compare reports unclipped estimates and "
                          "differences (clipping both models would hide their difference)",
                          RuntimeWarning, stacklevel=2)
    if paired:
        # distinct tuples of per-model cells (or coarse cells) = joint sufficient statistic of the
        # paired design (_tuple_draws)
        tuples, tcount, ncols, coarse_t, col = _tuple_draws(fits, stats_, cell_of_user)
        M = int(tcount.sum())
        T = tuples.shape[0]
        maps = {m: sparse.csr_matrix((np.ones(T), (np.arange(T), tuples[:, col[m]])), shape=(T, ncols[col[m]]))
                for m in names}
        p = tcount / M

        def draw(k, g):
            return g.multinomial(M, p, size=k)

        def work(Ct):
            return {m: fits[m].replicates(np.asarray((maps[m].T @ Ct.T).T), coarse=coarse_t) for m in names}
        users = M
        drawn = T
    else:
        Ms = {m: stats_[m].M for m in names}
        draws = {m: _cell_draws(fits[m], _cells_of(stats_[m])[2]) for m in names}

        def draw(k, g):     # one draw per model, in sorted-name order (order-free intervals)
            return {m: draws[m][0](k, g) for m in sorted(names)}

        def work(Cd):
            return {m: fits[m].replicates(Cd[m], coarse=draws[m][1]) for m in names}
        users = Ms[names[0]] if len(set(Ms.values())) == 1 else -1
        drawn = sum(draws[m][2].size for m in names)
        coarse_t = False

    outs = bootstrap_loop(n_boot, rng, draw, work, cells=drawn, progress=progress,
                          desc=f"{'paired' if paired else 'unpaired'} bootstrap {meth}"
                          + (f" (draws on {drawn:,} coarse user tuples)" if paired and coarse_t else ""))
    boot = {m: np.concatenate([o[m] for o in outs]) for m in names}
    rows = bootstrap_pairwise_rows(parsed, {m: point[m] for m in names}, boot, ci, adjust=adjust,
                                   alpha=alpha, extra={"method": meth, "scheme": scheme, "users": users,
                                                       "n_boot": n_boot, "paired": paired})
    out = pd.DataFrame(rows)
    w = {m: _resolution(stats_[m], scheme) for m in names}
    out["below_resolution"] = [K < max(w[a], w[b]) for K, a, b in zip(out.K, out.model_a, out.model_b)]
    return out[list(COMPARE_COLUMNS)]
