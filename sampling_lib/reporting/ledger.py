"""The claims ledger: what a notebook verified, and the ledger files of a report.

Inside a notebook every verified statement goes through one :class:`ClaimLedger`
(see the package docstring). :func:`claims_from_notebook` reads the records back
from an executed notebook; :func:`ledger_frame` and :func:`read_ledger` write and
read ``claims.csv``; :func:`read_discrepancies` reads ``notebooks/discrepancies.csv``.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .environment import commit_label, environment_summary, project_root

__all__ = [
    "CLAIMS_MIME", "PAPERS", "KINDS", "LEDGER_COLUMNS", "Claim", "CheckOutcome", "ClaimLedger", "ClaimsFailed",
    "claims_from_notebook", "claims_from_node", "ledger_frame", "read_ledger", "read_discrepancies", "finite_scalar",
]


CLAIMS_MIME = "application/vnd.sampling-lab.claims+json"

PAPERS = {
    "KDD20": "Li, Jin, Gao, Liu. On Sampling Top-K Recommendation Evaluation. KDD 2020",
    "AAAI21": "Jin, Li, Mudrak, Gao, Liu. On Estimating Recommendation Evaluation Metrics under Sampling. AAAI 2021",
    "TORS24": "Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS 2024",
    "AP25": "Manzhos, Ianevych, Melnyk. Average Precision at Cutoff k under Random Rankings: Expectation and Variance. 2025",
    "KR20": "Krichene, Rendle. On Sampled Metrics for Item Recommendation. KDD 2020",
    "sampling-lab": "sampling-lab's own results (not stated in the papers)",
}

#: The two kinds of ledger record: a claim fails the run, an observation never does.
KINDS = ("claim", "observation")

class ClaimsFailed(AssertionError):
    """Raised by :meth:`ClaimLedger.finalize` when at least one claim failed."""


def _jsonable(x):
    """Summarise a measured/expected value as a JSON-friendly scalar or short string."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, str):
        return x
    a = np.asarray(x)
    if a.size == 1:
        return _jsonable(a.reshape(()).item())
    return f"array{a.shape}"


