"""The terminal views fit the terminal: notes wrap to its width (at most 100), tables fit 100 columns.

Before: notes wrapped at a fixed 100 columns, so an 80-column terminal broke them mid-word; compare's table
was 121 columns, and plan's about 150 (its header line 186, its printed commands 208) with headers that did
not line up with their columns.
"""
import re
import shlex

import numpy as np
import pandas as pd
import pytest

from sampling_lib import _display
from sampling_lib.cli import main


@pytest.fixture
def ranks(tmp_path):
    g = np.random.default_rng(0)
    rows = [(u, m, int(r)) for m, hi in (("modelA", 30), ("modelB", 60)) for u, r in enumerate(g.integers(1, hi, 400))]
    p = tmp_path / "ranks.csv"
    pd.DataFrame(rows, columns=["user", "model", "rank"]).to_csv(p, index=False)
    return p


def _out(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


@pytest.mark.parametrize("columns, width", [("80", 80), ("60", 60), ("300", 100), (None, 100)])
def test_notes_wrap_to_the_terminal_between_words(ranks, capsys, monkeypatch, columns, width):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)       # no terminal (captured): 100
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = _out(capsys, "estimate", ranks, "-N", 3706, "-n", 100, "--n-boot", 20, "-q")
    notes = out.split("\n\n", 2)[2].splitlines()
    assert max(len(ln) for ln in notes) <= width, notes
    assert max(len(ln) for ln in notes) > width - 15                # it uses the width, not a fixed 100
    # broken between words only: the note's words are those of the library's text, each whole
    note = " ".join(" ".join(notes).split())
    want = _display.resolution_note(["recall@10", "ndcg@10"], 3705 / 99, widened=True)
    assert " ".join(want.split()) in note


def test_compare_fits_100_columns(ranks, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = _out(capsys, "compare", ranks, "-N", 3706, "-n", 100, "--n-boot", 30, "-q")
    assert max(len(ln) for ln in out.splitlines()) <= 100, out
    table = out.split("\n\n")[1].splitlines()
    assert table[0].split()[:5] == ["metric", "model_a", "model_b", "a", "b"]
    at = table[0].index("decision")
    for row in table[1:]:
        assert row[at:].rstrip(" *") in ("a > b", "a < b", "n.s."), row


def _aligned(table):
    """Every right-aligned header (stages, items, cost, ±, ratio) ends where its values end."""
    head, rows = table[0], table[1:]
    for m in re.finditer(r"(stages|items|cost|\S+ ±|ratio)", head):
        end = m.end()
        for r in rows:
            assert r[end - 1] != " " and (end == len(r) or r[end] == " "), (m.group(), head, r)


def test_plan_fits_100_columns_and_its_columns_line_up(ranks, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = _out(capsys, "plan", ranks, "-N", 3706, "-n", 100)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 100, max(lines, key=len)
    table = out.split("\n\n")[1].splitlines()
    assert table[0].startswith("design") and "<- chosen" in out
    _aligned(table)
    # the printed commands paste into a shell: continued lines join into the command
    joined = re.sub(r" \\\n\s+", " ", out)
    cmd = next(ln.strip() for ln in joined.splitlines() if ln.strip().startswith("sampling-lib negatives --stage 2"))
    assert shlex.split(cmd)[:4] == ["sampling-lib", "negatives", "--stage", "2"] and "--n-max" in cmd


def test_plan_without_a_pilot_fits_an_80_column_terminal_but_its_table(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    out = _out(capsys, "plan", "-N", 2000, "-n", 10, "--users", 1000, "--guess-recall", 0.3, "--wide")
    head, table, rest = out.split("\n\n", 2)
    assert max(len(ln) for ln in head.splitlines() + rest.splitlines()) <= 80, out
    assert max(len(ln) for ln in table.splitlines()) <= 100
    _aligned(table.splitlines())


def test_wrap_command_keeps_the_tokens():
    cmd = ("sampling-lib ranks STAGE1.csv STAGE2.csv STAGE3.csv --input-format negatives --held-out USERS.csv "
           "--scores SCORES1.csv --scores SCORES2.csv --scores SCORES3.csv -N 3706 --scheme hypergeometric "
           "-o merged.csv")
    for width in (40, 60, 80, 100):
        text = _display.wrap_command(cmd, width=width)
        assert all(len(ln) <= width for ln in text.splitlines()), text
        assert shlex.split(text.replace("\\\n", " ")) == shlex.split(cmd)
