"""The estimator registry: one place that names, configures and builds every estimator.

``get_estimator(name, **options)`` returns an :class:`Estimator`, a callable
``est(sampled_ranks, N, n) -> w`` (a length-N weight vector; the estimate of
any metric F is ``w @ F(1..N)``). :func:`sampling_lib.correct.estimate` and
:func:`~sampling_lib.correct.compare`, :func:`sampling_lib.experiments.run_experiment`,
the command line (``--method`` choices) and the notebooks all build their
estimators here, so the set of names (:data:`sampling_lib.estimators.METHODS`), their options and the
way their bootstrap replicates are computed are written once.

Adding an estimator is one :class:`EstimatorSpec` registered with
:func:`register` in :mod:`sampling_lib.estimators._methods` (the registered estimators and the lists
of their names): its name, its fit function
``fit(sampled_ranks, N, n, *, scheme, **options) -> w``, the options it takes,
and how bootstrap replicates are computed (``bootstrap``):

* ``"em"`` -- a fixed number of EM steps from ``init`` (``tol=None``): all
  replicates run at once as batched EM on the resampled cell counts
  (:func:`em_fixed_iterations`); with a tolerance, each replicate is refitted
  warm-started from the full-sample solution (``warm_start_option``);
* ``"linear"`` -- the estimate is linear in the sampled-rank distribution for
  a fixed prior (BV, MN): a replicate is one matrix product with the sampled
  metric per cell (``sampled_metric``); with a fitted prior (``prior``) and
  ``refit_prior=True`` the prior is refitted on every replicate;
  BV_MLE / MN_MLE (and BV_MES / MN_MES) refit the prior of all replicates at
  once on the compressed grid (batched EM, or the batched MES solver), then
  solve the B linear systems together; with per-user N_u, MN's replicates are
  first order in the prior and BV's are solved at nodes in log N
  (:mod:`sampling_lib.estimators._linear_nodes`);
* ``"refit"`` -- the fit is run again on every replicate;
* ``"batched"`` -- the estimator refits all replicates at once itself
  (``replicates(fitted, Cb)``, e.g. the log-spline prior by a batched Newton
  iteration warm-started from the full-sample state returned by ``fit_state``;
  MES by a batched dual Newton method warm-started at the full-sample
  solution; CLS, which is linear in the sampled-rank distribution for a fixed
  prior, by one matrix product).

Compressed kernels: ``mle``, ``wmle``, ``mes``, ``cls`` and the
``*_mle`` / ``*_mes`` estimators take ``grid_tol`` (default
:data:`sampling_lib.kernels.DEFAULT_GRID_TOL`): they run on the bins of
:func:`sampling_lib.kernels.rank_grid`, whose kernel rows are within
``grid_tol`` in total variation of every row they stand for, at a cost that
does not grow with N (what the bound implies for each estimate is in
:func:`sampling_lib.estimators.mle_fit` and :func:`~sampling_lib.estimators.mes_fit`).
``grid_tol=0`` runs on the exact N x n kernel. Per-user N and varying sample
sizes use the exact kernels, except CLS, which solves each group of N_u on that
group's own grid.

An estimator may also declare ``alternatives(options) -> [dict, ...]``:
settings of its tuning that the data cannot tell apart (the log-spline
penalty divided and multiplied by 10). :func:`sampling_lib.correct.estimate`
fits each alternative on the same data and the same bootstrap draws, reports
the range of their point estimates (the prior-sensitivity band) and, for
metrics below resolution, returns the union of their bootstrap intervals, so
that the ambiguity is shown, not hidden.

The weights that ``fit_state`` returns may be length-N
arrays or lazy vectors with a method ``head(H)`` returning their first H
entries (e.g. :class:`~sampling_lib.estimators.GridWeights` of an estimator
that works on a compressed rank grid). :meth:`Estimator.fit_counts` needs
only ranks 1..H of the weights, H = the rows of the metric matrix (top-K
metrics are 0 beyond K, so H = min(N, max K) suffices): an estimator with lazy
weights then costs no memory of order N.

``n`` may be a per-user array of sample sizes (``varying_sizes=True``
estimators get it as is, others need one common size), and ``N`` a per-user
array of candidate counts N_u (``varying_items=True`` estimators get it as is:
the EM estimators, MES and the log-spline; the others -- BV, MN, CLS and their
fitted-prior variants -- are fitted per group of users with the same N_u bin
and averaged with the groups' user shares, the prior of a ``*_mle`` variant
being fitted once on all users with their own N_u and restricted to each
group's ranks, MN's M being the evaluation's users). Equal per-user values are
the int, exactly.

References
----------
.. [AAAI21] Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation
   Metrics under Sampling. AAAI 2021, eqs 18-27.
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, eqs 7-10, 31-36, 42-43.
.. [KR20] Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validation import check_array_size, check_int, check_n_items, check_scheme
from ..exceptions import EstimatorOptionError
from ..kernels import DEFAULT_N_ITEMS_TOL, n_items_bins
from ._bootstrap import FittedEstimator
from ._linear_groups import HeadWeights, group_prior, linear_group_solutions, linear_groups_prior_fit

__all__ = [
    "DEFAULT_METHOD",
    "ONE_STEP_PRIOR_KINDS",
    "BOOTSTRAP_KINDS",
    "INPUTS",
    "EstimatorSpec",
    "Estimator",
    "register",
    "registered",
    "get_estimator",
    "estimator_spec",
    "build_estimators",
    "fit_estimators",
]

#: How the bootstrap replicates of an estimator are computed (see the module docstring).
BOOTSTRAP_KINDS = ("em", "linear", "refit", "batched")

_COMMON_OPTIONS = ("scheme",)
#: What a registered estimator consumes (``EstimatorSpec.input``).
INPUTS = ("ranks", "popularity")


@dataclass(frozen=True)
class EstimatorSpec:
    """Everything the library needs to know about one estimator.

    Attributes
    ----------
    name : str
        Registered name (lower case), e.g. ``"bv_mle"``.
    fit : callable
        ``fit(sampled_ranks, N, n, *, scheme, **options) -> w`` (length N);
        ``n`` is an int, or the per-user sample sizes when ``varying_sizes``.
    options : tuple of str
        Keyword options ``fit`` accepts (besides ``scheme``, accepted by all).
    bootstrap : {"em", "linear", "refit"}
        How bootstrap replicates are computed (module docstring).
    prior : str, optional
        Registered name of the estimator whose output is the prior (``"mle"``
        for BV_MLE); passed to ``fit`` as ``prior=``.
    sampled_metric : callable, optional
        ``"linear"`` only: ``x = sampled_metric(F, N, n, prior, *, M, scheme, **options)``,
        the length-n sampled metric, so that the estimate is ``P~ @ x``.
    em_weights : callable, optional
        ``"em"`` only: ``em_weights(n, **options)`` the per-rank weights of a
        weighted EM (WMLE); default all ones.
    warm_start_option : str, optional
        ``"em"`` only: option through which a solution warm-starts a refit.
    varying_sizes : bool
        Accepts users with different sample sizes (``n`` a per-user array).
    varying_items : bool
        Accepts per-user item counts (``N`` a per-user array; the weight
        vector then has length max N_u, see :func:`sampling_lib.estimators.mle_fit`).
    horizon_option : str, optional
        Option that :func:`sampling_lib.correct.estimate` sets to the largest
        cutoff K of the requested metrics when not given (CLS ``max_rank``).
    fit_state : callable, optional
        ``"batched"`` only: ``fit_state(sampled_ranks, N, n, *, scheme, **options)
        -> (w, state)``; ``state`` warm-starts the replicates; ``w`` a length-N
        array or a lazy vector with ``head(H)`` (module docstring).
    replicates : callable, optional
        ``"batched"`` only: ``replicates(fitted, Cb) -> (B, m)`` estimates for
        bootstrap cell counts ``Cb`` (a :class:`FittedEstimator` is passed).
    alternatives : callable, optional
        ``alternatives(options) -> list of dict``: option sets of the same
        estimator under alternative tuning (see the module docstring).
    draw_cells : callable, optional
        ``"batched"`` only: ``draw_cells(fitted) -> (index, n_coarse, shares)``
        or None: coarse cells on which the bootstrap may draw (each exact
        cell's coarse cell ``index``; the draws are spread back over the exact
        cells in proportion to their counts) and the share of each metric's
        bootstrap variance this leaves out
        (:func:`sampling_lib.estimators._logspline_boot.coarse_draw_cells`);
        ``replicates(fitted, Cb, coarse=True)`` then takes counts of the
        coarse cells. None: draw on the exact cells.
    cell_influence : callable, optional
        With ``draw_cells``: ``cell_influence(fitted) -> (cells, m)``, the
        first-order influence of each exact cell on the metric estimates
        (:func:`sampling_lib.estimators._logspline_boot.cell_influence`), or
        None; the paired bootstrap of :func:`sampling_lib.correct.compare`
        checks with it how much drawing coarse user tuples moves the variance
        of each difference.
    fit_cells : callable, optional
        ``"batched"`` only: ``fit_cells(n_items, sizes, ranks, counts, *, scheme,
        **options) -> (w, state)``, the result of ``fit_state`` from the cells
        (N_u, n_u, r) and their user counts, without the per-user arrays
        (memory O(cells), not O(users): a counts table of 10^8 users); used by
        :meth:`Estimator.fit_counts` when given.
    input : {"ranks", "popularity"}
        What the estimator consumes: sampled ranks among uniform negatives
        (:class:`sampling_lib.counts.RankCounts`), or a popularity-sampled
        evaluation (:class:`sampling_lib.popularity.PopularityLog`: ``fit_state(log,
        **options)`` and ``replicates`` over per-user bootstrap weights).
    full_ranking : bool
        Takes users ranked in full (cells with n_u = N_u: the sampled rank is
        the global rank, whatever the scheme).
    bounds : callable, optional
        ``bounds(data, **options) -> (lower, upper)`` weight vectors whose
        metrics bound the estimand without the estimator's assumptions (the
        popularity estimators' no-log bounds), or None.
    fit_groups : callable, optional
        ``"batched"`` only, for estimators without a per-user-N form:
        ``fit_groups(groups, ranks, counts, n, F, *, scheme, **options) -> (w, state)``,
        the fit per group of N_u (:meth:`Estimator._groups`) from the cells' ranks and user
        counts, with a state from which ``replicates`` computes every replicate (CLS:
        :func:`sampling_lib.estimators._cls.cls_groups_fit`). Without it, per-user N is
        fitted by :meth:`Estimator._per_group` and every replicate is refitted.
    linear_kind : {"bv", "mn"}, optional
        ``"linear"`` only: which Gram matrix the batched replicates with a
        refitted prior solve (TORS24 eqs 9-10 or 42).
    summary : str
        One line for help texts.
    references : str
        Paper and equation keys.
    """

    name: str
    fit: Callable
    options: tuple = ()
    bootstrap: str = "refit"
    prior: str | None = None
    sampled_metric: Callable | None = None
    em_weights: Callable | None = None
    warm_start_option: str | None = None
    varying_sizes: bool = False
    horizon_option: str | None = None
    varying_items: bool = False
    summary: str = ""
    references: str = ""
    defaults: dict = field(default_factory=dict)
    fit_state: Callable | None = None
    replicates: Callable | None = None
    alternatives: Callable | None = None
    draw_cells: Callable | None = None
    cell_influence: Callable | None = None
    fit_cells: Callable | None = None
    fit_groups: Callable | None = None
    linear_kind: str | None = None
    input: str = "ranks"
    bounds: Callable | None = None
    full_ranking: bool = False

    def __post_init__(self):
        if self.input not in INPUTS:
            raise ValueError(f"input must be one of {INPUTS}; got {self.input!r}")
        if self.bootstrap not in BOOTSTRAP_KINDS:
            raise ValueError(f"bootstrap must be one of {BOOTSTRAP_KINDS}; got {self.bootstrap!r}")
        if self.bootstrap == "linear" and self.sampled_metric is None:
            raise ValueError(f"estimator {self.name!r}: bootstrap='linear' needs sampled_metric")
        if self.bootstrap == "batched" and (self.fit_state is None or self.replicates is None):
            raise ValueError(f"estimator {self.name!r}: bootstrap='batched' needs fit_state and "
                             "replicates")


_REGISTRY: dict[str, EstimatorSpec] = {}


def register(spec):
    """Register an :class:`EstimatorSpec` under ``spec.name`` (names are unique)."""
    if not isinstance(spec, EstimatorSpec):
        raise TypeError(f"spec must be an EstimatorSpec; got {type(spec).__name__}")
    if spec.name in _REGISTRY:
        raise ValueError(f"estimator {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def registered(input="ranks"):
    """Names of the registered estimators of ``input`` (:data:`INPUTS`), in registration order."""
    return tuple(k for k, v in _REGISTRY.items() if v.input == input)


def estimator_spec(name):
    """The :class:`EstimatorSpec` registered under ``name`` (case-insensitive)."""
    if not isinstance(name, str) or name.lower() not in _REGISTRY:
        raise ValueError(f"method must be one of {list(_REGISTRY)}; got {name!r}")
    return _REGISTRY[name.lower()]


class Estimator:
    """A configured estimator: ``est(sampled_ranks, N, n) -> w`` (length N).

    Built by :func:`get_estimator`. ``n`` is the common sample size, or for
    estimators that accept varying sizes (``adaptive_mle``) the per-user
    sample sizes (an array of the length of ``sampled_ranks``). ``N`` is the
    number of items, or for estimators that accept it (``spec.varying_items``)
    the per-user candidate counts N_u (w then has length max N_u).
    """

    def __init__(self, spec, options):
        self.spec = spec
        opts = dict(options)
        self.scheme = check_scheme(opts.pop("scheme", "binomial"))
        self.prior_options = dict(opts.pop("prior_options", None) or {})
        self.options = {**spec.defaults, **opts}
        self._prior = None
        if spec.prior is not None and "grid_tol" in self.options and "grid_tol" in estimator_spec(
                spec.prior).options:
            # the prior and the linear step share one grid
            self.prior_options.setdefault("grid_tol", self.options["grid_tol"])
        if spec.prior is not None:
            self._prior = get_estimator(spec.prior, scheme=self.scheme, **self.prior_options)

    def cache_key(self):
        """A hashable key of (name, scheme, options), or None if an option is an array."""
        def frozen(v):
            if isinstance(v, dict):
                return tuple(sorted((k, frozen(x)) for k, x in v.items()))
            if v is None or isinstance(v, (str, int, float, bool, np.integer, np.floating)):
                return v
            raise TypeError
        try:
            return (self.name, self.scheme, frozen(self.options), frozen(self.prior_options))
        except TypeError:
            return None

    @property
    def name(self):
        return self.spec.name

    def with_options(self, **options):
        """The same estimator with ``options`` replaced (scheme and prior options kept)."""
        return Estimator(self.spec, {**self.options, **options, "scheme": self.scheme,
                                     "prior_options": self.prior_options})

    def __repr__(self):
        opts = "".join(f", {k}={v!r}" for k, v in self.options.items() if k != "init")
        return f"get_estimator({self.name!r}, scheme={self.scheme!r}{opts})"

    # -- point estimate ----------------------------------------------------
    def _sizes(self, sampled_ranks, n):
        """(ranks, n for the fit): an int, or the per-user sizes for varying-size estimators."""
        if np.ndim(n) == 0:
            return sampled_ranks, check_int(n, "n", low=2)
        sizes = np.asarray(n)
        if sizes.shape != np.shape(sampled_ranks):
            raise ValueError(f"n must be an int or one sample size per user ({np.size(sampled_ranks)}); "
                             f"got shape {sizes.shape}")
        u = np.unique(sizes)
        if u.size == 1 and not self.spec.varying_sizes:
            return sampled_ranks, check_int(u[0], "n", low=2)
        if not self.spec.varying_sizes:
            raise ValueError(f"estimator {self.name!r} needs one common sample size; the sample "
                             f"sizes vary ({u[:5].tolist()}...): use 'adaptive_mle'")
        return sampled_ranks, sizes

    def _items(self, sampled_ranks, N):
        """N as an int, or the per-user item counts N_u (length of ``sampled_ranks``)."""
        return check_n_items(N, np.size(sampled_ranks))

    def _check_weights_size(self, N):
        """Refuse up front a weight vector of length N (max N_u) over the per-array limit."""
        Nmax = N if isinstance(N, int) else int(np.max(N))
        check_array_size((Nmax,), f"the weight vector of {self.name!r} over every rank (N={Nmax})")

    def _groups(self, N, n):
        """Users grouped by their bin of N_u (:func:`~sampling_lib.kernels.n_items_bins`).

        For estimators without a per-user-N form (``varying_items=False``: BV,
        MN, CLS): each group is fitted with its representative N_b, and the
        weight vectors are averaged with the groups' user shares. BV and MN
        are linear in the users' sampled ranks (an estimate is
        (1/M) sum_u x(r_u)), so with exact groups (tolerance 0) this is the
        per-user form exactly; with the default tolerance every user's kernel
        row is within ``DEFAULT_N_ITEMS_TOL`` in total variation of its exact
        row. Returns ``[(N_b, selection), ...]`` in increasing N_b.
        """
        Nb = n_items_bins(N, n, tol=DEFAULT_N_ITEMS_TOL, scheme=self.scheme)
        return [(int(b), Nb == b) for b in np.unique(Nb)]

    def _group_prior(self, prior, Nb):
        """A prior over 1..max N_u restricted to a group's ranks 1..N_b (renormalised)."""
        return None if prior is None else group_prior(prior, Nb)

    def _group_users(self, opts, M):
        """Options of a group's fit: MN's ``M`` (when not given) is the evaluation's M users, not the group's.

        The estimate is sum_b s_b T_b over groups b with user shares s_b = M_b / M,
        so its variance is sum_b s_b^2 Var_b / M_b = (1/M) sum_b s_b Var_b while
        its squared bias is at most sum_b s_b bias_b^2 (Jensen): each group's
        MN objective bias_b^2 + Var_b / M bounds the MSE term by term (TORS24
        eq 42 with M users). The group's own M_b overweights the variance M / M_b
        times: with ~2,300 groups of ~9 users, MN's Recall@10 fell to 0.01 (truth
        0.60; ``benchmarks/bench_peruser.py`` case 4).
        """
        if "M" in self.spec.options and opts.get("M") is None:
            return {**opts, "M": int(M)}
        return opts

    def _group_options(self, opts, Nb):
        """A group's fit options (the prior, if any, restricted to ranks 1..N_b) and that prior or None."""
        pb = self._group_prior(opts.get("prior"), Nb)
        return (opts if pb is None else {**opts, "prior": pb}), pb

    def _per_group(self, r, N, n, opts):
        """Weights (length max N_u) of a ``varying_items=False`` estimator by groups of N_u."""
        opts = self._group_users(opts, np.size(r))
        Nmax = int(N.max())
        w = np.zeros(Nmax)
        for Nb, sel in self._groups(N, n):
            o, _ = self._group_options(opts, Nb)
            w[:Nb] += sel.mean() * np.asarray(self.spec.fit(r[sel], Nb, n, scheme=self.scheme, **o), dtype=float)
        return w

    def _per_group_linear(self, counts, n, F, prior):
        """A linear estimator's weights (as :meth:`_per_group`) and each cell's sampled metrics
        (the bootstrap's X), group by group in one pass over the cells' groups of N_u.

        A group's kernel and Gram matrix are built once for its fit and its sampled metrics
        (:mod:`sampling_lib.estimators._linear_groups`). The weights beyond the metrics' ranks
        come on demand from :meth:`_per_group` (:meth:`_head_weights`).

        Returns ``(w, X, gradient)``: with a fitted prior (BV_MLE, BV_MES, MN_MLE, MN_MES) the
        groups are solved on their exact kernels in one pass that also gives the estimates'
        gradient in the prior (:func:`linear_groups_prior_fit`). The gradient is returned for the
        kinds in :data:`ONE_STEP_PRIOR_KINDS` (MN: the one-step bootstrap of
        :class:`FittedEstimator`), else None (BV: replicates at nodes in log N,
        :mod:`sampling_lib.estimators._linear_nodes`).
        """
        opts = self._group_users(dict(self.options), counts.M)
        if self.spec.prior is None:
            return (*self._per_group_solved(counts, n, F, opts), None)
        opts["prior"] = prior
        groups = self._groups(counts.n_items, n)
        one_step = self.spec.linear_kind in ONE_STEP_PRIOR_KINDS
        fit = linear_groups_prior_fit(self.spec.linear_kind, groups, counts.ranks, counts.counts, n, F, prior,
                                      scheme=self.scheme, gamma=opts.get("gamma", 0.01), M=opts.get("M"),
                                      gradient=one_step)
        # the rest of the weights on the same exact kernels as the head (no rank grid)
        return self._head_weights(fit.head, counts, n, {**opts, "grid_tol": None}), fit.X, fit.gradient

    def _per_group_solved(self, counts, n, F, opts):
        """:meth:`_per_group_linear` for a fixed prior (BV, MN): every group's data-free part
        ``Z = G^{-1} K[:H]^T`` at once (:func:`linear_group_solutions`, shared with the next model
        on the same groups), then each group's weights on ranks 1..H and its cells' sampled
        metrics. The weights beyond H (no top-K metric here needs them) are computed on demand by
        :meth:`_per_group`. Same values as the group-by-group fits, to rounding."""
        groups = self._groups(counts.n_items, n)
        H, m = F.shape
        sols = linear_group_solutions(self.spec.linear_kind, [b for b, _ in groups], n, H, scheme=self.scheme,
                                      gamma=opts.get("gamma", 0.01), M=opts.get("M"), prior=opts.get("prior"))
        head = np.zeros(H)
        X = np.empty((counts.ranks.size, m))
        for Nb, sel in groups:
            s, r, c = sols[Nb], counts.ranks[sel], counts.counts[sel]
            Hb = s.head.size
            users = int(c.sum())
            if users:           # a group whose cells count no users gets its rows and no weights
                pt = np.bincount(r - 1, weights=c, minlength=n) / users
                head[:Hb] += users / counts.M * s.head * (s.Z.T @ pt)
            X[sel] = (s.Z @ (s.head[:, None] * F[:Hb]))[r - 1]
        return self._head_weights(head, counts, n, opts), X

    def _head_weights(self, head, counts, n, opts):
        """The weights of ranks 1..H (``head``) and, on demand, every rank by :meth:`_per_group` on
        the counts' users (:class:`HeadWeights`)."""
        def full():
            ranks, _, items = counts.expand_cells()
            return self._per_group(np.asarray(ranks), items, n, opts)
        return HeadWeights(head, int(counts.n_items.max()), full)

    def prior_of(self, sampled_ranks, N, n, *, cache=None):
        """The fitted prior (``spec.prior``) on these ranks, or None."""
        if self._prior is None:
            return None
        return self._prior(sampled_ranks, N, n, cache=cache)

    def __call__(self, sampled_ranks, N=None, n=None, *, prior=None, cache=None):
        """The weight vector w (length N) on per-user sampled ranks.

        ``prior`` (keyword-only) replaces the fitted prior of a ``*_mle`` /
        ``*_mes`` estimator by a given one. ``cache`` (a dict, keyword-only)
        shares fits between estimators called on the *same* ranks (e.g. the
        MLE and the MLE prior of BV_MLE and MN_MLE): pass a fresh dict per
        sample, as :func:`fit_estimators` does.
        """
        if self.spec.input == "popularity":
            if N is not None or n is not None or prior is not None:
                raise ValueError(f"estimator {self.name!r} takes a PopularityLog alone: N, n and prior do not "
                                 "apply (each user's N_u and n_u are in the log)")
            return np.asarray(self.spec.fit_state(sampled_ranks, **self.options)[0], dtype=float)
        key = self.cache_key() if (cache is not None and prior is None) else None
        if key is not None and key in cache:
            return cache[key]
        N = self._items(sampled_ranks, N)
        self._check_weights_size(N)
        r, nn = self._sizes(sampled_ranks, n)
        opts = dict(self.options)
        if self.spec.prior is not None:
            opts["prior"] = self.prior_of(r, N, nn, cache=cache) if prior is None else prior
        elif prior is not None:
            raise EstimatorOptionError(f"estimator {self.name!r} has no fitted prior; got prior=")
        if isinstance(N, int) or self.spec.varying_items:
            w = np.asarray(self.spec.fit(r, N, nn, scheme=self.scheme, **opts), dtype=float)
        else:
            w = self._per_group(np.asarray(r), N, nn, opts)
        if key is not None:
            cache[key] = w
        return w

    # -- fit on the sufficient statistic and bootstrap replicates -----------
    def _check_users_size(self, counts):
        """Refuse up front (MemoryLimitError) an estimator that works per user on too many users.

        Estimators without ``fit_cells`` expand the counts into per-user arrays
        (ranks, sample sizes, item counts, and the estimator's own work of the
        same length): 4 x 8 bytes per user is the least they need
        (M = 3 x 10^8 failed with a raw MemoryError, a count of 10^12 asked
        for 14.6 TiB).
        """
        from ..exceptions import MemoryLimitError

        M = int(counts.counts.sum())
        try:
            check_array_size((M, 4), f"estimator {self.name!r} works per user: its arrays for {M:,} users")
        except MemoryLimitError as e:
            raise MemoryLimitError(f"{e}; the default estimator ({DEFAULT_METHOD!r}) works on the counts "
                                   "table, with memory independent of the number of users") from None

    def fit_counts(self, counts, N, F, *, refit_prior=True, alternatives=True):
        """Fit on a :class:`sampling_lib.correct.RankCounts` and prepare the bootstrap.

        ``F`` is the (H, m) matrix of metric values on ranks 1..H, H <= N
        (N = max N_u when the counts carry per-cell item counts
        ``counts.n_items``; ``N`` may then be None); the metrics are taken to
        be 0 on ranks H+1..N (top-K metrics with K <= H: H = min(N, max K) is
        enough, and H = N is the full matrix). Only the first H weights enter
        the estimates, so an estimator whose weights are lazy (``head(H)``,
        module docstring) never forms a length-N vector here. The returned
        :class:`FittedEstimator` holds the weights and computes replicates.
        """
        F = np.asarray(F, dtype=float)
        prior = state = X = None
        if self.spec.input == "popularity":
            _check_F(F, counts.N)
            w, state = self.spec.fit_state(counts, **self.options)
            bounds = None if self.spec.bounds is None else self.spec.bounds(counts, **self.options)
            return FittedEstimator(self, counts, counts.N, F, np.asarray(w, dtype=float), None, None, True,
                                   state, bounds=bounds)
        if counts.__class__.__name__ == "PopularityLog":
            raise ValueError(f"estimator {self.name!r} takes sampled ranks; popularity-sampled input needs one "
                             f"of {list(registered('popularity'))}")
        if self.spec.fit_cells is not None:
            # on the cells directly: nothing of length M (users) or N (items) is formed
            if counts.n_items is None:
                cell_items = np.full(counts.ranks.size, check_int(N, "N", low=2), dtype=np.int64)
            else:
                cell_items = counts.n_items
            Nmax = int(cell_items.max())
            _check_F(F, Nmax)
            w, state = self.spec.fit_cells(cell_items, counts.sizes, counts.ranks, counts.counts,
                                           scheme=self.scheme, **self.options)
        else:
            self._check_users_size(counts)
            ranks, sizes, items = counts.expand_cells()
            if items is None:
                items = check_int(N, "N", low=2)
            Nn = self._items(ranks, items)
            Nmax = Nn if isinstance(Nn, int) else int(Nn.max())
            _check_F(F, Nmax)
            self._check_weights_size(Nmax)
            n = int(counts.size_values[0]) if counts.size_values.size == 1 else sizes
            r, nn = self._sizes(ranks, n)
            if self.spec.prior is not None:
                prior = self.prior_of(r, Nn, nn)
            if self.spec.bootstrap == "batched" and (isinstance(Nn, int) or self.spec.varying_items):
                w, state = self.spec.fit_state(r, Nn, nn, scheme=self.scheme, **self.options)
                if not hasattr(w, "head"):
                    w = np.asarray(w, dtype=float)
            elif self.spec.bootstrap == "linear" and not isinstance(Nn, int) and not self.spec.varying_items:
                w, X, state = self._per_group_linear(counts, nn, F, prior)
            elif self.spec.fit_groups is not None and not isinstance(Nn, int):
                w, state = self.spec.fit_groups(self._groups(counts.n_items, nn), counts.ranks, counts.counts, nn, F,
                                                scheme=self.scheme, **self.options)
            else:
                w = self(r, Nn, nn, prior=prior)
        band, alts = None, []
        if alternatives and self.spec.alternatives is not None:
            for o in self.spec.alternatives(self.options):
                alt = self.with_options(**o)
                alts.append(alt.fit_counts(counts, N, F, refit_prior=refit_prior, alternatives=False))
            est_alt = np.stack([a.estimate for a in alts])
            band = (est_alt.min(axis=0), est_alt.max(axis=0))
        if self.spec.bootstrap == "linear" and X is None:
            opts = {k: v for k, v in self.options.items() if k not in ("prior", "M")}
            pr = self.options.get("prior") if prior is None else prior
            Mv = self.options.get("M", counts.M)
            X = np.stack([self.spec.sampled_metric(_padded(F[:, j], Nn), Nn, nn, pr, M=Mv,
                                                   scheme=self.scheme, **opts)
                          for j in range(F.shape[1])], axis=1)[counts.ranks - 1]
        return FittedEstimator(self, counts, Nmax, F, w, prior, X, bool(refit_prior), state, band, alts)




