"""Every notebook with a ``data_path`` parameter runs on a user's ratings file (issue 16).

The file is the kind a user brings and the project has not seen: no timestamps, string user and
item ids ("u17", "artist_0042"), a header-less two-column CSV, rows in random order, a few hundred
users and items. It is generated here from a seeded Generator (``synthetic_ratings``), never copied
from the shared data. Each notebook runs with its smoke parameters plus ``data_path`` through the
report runner (:func:`sampling_lib.reporting.execute_notebook`); it must finish with every claim
passing. Statements about one data set are observations and never fail a run.

The library-level test at the end checks the data-loading and ranking path at the size the issue
names (a few thousand users, 10-20K items) without a notebook.
"""
import json

import numpy as np
import pytest

from conftest import REPO
from sampling_lib import data, recommenders
from sampling_lib.reporting import execute_notebook, list_notebooks, smoke_parameters



def _parameters_source(path):
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


DATA_NOTEBOOKS = [p for p in list_notebooks(REPO / "notebooks") if "data_path =" in _parameters_source(p)]
NAME = "userdata"    # file stem and folder name: notebooks name the data set after one or the other


def write_user_file(path, n_users, n_items, *, seed, mean_interactions=12.0):
    """A header-less ``user,item`` CSV with string ids and no timestamps, rows shuffled.

    Ids are permuted so that their string order differs from the generator's order
    ("u10" sorts before "u2"). Returns the generator's Ratings.
    """
    r = data.synthetic_ratings(n_users, n_items, mean_interactions=mean_interactions, rng=seed)
    g = np.random.default_rng(seed)
    uid = np.array([f"u{k}" for k in g.permutation(n_users) + 1])
    iid = np.array([f"artist_{k:04d}" for k in g.permutation(n_items) + 1])
    perm = g.permutation(r.n_interactions)
    path.write_text("".join(f"{uid[u]},{iid[i]}\n" for u, i in zip(r.users[perm], r.items[perm])))
    return r


@pytest.fixture(scope="session")   # session: the scheduler interleaves these tests with others
def user_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data") / NAME
    folder.mkdir()
    path = folder / f"{NAME}.csv"
    write_user_file(path, 300, 400, seed=16)
    return path


def test_the_data_path_notebooks_are_found():
    names = [p.name[:2] for p in DATA_NOTEBOOKS]
    assert "08" in names and len(names) >= 8, names


def test_user_file_is_read_as_untimed_string_ids(user_file):
    r = data.load_ratings(user_file)
    assert r.timestamps is None and r.fmt == "csv"
    assert r.user_ids.dtype == object and str(r.user_ids[0]).startswith("u")
    assert str(r.item_ids[0]).startswith("artist_")
    split = data.leave_one_out(r)
    assert split.summary["holdout"] == "random"      # an untimed file: no time order to follow


