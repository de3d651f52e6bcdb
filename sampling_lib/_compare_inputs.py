"""The inputs of :func:`sampling_lib.correct.compare`: one statistic per model, the same users for all.

Per-user ranks (a dict, a DataFrame with a column per model, or :class:`sampling_lib.io.SampledRanks`)
become ``{model: (ranks, sizes, items)}``; counts (a counts table or a dict of
:class:`sampling_lib.counts.RankCounts`) become ``{model: RankCounts}``; popularity logs of a paired
comparison must list the same users in the same order. Model names are compared as text.
"""
import numpy as np
import pandas as pd

from ._validation import show_value
from .counts import RankCounts, as_counts, counts_from_frame, is_counts_table

__all__ = ["check_distinct_names", "model_inputs", "check_same_users", "counts_inputs"]


def check_distinct_names(keys):
    """Model names are used as text: two keys with the same str() (1 and "1") would merge."""
    seen = {}
    for k in keys:
        if str(k) in seen:
            raise ValueError(f"model names must be distinct as text; {seen[str(k)]!r} and {k!r} "
                             f"are both named {str(k)!r}")
        seen[str(k)] = k


def model_inputs(ranks, sample_sizes, N):
    """{model: (ranks, sizes or None, items or None)} with equal lengths (same users, same order)."""
    from .io import SampledRanks

    def per_model(x, k):
        return x.get(k) if isinstance(x, dict) else x

    if isinstance(ranks, SampledRanks):
        if ranks.ranks.isna().any().any():
            counts = ranks.ranks.isna().sum()
            bad = {k: int(v) for k, v in counts.items() if v}
            m = next(iter(bad))
            u = ranks.ranks.index[np.flatnonzero(ranks.ranks[m].isna().to_numpy())[0]]
            raise ValueError(f"compare needs every model on the same users (a paired comparison); missing "
                             f"users per model: {bad}, e.g. user {show_value(u)} has no rank of model "
                             f"{show_value(m)}")
        d = {}
        for m in ranks.models:
            r, s = ranks.for_model(m)
            it = ranks.items_for_model(m)
            Nm = per_model(N, m)
            if it is not None and Nm is not None and np.ndim(Nm) == 0 and np.any(it != Nm):
                raise ValueError(f"N={Nm} disagrees with the n_items column of model {m!r}")
            d[m] = (r, s, it if it is not None else Nm)
    else:
        if isinstance(ranks, pd.DataFrame):
            check_distinct_names(ranks.columns)
            d0 = {str(c): ranks[c].to_numpy() for c in ranks.columns}
        elif isinstance(ranks, dict):
            check_distinct_names(ranks)
            d0 = {str(k): np.asarray(v) for k, v in ranks.items()}
        else:
            raise TypeError("ranks must be a dict {model: sampled ranks}, a DataFrame with one "
                            "column per model, SampledRanks, a counts table or a dict {model: "
                            f"RankCounts}}; got {type(ranks).__name__}")
        d = {}
        for k, v in d0.items():
            s = per_model(sample_sizes, k)
            d[k] = (v, None if s is None else np.asarray(s), per_model(N, k))
    if len(d) < 2:
        raise ValueError(f"compare needs at least 2 models; got {len(d)}")
    sizes = {k: np.asarray(v[0]).size for k, v in d.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"compare needs the same users (same length and order) for every model; "
                         f"got sizes {sizes}")
    for k, v in d.items():
        if v[2] is None:
            raise ValueError(f"N (the number of items) is required for model {k!r}")
    return d


def check_same_users(logs):
    """Popularity logs of a paired comparison list the same users in the same order."""
    names = list(logs)
    Ms = {m: lg.M for m, lg in logs.items()}
    if len(set(Ms.values())) != 1:
        raise ValueError(f"compare needs the same users (same length and order) for every model; got {Ms}")
    ref = logs[names[0]].users
    for m, lg in logs.items():
        if ref is not None and lg.users is not None and not np.array_equal(np.asarray(ref), np.asarray(lg.users)):
            raise ValueError(f"compare needs the same users in the same order; model {m!r} differs from "
                             f"{names[0]!r}")


def counts_inputs(ranks, N, n, sample_sizes):
    """{model: RankCounts} of a counts table or a dict of RankCounts, or None."""
    if is_counts_table(ranks):
        if sample_sizes is not None:
            raise ValueError("sample_sizes cannot be combined with a counts table (use its "
                             "'sample_size' column)")
        if N is not None and np.ndim(N) != 0:
            raise ValueError("N must be one int for a counts table (per-cell item counts go in its "
                             "'n_items' column)")
        d = counts_from_frame(ranks, n=n, N=N)
    elif isinstance(ranks, dict) and ranks and all(isinstance(v, RankCounts) for v in ranks.values()):
        check_distinct_names(ranks)
        d = {str(k): v for k, v in ranks.items()}
    else:
        return None
    out = {}
    for k, st in d.items():
        out[k] = as_counts(st, N.get(k) if isinstance(N, dict) else N, n, None)[0]
    if len(out) < 2:
        raise ValueError(f"compare needs at least 2 models; got {len(out)}")
    return out
