"""The real-data panel's data sets: where they are, how they are read, which models rank them.

The panel of notebook 10 and ``benchmarks/bench_accuracy.py`` is four
public data sets, read from a folder outside the repository (``shared_data``,
never copied into it):

* MovieLens 100K (``ml-100k/u.data``; timestamps: the latest interaction is
  held out), 943 users x 1,682 items;
* Last.fm 2K (``lastfm-2k/user_artists.dat``; no timestamps: a random held-out
  interaction per user, seeded), as two catalogues of the same users: the
  artists with at least 5 listeners (2,828) and all 17,632;
* Gowalla and Yelp2018 as preprocessed for NGCF / LightGCN
  (``gowalla-lightgcn/``, ``yelp2018-lightgcn/``: ``train.txt`` and
  ``test.txt``, one line ``user item item ...`` per user; about 30,000 users x
  40,000 items each, no timestamps). Their published train/test split is
  random, not by time; the panel pools the two files and holds out one random
  interaction per user (seeded), the leave-one-out protocol of the other data
  sets (KDD20 Sec 2.1).

Every data set is ranked by the settings of :data:`PANEL_MODELS` that fit its
size (:data:`LARGE_MODELS` above :data:`DENSE_ITEMS_MAX` items: EASE needs a
dense items x items inverse). A data set's *family* groups the catalogues of
the same users (the two Last.fm ones): leave-one-dataset-out holds a family out
as a whole (:mod:`sampling_lib.studies.tuning`).

References
----------
.. [KDD20] Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020
   (Sec 2.1: leave-one-out, global rank R_u).
.. [NGCF] Wang, He, Wang, Feng, Chua. Neural Graph Collaborative Filtering. SIGIR 2019
   (the Gowalla and Yelp2018 preprocessing).
.. [LightGCN] He, Deng, Wang, Li, Zhang, Wang. LightGCN. SIGIR 2020.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import check_int

__all__ = [
    "PanelDataset",
    "PANEL_DATASETS",
    "PANEL_MODELS",
    "LARGE_MODELS",
    "DENSE_ITEMS_MAX",
    "load_user_item_lists",
    "panel_populations",
    "dataset_family",
]

PANEL_MODELS = {
    "popularity": ("popularity", {}),
    "itemknn-10": ("itemknn", {"neighbors": 10}),
    "itemknn": ("itemknn", {"neighbors": None}),
    "ease-5000": ("ease", {"lam": 5000.0}),
    "ease-200": ("ease", {"lam": 200.0}),
    "als-8": ("als", {"factors": 8, "iterations": 3}),
    "als-64": ("als", {"factors": 64, "iterations": 15}),
}
#: EASE is fitted up to this many items (a dense items x items inverse: 6,000 items = 288 MB).
DENSE_ITEMS_MAX = 6000
#: The settings of :data:`PANEL_MODELS` used above :data:`DENSE_ITEMS_MAX` items.
LARGE_MODELS = {k: v for k, v in PANEL_MODELS.items() if v[0] != "ease"}


@dataclass(frozen=True)
class PanelDataset:
    """One data set of the panel.

    Attributes
    ----------
    label : str
        Its name in the tables.
    files : tuple of str
        Paths relative to ``shared_data``.
    kind : {"ratings", "user_item_lists"}
        Read by :func:`sampling_lib.data.load_ratings`, or by
        :func:`load_user_item_lists` (all files pooled).
    min_item_users : int
        Items with fewer users are dropped before the split.
    family : str
        Data sets of one family share their users (held out together).
    """

    label: str
    files: tuple
    kind: str = "ratings"
    min_item_users: int = 1
    family: str = ""

    def paths(self, shared_data):
        from ..data import resolve_path

        root = resolve_path(shared_data, what="shared_data")
        return [resolve_path(root / f, what="shared_data file") for f in self.files]

    def ratings(self, shared_data):
        """The interactions, read from ``shared_data``."""
        from ..data import filter_items, load_ratings

        paths = self.paths(shared_data)
        r = load_ratings(paths[0]) if self.kind == "ratings" else load_user_item_lists(paths)
        return filter_items(r, self.min_item_users) if self.min_item_users > 1 else r


PANEL_DATASETS = {d.label: d for d in (
    PanelDataset("ml-100k", ("ml-100k/u.data",), family="ml-100k"),
    PanelDataset("lastfm-2k (>=5 users/item)", ("lastfm-2k/user_artists.dat",), min_item_users=5,
                 family="lastfm-2k"),
    PanelDataset("lastfm-2k", ("lastfm-2k/user_artists.dat",), family="lastfm-2k"),
    PanelDataset("gowalla", ("gowalla-lightgcn/train.txt", "gowalla-lightgcn/test.txt"),
                 kind="user_item_lists", family="gowalla"),
    PanelDataset("yelp2018", ("yelp2018-lightgcn/train.txt", "yelp2018-lightgcn/test.txt"),
                 kind="user_item_lists", family="yelp2018"),
)}


def dataset_family(label):
    """The family of a panel data set (its label when it is not one of :data:`PANEL_DATASETS`)."""
    d = PANEL_DATASETS.get(label)
    return d.family if d is not None and d.family else label


def load_user_item_lists(paths):
    """Read files of one line ``user item item ...`` per user (the NGCF / LightGCN format).

    Fields are separated by white space; a user listed in several files (e.g.
    ``train.txt`` and ``test.txt``) gets the union of the lines. There are no
    timestamps: :func:`sampling_lib.data.leave_one_out` then holds out a random
    interaction per user.

    Parameters
    ----------
    paths : str, Path, or sequence of them

    Returns
    -------
    sampling_lib.data.Ratings
        ``fmt="user_item_lists"``; ids re-indexed in order of their values
        (``user_ids`` / ``item_ids`` keep the originals); a pair listed twice is
        kept once (``n_duplicates``).

    Raises
    ------
    ValueError
        A token that is not a non-negative integer, or an empty file; the message
        names the file and the 1-based line.

    References
    ----------
    NGCF / LightGCN data release (``Data/<name>/train.txt``).

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "train.txt"), "w").write("0 5 7\\n1 7\\n")
    >>> _ = open(os.path.join(d, "test.txt"), "w").write("0 9\\n1 5\\n")
    >>> r = load_user_item_lists([os.path.join(d, "train.txt"), os.path.join(d, "test.txt")])
    >>> r.n_users, r.n_items, r.n_interactions, r.item_ids.tolist()
    (2, 3, 5, [5, 7, 9])
    """
    from ..data import Ratings

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("paths must name at least one file")
    users, items = [], []
    for p in paths:
        text = p.read_text(encoding="ascii", errors="replace")
        n_lines = 0
        for no, line in enumerate(text.splitlines(), start=1):
            tok = line.split()
            if not tok:
                continue
            if not all(t.isdigit() for t in tok):
                bad = next(t for t in tok if not t.isdigit())
                raise ValueError(f"{p}: line {no}: ids must be non-negative integers; got {bad!r}")
            a = np.array(tok, dtype=np.int64)
            users.append(np.full(a.size - 1, a[0]))
            items.append(a[1:])
            n_lines += 1
        if n_lines == 0:
            raise ValueError(f"{p}: file is empty (no users)")
    u = np.concatenate(users)
    i = np.concatenate(items)
    if u.size == 0:
        raise ValueError(f"{', '.join(map(str, paths))}: no interactions")
    user_ids, uu = np.unique(u, return_inverse=True)
    item_ids, ii = np.unique(i, return_inverse=True)
    key = uu * item_ids.size + ii
    _, first = np.unique(key, return_index=True)
    first.sort()
    return Ratings(users=uu[first].astype(np.int64), items=ii[first].astype(np.int64), timestamps=None,
                   order=np.arange(first.size, dtype=np.int64), n_users=int(user_ids.size),
                   n_items=int(item_ids.size), user_ids=user_ids, item_ids=item_ids,
                   source=", ".join(map(str, paths)), fmt="user_item_lists",
                   n_duplicates=int(u.size - first.size))


def _subsample_users(ratings, max_users, rng):
    """The interactions of ``max_users`` users drawn at random (all items kept as candidates)."""
    from ..data import Ratings

    keep = np.sort(np.random.default_rng(rng).choice(ratings.n_users, max_users, replace=False))
    new = np.full(ratings.n_users, -1, dtype=np.int64)
    new[keep] = np.arange(keep.size)
    sel = new[ratings.users] >= 0
    ts = None if ratings.timestamps is None else ratings.timestamps[sel]
    return Ratings(users=new[ratings.users[sel]], items=ratings.items[sel], timestamps=ts,
                   order=ratings.order[sel], n_users=int(keep.size), n_items=ratings.n_items,
                   user_ids=ratings.user_ids[keep], item_ids=ratings.item_ids,
                   source=f"{ratings.source} ({max_users} users drawn)", fmt=ratings.fmt)


def panel_populations(shared_data, datasets=None, models=None, *, large_models=None, max_users=None, rng=0,
                      progress=False):
    """Global ranks of every (data set, model) of the panel.

    Parameters
    ----------
    shared_data : str or Path or None
        The folder holding the data sets (relative: to the project root or the
        working folder, :func:`sampling_lib.data.resolve_path`); unused when
        ``datasets`` is a mapping.
    datasets : sequence of str, or mapping label -> Ratings or path, optional
        Labels of :data:`PANEL_DATASETS` (default all), or data sets of your own
        (a :class:`~sampling_lib.data.Ratings` or a ratings file each; its
        family is its label).
    models : mapping label -> (name, params), optional
        Default :data:`PANEL_MODELS` up to :data:`DENSE_ITEMS_MAX` items.
    large_models : mapping label -> (name, params), optional
        The settings above :data:`DENSE_ITEMS_MAX` items; default ``models``
        when given, else :data:`LARGE_MODELS` (no EASE).
    max_users : int or mapping label -> int, optional
        Rank only this many users drawn at random (before the split; every item
        stays a candidate): the notebook's lighter panel on the large data sets.
    rng : int
        Seeds the split, the models and the user draws.
    progress : bool

    Returns
    -------
    populations : dict
        ``{(dataset, model): (global ranks, N)}`` for
        :func:`sampling_lib.studies.accuracy_panel`.
    table : pandas.DataFrame
        One row per population: ``dataset, family, model, N, M, recall@10,
        median_R, seconds``, plus ``skipped`` models.
    """
    from ..experiments import global_ranks_from_data

    own = isinstance(datasets, Mapping)
    labels = list(PANEL_DATASETS) if datasets is None else list(datasets)
    unknown = [] if own else [d for d in labels if d not in PANEL_DATASETS]
    if unknown:
        raise ValueError(f"datasets must be among {list(PANEL_DATASETS)}; got {unknown}")
    populations, rows = {}, []
    for label in labels:
        t0 = time.perf_counter()
        if own:
            from ..data import Ratings, load_ratings

            src = datasets[label]
            ratings, family = (src if isinstance(src, Ratings) else load_ratings(src)), label
        else:
            ratings, family = PANEL_DATASETS[label].ratings(shared_data), PANEL_DATASETS[label].family
        cap = max_users.get(label) if isinstance(max_users, dict) else max_users
        if cap is not None and check_int(cap, "max_users", low=2) < ratings.n_users:
            ratings = _subsample_users(ratings, cap, rng)
        if ratings.n_items <= DENSE_ITEMS_MAX:
            settings = PANEL_MODELS if models is None else models
        else:
            settings = large_models if large_models is not None else (LARGE_MODELS if models is None else models)
        ranks, N, info = global_ranks_from_data(ratings, settings, rng=rng, keep_models=False,
                                                max_dense_items=DENSE_ITEMS_MAX)
        for model, R in ranks.items():
            populations[(label, model)] = (R, N)
            rows.append({"dataset": label, "family": family, "model": model, "N": N, "M": R.size,
                         "recall@10": float(np.mean(R <= 10)), "median_R": float(np.median(R)),
                         "seconds": round(info["seconds"][model], 1)})
        if progress:
            print(f"  {label}: N = {N}, M = {info['M']}, {time.perf_counter() - t0:.0f} s"
                  + (f", skipped {list(info['skipped'])}" if info["skipped"] else ""), flush=True)
    return populations, pd.DataFrame(rows)
