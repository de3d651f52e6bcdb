"""The sufficient statistic of sampled ranks: users per cell, and its bootstrap.

Every estimator of the library consumes the sampled ranks through their
*sufficient statistic*: the number of users per cell (N_u, n_u, r) -- item
count, sample size (held-out item included) and sampled rank
(:class:`RankCounts`). This module is the one place where users are grouped
into cells (:func:`cells`) and where bootstrap replicates are drawn: a
resample of the M users with replacement, re-counted per cell, is one draw of
Multinomial(M, counts / M) (:func:`bootstrap_counts`), so a replicate costs
O(cells), not O(M); replicates are drawn in fixed chunks of
:data:`BOOT_CHUNK` to :data:`BOOT_CHUNK_MAX` (set by the number of cells) from one Generator
(:func:`bootstrap_loop`), so the same seed gives the same replicates whatever the work done on
each chunk.

A cell with n_u = N_u is a user ranked in full: every candidate was scored,
so the sampled rank is the global rank (the likelihood the estimators use for
it is the point mass at R = r, whatever the scheme).

References
----------
.. [Efron93] Efron, Tibshirani. An Introduction to the Bootstrap (1993), ch. 6
   (the nonparametric bootstrap) and ch. 13 (percentile interval).
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for
   Recommender System. ACM TORS 2024, Sec 6.2 (per-user sample sizes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validation import (check_columns, check_int, check_int_column, check_n_items, check_N_n,
                          check_ranks, check_read_columns, check_scheme)

__all__ = [
    "RankCounts",
    "rank_counts",
    "counts_from_frame",
    "cells",
    "check_items",
    "is_counts_table",
    "ranked_in_full",
    "as_counts",
    "statistics",
    "check_sampled",
    "bootstrap_counts",
    "bootstrap_loop",
    "coarse_means",
    "coarse_share",
    "BOOT_CHUNK",
    "BOOT_CHUNK_MAX",
    "BOOT_CHUNK_ENTRIES",
    "boot_chunk",
]

#: Bootstrap replicates drawn and processed per chunk, at least (fixed for given input sizes, so that
#: the replicates depend on the Generator and the data only, not on how the work on them is organised).
BOOT_CHUNK = 64
#: At most this many replicates per chunk: :func:`bootstrap_loop` takes chunks of up to
#: BOOT_CHUNK_MAX replicates while a chunk's count matrix (replicates x cells) has at most
#: :data:`BOOT_CHUNK_ENTRIES` entries. Larger chunks spread the per-chunk work of the batched refits
#: (Python steps of the quasi-Newton iteration) over more replicates: 10 models x 10^5 users with
#: per-user N, 1,000 replicates, 10.6-11.2 s at 64 against 10.1-10.4 s at 256 (3 alternated runs each,
#: ``benchmarks/bench_peruser.py``'s case 3).
BOOT_CHUNK_MAX = 256
#: Entries (replicates x cells) of a chunk's count matrix above which chunks stay at BOOT_CHUNK
#: (2^22: 32 MB of float64 per chunk-sized array).
BOOT_CHUNK_ENTRIES = 2**22


def boot_chunk(n_cells):
    """Replicates per chunk for count vectors over ``n_cells`` cells: BOOT_CHUNK_MAX while a chunk
    has at most :data:`BOOT_CHUNK_ENTRIES` entries, down to :data:`BOOT_CHUNK` (a power of 2).

    Examples
    --------
    >>> boot_chunk(1_000), boot_chunk(20_000), boot_chunk(10**6)
    (256, 128, 64)
    """
    n_cells = check_int(n_cells, "n_cells", low=1)
    k = BOOT_CHUNK_MAX
    while k > BOOT_CHUNK and k * n_cells > BOOT_CHUNK_ENTRIES:
        k //= 2
    return k


# ----------------------------------------------------------------------------
# the statistic
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RankCounts:
    """Users per (item count, sample size, sampled rank) cell: the sufficient statistic.

    Attributes
    ----------
    sizes : ndarray of int, shape (C,)
        Sample size n of each non-empty cell.
    ranks : ndarray of int, shape (C,)
        Sampled rank r (1..n) of each cell.
    counts : ndarray of int, shape (C,)
        Number of users in the cell (all > 0). Cells are sorted by
        (item count, size, rank).
    n_items : ndarray of int, shape (C,), or None
        Number of candidates N_u of each cell's users (one value for a common
        N); None when the item count is given separately (to the estimator).
    """

    sizes: np.ndarray
    ranks: np.ndarray
    counts: np.ndarray
    n_items: np.ndarray | None = None

    @property
    def M(self) -> int:
        """Number of users."""
        return int(self.counts.sum())

    @property
    def size_values(self) -> np.ndarray:
        """The distinct sample sizes."""
        return np.unique(self.sizes)

    @property
    def item_values(self) -> np.ndarray | None:
        """The distinct item counts (None when not stored)."""
        return None if self.n_items is None else np.unique(self.n_items)

    def expand(self, counts=None):
        """Per-user arrays (sampled_ranks, sample_sizes) for ``counts`` (default: own)."""
        c = self.counts if counts is None else np.asarray(counts, dtype=np.int64)
        return np.repeat(self.ranks, c), np.repeat(self.sizes, c)

    def expand_cells(self, counts=None):
        """Per-user arrays (sampled_ranks, sample_sizes, n_items or None) for ``counts``."""
        c = self.counts if counts is None else np.asarray(counts, dtype=np.int64)
        items = None if self.n_items is None else np.repeat(self.n_items, c)
        return np.repeat(self.ranks, c), np.repeat(self.sizes, c), items

    def to_frame(self):
        """The counts table: columns ``rank, count, sample_size`` [+ ``n_items``].

        Examples
        --------
        >>> rank_counts([1, 3, 1], n=5, n_items=100).to_frame().to_dict("list")
        {'rank': [1, 3], 'count': [2, 1], 'sample_size': [5, 5], 'n_items': [100, 100]}
        """
        d = {"rank": self.ranks, "count": self.counts, "sample_size": self.sizes}
        if self.n_items is not None:
            d["n_items"] = self.n_items
        return pd.DataFrame(d)


def cells(ranks, sizes, n_items=None, counts=None, *, return_inverse=False):
    """The one grouping of users (or weighted rows) into cells (N_u, n_u, r): a :class:`RankCounts`.

    Parameters
    ----------
    ranks, sizes : array_like of int, shape (M,)
        Sampled rank r and sample size n of every user (or row).
    n_items : array_like of int, shape (M,), optional
        Item count N_u of every user; None leaves the cells without item counts.
    counts : array_like, shape (M,), optional
        Weight of every row (default 1 per row: users).
    return_inverse : bool, keyword-only
        Also return the index of every row's cell.

    Returns
    -------
    RankCounts, and the rows' cell indices (int64, shape (M,)) when asked
        Cells sorted by (N, n, r); cells of total weight 0 are dropped (then
        a dropped row's index is -1).

    Examples
    --------
    >>> c, inv = cells([2, 1, 2], [5, 5, 5], return_inverse=True)
    >>> c.ranks.tolist(), c.counts.tolist(), inv.tolist()
    ([1, 2], [1, 2], [1, 0, 1])
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    it = np.zeros_like(ranks) if n_items is None else np.asarray(n_items, dtype=np.int64)
    br, bs = int(ranks.max()) + 1, int(sizes.max()) + 1
    if (int(it.max()) + 1) * bs * br < 2 ** 62:       # one int64 key per row
        key = (it * bs + sizes) * br + ranks
        uk, inv = np.unique(key, return_inverse=True)
        cols = np.stack([uk // (bs * br), (uk // br) % bs, uk % br])
    else:
        cols, inv = np.unique(np.stack([it, sizes, ranks]), axis=1, return_inverse=True)
    inv = inv.ravel()
    cnt = (np.bincount(inv, minlength=cols.shape[1]) if counts is None
           else np.bincount(inv, weights=np.asarray(counts, dtype=float), minlength=cols.shape[1]))
    keep = cnt > 0
    cols = cols[:, keep]
    st = RankCounts(sizes=cols[1].astype(np.int64), ranks=cols[2].astype(np.int64),
                    counts=np.round(cnt[keep]).astype(np.int64),
                    n_items=None if n_items is None else cols[0].astype(np.int64))
    if not return_inverse:
        return st
    new = np.full(keep.size, -1, dtype=np.int64)
    new[keep] = np.arange(int(keep.sum()))
    return st, new[inv]


def ranked_in_full(sizes, n_items, scheme="binomial"):
    """Which cells (or users) were ranked in full: their sampled rank is their global rank.

    A set of n_u = N_u items is every candidate. Without replacement
    (``scheme="hypergeometric"``) its kernel is the point mass r = R anyway.
    With replacement it is so in a nested design, where some users were
    sampled (n_u < N_u) and others ranked in full; when *every* user has
    n_u = N_u under ``scheme="binomial"`` the cells follow the with-replacement
    kernel of N_u - 1 draws (the papers' model, KDD20 eq 6), as in a
    simulation of that kernel.

    Examples
    --------
    >>> ranked_in_full([10, 50, 50], [50, 50, 40], "binomial").tolist()
    [False, True, False]
    >>> ranked_in_full([50, 50], [50, 50], "binomial").tolist(), ranked_in_full([50], [50], "hypergeometric").tolist()
    ([False, False], [True])
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    n_items = np.asarray(n_items, dtype=np.int64)
    full = sizes == n_items
    if check_scheme(scheme) == "binomial" and not np.any(sizes < n_items):
        return np.zeros_like(full)
    return full


def check_sampled(sampled_ranks, N, n):
    """Checked (r, N, n) of per-user sampled ranks with one sample size n.

    ``N`` is one int, or per-user item counts (an int64 array, returned as an
    int when all equal) with n <= N_u for every user.
    """
    if np.ndim(N) == 0:
        N, n = check_N_n(N, n)
        return check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n"), N, n
    n = check_int(n, "n", low=2)
    r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
    N = check_n_items(N, r.size)
    if isinstance(N, int):
        N, n = check_N_n(N, n)
    else:
        check_items(N, r.size, np.full(r.size, n))
    return r, N, n


def rank_counts(sampled_ranks, n=None, *, sample_sizes=None, n_items=None, return_inverse=False):
    """The sufficient statistic :class:`RankCounts` of per-user sampled ranks.

    Parameters
    ----------
    sampled_ranks : array_like of int
        r_u in 1..n (or 1..n_u).
    n : int, optional
        Common sample size; required unless ``sample_sizes`` is given.
    sample_sizes : array_like of int, optional
        Per-user sample sizes n_u (adaptive sampling, TORS24 Sec 6.2).
    n_items : int or array_like of int, optional, keyword-only
        The number of candidates N (one int) or per-user N_u >= n_u; stored
        per cell (cells per (N_u, n_u, r)).
    return_inverse : bool, keyword-only
        Also return every user's cell index (as :func:`cells`).

    Examples
    --------
    >>> c = rank_counts([1, 3, 1, 2], n=5)
    >>> c.ranks.tolist(), c.counts.tolist(), c.M
    ([1, 2, 3], [2, 1, 1], 4)
    >>> c = rank_counts([1, 1, 1], n=5, n_items=[90, 80, 90])
    >>> c.n_items.tolist(), c.counts.tolist()
    ([80, 90], [1, 2])
    """
    if sample_sizes is None:
        if n is None:
            raise ValueError("n (the sample size) is required unless sample_sizes is given")
        n = check_int(n, "n", low=2)
        r = check_ranks(sampled_ranks, n, name="sampled_ranks", upper_name="n")
        sizes = np.full(r.size, n, dtype=np.int64)
    else:
        sizes = check_ranks(sample_sizes, np.iinfo(np.int64).max, name="sample_sizes")
        if sizes.min() < 2:
            raise ValueError(f"sample_sizes must be >= 2; got min {sizes.min()}")
        if n is not None and np.any(sizes != check_int(n, "n", low=2)):
            raise ValueError(f"n={n} disagrees with sample_sizes (values {np.unique(sizes)[:5].tolist()})")
        r = check_ranks(sampled_ranks, int(sizes.max()), name="sampled_ranks",
                        upper_name="max(sample_sizes)")
        if r.shape != sizes.shape:
            raise ValueError(f"sampled_ranks and sample_sizes must have the same length; "
                             f"got {r.size} and {sizes.size}")
        bad = np.flatnonzero(r > sizes)
        if bad.size:
            i = bad[0]
            raise ValueError(f"sampled_ranks must lie in 1..sample_size; got rank {r[i]} > "
                             f"sample_size {sizes[i]} (user index {i})")
    items = None
    if n_items is not None:
        items = check_items(n_items, r.size, sizes)
    return cells(r, sizes, items, return_inverse=return_inverse)


def check_items(n_items, M, sizes, name="N"):
    """Per-user item counts N_u (int64 array of length M) with n_u <= N_u for every user.

    ``n_items`` is one int (the same N for every user) or one count per user.
    """
    if np.ndim(n_items) == 0:
        N = check_int(n_items, name, low=2)
        if sizes.max() > N:
            raise ValueError(f"n must lie in 2..{name}={N}; got n={sizes.max()}")
        return np.full(M, N, dtype=np.int64)
    a = np.asarray(n_items)
    if a.ndim != 1 or a.size != M:
        raise ValueError(f"{name} must be an int or one item count per user ({M}); got shape "
                         f"{a.shape}")
    items = check_ranks(a, np.iinfo(np.int64).max, name=name, upper_name="max")
    bad = np.flatnonzero(sizes > items)
    if bad.size:
        i = bad[0]
        raise ValueError(f"the sample size must lie in 2..N_u for every user; user index {i} has "
                         f"n={sizes[i]} > {name}={items[i]}")
    return items


def counts_from_frame(table, *, n=None, N=None, rank_col="rank", count_col="count",
                      size_col="sample_size", items_col="n_items", model_col="model"):
    """Per-model :class:`RankCounts` from a counts table (scale in users).

    One row per cell: ``rank`` (sampled rank), ``count`` (users in the cell),
    optional ``sample_size`` (n_u), ``n_items`` (N_u) and ``model``; any
    other column is an error (a misspelt one would be ignored). Rows of
    the same cell are added. This is the sufficient statistic, so estimates
    and bootstrap intervals from it equal those from the per-user ranks it
    counts (same seed). Aggregate 10^9 users where they live, e.g. in Spark
    SQL or DuckDB::

        SELECT model, n_items, sample_size, rank, COUNT(*) AS count
        FROM ranks GROUP BY model, n_items, sample_size, rank

    Parameters
    ----------
    table : pandas.DataFrame
    n, N : int, optional, keyword-only
        Common sample size / item count when the table has no such column
        (a column and a disagreeing value are an error).

    Returns
    -------
    dict
        ``{model: RankCounts}`` in order of appearance ("model" when there is
        no model column).

    Examples
    --------
    >>> t = pd.DataFrame({"rank": [1, 2, 1], "count": [5, 3, 2], "n_items": [900, 900, 800]})
    >>> c = counts_from_frame(t, n=100)["model"]
    >>> c.n_items.tolist(), c.counts.tolist(), c.M
    ([800, 900, 900], [2, 5, 3], 10)
    """
    df = table
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame; got {type(table).__name__}")
    check_columns(df, [rank_col, count_col], "the counts table")
    check_read_columns(df, (rank_col, count_col, size_col, items_col, model_col), "the counts table",
                       f"a counts table holds {rank_col}, {count_col}[, {model_col}][, {size_col}][, {items_col}]")
    if len(df) == 0:
        raise ValueError("the counts table has no rows")
    r = check_int_column(df[rank_col], rank_col).to_numpy()
    c = check_int_column(df[count_col], count_col).to_numpy()
    if (c < 0).any():
        raise ValueError(f"column {count_col!r} must hold counts >= 0; got min {c.min()}")
    if (r < 1).any():
        raise ValueError(f"column {rank_col!r} must hold ranks >= 1; got min {r.min()}")
    if size_col in df.columns:
        sizes = check_int_column(df[size_col], size_col).to_numpy()
        if (sizes < 2).any():
            raise ValueError(f"column {size_col!r} must be >= 2; got min {sizes.min()}")
        if n is not None and (sizes != check_int(n, "n", low=2)).any():
            raise ValueError(f"n={n} disagrees with column {size_col!r} "
                             f"(values {np.unique(sizes)[:5].tolist()})")
    elif n is None:
        raise ValueError(f"the sample size is unknown: the counts table has no {size_col!r} "
                         "column; pass n (--sample-size)")
    else:
        sizes = np.full(r.size, check_int(n, "n", low=2), dtype=np.int64)
    if (r > sizes).any():
        i = int(np.flatnonzero(r > sizes)[0])
        raise ValueError(f"sampled ranks must lie in 1..sample_size; row {i + 1} has rank {r[i]} > "
                         f"sample_size {sizes[i]}")
    items = None
    if items_col in df.columns:
        items = check_int_column(df[items_col], items_col).to_numpy()
        if N is not None and np.ndim(N) == 0 and (items != check_int(N, "N", low=2)).any():
            raise ValueError(f"N={N} disagrees with column {items_col!r} "
                             f"(values {np.unique(items)[:5].tolist()})")
    elif N is not None:
        if np.ndim(N) != 0:
            raise ValueError("N must be one int for a counts table (per-cell item counts go in its "
                             f"{items_col!r} column)")
        items = np.full(r.size, check_int(N, "N", low=2), dtype=np.int64)
    if items is not None and (sizes > items).any():
        i = int(np.flatnonzero(sizes > items)[0])
        raise ValueError(f"the sample size must lie in 2..n_items; row {i + 1} has sample_size "
                         f"{sizes[i]} > n_items {items[i]}")
    models = (df[model_col].astype(str).to_numpy() if model_col in df.columns
              else np.full(r.size, "model", dtype=object))
    _warn_repeated_cells(models, items, sizes, r, c, model_col in df.columns)
    out = {}
    for m in dict.fromkeys(models):
        sel = models == m
        st = cells(r[sel], sizes[sel], None if items is None else items[sel], c[sel])
        if st.counts.size == 0:
            raise ValueError(f"model {m!r} has no users (all counts are 0)")
        out[str(m)] = st
    return out


def _warn_repeated_cells(models, items, sizes, ranks, counts, named):
    """A counts table lists each cell once (one GROUP BY); rows that repeat a cell are added, with a warning
    naming the first such cell and its rows (a table pasted twice would double every count silently)."""
    import warnings

    key = pd.DataFrame({"m": models, "i": 0 if items is None else items, "s": sizes, "r": ranks})
    dup = key.duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    i = int(np.flatnonzero(dup)[0])
    rows = np.flatnonzero(dup & (key == key.iloc[i]).all(axis=1).to_numpy())
    cell = (f"model {models[i]!r}, " if named else "") + (f"n_items {items[i]}, " if items is not None else "")
    n_cells = int(key[dup].drop_duplicates().shape[0])
    warnings.warn(f"the counts table lists {n_cells} cell(s) on more than one row, e.g. ({cell}sample_size "
                  f"{sizes[i]}, rank {ranks[i]}) in rows {' and '.join(str(j + 1) for j in rows[:3])}"
                  f"{' and more' if rows.size > 3 else ''}: their counts are added "
                  f"({' + '.join(str(int(counts[j])) for j in rows[:3])}{' + ...' if rows.size > 3 else ''} users). "
                  "A counts table (one GROUP BY) lists each cell once: check for rows given twice",
                  UserWarning, stacklevel=3)


# ----------------------------------------------------------------------------
# the statistic of any input (sampling_lib.correct.estimate / compare)
# ----------------------------------------------------------------------------
def is_counts_table(x):
    """Whether ``x`` is a counts table (a DataFrame with ``rank`` and ``count`` columns)."""
    return isinstance(x, pd.DataFrame) and {"rank", "count"} <= set(x.columns)


def as_counts(sampled_ranks, N=None, n=None, sample_sizes=None):
    """(RankCounts with per-cell item counts, max N, model name) of one model's sampled ranks.

    ``sampled_ranks`` is per-user ranks (with ``N``, ``n`` or ``sample_sizes``),
    a one-model counts table (:func:`counts_from_frame`) or a
    :class:`RankCounts`; the name is that of the counts table's model, else
    "model". Options that contradict the data raise.
    """
    name = "model"
    if isinstance(sampled_ranks, pd.DataFrame):
        if not is_counts_table(sampled_ranks):
            raise TypeError("a DataFrame passed as sampled_ranks must be a counts table with columns "
                            f"'rank' and 'count'; got columns {list(sampled_ranks.columns)}")
        if sample_sizes is not None:
            raise ValueError("sample_sizes cannot be combined with a counts table (use its "
                             "'sample_size' column)")
        d = counts_from_frame(sampled_ranks, n=n, N=N)
        if len(d) > 1:
            raise ValueError(f"the counts table holds {len(d)} models {list(d)[:5]}; estimate one "
                             "model's rows at a time (or use compare)")
        name, stat = next(iter(d.items()))
    elif isinstance(sampled_ranks, RankCounts):
        stat = sampled_ranks
        if sample_sizes is not None or (n is not None and np.any(stat.sizes != n)):
            raise ValueError("n / sample_sizes disagree with the RankCounts' sample sizes")
        if stat.n_items is None and N is not None:
            stat = RankCounts(stat.sizes, stat.ranks, stat.counts,
                              check_items(N, stat.ranks.size, stat.sizes))
        elif stat.n_items is not None and N is not None and (
                np.ndim(N) != 0 or np.any(stat.n_items != check_int(N, "N", low=2))):
            raise ValueError("N disagrees with the item counts stored in the RankCounts")
    else:
        if N is None:
            raise ValueError("N (the number of items, an int or one count per user) is required")
        stat = rank_counts(sampled_ranks, n, sample_sizes=sample_sizes, n_items=N)
    if stat.n_items is None:
        raise ValueError("N (the number of items) is required: pass N or give the counts table an "
                         "'n_items' column")
    return stat, int(stat.n_items.max()), name


def statistics(data, N=None, n=None, sample_sizes=None, item_weights=None, exclude=None, scheme="binomial"):
    """{model: statistic} of any input of :func:`sampling_lib.correct.estimate`.

    Sampled ranks, a counts table, a :class:`RankCounts` or a
    :class:`sampling_lib.io.SampledRanks` give a :class:`RankCounts` with
    item counts per model; popularity-sampled input (``item_weights``, a
    :class:`~sampling_lib.popularity.PopularityLog` or a dict of them, or a
    scores table with the logged ``q``) gives a PopularityLog per model (its
    users are the cells). Options that do not apply raise.
    """
    from .io import SampledRanks
    from .popularity import WITHOUT_REPLACEMENT, as_logs, canonical_order, is_popularity_input

    if item_weights is not None or is_popularity_input(data):
        for name, v in (("N", N), ("n", n), ("sample_sizes", sample_sizes)):
            if v is not None:
                raise ValueError(f"{name} does not apply to popularity-sampled input: each user's N_u is counted "
                                 "from the item weights and the user's excluded items (or read from the "
                                 "n_candidates column), and n_u from the logged negatives")
        if check_scheme(scheme) != "binomial":
            raise ValueError(WITHOUT_REPLACEMENT)
        # users in a canonical order: the bootstrap's intervals do not depend on the input's row order
        return {m: canonical_order(log) for m, log in as_logs(data, item_weights, exclude).items()}
    if exclude is not None:
        raise ValueError("exclude applies to popularity-sampled input only (with item_weights, or a scores "
                         "table with the logged q); these are sampled ranks")
    if isinstance(data, SampledRanks):
        if sample_sizes is not None:
            raise ValueError("sample_sizes cannot be combined with SampledRanks (they carry their own)")
        out = {}
        for m in data.models:
            r, s = data.for_model(m)
            it = data.items_for_model(m)
            Nm = N.get(m) if isinstance(N, dict) else N
            if it is not None and Nm is not None and (np.ndim(Nm) != 0 or np.any(it != Nm)):
                raise ValueError(f"N={Nm} disagrees with the n_items column of model {m!r}")
            out[m] = as_counts(r, it if it is not None else Nm, None if s is not None else n, s)[0]
        return out
    stat, _, name = as_counts(data, N, n, sample_sizes)
    return {name: stat}


# ----------------------------------------------------------------------------
# the bootstrap
# ----------------------------------------------------------------------------
def coarse_means(values, weights, index, n_coarse):
    """Weighted means (n_coarse, m) of ``values`` (C, m) over the coarse cells ``index`` (C,) of
    the exact cells, with the exact cells' ``weights`` (C,); 0 in a coarse cell of zero weight.

    The value a coarse bootstrap draw gives each exact cell when it is spread over them in
    proportion to ``weights`` (:func:`coarse_share`).

    Examples
    --------
    >>> coarse_means(np.array([[1.0], [3.0], [5.0]]), [1, 3, 2], [0, 0, 1], 2).ravel().tolist()
    [2.5, 5.0]
    """
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    tot = np.bincount(index, weights=w, minlength=n_coarse)
    s = np.stack([np.bincount(index, weights=w * v[:, j], minlength=n_coarse) for j in range(v.shape[1])], axis=1)
    return np.divide(s, tot[:, None], out=np.zeros_like(s), where=tot[:, None] > 0)


def coarse_share(values, coarse_values, p):
    """Relative change (m,) of the first-order bootstrap variance when exact cells are drawn on
    coarse ones: |1 - Var_p(coarse_values) / Var_p(values)| per column (0 where Var_p(values) is 0).

    A multinomial replicate w_b of M users over exact cells with probabilities p moves a
    statistic that is linear to first order, T_b - T = (1/M) sum_c (w_bc - w_c) psi_c, with
    variance Var_p(psi) / M; drawn on coarse cells and spread back over the exact ones, each
    exact cell contributes the value its coarse draw gives it (``coarse_values``: e.g. the
    :func:`coarse_means` of psi), so the variance is Var_p(coarse_values) / M. When the coarse
    values are the p-weighted means of psi over the coarse cells the ratio is at most 1 (law of
    total variance: the share of the variance within the coarse cells); a difference of two
    models' values, each averaged over its own coarse cells, may move it either way.

    Examples
    --------
    >>> p = np.full(4, 0.25)
    >>> round(float(coarse_share(np.array([[0.0], [1.0], [2.0], [3.0]]),
    ...                          np.array([[0.5], [0.5], [2.5], [2.5]]), p)[0]), 3)
    0.2
    """
    v = np.asarray(values, dtype=float)
    vb = np.asarray(coarse_values, dtype=float)
    p = np.asarray(p, dtype=float)

    def var(x):
        return p @ (x - p @ x) ** 2

    total = var(v)
    return np.abs(1.0 - np.divide(var(vb), total, out=np.ones(v.shape[1]), where=total > 0))


def bootstrap_counts(counts, n_boot, *, rng=None):
    """Bootstrap replicates of a count vector: rows of Multinomial(M, counts / M).

    Resampling M users with replacement and re-counting them per cell is
    exactly one multinomial draw with the observed cell frequencies.

    Examples
    --------
    >>> b = bootstrap_counts([5, 3, 2], 4, rng=0)
    >>> b.shape, b.sum(axis=1).tolist()
    ((4, 3), [10, 10, 10, 10])
    """
    c = np.asarray(counts, dtype=np.int64)
    if c.ndim != 1 or c.size == 0 or np.any(c < 0) or c.sum() == 0:
        raise ValueError(f"counts must be a non-empty 1-D array of non-negative ints with a "
                         f"positive sum; got {counts!r}")
    n_boot = check_int(n_boot, "n_boot", low=1)
    rng = np.random.default_rng(rng)
    M = int(c.sum())
    return rng.multinomial(M, c / M, size=n_boot)


def _progress(total, enabled, desc):
    """A tqdm bar on a terminal, throttled plain lines otherwise (sampling_lib._progress), or None."""
    from ._progress import progress

    return progress(total, enabled, desc)


def bootstrap_loop(n_boot, rng, draw, work, *, cells=None, progress=False, desc="bootstrap"):
    """The one bootstrap loop: ``work(draw(k, rng))`` on chunks of k replicates.

    k is :func:`boot_chunk` of ``cells`` (:data:`BOOT_CHUNK` when None): a function of the input's
    size only, so the same seed gives the same replicates.

    Parameters
    ----------
    n_boot : int
        Number of replicates.
    rng : numpy.random.Generator
    draw : callable
        ``draw(k, rng)`` draws k replicates (e.g. ``rng.multinomial(M, p, size=k)``).
    work : callable
        ``work(replicates)`` returns the chunk's result.
    cells : int, optional, keyword-only
        Cells per count vector drawn (sets the chunk size, :func:`boot_chunk`).
    progress : bool, keyword-only
        Progress on stderr: a tqdm bar on a terminal, plain throttled lines
        otherwise (:mod:`sampling_lib._progress`).
    desc : str, keyword-only
        The bar's label.

    Returns
    -------
    list
        The chunks' results, in order.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> out = bootstrap_loop(100, g, lambda k, g: g.multinomial(10, [0.5, 0.5], size=k), len)
    >>> out
    [64, 36]
    """
    chunk = BOOT_CHUNK if cells is None else boot_chunk(cells)
    bar = _progress(n_boot, progress, desc)
    outs = []
    try:
        for a in range(0, n_boot, chunk):
            k = min(chunk, n_boot - a)
            outs.append(work(draw(k, rng)))
            if bar is not None:
                bar.update(k)
    finally:
        if bar is not None:
            bar.close()
    return outs
