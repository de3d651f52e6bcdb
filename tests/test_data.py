"""Tests for sampling_lib.data: loaders, leave-one-out split, synthetic generator."""
from pathlib import Path

import numpy as np
import pytest

from sampling_lib.data import (
    Ratings,
    dataset_statistics,
    leave_one_out,
    load_ratings,
    synthetic_ratings,
)

ML100K = Path(__file__).resolve().parents[1].parent / "shared/data/ml-100k/u.data"

# user item rating timestamp; user 1 has a timestamp tie at 200 (item 30 comes last in
# the file -> test item), user 2 has a single interaction (dropped), user 3's latest
# interaction is item 20 at t=10.
ROWS = [(1, 10, 5, 100), (1, 20, 3, 200), (1, 30, 4, 200), (2, 10, 4, 50),
        (3, 20, 2, 10), (3, 10, 1, 5), (3, 40, 5, 7)]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _fmt_rows(sep, header=None):
    lines = [header] if header else []
    lines += [sep.join(str(v) for v in r) for r in ROWS]
    return "\n".join(lines) + "\n"


FORMATS = [
    # (file name, content, expected fmt)
    ("u.data", _fmt_rows("\t"), "udata"),
    ("ratings.dat", _fmt_rows("::"), "dat"),
    ("ratings.csv", _fmt_rows(",", "userId,movieId,rating,timestamp"), "csv"),
    ("any.csv", _fmt_rows(","), "csv"),                       # headerless, MovieLens layout
    ("data.txt", _fmt_rows("::"), "dat"),                      # detected from content
    ("weird.csv", _fmt_rows("\t"), "udata"),                   # content wins over the name
]


@pytest.mark.parametrize("name,text,fmt", FORMATS)
def test_loaders_same_interactions(tmp_path, name, text, fmt):
    r = load_ratings(_write(tmp_path, name, text))
    assert r.fmt == fmt
    assert (r.n_users, r.n_items, r.n_interactions) == (3, 4, 7)
    assert r.user_ids.tolist() == [1, 2, 3] and r.item_ids.tolist() == [10, 20, 30, 40]
    assert r.users.tolist() == [0, 0, 0, 1, 2, 2, 2]
    assert r.items.tolist() == [0, 1, 2, 0, 1, 0, 3]
    assert r.timestamps.tolist() == [100, 200, 200, 50, 10, 5, 7]


def test_generic_csv_named_columns_any_order_no_timestamp(tmp_path):
    p = _write(tmp_path, "x.csv", "item_id,user_id\nb,alice\na,alice\nb,bob\n")
    r = load_ratings(p)
    assert r.timestamps is None
    assert r.user_ids.tolist() == ["alice", "bob"] and r.item_ids.tolist() == ["a", "b"]
    assert r.users.tolist() == [0, 0, 1] and r.items.tolist() == [1, 0, 1]


def test_generic_csv_three_columns_is_user_item_timestamp(tmp_path):
    r = load_ratings(_write(tmp_path, "x.csv", "5,7,30\n5,8,10\n6,7,20\n"))
    assert r.timestamps.tolist() == [30, 10, 20]
    assert r.item_ids.tolist() == [7, 8]


def test_numeric_ids_sorted_numerically(tmp_path):
    r = load_ratings(_write(tmp_path, "u.data", "10\t2\t1\t1\n9\t10\t1\t2\n"))
    assert r.user_ids.tolist() == [9, 10] and r.item_ids.tolist() == [2, 10]


def test_duplicates_kept_once_with_earliest_timestamp(tmp_path):
    r = load_ratings(_write(tmp_path, "u.data", "1\t1\t5\t300\n1\t2\t5\t100\n1\t1\t3\t50\n"))
    assert r.n_duplicates == 1 and r.n_interactions == 2
    assert sorted(zip(r.items.tolist(), r.timestamps.tolist())) == [(0, 50.0), (1, 100.0)]


def test_blank_lines_ignored(tmp_path):
    r = load_ratings(_write(tmp_path, "u.data", "1\t1\t5\t3\n\n2\t1\t5\t4\n\n"))
    assert r.n_interactions == 2


