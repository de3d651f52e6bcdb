"""Property / fuzz tests of every reader of sampling_lib.io (issue 26, "Build beyond the fixes").

A file is either read into the documented table -- the same table whatever its byte-order mark, line
endings, blank lines or id spelling -- or refused with one ValueError line that names the file (and the
line, for a bad line); never a traceback of another kind and never a silently different table. Each
property draws few examples (the project's ``ci`` profile derandomizes them), so the module takes a few
seconds in ``make test``; ``HYPOTHESIS_PROFILE=explore`` searches afresh.
"""
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sampling_lib import io
from sampling_lib.popularity import popularity_logs_from_table, read_item_weights

FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ids as people write them: digits with leading zeros, decimals, words pandas would read as missing
# values, non-ASCII text; never a separator, quote or white space (those are not ids of any format here)
ID = st.one_of(
    st.integers(0, 999).map(str),
    st.integers(0, 99).map(lambda i: f"0{i}"),
    st.integers(0, 9).map(lambda i: f"{i}.0"),
    st.sampled_from(["NA", "null", "nan", "None", "True", "u-1", "é", "用户7", "1e3"]),
    st.text("abcxyz_", min_size=1, max_size=4),
)
ENCODING = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1"])
NEWLINE = st.sampled_from(["\n", "\r\n"])


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def write(path, lines, *, encoding="utf-8", newline="\n", blank_after=()):
    """Write text lines (blank lines after the given indices); returns the file line of each given line."""
    if encoding == "latin-1":
        assume(all(ord(ch) < 256 for line in lines for ch in line))
    out, numbers = [], []
    for k, line in enumerate(lines):
        out.append(line)
        numbers.append(len(out))
        if k in blank_after:
            out.append("")
    path.write_bytes(newline.join(out + [""]).encode(encoding))
    return numbers


def is_ascii(lines):
    return all(ch.isascii() for line in lines for ch in line)


def refused(exc, path, line=None):
    """A refusal: one ValueError line naming the file (and the line)."""
    msg = str(exc)
    assert isinstance(exc, ValueError) and "\n" not in msg, (type(exc), msg)
    assert str(path) in msg, msg
    if line is not None:
        assert f"line {line}" in msg, msg
    return msg