def _check_F(F, N):
    if F.ndim != 2 or not 1 <= F.shape[0] <= N:
        raise ValueError(f"F must be the (H, m) metric matrix on ranks 1..H with 1 <= H <= "
                         f"N={N}; got shape {F.shape}")


def _padded(f, N):
    """f (values on ranks 1..H) followed by zeros up to length N."""
    if f.size == N:
        return f
    out = np.zeros(N)
    out[:f.size] = f
    return out


def get_estimator(name, **options):
    """The configured estimator ``name``: a callable ``(sampled_ranks, N, n) -> w``.

    Parameters
    ----------
    name : str
        One of :data:`sampling_lib.estimators.METHODS` (case-insensitive).
    **options
        ``scheme`` ({"binomial", "hypergeometric"}, every estimator), the
        estimator's own options (``estimator_spec(name).options``), e.g.
        ``gamma`` for BV, ``eta`` for MES, ``tol``/``max_iter`` for MLE, and
        for estimators with a fitted prior (``bv_mle``, ``mn_mes``, ...)
        ``prior_options``, a dict of options of the prior's estimator.

    Returns
    -------
    Estimator
        ``est(sampled_ranks, N, n)`` returns the length-N weight vector w; the
        estimate of a metric with values F(1..N) is ``w @ F``.

    Raises
    ------
    ValueError
        Unknown name (the message lists the registered names).
    sampling_lib.exceptions.EstimatorOptionError
        (a ``TypeError``) An option the estimator does not take; the message
        names the bad and the allowed keys.

    Examples
    --------
    >>> from sampling_lib.metrics import metric_values
    >>> est = get_estimator("bv", gamma=0.1)
    >>> w = est([1, 1, 2, 5, 9], 200, 10)
    >>> w.shape, round(float(w.sum()), 10)
    ((200,), 1.0)
    >>> get_estimator("bv", gama=0.1)
    Traceback (most recent call last):
    ...
    sampling_lib.exceptions.EstimatorOptionError: estimator 'bv' got unknown option(s) ['gama']; allowed: ['gamma', 'prior', 'scheme']
    """
    spec = estimator_spec(name)
    allowed = tuple(spec.options) + _COMMON_OPTIONS + (("prior_options",) if spec.prior else ())
    bad = sorted(k for k in options if k not in allowed)
    if bad:
        raise EstimatorOptionError(f"estimator {spec.name!r} got unknown option(s) {bad}; "
                                   f"allowed: {sorted(allowed)}")
    return Estimator(spec, options)