MALFORMED = [
    # (content, file name, expected message fragment)
    ("1\t1\t5\t3\n1\t2\t5\t4\n1\t3\t5\t4\t9\n", "u.data", "line 3: expected 4 fields, saw 5"),
    ("1\t1\t5\t3\n1\t2\t5\t4\n1\t3\t5\n", "u.data", "line 3: missing timestamp"),
    ("1\t1\t5\t3\n1\t2\t5\tyesterday\n", "u.data", "line 2: timestamp is not a number"),
    ("1::1::5::3\n1::x::5::3\n", "ratings.dat", "line 2: item id is not an integer"),
    ("userId,movieId,rating,timestamp\n1,1,5,3\n1,2,good,4\n", "ratings.csv",
     "line 3: rating is not a number"),
    ("userId,movieId\n1,1\n,2\n", "r.csv", "line 3: missing user id"),
    ("just one field\n", "r.txt", "line 1: cannot detect the format"),
    ("", "empty.csv", "empty"),
    ("name,age\nbob,3\n", "people.csv", "line 1: header ['name', 'age'] has no recognisable user"),
    ("user,item\nu,a\nv\n", "short.csv", "line 3: missing item id"),
]


@pytest.mark.parametrize("text,name,msg", MALFORMED)
def test_malformed_files_name_file_and_line(tmp_path, text, name, msg):
    p = _write(tmp_path, name, text)
    with pytest.raises(ValueError) as exc:
        load_ratings(p)
    assert str(p) in str(exc.value)
    assert msg in str(exc.value)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope.data"):
        load_ratings("/nonexistent/nope.data")


def test_leave_one_out_ties_and_dropped_users(tmp_path):
    r = load_ratings(_write(tmp_path, "u.data", _fmt_rows("\t")))
    s = leave_one_out(r)
    # users 1 and 3 kept (re-indexed 0, 1); user 2 dropped (one interaction)
    assert s.user_ids.tolist() == [1, 3]
    assert s.summary["n_users_dropped"] == 1 and s.summary["n_users_kept"] == 2
    # user 1: items 20 and 30 tie at t=200 -> the later file row (item 30) is held out
    # user 3: item 20 has the latest timestamp
    assert s.item_ids[s.test_items].tolist() == [30, 20]
    assert s.summary["n_timestamp_ties"] == 1
    train = s.train.toarray()
    assert train.tolist() == [[1, 1, 0, 0], [1, 0, 0, 1]]
    assert s.n_items == 4 and s.train.shape == (2, 4)   # item 40 etc. stay candidates
    assert s.summary["n_train"] + s.summary["n_test"] == 6


def test_leave_one_out_without_timestamps_holds_out_last_row(tmp_path):
    r = load_ratings(_write(tmp_path, "x.csv", "user,item\nu,a\nu,c\nu,b\nv,a\nv,b\nw,c\n"))
    s = leave_one_out(r, holdout="last")  # the default for untimed files is now "random"
    assert s.item_ids[s.test_items].tolist() == ["b", "b"]
    assert s.summary["n_users_dropped"] == 1


def test_leave_one_out_min_interactions(tmp_path):
    r = load_ratings(_write(tmp_path, "u.data", _fmt_rows("\t")))
    s = leave_one_out(r, min_interactions=3)
    assert s.summary["n_users_dropped"] == 1 and s.n_users == 2
    s = leave_one_out(r, min_interactions=4)
    assert s.n_users == 0 and s.summary["n_users_dropped"] == 3
    with pytest.raises(ValueError, match="min_interactions"):
        leave_one_out(r, min_interactions=1)
    with pytest.raises(TypeError, match="Ratings"):
        leave_one_out("u.data")


def test_test_item_never_in_train():
    s = leave_one_out(synthetic_ratings(300, 80, rng=5))
    assert not np.any(np.asarray(s.train[np.arange(s.n_users), s.test_items]).ravel())
    assert s.train.nnz + s.n_users == s.summary["n_interactions"]


def test_synthetic_is_seeded_and_skewed():
    a = synthetic_ratings(400, 200, rng=1)
    b = synthetic_ratings(400, 200, rng=1)
    np.testing.assert_array_equal(a.items, b.items)
    assert isinstance(a, Ratings) and a.fmt == "synthetic"
    assert np.bincount(a.users).min() >= 2
    # popularity skew: the top 10% of items carry far more than 10% of interactions
    counts = np.sort(np.bincount(a.items, minlength=200))[::-1]
    assert counts[:20].sum() / counts.sum() > 0.25
    # no duplicates
    assert np.unique(a.users * 200 + a.items).size == a.n_interactions