def _outputs_text(path):
    nb = json.loads(path.read_text())
    parts = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            parts.append(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"]))
            for v in o.get("data", {}).values():
                parts.append(v if isinstance(v, str) else "".join(v) if isinstance(v, list) else "")
    return "\n".join(parts)


#: user-data runs kept in the quick suite (make test): none; every notebook's user-data run is marked slow
#: (make test-slow), its smoke run stays quick (text ids through evaluate: tests/test_evaluate.py)
QUICK_DATA_NOTEBOOKS = ()


@pytest.mark.notebooks
@pytest.mark.parametrize("path", [p if p.name[:2] in QUICK_DATA_NOTEBOOKS else pytest.param(p, marks=pytest.mark.slow)
                                  for p in DATA_NOTEBOOKS], ids=[p.stem for p in DATA_NOTEBOOKS])
def test_notebook_runs_on_an_untimed_file_with_string_ids(path, user_file, tmp_path, notebook_kernel):
    # The figures are built but not rasterized (matplotlib's Agg backend in the shared kernel, no inline PNGs):
    # this test is about the data path; every notebook's figures are drawn in full by `make reports`. Saves
    # a quarter of these runs' time.
    params = dict(smoke_parameters(path), data_path=str(user_file))
    dst = tmp_path / path.name
    run = execute_notebook(path, dst, params, html=False, kernel=notebook_kernel)
    failed = [c["claim_id"] for c in run.claims if not c["passed"] and c.get("kind", "claim") == "claim"]
    assert run.ok, f"{path.name} on {user_file.name}: {run.error}; failed claims: {failed}"
    assert run.claims, "no claims recorded"
    assert NAME in _outputs_text(dst), "the notebook does not show that it used the user's file"


def test_loading_and_ranking_at_thousands_of_users_and_15k_items(tmp_path):
    # the size issue 16 names (a few thousand users, 10-20K items), library path only:
    # load (string ids, untimed) -> leave-one-out -> popularity / item-KNN / ALS -> global ranks
    M, N = 4000, 15_000
    g = np.random.default_rng(3)
    first = g.integers(N, size=M)                          # two distinct items per user, then a Zipf tail
    second = (first + 1 + g.integers(N - 1, size=M)) % N
    k = g.poisson(6, size=M)
    w = 1.0 / np.arange(1, N + 1) ** 0.5
    tail = g.choice(N, size=k.sum(), p=w / w.sum())
    users = np.concatenate([np.arange(M), np.arange(M), np.repeat(np.arange(M), k)])
    items = np.concatenate([first, second, tail])
    perm = g.permutation(users.size)
    path = tmp_path / "big.csv"
    path.write_text("".join(f"user_{u:05d},sku-{i}\n" for u, i in zip(users[perm], items[perm])))
    pairs = np.unique(users * N + items)
    r = data.load_ratings(path)
    assert r.timestamps is None and (r.n_users, r.n_interactions) == (M, pairs.size)
    assert r.n_items == np.unique(items).size and r.n_items > 10_000
    split = data.leave_one_out(r, rng=1)
    assert split.n_users == M and split.train.shape == (M, r.n_items)
    assert split.train.nnz + M == pairs.size
    # the held-out item is one of the user's own items and is not in the training row
    X = split.train.tocsr()
    assert not np.any(np.asarray(X[np.arange(M), split.test_items]).ravel())
    assert np.all(np.isin(split.test_items + r.n_items * np.arange(M), r.items + r.n_items * r.users))
    n_cand = recommenders.n_candidates(split.train)
    # (item-KNN and EASE build dense N x N item matrices: 1.2 GB and ~20 s at this N, so not in a unit test)
    for name, params in [("popularity", {}), ("als", {"factors": 8, "iterations": 2})]:
        model = recommenders.make_recommender(name, **params).fit(split.train)
        R = recommenders.global_ranks(model, split.train, split.test_items, rng=0)
        assert R.shape == (M,) and R.min() >= 1 and np.all(R <= n_cand)


def test_dense_item_models_over_the_memory_limit_refuse_and_are_skipped(monkeypatch):
    # lastfm-2k full (17,632 items): the default model list's EASE reached a 12 GB kernel before this
    # change; item-KNN and EASE now refuse up front, and global_ranks_from_data skips them with a warning
    from sampling_lib.exceptions import MemoryLimitError
    from sampling_lib.experiments import global_ranks_from_data

    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", str(100 * 100 * 8))
    split = data.leave_one_out(data.synthetic_ratings(200, 150, rng=0))
    for name in ("ease", "itemknn"):
        with pytest.raises(MemoryLimitError, match=r"N=150 items"):
            recommenders.make_recommender(name).fit(split.train)
    with pytest.warns(RuntimeWarning, match="skipped"):
        ranks, N, info = global_ranks_from_data(None, synthetic={"n_users": 200, "n_items": 150})
    assert list(ranks) == ["popularity", "als"] and sorted(info["skipped"]) == ["ease", "itemknn"]
    with pytest.raises(MemoryLimitError, match="every model was skipped"), pytest.warns(RuntimeWarning):
        global_ranks_from_data(None, models=("ease",), synthetic={"n_users": 200, "n_items": 150})