def _execution_count():
    """Execution count of the notebook cell running now (None outside IPython)."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is None:
            return None
        # the result being filled holds the count of the running cell (shell.execution_count may
        # already point at the next one: IPython 9 increments it before running the cell)
        result = getattr(getattr(ip, "displayhook", None), "exec_result", None)
        count = getattr(result, "execution_count", None)
        return int(count if count is not None else ip.execution_count)
    except Exception:  # pragma: no cover - IPython missing or exotic shell
        return None


@dataclass(frozen=True)
class Claim:
    """One ledger record: what was compared, the measured value and the verdict.

    ``kind`` is ``"claim"`` (must hold for any data; fails the run) or
    ``"observation"`` (about one dataset; shown, never fails). ``scale`` is
    the tolerance on the scale of the values (e.g. ``atol + rtol |expected|``)
    when the comparison is scalar; the index uses it to show the digits that
    matter. ``cell`` is the execution count of the cell that recorded it.
    """

    claim_id: str
    source: str
    description: str
    measured: object
    expected: object
    tolerance: str
    comparison: str
    passed: bool
    notebook: str = ""
    kind: str = "claim"
    scale: object = None
    cell: object = None

    @property
    def paper(self) -> str:
        key = self.source.split()[0] if self.source else ""
        return key if key in PAPERS else "other"


@dataclass(frozen=True)
class CheckOutcome:
    """What a ``check_*`` call returns: truthy when the claim passed; shows its verdict."""

    claim: Claim

    def __bool__(self):
        return self.claim.passed

    def __repr__(self):
        c = self.claim
        if c.kind == "observation":
            verdict = "observation: holds" if c.passed else "observation: does not hold"
        else:
            verdict = "pass" if c.passed else "FAIL"
        return (f"[{verdict}] {c.claim_id} ({c.source}): measured {c.measured}, "
                f"expected {c.expected}, {c.tolerance}")


def finite_scalar(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class ClaimLedger:
    """Records the verified claims and the observations of one notebook.

    Parameters
    ----------
    notebook : str
        Notebook name, e.g. ``"01_sampling_theorem"``.

    Notes
    -----
    Every ``check_*`` method records a :class:`Claim` and returns a
    :class:`CheckOutcome` (truthy if it passed, displayed as a one-line
    verdict); none raises, so a notebook records all of its checks before
    :meth:`finalize` raises on the failed claims. With ``observation=True``
    the record is an observation: a statement about the data at hand whose
    verdict is shown but never fails the run (DESIGN.md: a claim must hold for
    any data). Ids must be unique within a notebook. ``source`` starts with a
    key of :data:`PAPERS`.
    """

    notebook: str
    claims: list = field(default_factory=list)

    def _add(self, claim_id, source, description, measured, expected, tolerance, comparison, passed,
             observation=False, scale=None):
        if any(c.claim_id == claim_id for c in self.claims):
            raise ValueError(f"claim_id must be unique within the notebook; {claim_id!r} was recorded already")
        if not source or source.split()[0] not in PAPERS:
            raise ValueError(f"source must start with one of {sorted(PAPERS)}; got {source!r}")
        if not isinstance(observation, (bool, np.bool_)):
            raise TypeError(f"observation must be True or False; got {observation!r}")
        c = Claim(
            claim_id=str(claim_id),
            source=str(source),
            description=str(description),
            measured=_jsonable(measured),
            expected=_jsonable(expected),
            tolerance=str(tolerance),
            comparison=comparison,
            passed=bool(passed),
            notebook=self.notebook,
            kind="observation" if observation else "claim",
            scale=finite_scalar(scale),
            cell=_execution_count(),
        )
        self.claims.append(c)
        return CheckOutcome(c)

    def check_close(self, claim_id, source, description, *, measured, expected, rtol=0.0, atol=0.0,
                    observation=False):
        """Pass when |measured - expected| <= atol + rtol |expected| elementwise.

        For arrays the recorded ``measured`` is the largest absolute error and
        ``expected`` the allowed error at that element.
        """
        m = np.asarray(measured, dtype=float)
        e = np.asarray(expected, dtype=float)
        if m.shape != e.shape and m.size != 1 and e.size != 1:
            raise ValueError(f"measured and expected shapes differ: {m.shape} vs {e.shape}")
        err = np.abs(m - e)
        allowed = atol + rtol * np.abs(e)
        ok = bool(np.all(np.isfinite(m)) and np.all(err <= allowed))
        scale = None
        if m.size == 1 and e.size == 1:
            mv, ev = float(m.reshape(())), float(e.reshape(()))
            scale = float(np.reshape(allowed, ()))
        else:
            i = int(np.nanargmax(err - allowed)) if np.all(np.isfinite(err)) else 0
            mv = f"max abs err {np.max(err):.3g}"
            ev = f"allowed {np.broadcast_to(allowed, err.shape).flat[i]:.3g} at worst element ({err.size} compared)"
        return self._add(claim_id, source, description, mv, ev, f"rtol={rtol:g}, atol={atol:g}", "close", ok,
                         observation, scale)

    def check_z(self, claim_id, source, description, *, estimate, expected, se, z_max=4.0, observation=False):
        """Pass when |estimate - expected| / se <= z_max (elementwise, Monte Carlo check).

        Elements with se == 0 must match exactly (to 1e-12).
        """
        est = np.asarray(estimate, dtype=float)
        exp = np.asarray(expected, dtype=float)
        se = np.broadcast_to(np.asarray(se, dtype=float), np.broadcast_shapes(est.shape, exp.shape))
        diff = np.abs(est - exp)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, diff / se, np.where(diff <= 1e-12, 0.0, np.inf))
        zmax = float(np.max(z)) if z.size else 0.0
        ok = bool(np.all(np.isfinite(est)) and zmax <= z_max)
        scale = None
        if est.size == 1 and exp.size == 1:
            mv, ev = float(est.reshape(())), float(exp.reshape(()))
            scale = float(se.reshape(-1)[0])
        else:
            mv, ev = f"max |z| {zmax:.3g} over {z.size}", "|z| <= z_max"
        return self._add(claim_id, source, description, mv, ev, f"|z| <= {z_max:g} (z = {zmax:.3g})", "z-score",
                         ok, observation, scale)

    def check_le(self, claim_id, source, description, *, measured, bound, tol=0.0, observation=False):
        """Pass when measured <= bound + tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, 1.0, observation)

    def check_ge(self, claim_id, source, description, *, measured, bound, tol=0.0, observation=False):
        """Pass when measured >= bound - tol (elementwise)."""
        return self._check_order(claim_id, source, description, measured, bound, tol, -1.0, observation)

    def _check_order(self, claim_id, source, description, measured, bound, tol, sign, observation):
        # sign = +1: measured <= bound + tol; sign = -1: measured >= bound - tol
        m, b = np.asarray(measured, dtype=float), np.asarray(bound, dtype=float)
        holds = m <= b + tol if sign > 0 else m >= b - tol
        ok = bool(np.all(np.isfinite(m)) and np.all(holds))
        if m.size > 1 or b.size > 1:
            mv = f"max excess {np.max(m - b):.3g}" if sign > 0 else f"min margin {np.min(m - b):.3g}"
            b = "0"
        else:
            mv, b = float(m.reshape(())), float(b.reshape(()))
        tolerance = f"<= bound + {tol:g}" if sign > 0 else f">= bound - {tol:g}"
        return self._add(claim_id, source, description, mv, b, tolerance, "<=" if sign > 0 else ">=", ok,
                         observation, tol if tol > 0 else None)

    def check_true(self, claim_id, source, description, *, passed, measured=None, expected=None, tolerance="",
                   observation=False):
        """Record a claim decided by the caller; give the evidence in measured/expected."""
        return self._add(claim_id, source, description, measured, expected, tolerance, "condition", bool(passed),
                         observation)

    def observe(self, claim_id, source, description, *, holds, measured=None, expected=None, tolerance=""):
        """Record an observation decided by the caller (shown with its verdict, never fails the run).

        Same as ``check_true(..., passed=holds, observation=True)``.
        """
        return self.check_true(claim_id, source, description, passed=holds, measured=measured,
                               expected=expected, tolerance=tolerance, observation=True)

    def table(self) -> pd.DataFrame:
        """Tidy DataFrame of the records (one row per claim or observation)."""
        cols = ["kind", "claim_id", "source", "description", "measured", "expected", "tolerance", "comparison",
                "passed"]
        return pd.DataFrame([{k: getattr(c, k) for k in cols} for c in self.claims], columns=cols)

    @property
    def failed(self):
        """The claims (not observations) that failed."""
        return [c for c in self.claims if c.kind == "claim" and not c.passed]

    @property
    def observations(self):
        return [c for c in self.claims if c.kind == "observation"]

    def finalize(self):
        """Display the records, publish them for the runner, raise if any claim failed."""
        payload = {"notebook": self.notebook, "claims": [asdict(c) for c in self.claims]}
        try:
            from IPython.display import display

            tbl = self.table()
            display(
                {
                    "text/html": tbl.to_html(index=False),
                    "text/plain": tbl.to_string(index=False),
                    CLAIMS_MIME: payload,
                },
                raw=True,
            )
        except ImportError:  # pragma: no cover - IPython is a dependency
            pass
        if not self.claims:
            raise ClaimsFailed(f"{self.notebook}: no claims were recorded")
        if self.failed:
            n = sum(c.kind == "claim" for c in self.claims)
            ids = ", ".join(c.claim_id for c in self.failed)
            raise ClaimsFailed(f"{self.notebook}: {len(self.failed)} of {n} claims failed: {ids}")
        return self.table()