def build_estimators(methods, *, scheme="binomial", **options):
    """Configured estimators ``{name: Estimator}``, each given the options it accepts.

    ``gamma`` goes to the BV family, ``eta`` to MES and to the MES prior of
    BV_MES / MN_MES, ``max_rank`` to CLS, and so on (an option no requested
    estimator or prior takes is an error). Call them with one shared
    ``cache`` dict per sample to fit shared priors once (as
    :func:`fit_estimators` and :func:`sampling_lib.experiments.run_experiment` do).

    Examples
    --------
    >>> ests = build_estimators(["bv", "bv_mes", "cls"], gamma=0.1, eta=0.02, max_rank=10)
    >>> ests["bv_mes"]
    get_estimator('bv_mes', scheme='binomial', gamma=0.1)
    >>> ests["bv_mes"].prior_options
    {'eta': 0.02}
    """
    if isinstance(methods, str):
        methods = [methods]
    used = set()
    ests = {}
    for m in methods:
        spec = estimator_spec(m)
        own = {k: v for k, v in options.items() if k in spec.options}
        used |= set(own)
        if spec.prior is not None:
            pspec = estimator_spec(spec.prior)
            pr = {k: v for k, v in options.items() if k in pspec.options}
            used |= set(pr)
            own["prior_options"] = pr
        ests[m] = get_estimator(m, scheme=scheme, **own)
    unused = sorted(set(options) - used)
    if unused:
        raise EstimatorOptionError(f"option(s) {unused} are taken by none of the estimators "
                                   f"{list(methods)}")
    return ests


