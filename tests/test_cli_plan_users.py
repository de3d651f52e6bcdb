"""``sampling-lib plan-users`` like the other commands: a description, examples, help for every option, a
table with a header line and a legend (it printed a bare pandas dump), one-line errors naming the option."""
import io

import pandas as pd
import pytest

from sampling_lib.cli import main
from sampling_lib.user_sampling import hoeffding_sample_size, sample_size_difference, sample_size_proportion


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_help_has_a_description_examples_and_help_for_every_option(capsys):
    rc, out, _ = _run(capsys, "plan-users", "--help")
    assert rc == 0
    assert "How many test users" in out and "TORS24 eq 46" in " ".join(out.split())
    assert "examples:" in out and "sampling-lib plan-users --margin 0.01 --models 5" in out
    options = out.split("options:")[1].split("examples:")[0]
    for opt in ("--margin", "--confidence-level", "--models", "--p", "--format", "--output"):
        block = options.split(opt, 1)[1].split("\n  -")[0]
        assert len(block.split()) > 2, f"{opt} has no help: {block!r}"


def test_the_table_and_its_numbers(capsys):
    rc, out, _ = _run(capsys, "plan-users", "--margin", 0.01, "--models", 5, "--p", 0.2)
    assert rc == 0
    head, table, legend = out.split("\n\n")
    head = " ".join(head.split())
    assert "margin of ±0.01" in head and "95% confidence" in head and "5 models" in head and "p = 0.2" in head
    rows = table.splitlines()
    assert rows[0].split() == ["quantity", "users", "source"]
    want = [sample_size_proportion(0.01, 0.95, 0.2, n_models=5), hoeffding_sample_size(0.01, 0.05, n_tests=5),
            sample_size_difference(0.01, 0.95, 0.2, n_models=5)]
    at = rows[0].index("users") + len("users")
    got = [int(r[:at].split()[-1].replace(",", "")) for r in rows[1:]]
    assert got == want
    assert "Bonferroni over 10 pairs" in rows[3] and "Bonferroni over 5 models" in rows[1]
    assert "pandas" not in out and "0.0100" not in out and max(len(ln) for ln in out.splitlines()) <= 100
    assert "users: test users ranked in full" in legend
    rc, out, _ = _run(capsys, "plan-users", "--margin", 0.01, "--models", 5, "--p", 0.2, "--format", "csv")
    t = pd.read_csv(io.StringIO(out))
    assert t.users.tolist() == want and set(t.columns) >= {"quantity", "margin", "confidence_level", "models", "p"}


@pytest.mark.parametrize("argv, match", [
    (["--margin", 0], "argument --margin: must be a number in (0, 1]; got 0"),
    (["--margin", 0.01, "--p", 1.5], "argument --p: must be a number in [0, 1]; got 1.5"),
    (["--margin", 0.01, "--confidence-level", 95], "argument --confidence-level/--confidence: must be a number in (0, 1); got 95"),
    (["--margin", 0.01, "--models", 0], "argument --models: must be an integer in 1.."),
])
def test_errors_name_the_option_and_its_range(capsys, argv, match):
    rc, out, err = _run(capsys, "plan-users", *argv)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and match in lines[0], err