def test_synthetic_validation():
    with pytest.raises(ValueError, match="n_items"):
        synthetic_ratings(10, 1)
    with pytest.raises(ValueError, match="mean_interactions"):
        synthetic_ratings(10, 10, mean_interactions=1.5)


def test_dataset_statistics():
    r = synthetic_ratings(50, 20, rng=0)
    st = dataset_statistics(r, "toy").iloc[0]
    assert st["interactions"] == r.n_interactions
    assert st["sparsity"] == pytest.approx(1 - r.n_interactions / 1000)


@pytest.mark.skipif(not ML100K.exists(), reason="MovieLens 100K not available")
def test_ml100k():
    r = load_ratings(ML100K)
    assert r.fmt == "udata"
    # MovieLens 100K README: 100,000 ratings by 943 users on 1682 items
    assert (r.n_interactions, r.n_users, r.n_items, r.n_duplicates) == (100000, 943, 1682, 0)
    s = leave_one_out(r)
    assert s.summary["n_users_dropped"] == 0 and s.n_users == 943
    # every ml-100k user has >= 20 ratings, so the training row has >= 19 items
    assert np.diff(s.train.indptr).min() >= 19


def test_semicolon_quoted_csv_book_crossing_style(tmp_path):
    text = '"User-ID";"ISBN";"Book-Rating"\n"276725";"034545104X";"0"\n"276726";"0155061224";"5"\n'
    r = load_ratings(_write(tmp_path, "BX-Book-Ratings.csv", text))
    assert r.fmt == "csv" and r.n_users == 2 and r.timestamps is None
    assert r.item_ids.tolist() == ["0155061224", "034545104X"]


@pytest.mark.parametrize("name,text,fmt", FORMATS)
def test_fast_numeric_path_equals_validating_path(tmp_path, monkeypatch, name, text, fmt):
    import sampling_lib.data as data

    p = _write(tmp_path, name, text)
    fast = load_ratings(p)
    monkeypatch.setattr(data, "_fast_numeric", lambda *a, **k: None)
    slow = load_ratings(p)
    for f in ("users", "items", "timestamps", "user_ids", "item_ids"):
        np.testing.assert_array_equal(getattr(fast, f), getattr(slow, f))
    assert (fast.fmt, fast.n_duplicates) == (slow.fmt, slow.n_duplicates)
    np.testing.assert_array_equal(np.argsort(fast.order), np.argsort(slow.order))


def test_datetime_timestamps(tmp_path):
    text = "user,item,timestamp\nu,a,2020-01-02T00:00:00\nu,b,2020-01-01 12:00\nv,a,2019-12-31\n"
    r = load_ratings(_write(tmp_path, "x.csv", text))
    assert r.timestamps[1] - r.timestamps[0] == -12 * 3600
    s = leave_one_out(r)
    assert s.item_ids[s.test_items].tolist() == ["a"]       # u's latest is item a (Jan 2)
    bad = "user,item,timestamp\nu,a,2020-01-02\nu,b,not a date\n"
    with pytest.raises(ValueError, match="line 3: timestamp is not a number"):
        load_ratings(_write(tmp_path, "bad.csv", bad))


def test_leave_one_out_random_holdout_for_untimed_files(tmp_path):
    # HetRec-style file: header userID/artistID/weight, tab-separated, CRLF, no timestamps,
    # sorted by item: "last in the file" would always hold out the largest item id.
    rows = ["userID\tartistID\tweight"]
    for u in range(1, 41):
        for i in range(1, 11):
            rows.append(f"{u}\t{i}\t{(u * i) % 7 + 1}")
    p = tmp_path / "user_artists.dat"
    p.write_bytes("\r\n".join(rows).encode())
    r = load_ratings(p)
    assert r.timestamps is None and r.n_users == 40 and r.n_items == 10
    s = leave_one_out(r, rng=1)
    assert s.summary["holdout"] == "random"
    # random hold-out: not always the same (last) item; reproducible from the seed
    assert np.unique(s.test_items).size > 3
    assert np.array_equal(s.test_items, leave_one_out(r, rng=1).test_items)
    last = leave_one_out(r, holdout="last")
    assert np.all(last.item_ids[last.test_items] == "10") or np.all(last.test_items == last.test_items[0])
    with pytest.raises(ValueError, match="holdout"):
        leave_one_out(r, holdout="first")
