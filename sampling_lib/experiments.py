"""From data to global ranks, and the repeated sampling experiment runner.

- :func:`global_ranks_from_data`: ratings file (or the synthetic generator) ->
  leave-one-out split -> fitted recommenders -> global ranks R_u in 1..N per model.
  This is the entry point notebooks use when a ``data_path`` is given.
- :func:`run_experiment`: repeats x sampling schemes x sample sizes x models x
  estimators x metrics -> one tidy DataFrame with columns
  ``repeat, model, scheme, n, estimator, metric, K, estimate, truth, rel_error``.
  Estimators are plain functions ``w = est(sampled_ranks, N, n)`` returning a
  length-N vector with ``estimate = w @ F(1..N)`` (DESIGN.md), so new estimators plug
  in without touching the runner. Repeats run in parallel with joblib, or on a Dask
  cluster (joblib's ``dask`` backend) when a scheduler address is given; every
  repeat's random stream is a child of one ``numpy.random.SeedSequence`` built from
  ``rng`` (``SeedSequence(rng).spawn(repeats)`` for an integer ``rng``), so results
  do not depend on the backend or the number of workers.

References
----------
KDD20 Sec 2.1 (global and sampled hit ratios), Appendix A (experimental setup);
TORS24 Sec 7 (repeated estimation experiments, relative errors).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ._validation import check_int
from .data import dataset_statistics, leave_one_out, load_ratings, synthetic_ratings
from .exceptions import MemoryLimitError
from .recommenders import global_ranks, make_recommender, n_candidates, sampled_ranks_from_scores

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_MODEL_PARAMS",
    "DEFAULT_SYNTHETIC",
    "fit_models",
    "seed_sequence",
    "global_ranks_from_data",
    "Population",
    "rank_population",
    "run_experiment",
    "experiment_samples",
    "EXPERIMENT_COLUMNS",
    "score_sampling_experiment",
    "BetaGlobalFit",
    "fit_beta_global",
]

DEFAULT_MODELS = ("popularity", "itemknn", "ease", "als")
#: Default hyper-parameters (not tuned per dataset; ALS and EASE values follow common
#: MovieLens settings).
DEFAULT_MODEL_PARAMS = {
    "popularity": {},
    "itemknn": {"neighbors": None},
    "ease": {"lam": 200.0},
    "als": {"factors": 32, "reg": 0.1, "alpha": 10.0, "iterations": 10, "cg_steps": 3},
}
#: Modest synthetic data used when ``data_path is None`` (runs in about a second).
DEFAULT_SYNTHETIC = {"n_users": 2000, "n_items": 1000, "n_factors": 8,
                     "mean_interactions": 30.0, "popularity_skew": 1.0, "signal": 6.0}


def seed_sequence(rng):
    """The ``numpy.random.SeedSequence`` behind the ``rng`` argument of the pipelines and studies.

    An int >= 0 gives ``SeedSequence(rng)`` (the documented, reproducible layout:
    sub-stream k is ``SeedSequence([rng, k])``); a SeedSequence is used as is; a
    Generator gives a fresh sequence seeded by one draw from it; None gives
    fresh OS entropy. Anything else is a TypeError naming ``rng``.

    Examples
    --------
    >>> seed_sequence(3).entropy, seed_sequence(np.random.SeedSequence(5)).entropy
    (3, 5)
    """
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        return np.random.SeedSequence(int(rng.integers(2 ** 63)))
    if rng is None:
        return np.random.SeedSequence()
    return np.random.SeedSequence(check_int(rng, "rng", low=0))


def _child(seq, k):
    """Sub-stream k of ``seq``: ``SeedSequence([seed, k])`` for ``seq = SeedSequence(seed)``."""
    return np.random.SeedSequence([*np.atleast_1d(seq.entropy).tolist(), k], spawn_key=seq.spawn_key)

EXPERIMENT_COLUMNS = ["repeat", "model", "scheme", "n", "estimator", "metric", "K",
                      "estimate", "truth", "rel_error"]


def fit_models(train, models=DEFAULT_MODELS, *, model_params=None, rng=0) -> dict:
    """Fit the named recommenders on a training matrix; returns ``{name: model}``.

    ``models`` as :func:`global_ranks_from_data` (names, or a mapping label ->
    (name, params)); ``model_params`` maps a model name to keyword overrides of
    :data:`DEFAULT_MODEL_PARAMS`; ALS gets its random stream from ``rng`` (an
    int seed, a SeedSequence or a Generator; sub-stream 1).

    Examples
    --------
    >>> from sampling_lib.data import synthetic_ratings, leave_one_out
    >>> split = leave_one_out(synthetic_ratings(60, 40, rng=0))
    >>> sorted(fit_models(split.train, ("popularity", "ease")))
    ['ease', 'popularity']
    """
    seq = seed_sequence(rng)
    return {label: _fit_one(name, params, train, seq)
            for label, (name, params) in _settings(models, model_params).items()}


def _fit_one(name, params, train, seq):
    """One recommender fitted on ``train`` (ALS seeded by sub-stream 1 of ``seq`` unless given)."""
    params = dict(params)
    if str(name).lower() == "als":
        params.setdefault("rng", np.random.default_rng(_child(seq, 1)))
    return make_recommender(name, **params).fit(train)


def _settings(models, model_params):
    """{label: (recommender name, constructor params)} of ``models`` (names or a mapping)."""
    if isinstance(models, str):
        models = (models,)
    if isinstance(models, Mapping):
        if model_params:
            raise ValueError("model_params applies to models given by name; a mapping label -> (name, params) "
                             "carries its own params")
        out = {}
        for label, v in models.items():
            # a list pair too: notebook parameters arrive through JSON / YAML (papermill), which have no tuples
            if not (isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[0], str)
                    and isinstance(v[1], Mapping)):
                raise TypeError(f"models[{label!r}] must be a (recommender name, params) pair; got {v!r}")
            out[str(label)] = (v[0], dict(v[1]))
        return out
    models = tuple(models)
    mp = dict(model_params or {})
    unknown = set(mp) - set(models)
    if unknown:
        raise ValueError(f"model_params has models not in models={models}: {sorted(unknown)}")
    return {m: (m, {**DEFAULT_MODEL_PARAMS.get(str(m).lower(), {}), **mp.get(m, {})}) for m in models}


def global_ranks_from_data(data_path=None, models: Sequence[str] | Mapping = DEFAULT_MODELS, *, rng=0,
                           model_params: Mapping | None = None, synthetic: Mapping | None = None,
                           min_interactions: int = 2, min_item_users: int = 1, train_last: bool = True,
                           ties: str = "pessimistic", block_size: int | None = None,
                           keep_models: bool = True, max_dense_items: int | None = None,
                           progress: bool = False):
    """Global ranks of real recommenders: load -> leave-one-out -> fit -> rank (the one pipeline).

    Parameters
    ----------
    data_path : str, Path, Ratings or None
        A ratings file for :func:`sampling_lib.data.load_ratings`, a loaded
        :class:`~sampling_lib.data.Ratings`, or ``None`` for
        :func:`sampling_lib.data.synthetic_ratings` with :data:`DEFAULT_SYNTHETIC`
        (2000 users x 1000 items, seeded by ``rng``; a few seconds).
    models : sequence of str, or mapping label -> (name, params)
        Recommenders by name (``"popularity"``, ``"itemknn"``, ``"ease"``,
        ``"als"``; each with :data:`DEFAULT_MODEL_PARAMS`, overridden by
        ``model_params``), or labelled settings whose params are passed to
        the recommender as given (over its own defaults), e.g.
        :data:`sampling_lib.studies.PANEL_MODELS`.
    rng : int, SeedSequence or Generator, default 0, keyword-only
        Seeds the synthetic data, the split, random tie-breaking and the ALS
        initialisation (sub-streams 0, 3, 2 and 1 of one ``SeedSequence``).
    model_params : mapping, optional
        ``{model: {param: value}}`` overrides of :data:`DEFAULT_MODEL_PARAMS`
        (models given by name only).
    synthetic : mapping, optional
        Overrides of :data:`DEFAULT_SYNTHETIC` (an error when ``data_path`` is given).
    min_interactions : int, default 2
        Users with fewer interactions are dropped by the leave-one-out split.
    min_item_users : int, default 1
        Keep only items with at least this many users before the split
        (:func:`sampling_lib.data.filter_items`).
    train_last : bool, default True
        The convention of the candidate set: training items ranked after all
        other items, so R_u is the rank among the user's N_u = N - |history_u|
        non-history items (``info["n_candidates"]``); ``False`` ranks among
        all N items (N_u = N). See :func:`sampling_lib.recommenders.global_ranks`.
    ties : {"pessimistic", "optimistic", "random"}, default "pessimistic"
    block_size : int, optional
    keep_models : bool, default True
        Put the fitted models in ``info["fitted"]`` (needed for score-based sampling).
    max_dense_items : int, optional
        Skip EASE settings (listed in ``info["skipped"]``) when the catalogue
        has more items (EASE inverts an items x items matrix).
    progress : bool, default False
        Print one line per fitted model.

    Returns
    -------
    ranks : dict
        ``{model: ndarray of int64 in 1..N}``, one global rank per kept user.
    N : int
        Number of items.
    info : dict
        ``dataset`` (name), ``source``, ``stats`` (KDD20 Table 4 style one-row
        DataFrame), ``split`` (the :class:`~sampling_lib.data.LeaveOneOutSplit`),
        ``summary`` (split summary), ``M`` (users evaluated), ``fit_seconds``,
        ``rank_seconds`` and ``seconds`` (their sum) per model,
        ``model_params``, ``fitted`` (models, if kept), ``train_last``,
        ``ties``, ``rng``, ``n_items_history`` (per-user training items),
        ``n_candidates`` (per-user N_u of the convention,
        :func:`sampling_lib.recommenders.n_candidates`: the item counts to pass
        as ``N`` with ranks among non-history items), ``skipped``
        (``{model: reason}``: a model over ``max_dense_items``, or whose item x
        item matrix would exceed the per-array memory limit, is skipped with a
        ``RuntimeWarning`` instead of exhausting memory; item-KNN and EASE above
        about 16,000 items by default, see ``SAMPLING_LIB_MAX_ARRAY_BYTES``).

    References
    ----------
    KDD20 Sec 2.1 (R_u), Appendix A (models, leave-one-out).

    Examples
    --------
    >>> ranks, N, info = global_ranks_from_data(None, models=("popularity",),
    ...                                         synthetic={"n_users": 200, "n_items": 100})
    >>> N, ranks["popularity"].shape, bool(ranks["popularity"].min() >= 1)
    (100, (200,), True)
    """
    from .data import Ratings, filter_items

    seq = seed_sequence(rng)
    settings = _settings(models, model_params)
    if not settings:
        raise ValueError("models must name at least one recommender")
    if data_path is None:
        params = dict(DEFAULT_SYNTHETIC)
        if synthetic:
            unknown = set(synthetic) - set(DEFAULT_SYNTHETIC) - {"block_size"}
            if unknown:
                raise ValueError(f"unknown synthetic parameters {sorted(unknown)}; "
                                 f"allowed: {sorted(DEFAULT_SYNTHETIC)}")
            params.update(synthetic)
        ratings = synthetic_ratings(**params, rng=_child(seq, 0))
        name = "synthetic"
    else:
        if synthetic:
            raise ValueError("synthetic applies to the synthetic data (data_path=None) only")
        if isinstance(data_path, Ratings):
            ratings = data_path
            name = Path(str(ratings.source)).stem or "ratings"
        else:
            ratings = load_ratings(data_path)
            p = Path(data_path)
            name = p.parent.name if p.name in ("u.data", "ratings.dat", "ratings.csv") else p.stem
    min_item_users = check_int(min_item_users, "min_item_users", low=1)
    if min_item_users > 1:
        ratings = filter_items(ratings, min_item_users)
    split = leave_one_out(ratings, min_interactions=min_interactions,
                          rng=np.random.default_rng(_child(seq, 3)))
    N = int(split.n_items)
    fit_seconds, rank_seconds, ranks, fitted, skipped = {}, {}, {}, {}, {}
    for label, (mname, params) in settings.items():
        if max_dense_items is not None and str(mname).lower() == "ease" and N > max_dense_items:
            skipped[label] = f"EASE on {N} items > max_dense_items={max_dense_items}"
            continue
        t0 = time.perf_counter()
        try:
            model = _fit_one(mname, params, split.train, seq)
        except MemoryLimitError as exc:   # an item x item model on a large catalogue: skip it, say so
            skipped[label] = str(exc)
            warnings.warn(f"model {label!r} skipped: {exc}", RuntimeWarning, stacklevel=2)
            continue
        fit_seconds[label] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ranks[label] = global_ranks(model, split.train, split.test_items, train_last=train_last,
                                    ties=ties, block_size=block_size,
                                    rng=np.random.default_rng(_child(seq, 2)))
        rank_seconds[label] = time.perf_counter() - t0
        if keep_models:
            fitted[label] = model
        if progress:
            print(f"  {label}: {fit_seconds[label] + rank_seconds[label]:.1f} s", flush=True)
    hist = np.asarray(split.train.sum(axis=1)).ravel().astype(np.int64)
    info = {
        "dataset": name,
        "source": ratings.source,
        "stats": dataset_statistics(ratings, name),
        "split": split,
        "summary": dict(split.summary),
        "M": int(split.n_users),
        "N": N,
        "fit_seconds": fit_seconds,
        "rank_seconds": rank_seconds,
        "seconds": {m: fit_seconds[m] + rank_seconds[m] for m in ranks},
        "model_params": {m: (fitted[m].get_params() if m in fitted else settings[m][1]) for m in settings},
        "fitted": fitted,
        "train_last": train_last,
        "ties": ties,
        "rng": rng if isinstance(rng, (int, np.integer)) else repr(rng),
        "n_items_history": hist,
        "n_candidates": n_candidates(split.train, train_last=train_last),
        "skipped": skipped,
    }
    if not ranks:
        raise MemoryLimitError(f"every model was skipped on {name} (N={N} items): " + "; ".join(skipped.values()))
    return ranks, N, info


@dataclass(frozen=True)
class Population:
    """Test users' global ranks per model, as :func:`rank_population` returns them.

    Attributes
    ----------
    ranks : dict model -> ndarray of int64 in 1..N
    N : int
    pmfs : dict model -> ndarray (N,)
        The population rank distribution: the synthetic law the ranks were
        drawn from, or, for real data, the users' empirical distribution.
    source : str
        One line naming the data.
    info : dict
        :func:`global_ranks_from_data`'s ``info`` for real data, else empty.
    """

    ranks: dict
    N: int
    pmfs: dict
    source: str
    info: dict

    @property
    def M(self) -> int:
        """Users of the first model."""
        return len(next(iter(self.ranks.values())))


def rank_population(data_path=None, *, N=None, M=None, pmfs=None, models=DEFAULT_MODELS, rng=None,
                    data_rng=0):
    """The notebooks' two populations behind one call: synthetic laws or real recommenders.

    With ``data_path=None``, M users' global ranks are drawn from each synthetic
    law (``pmfs``, default :func:`sampling_lib.rankdist.synthetic_models` at N
    items) with ``rng``, in the order of ``pmfs``. With a ratings file, the
    ``models`` are fitted on it (:func:`global_ranks_from_data` with
    ``rng=data_rng``) and the population law of each is its users' empirical
    rank distribution.

    Parameters
    ----------
    data_path : str, Path or None
    N, M : int
        Items and users of the synthetic population (ignored for real data).
    pmfs : mapping name -> pmf, optional
        Synthetic laws (default ``synthetic_models(N)``).
    models : sequence of str
        Recommenders for real data.
    rng : seed or Generator
        Draws the synthetic users.
    data_rng : int, SeedSequence or Generator
        Seeds :func:`global_ranks_from_data` for real data.

    Returns
    -------
    Population

    Examples
    --------
    >>> pop = rank_population(N=100, M=50, rng=0)
    >>> pop.N, pop.M, list(pop.ranks)[:2]
    (100, 50, ['beta_a0.25', 'beta_a0.35'])
    """
    from .rankdist import draw_global_ranks, empirical_pmf, synthetic_models

    if data_path is None:
        N = check_int(N, "N", low=2)
        M = check_int(M, "M", low=1)
        pmfs = dict(synthetic_models(N) if pmfs is None else pmfs)
        rng = np.random.default_rng(rng)
        ranks = {name: draw_global_ranks(p, M, rng=rng) for name, p in pmfs.items()}
        return Population(ranks, N, pmfs, f"synthetic rank distributions ({', '.join(pmfs)}; "
                                          f"N = {N:,}, M = {M:,} users each)", {})
    ranks, N, info = global_ranks_from_data(data_path, models=models, rng=data_rng)
    pmfs = {m: empirical_pmf(R, N) for m, R in ranks.items()}
    return Population(ranks, N, pmfs, f"{info['dataset']} ({len(next(iter(ranks.values()))):,} "
                                      f"leave-one-out test users, N = {N:,} items)", info)


# --------------------------------------------------------------------------- runner
def _est_items(estimators) -> list[tuple[str, Callable]]:
    from .estimators import get_estimator

    if callable(estimators) or isinstance(estimators, str):
        estimators = [estimators]
    if isinstance(estimators, Mapping):
        items = list(estimators.items())
    else:
        items = [(f, f) if isinstance(f, str) else (getattr(f, "__name__", repr(f)), f)
                 for f in estimators]
    # registered names -> the registry's estimators (default options)
    items = [(name, get_estimator(f) if isinstance(f, str) else f) for name, f in items]
    if not items:
        raise ValueError("estimators must contain at least one function est(sampled_ranks, N, n)")
    for name, f in items:
        if not callable(f):
            raise TypeError(f"estimator {name!r} must be callable est(sampled_ranks, N, n); got {f!r}")
    return items


def _scheme_items(schemes) -> list[tuple[str, object]]:
    if isinstance(schemes, (str,)) or callable(schemes):
        schemes = [schemes]
    if isinstance(schemes, Mapping):
        return list(schemes.items())
    out = []
    for s in schemes:
        if isinstance(s, str):
            out.append((s, s))
        elif callable(s):
            out.append((getattr(s, "__name__", repr(s)), s))
        else:
            raise TypeError(f"scheme must be a name or a callable sampler(ranks, N, n, rng); got {s!r}")
    return out


def _repeat_samples(seed_seq, ranks, N, schemes, sample_sizes):
    """The sampled ranks of one repeat: one child stream per (scheme, n, model) cell, in a fixed order."""
    from .sampling import sample_ranks

    cells = [(sname, s, n, m) for sname, s in schemes for n in sample_sizes for m in ranks]
    for (sname, scheme, n, m), child in zip(cells, seed_seq.spawn(len(cells))):
        rng = np.random.default_rng(child)
        if isinstance(scheme, str):
            r = sample_ranks(ranks[m], N, n, scheme=scheme, rng=rng)
        else:
            r = np.asarray(scheme(ranks[m], N, n, rng))
        yield sname, n, m, r


def _one_repeat(rep, seed_seq, ranks, N, schemes, sample_sizes, estimators, metrics):
    from .estimators import Estimator
    from .metrics import metric_values, parse_metric

    Nmax = N if isinstance(N, int) else int(N.max())
    F = {met: metric_values(met, Nmax) for met in metrics}
    truth = {(m, met): float(np.mean(F[met][ranks[m] - 1])) for m in ranks for met in metrics}
    parsed = {met: parse_metric(met) for met in metrics}
    rows = []
    for sname, n, m, r in _repeat_samples(seed_seq, ranks, N, schemes, sample_sizes):
        cache = {}  # fits shared by the registry's estimators on this sample (e.g. MLE priors)
        for ename, est in estimators:
            w = np.asarray(est(r, N, n, cache=cache) if isinstance(est, Estimator) else est(r, N, n),
                           dtype=float)
            if w.shape != (Nmax,):
                raise ValueError(f"estimator {ename!r} returned shape {w.shape}; expected ({Nmax},)")
            for met in metrics:
                estimate = float(w @ F[met])
                tr = truth[(m, met)]
                name, K = parsed[met]
                rows.append((rep, m, sname, n, ename, name, K, estimate, tr,
                             (estimate - tr) / tr if tr != 0 else np.nan))
    return rows


def run_experiment(global_ranks: Mapping[str, np.ndarray], N: int, estimators, *,
                   metrics: Sequence[str] = ("recall@10",), schemes=("binomial",),
                   sample_sizes: Sequence[int] = (100,), repeats: int = 10, rng=0,
                   n_jobs: int = 1, scheduler_address: str | None = None) -> pd.DataFrame:
    """Repeated sampling experiment -> tidy DataFrame.

    For every repeat, scheme, sample size n and model, the model's global ranks are
    turned into sampled ranks (``sampling_lib.sampling.sample_ranks`` for scheme
    names, or a callable ``sampler(global_ranks, N, n, rng)``); each estimator maps
    them to ``w = est(sampled_ranks, N, n)`` (length N) and each metric's estimate is
    ``w @ F(1..N)``; the truth is the mean of F over the global ranks.

    Parameters
    ----------
    global_ranks : mapping model -> array of int in 1..N
    N : int or array_like of int, shape (M,)
        Number of items, or per-user candidate counts N_u of the M users
        (every model ranks the same users; e.g. ``info["n_candidates"]`` of
        :func:`global_ranks_from_data`); estimators then get the array and
        return weights of length max N_u (every registered name; see
        :data:`sampling_lib.estimators.PERUSER_METHODS` for which have a
        per-user likelihood and which are fitted per group of N_u).
    estimators : mapping name -> callable or registered name, or a sequence of
        registered names (:data:`sampling_lib.estimators.METHODS`, e.g. ``"mle"``)
        and callables (named by ``__name__``), or one of those; a callable is
        ``est(sampled_ranks, N, n) -> w`` like
        :func:`sampling_lib.estimators.get_estimator`'s (use it for options:
        ``{"bv_g0.1": get_estimator("bv", gamma=0.1)}``)
    metrics : sequence of str, e.g. ``("recall@10", "ndcg@10")``
    schemes : sequence of ``"binomial"`` / ``"hypergeometric"`` / callables, or a
        mapping name -> scheme
    sample_sizes : sequence of int, each in 2..N
    repeats : int >= 1
    rng : int, SeedSequence or Generator, default 0
        Repeat r uses ``np.random.SeedSequence(rng).spawn(repeats)[r]`` for an int
        ``rng`` (then one child per (scheme, n, model) cell), so the result is the
        same for any n_jobs/backend.
    n_jobs : int, default 1
        joblib workers (-1 = all cores).
    scheduler_address : str, optional
        Address of a running Dask scheduler (``"tcp://..."``); the repeats then run
        on that cluster through joblib's ``dask`` backend.

    Returns
    -------
    DataFrame with columns :data:`EXPERIMENT_COLUMNS`; ``rel_error`` is the *signed*
    relative error ``(estimate - truth) / truth`` (NaN if truth is 0).

    References
    ----------
    TORS24 Sec 7 (relative errors over repeated samples); KDD20 Appendix A.

    Examples
    --------
    >>> import numpy as np
    >>> def empirical(r, N, n):              # plug-in: sampled rank r treated as global rank
    ...     return np.bincount(r - 1, minlength=N)[:N] / r.size
    >>> df = run_experiment({"m": np.array([1, 5, 50])}, 100, {"plugin": empirical},
    ...                     metrics=["recall@10"], sample_sizes=[10], repeats=2)
    >>> df.shape, list(df.columns[:4])
    ((2, 10), ['repeat', 'model', 'scheme', 'n'])
    """
    from ._validation import check_n_items, check_N_n, check_ranks

    N = check_n_items(N)
    repeats = check_int(repeats, "repeats", low=1)
    seq = seed_sequence(rng)
    if not isinstance(global_ranks, Mapping) or not global_ranks:
        raise TypeError("global_ranks must be a non-empty mapping model -> ranks")
    if isinstance(N, int):
        ranks = {m: check_ranks(r, N, name=f"global_ranks[{m!r}]") for m, r in global_ranks.items()}
        sizes = [check_N_n(N, n)[1] for n in np.atleast_1d(sample_sizes).tolist()]
    else:
        ranks = {}
        for m, r in global_ranks.items():
            rr = check_ranks(r, int(N.max()), name=f"global_ranks[{m!r}]")
            if rr.shape != N.shape or np.any(rr > N):
                raise ValueError(f"global_ranks[{m!r}] must hold one rank per user in 1..N_u "
                                 f"({N.size} users)")
            ranks[m] = rr
        sizes = [check_N_n(int(N.min()), n)[1] for n in np.atleast_1d(sample_sizes).tolist()]
    if isinstance(metrics, str):
        metrics = [metrics]
    from .metrics import parse_metric
    for met in metrics:
        parse_metric(met)
    est_items = _est_items(estimators)
    sch = _scheme_items(schemes)
    for name, s in sch:
        if isinstance(s, str):
            from ._validation import check_scheme
            check_scheme(s)
    seqs = seq.spawn(repeats)
    args = (ranks, N, sch, sizes, est_items, list(metrics))
    if scheduler_address is None and n_jobs == 1:
        results = [_one_repeat(r, seqs[r], *args) for r in range(repeats)]
    else:
        from ._extras import require

        require("joblib", "experiments with n_jobs > 1")
        from joblib import Parallel, delayed, parallel_config

        if scheduler_address is not None:
            Client = require("distributed", "experiments on a Dask cluster", extra="dask").Client

            with Client(scheduler_address) as client:  # noqa: F841 - registers the backend
                with parallel_config(backend="dask"):
                    results = Parallel()(delayed(_one_repeat)(r, seqs[r], *args)
                                         for r in range(repeats))
        else:
            results = Parallel(n_jobs=n_jobs)(delayed(_one_repeat)(r, seqs[r], *args)
                                              for r in range(repeats))
    rows = [row for rep_rows in results for row in rep_rows]
    df = pd.DataFrame(rows, columns=EXPERIMENT_COLUMNS)
    return df.astype({"repeat": "int64", "n": "int64", "K": "int64"})


def experiment_samples(global_ranks: Mapping[str, np.ndarray], N: int, *, schemes=("binomial",),
                       sample_sizes: Sequence[int] = (100,), repeats: int = 10, rng=0) -> dict:
    """The sampled ranks :func:`run_experiment` draws, for checking its estimates directly.

    Same arguments and the same random layout as :func:`run_experiment` (one
    child stream per repeat, then one per (scheme, n, model) cell), so the
    estimators can be applied to exactly the samples behind the runner's rows.

    Returns
    -------
    dict
        ``{(repeat, scheme, n, model): sampled ranks}``.

    Examples
    --------
    >>> import numpy as np
    >>> s = experiment_samples({"m": np.array([1, 5, 50])}, 100, sample_sizes=[10], repeats=2)
    >>> sorted(s)
    [(0, 'binomial', 10, 'm'), (1, 'binomial', 10, 'm')]
    """
    from ._validation import check_N_n, check_ranks

    N = check_int(N, "N", low=2)
    ranks = {m: check_ranks(r, N, name=f"global_ranks[{m!r}]") for m, r in global_ranks.items()}
    sizes = [check_N_n(N, n)[1] for n in np.atleast_1d(sample_sizes).tolist()]
    seqs = seed_sequence(rng).spawn(check_int(repeats, "repeats", low=1))
    return {(rep, sname, n, m): r for rep, seq in enumerate(seqs)
            for sname, n, m, r in _repeat_samples(seq, ranks, N, _scheme_items(schemes), sizes)}


# --------------------------------------------------------------------------- KDD20 App A
def score_sampling_experiment(fitted: Mapping, split, n_values: Sequence[int], ks: Sequence[int], *,
                              schemes: Sequence[str] = ("binomial", "hypergeometric", "actual"),
                              repeats: int = 10, rng=0, train_last_simulated: bool = False,
                              ties: str = "pessimistic") -> pd.DataFrame:
    """Sampled hit ratios SHR@k from real scores, repeated (KDD20 Appendix A Tables 5-6).

    For each fitted model, sample size n and scheme, every test user gets ``repeats``
    independent sample sets of n-1 items (:func:`sampling_lib.recommenders.
    sampled_ranks_from_scores`); SHR@k is the fraction of users with sampled rank
    <= k. ``binomial``/``hypergeometric`` keep the training items' scores when
    ``train_last_simulated=False`` (default, the KDD20 Table 5 binom/hyper setting);
    ``actual`` samples only never-interacted items.

    Returns
    -------
    DataFrame with columns ``model, scheme, n, repeat, k, shr`` (one row each).

    References
    ----------
    KDD20 eq 3 (SHR@k), Appendix A Tables 5-6.

    Examples
    --------
    >>> ranks, N, info = global_ranks_from_data(None, ("popularity",),
    ...                                         synthetic={"n_users": 100, "n_items": 60})
    >>> df = score_sampling_experiment(info["fitted"], info["split"], [10], [1, 5], repeats=2)
    >>> df.shape
    (12, 6)
    """
    repeats = check_int(repeats, "repeats", low=1)
    ks = np.asarray(ks, dtype=np.int64)
    cells = [(m, n, sc) for m in fitted for n in n_values for sc in schemes]
    seqs = seed_sequence(rng).spawn(len(cells))
    frames = []
    for (m, n, sc), sq in zip(cells, seqs):
        n = check_int(n, "n", low=2)
        if np.any(ks < 1) or np.any(ks > n):
            raise ValueError(f"ks must lie in 1..n={n}; got {ks.tolist()}")
        r = sampled_ranks_from_scores(fitted[m], split.train, split.test_items, n, sc,
                                      train_last=(sc == "actual") or train_last_simulated,
                                      ties=ties, size=repeats, rng=np.random.default_rng(sq))
        shr = (r[:, :, None] <= ks[None, None, :]).mean(axis=1)      # (repeats, len(ks))
        frames.append(pd.DataFrame({
            "model": m, "scheme": sc, "n": n,
            "repeat": np.repeat(np.arange(repeats), ks.size),
            "k": np.tile(ks, repeats), "shr": shr.ravel()}))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class BetaGlobalFit:
    """Result of :func:`fit_beta_global`: exponent ``a``, log-likelihood, evaluations."""

    a: float
    loglik: float
    nfev: int
    converged: bool


def fit_beta_global(global_ranks, N: int, *, a_bounds=(1e-3, 50.0), xtol: float = 1e-10
                    ) -> BetaGlobalFit:
    """Maximum-likelihood Beta(a, 1) exponent of observed global ranks (KDD20 Fig 3).

    Decision: KDD20 Sec 3 writes W_R as the Beta(a,1) *density* at (R-1)/(N-1), which is
    infinite at R = 1 for a < 1; we fit the discretised law of
    ``sampling_lib.rankdist.beta_rank_pmf`` instead, P(R) = (R/N)^a - ((R-1)/N)^a, and
    maximise sum_u log P(R_u) over a (bounded Brent search on log a, tolerance ``xtol``).
    This uses the global ranks (ground truth), unlike KDD20 eq 19 (Beta@P,
    ``sampling_lib.mapping.fit_beta_a``) which only sees sampled ranks.

    Examples
    --------
    >>> from sampling_lib.rankdist import beta_rank_pmf, draw_global_ranks
    >>> R = draw_global_ranks(beta_rank_pmf(1000, 0.4), 20000, rng=0)
    >>> round(fit_beta_global(R, 1000).a, 2)
    0.4
    """
    from scipy import optimize

    from ._validation import check_ranks

    N = check_int(N, "N", low=2)
    R = check_ranks(global_ranks, N, name="global_ranks")
    counts = np.bincount(R - 1, minlength=N).astype(float)
    idx = np.flatnonzero(counts)
    hi = (idx + 1) / N
    lo = idx / N

    def negll(la):
        a = np.exp(la)
        # log(hi^a - lo^a) = a log hi + log1p(-(lo/hi)^a)
        with np.errstate(divide="ignore"):
            val = a * np.log(hi) + np.log1p(-np.exp(a * (np.log(lo) - np.log(hi))))
        return -float(counts[idx] @ val)

    res = optimize.minimize_scalar(negll, bounds=np.log(a_bounds), method="bounded",
                                   options={"xatol": xtol})
    a = float(np.exp(res.x))
    at_edge = min(abs(res.x - np.log(a_bounds[0])), abs(res.x - np.log(a_bounds[1]))) < 1e-6
    return BetaGlobalFit(a=a, loglik=-float(res.fun), nfev=int(res.nfev),
                         converged=bool(res.success) and not at_edge)
