"""Every place that names the default estimator names the one the code uses (issue 27 item 5).

The README once said "MLE of the rank distribution by default" and notebook 09 called
its table "the MLE" above a table whose method was logspline. Statements of the
default's name are found by three phrasings -- "default [estimator|method] [is|:|,] X",
"X (default)" / "X (the default)", and an estimator named shortly before "by default"
-- in the README, the markdown of notebooks 09 and 10 and ``sampling-lib estimate --help``;
each must name :data:`sampling_lib.estimators.DEFAULT_METHOD`, and each of these texts
must state it at least once.
"""
import re

import nbformat
import pytest

from conftest import REPO
from sampling_lib.estimators import DEFAULT_METHOD, METHODS

NAMES = {m.lower() for m in METHODS}
AFTER = re.compile(r"\bdefault(?: estimator| method)?(?: is|:|,)?\s+[`(*]*(\w+)", re.I)
BEFORE = re.compile(r"[`*]*(\w+)[`*]*\s+\((?:the )?default\)", re.I)
BY_DEFAULT = re.compile(r"\bby default\b", re.I)


def stated_defaults(text):
    """Estimator names that ``text`` states to be the default (see the module docstring)."""
    text = " ".join(text.split())
    found = [m.group(1) for rx in (AFTER, BEFORE) for m in rx.finditer(text)]
    for m in BY_DEFAULT.finditer(text):
        before = re.split(r"[.;:()]", text[max(0, m.start() - 80):m.start()])[-1]
        names = [w for w in re.findall(r"\w+", before) if w.lower() in NAMES]
        found += names[-1:]
    return [f.lower() for f in found if f.lower() in NAMES]


def _markdown(name):
    nb = nbformat.read(str(next((REPO / "notebooks").glob(f"{name}_*.ipynb"))), as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def _cli_help():
    import contextlib
    import io

    from sampling_lib.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["estimate", "--help"]) == 0
    return out.getvalue()


@pytest.mark.parametrize("where", ["README.md", "notebook 09", "notebook 10", "sampling-lib estimate --help"])
def test_the_default_is_named_as_the_code_has_it(where):
    text = ((REPO / "README.md").read_text() if where == "README.md" else _cli_help() if where.startswith("sampling")
            else _markdown(where.split()[1]))
    named = stated_defaults(text)
    assert named, f"{where} does not state the default estimator's name"
    wrong = sorted(set(named) - {DEFAULT_METHOD})
    assert not wrong, f"{where} names {wrong} as the default; the code's default is {DEFAULT_METHOD!r}"


def test_the_phrasings_are_recognised():
    assert stated_defaults("the corrected estimate (MLE of the rank distribution by default; --method)") == ["mle"]
    assert stated_defaults("The default estimator is `logspline` (empirical Bayes)") == ["logspline"]
    assert stated_defaults("estimator, one of mle, bv (default logspline; adaptive_mle when ...)") == ["logspline"]
    assert stated_defaults("`bv` (the default) and the default's interval, default 0.95") == ["bv"]
    assert stated_defaults("MLE's interval; the default's interval is wider") == []