# --------------------------------------------------------------------------- runner

def claims_from_notebook(path):
    """Records published by :meth:`ClaimLedger.finalize` in an executed notebook.

    Each record gets ``cell_id``: the id of the cell whose execution count the
    record carries (the cell that ran the check), or ``""`` when unknown.
    """
    import nbformat

    return claims_from_node(nbformat.read(str(path), as_version=4))


def claims_from_node(nb):
    """:func:`claims_from_notebook` for a notebook already read (an ``nbformat`` node)."""
    cell_ids = {c.get("execution_count"): c.get("id", "") for c in nb.cells
                if c.cell_type == "code" and c.get("execution_count") is not None}
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if CLAIMS_MIME in data:
                payload = data[CLAIMS_MIME]
                if isinstance(payload, str):
                    payload = json.loads(payload)
                for c in payload["claims"]:
                    c = dict(c)
                    c.setdefault("kind", "claim")
                    c["cell_id"] = cell_ids.get(c.get("cell"), "") or ""
                    out.append(c)
    return out


LEDGER_COLUMNS = [
    "paper", "notebook", "kind", "claim_id", "source", "description", "measured", "expected",
    "tolerance", "comparison", "passed", "scale", "cell_id", "run", "commit", "environment",
]


def ledger_frame(runs, mode, env):
    rows = []
    commit, env_s = commit_label(env), environment_summary(env)
    for r in runs:
        for c in r.claims:
            row = {k: c.get(k) for k in LEDGER_COLUMNS}
            row["notebook"] = r.name
            first = str(row["source"]).split()[0] if str(row["source"]).split() else ""
            row["paper"] = first if first in PAPERS else "other"
            row["kind"] = c.get("kind") or "claim"
            if not r.kept:  # rows kept from an earlier run keep their own mode, commit and environment
                row["run"], row["commit"], row["environment"] = mode, commit, env_s
            rows.append(row)
    df = pd.DataFrame(rows, columns=LEDGER_COLUMNS)
    df["passed"] = df["passed"].map(lambda v: v in (True, "True", "true", 1)).astype(bool)
    return df


def read_ledger(path):
    """claims.csv as written by any version of the runner (missing columns filled)."""
    df = pd.read_csv(path, keep_default_na=False, dtype=str)
    defaults = {"kind": "claim", "scale": "", "cell_id": "", "run": "", "commit": "unknown", "environment": ""}
    for k, v in defaults.items():
        if k not in df.columns:
            df[k] = v
    df["passed"] = df["passed"].astype(str).str.lower().isin(["true", "1"])
    df.loc[df["kind"] == "", "kind"] = "claim"
    return df


def read_discrepancies(path=None):
    """The table of paper statements that disagree with derivation and simulation.

    ``notebooks/discrepancies.csv`` (columns paper, statement, measured,
    notebooks) is the one source: the index renders it and README.md shows
    the same rows (a test checks that they agree).
    """
    path = Path(path or project_root() / "notebooks" / "discrepancies.csv")
    if not path.exists():
        return pd.DataFrame(columns=["paper", "statement", "measured", "notebooks"])
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# --------------------------------------------------------------------------- the index page