def read_or_refusal(reader, path):
    """The reader's result, or its error checked to be one line naming the file."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # e.g. the NCF note on held-out items among negatives
            return reader(path)
    except FileNotFoundError as exc:                 # pragma: no cover - the file is always written
        pytest.fail(str(exc))
    except ValueError as exc:
        refused(exc, path)
        return None


def expect_encoding(exc_or_result, path, encoding, ascii_only):
    """utf-16 is always refused; latin-1 is refused exactly when the text is not ASCII."""
    if encoding == "utf-16":
        with pytest.raises(ValueError, match="UTF-16 text") as e:
            exc_or_result()
        refused(e.value, path)
        return False
    if encoding == "latin-1" and not ascii_only:
        with pytest.raises(ValueError, match=r"line \d+: .*not UTF-8 text") as e:
            exc_or_result()
        refused(e.value, path)
        return False
    return True


# --- random bytes: every reader ---------------------------------------------------------------
READERS = {
    "ranks.csv": lambda p: io.ranks_from_table(p),
    "scores.csv": lambda p: io.ranks_from_score_table(p),
    "counts.csv": lambda p: io.counts_table(p),
    "table.csv": lambda p: io.table_layout(p),
    "run.trec": io.read_trec_run,
    "qrels.txt": io.read_trec_qrels,
    "run.json": io.read_ranx_json,
    "x.test.negative": io.read_ncf_negatives,
    "elliot.tsv": lambda p: io.read_elliot_negatives(p, held_out=pd.DataFrame({"user": ["0"], "item": ["1"]})),
    "neg.csv": lambda p: io.read_negatives(p, pd.DataFrame({"user": ["0"], "item": ["1"]})),
    "weights.csv": read_item_weights,
    "pop.csv": lambda p: popularity_logs_from_table(p),
}


@pytest.mark.parametrize("name", sorted(READERS))
@FEW
@given(data=st.one_of(
    st.binary(max_size=200),
    st.lists(st.sampled_from([b"user", b"rank", b"count", b",", b"\t", b"\n", b"1", b"01", b"(", b")",
                              b"Q0", b" ", b"\xef\xbb\xbf", b"\xff\xfe", b"{", b"}", b'"', b":", b"label",
                              b"score", b"item", b"weight", b"-1", b"1e999", b"\x00", b"\xe9"]),
             max_size=40).map(b"".join)))
def test_random_bytes_give_a_table_or_one_line_naming_the_file(where, name, data):
    path = where / name
    path.write_bytes(data)
    read_or_refusal(READERS[name], path)


# --- ranks tables: the documented table, or the line of the bad cell -----------------------------
@st.composite
def ranks_tables(draw):
    users = draw(st.lists(ID, min_size=1, max_size=6, unique=True))
    models = draw(st.lists(ID, min_size=1, max_size=3, unique=True))
    rows = [(u, m, draw(st.integers(1, 10))) for m in models for u in users]
    return rows


@FEW
@given(rows=ranks_tables(), encoding=ENCODING, newline=NEWLINE, blank=st.sets(st.integers(0, 20), max_size=3),
       fault=st.sampled_from([None, "blank user", "blank rank", "duplicate", "fraction"]),
       at=st.integers(0, 100))
def test_ranks_table_round_trip_or_the_bad_line(where, rows, encoding, newline, blank, fault, at):
    path = where / "ranks.csv"
    body = [f"{u},{m},{r}" for u, m, r in rows]
    i = at % len(body)
    if fault == "blank user":
        body[i] = f",{rows[i][1]},{rows[i][2]}"
    elif fault == "blank rank":
        body[i] = f"{rows[i][0]},{rows[i][1]},"
    elif fault == "fraction":
        body[i] = f"{rows[i][0]},{rows[i][1]},2.5"
    elif fault == "duplicate":
        assume(i > 0)
        body[i] = body[0]
    lines = ["user,model,rank"] + body
    number = write(path, lines, encoding=encoding, newline=newline, blank_after=blank)
    if not expect_encoding(lambda: io.ranks_from_table(path), path, encoding, is_ascii(lines)):
        return
    if fault is None:
        s = io.ranks_from_table(path)
        want = pd.DataFrame(rows, columns=["user", "model", "rank"]).pivot(
            index="user", columns="model", values="rank")
        got = s.ranks.astype("int64")
        assert sorted(got.index) == sorted(want.index) and sorted(got.columns) == sorted(want.columns)
        assert (got.loc[want.index, want.columns] == want).all().all()   # ids exactly as written
        return
    with pytest.raises(ValueError) as e:
        io.ranks_from_table(path)
    refused(e.value, path, number[i + 1])


# --- counts tables ---------------------------------------------------------------------------------
@FEW
@given(cells=st.lists(st.tuples(st.integers(1, 10), st.integers(0, 10**6), st.sampled_from(["a", "01", "1"])),
                      min_size=1, max_size=8),
       encoding=ENCODING, blank=st.sets(st.integers(0, 10), max_size=2),
       fault=st.sampled_from([None, "blank count", "blank model", "negative", "user column"]), at=st.integers(0, 50))
def test_counts_table_round_trip_or_the_bad_line(where, cells, encoding, blank, fault, at):
    path = where / "counts.csv"
    body = [f"{r},{c},{m}" for r, c, m in cells]
    i = at % len(body)
    header = "rank,count,model"
    if fault == "blank count":
        body[i] = f"{cells[i][0]},,{cells[i][2]}"
    elif fault == "blank model":
        body[i] = f"{cells[i][0]},{cells[i][1]},"
    elif fault == "negative":
        body[i] = f"{cells[i][0]},-1,{cells[i][2]}"
    elif fault == "user column":
        header = "rank,count,user"
    lines = [header] + body
    number = write(path, lines, encoding=encoding, blank_after=blank)
    if not expect_encoding(lambda: io.counts_table(path), path, encoding, is_ascii(lines)):
        return
    if fault is None:
        got = io.counts_table(path)
        want = pd.DataFrame(cells, columns=["rank", "count", "model"]).groupby(
            ["model", "rank"], as_index=False)["count"].sum()
        assert got.to_dict("list") == want.to_dict("list")          # "01" and "1" are two models
        return
    with pytest.raises(ValueError) as e:
        io.counts_table(path)
    refused(e.value, path, None if fault == "user column" else number[i + 1])


# --- TREC runs and qrels ---------------------------------------------------------------------------
@FEW
@given(run=st.dictionaries(ID, st.dictionaries(ID, st.floats(-1e6, 1e6, allow_nan=False), min_size=1,
                                               max_size=4), min_size=1, max_size=4),
       sep=st.sampled_from([" ", "\t", "  "]), bom=st.booleans(), newline=NEWLINE,
       blank=st.sets(st.integers(0, 10), max_size=2),
       fault=st.sampled_from([None, "fields", "score", "duplicate"]), at=st.integers(0, 50))
def test_trec_run_round_trip_or_the_bad_line(where, run, sep, bom, newline, blank, fault, at):
    path = where / "run.trec"
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    body = [sep.join([q, "Q0", d, str(k + 1), repr(s), "tag"]) for k, (q, d, s) in enumerate(rows)]
    i = at % len(body)
    if fault == "fields":
        body[i] = sep.join([rows[i][0], "Q0", rows[i][1], repr(rows[i][2])])
    elif fault == "score":
        body[i] = sep.join([rows[i][0], "Q0", rows[i][1], "1", "high", "tag"])
    elif fault == "duplicate":
        assume(i > 0)
        body[i] = body[0]
    number = write(path, body, encoding="utf-8-sig" if bom else "utf-8", newline=newline, blank_after=blank)
    if fault is None:
        t = io.read_trec_run(path)
        assert list(zip(t.user, t["item"], t.score)) == rows and (t.model == "tag").all()
        qrels = where / "qrels.txt"
        write(qrels, [f"{q} 0 {d} 1" for q, d, _ in rows], encoding="utf-8-sig" if bom else "utf-8")
        assert list(zip(*io.read_trec_qrels(qrels)[["user", "item"]].to_numpy().T)) == [r[:2] for r in rows]
        return
    with pytest.raises(ValueError) as e:
        io.read_trec_run(path)
    refused(e.value, path, number[i])


# --- ranx JSON ---------------------------------------------------------------------------------------
@FEW
@given(run=st.dictionaries(ID, st.dictionaries(ID, st.floats(-1e6, 1e6, allow_nan=False), min_size=1,
                                               max_size=3), min_size=1, max_size=3),
       bom=st.booleans(), indent=st.sampled_from([None, 2]), repeat=st.booleans())
def test_ranx_json_round_trip_or_refused(where, run, bom, indent, repeat):
    path = where / "run.json"
    text = json.dumps(run, indent=indent, ensure_ascii=False)
    if repeat:                                                  # a key written twice in one mapping
        q = next(iter(run))
        text = text.replace(json.dumps(q, ensure_ascii=False) + ":", json.dumps(q, ensure_ascii=False) + ": {}, "
                            + json.dumps(q, ensure_ascii=False) + ":", 1)
    path.write_bytes(text.encode("utf-8-sig" if bom else "utf-8"))
    if not repeat:
        assert io.read_ranx_json(path) == run
        return
    with pytest.raises(ValueError, match="appears twice") as e:
        io.read_ranx_json(path)
    refused(e.value, path)


# --- negatives files: NCF, Elliot, the project's own ---------------------------------------------------
@st.composite
def negatives(draw):
    users = draw(st.lists(ID, min_size=1, max_size=5, unique=True))
    out = {}
    for u in users:
        held = draw(ID)
        negs = draw(st.lists(ID.filter(lambda x, h=held: x != h), min_size=1, max_size=5))
        out[u] = (held, negs)
    return out


@FEW
@given(neg=negatives(), encoding=ENCODING, newline=NEWLINE, blank=st.sets(st.integers(0, 6), max_size=2),
       fault=st.sampled_from([None, "no negatives", "repeat user", "bad pair"]), at=st.integers(0, 50))
def test_ncf_and_elliot_round_trip_or_the_bad_line(where, neg, encoding, newline, blank, fault, at):
    users = list(neg)
    body = [f"({u},{h})\t" + "\t".join(ns) for u, (h, ns) in neg.items()]
    i = at % len(body)
    if fault == "no negatives":
        body[i] = f"({users[i]},{neg[users[i]][0]})"
    elif fault == "repeat user":
        assume(i > 0)
        body[i] = body[0]
    elif fault == "bad pair":
        body[i] = f"({users[i]},1,2)\t5"
    for name, reader in (("x.test.negative", io.read_ncf_negatives),
                         ("elliot.tsv", lambda p: io.read_elliot_negatives(p))):
        path = where / name
        number = write(path, body, encoding=encoding, newline=newline, blank_after=blank)
        if not expect_encoding(lambda: reader(path), path, encoding, is_ascii(body)):
            continue
        if fault is None:
            t = reader(path)
            want = [(u, h, 1) for u, (h, _) in neg.items()]
            got = list(zip(t.user, t["item"], t.label))
            assert [g for g in got if g[2] == 1] == want
            assert [(u, it) for u, it, lab in got if lab == 0] == [(u, x) for u, (_, ns) in neg.items() for x in ns]
            assert t.line.tolist() == [number[users.index(u)] for u in t.user]
            continue
        with pytest.raises(ValueError) as e:
            reader(path)
        refused(e.value, path, number[i])


@FEW
@given(neg=negatives(), encoding=ENCODING, blank=st.sets(st.integers(0, 20), max_size=2),
       fault=st.sampled_from([None, "blank item", "clash"]), at=st.integers(0, 50))
def test_own_negatives_file_round_trip_or_the_bad_line(where, neg, encoding, blank, fault, at):
    rows = [(u, x) for u, (_, ns) in neg.items() for x in ns]
    body = [f"{u},{x}" for u, x in rows]
    i = at % len(body)
    held = pd.DataFrame({"user": list(neg), "item": [h for h, _ in neg.values()]})
    if fault == "blank item":
        body[i] = f"{rows[i][0]},"
    elif fault == "clash":                                      # a user's held-out item among its negatives
        body[i] = f"{rows[i][0]},{neg[rows[i][0]][0]}"
    lines = ["user,item"] + body
    path = where / "neg.csv"
    number = write(path, lines, encoding=encoding, blank_after=blank)
    if not expect_encoding(lambda: io.read_negatives(path, held), path, encoding, is_ascii(lines)):
        return
    if fault is None:
        t = io.read_negatives(path, held)
        assert [(u, x) for u, x, lab in zip(t.user, t["item"], t.label) if lab == 0] == rows
        assert t.groupby("user", sort=False).label.sum().tolist() == [1] * len(neg)
        return
    with pytest.raises(ValueError) as e:
        io.read_negatives(path, held)
    refused(e.value, path, number[i + 1])


# --- mixed id types across the files of one call --------------------------------------------------------
@settings(FEW, max_examples=10)
@given(ids=st.lists(st.integers(0, 50), min_size=2, max_size=6, unique=True), junk=st.booleans())
def test_ids_compare_as_text_across_files_and_dataframes(where, ids, junk):
    """A DataFrame's integer users match a CSV's text users; a junk row changes nothing else."""
    cand = pd.DataFrame({"user": np.repeat(ids, 3), "item": np.tile([7, 8, 9], len(ids)),
                         "label": np.tile([1, 0, 0], len(ids))})
    path = where / "scores.csv"
    lines = ["user,item,score"] + [f"{u},{it},{s}" for u, it, s in zip(cand.user, cand["item"],
                                                                       np.linspace(0, 1, len(cand)))]
    if junk:
        lines.append("not-a-user,7,0.5")                    # one junk row: the column stays per-row text
    write(path, lines)
    s = io.ranks_from_negatives(cand, path)
    assert [int(u) for u in s.ranks.index] == ids
    assert io.id_text(cand.user).tolist() == [str(u) for u in cand.user]
    assert re.fullmatch(r"[0-9]+", io.id_text([np.int64(5)])[0])