def fit_estimators(methods, sampled_ranks, N, n, *, scheme="binomial", **options):
    """Weight vectors of several registered estimators on the same sampled ranks.

    Options are distributed as by :func:`build_estimators`; fits shared
    between estimators (the MLE and the MLE prior of BV_MLE and MN_MLE) are
    computed once.

    Returns
    -------
    dict
        ``{name: w}`` in the order of ``methods``.

    Examples
    --------
    >>> W = fit_estimators(["mle", "bv_mle", "mn_mle"], [1, 1, 2, 5, 9], 200, 10, gamma=0.1)
    >>> list(W), W["mle"].shape
    (['mle', 'bv_mle', 'mn_mle'], (200,))
    """
    cache = {}
    return {m: est(sampled_ranks, N, n, cache=cache)
            for m, est in build_estimators(methods, scheme=scheme, **options).items()}


#: The linear estimators whose per-user-N bootstrap with a fitted prior is the one-step expansion in the
#: prior (:meth:`FittedEstimator._one_step_prior_replicates`). MN only: BV's estimate is too far from
#: linear in its prior (its Gram matrix weighs each rank by the prior alone, gamma = 0.01). Against exact
#: refits of the same draws its one-step replicates were up to 0.95 bootstrap SD off at M = 1,000 and
#: 0.18 on the NCF ml-1m stand-in, where MN's stayed within 0.08 and 0.06 (tests/test_peruser.py,
#: benchmarks/bench_peruser.py case 7). BV_MLE and BV_MES keep the prior's full effect and interpolate
#: only in N_u (:class:`sampling_lib.estimators._linear_nodes.PriorNodes`, checked in every fit).
ONE_STEP_PRIOR_KINDS = ("mn",)

#: Default estimator of :func:`sampling_lib.correct.estimate`: the log-spline empirical
#: Bayes estimator, chosen by the real-data accuracy panel (notebook 10; see
#: :func:`sampling_lib.correct.estimate`, "Choice of the default").
DEFAULT_METHOD = "logspline"
