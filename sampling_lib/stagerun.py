"""The state of a staged evaluation: its inputs, the stages scored, each user's ranks so far; on disk too.

:class:`StagedRun` is the machine behind :func:`sampling_lib.evaluate` (a
scoring function called in batches) and ``sampling-lib design`` (request and
scores files). It holds the catalogue, each test user's held-out item, its
excluded items (history) and N_u, and per model the running counts of the
negatives scored above the held-out item. A stage asks for the scores of
some (user, item) pairs (:meth:`StagedRun.chunks`); the scores come back
(:meth:`StagedRun.absorb`); :meth:`StagedRun.finish_stage` then takes the
next decision (:mod:`sampling_lib.staged`, :func:`sampling_lib.design.plan`)
and poses the next stage, until the design is done. Nothing here decides.

The negatives are never stored: user u's set of size s holds the first s - 1
items of its seeded random order of candidates (:class:`sampling_lib.nested.NestedOrder`),
so a stage is a slice of places per user, the pairs are regenerated from
the seed whenever they are needed (the scoring, the request file,
``result.negatives``, ``result.save``), and no (user, item) pair is asked
for twice: the slices of successive stages do not overlap, and the held-out
item is never a candidate. Memory is O(users), whatever N and the cost.

Ties (:data:`sampling_lib.ranking.TIE_RULES`): a negative scored equal to the
held-out item counts above it (``"pessimistic"``, default), below it
(``"optimistic"``), or above it when its tie key is below the user's
(``"random"``: uniform keys from a hash of the seed, the user and the item,
so the random order of a user's ties is the same at every stage and for any
batch size).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ._arrays import unique_ints
from ._validation import check_float, check_int, show_value
from .metrics import parse_metrics
from .nested import CandidateMap, NestedOrder, _round
from .ranking import TIE_RULES
from .sampling import Design
from . import staged

__all__ = ["StagedRun", "STATE_FILE", "check_inputs"]

#: The file that marks a folder as a staged evaluation's (written first, read by every later call).
STATE_FILE = "design.json"
_ARRAYS = "state.npz"
#: The state's format. 2 (2026-11-29): the drawing order of :mod:`sampling_lib.nested` changed (32-bit round
#: function), so a folder of format 1 would continue with other negatives than its first stages drew.
_FORMAT = 2


# ----------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------
def _held_out_frame(held_out):
    """(users as an Index, held-out items as an array) of a Series, dict or ``user, item`` DataFrame."""
    if isinstance(held_out, pd.DataFrame):
        extra = [c for c in held_out.columns if c not in ("user", "item")]
        if "user" not in held_out.columns or "item" not in held_out.columns or extra:
            raise ValueError("held_out as a DataFrame holds the columns user, item (one row per test user); got "
                             f"columns {list(held_out.columns)}")
        users, items = held_out["user"].to_numpy(), held_out["item"].to_numpy()
    elif isinstance(held_out, pd.Series):
        users, items = held_out.index.to_numpy(), held_out.to_numpy()
    elif isinstance(held_out, dict):
        users = pd.Index(list(held_out.keys())).to_numpy()
        items = pd.Index(list(held_out.values())).to_numpy()
    else:
        raise TypeError("held_out must be a Series or dict {user: held-out item} or a DataFrame with columns "
                        f"user, item; got {type(held_out).__name__}")
    users = pd.Index(users)
    if users.size == 0:
        raise ValueError("held_out must name at least one test user")
    if users.has_duplicates:
        raise ValueError(f"held_out lists user {show_value(users[users.duplicated()][0])} twice; one held-out item "
                         "per test user")
    if pd.isna(pd.Series(items, dtype=object)).any() or pd.isna(pd.Series(users.to_numpy(), dtype=object)).any():
        raise ValueError("held_out has a missing user or item")
    return users, items


def _catalogue(n_items):
    """(N, item ids as an Index or None for 0..N-1)."""
    if np.ndim(n_items) == 0:
        if isinstance(n_items, (bool, np.bool_)) or not isinstance(n_items, (int, np.integer)):
            raise TypeError(f"n_items must be an int (items 0..n_items-1) or an array of item ids; got "
                            f"{type(n_items).__name__}")
        return check_int(n_items, "n_items", low=2), None
    ids = pd.Index(np.asarray(n_items))
    if ids.ndim != 1 or ids.size < 2:
        raise ValueError(f"n_items as item ids must list at least 2 items; got {ids.size}")
    if ids.has_duplicates:
        raise ValueError(f"n_items lists item {show_value(ids[ids.duplicated()][0])} twice; each item once")
    return int(ids.size), ids


def _positions(items, ids, N, what):
    """Item ids as positions 0..N-1 of the catalogue; the first id outside it is an error naming ``what``."""
    items = np.asarray(items)
    if ids is None:
        try:
            pos = pd.to_numeric(pd.Series(items), errors="raise").to_numpy()
        except (ValueError, TypeError):
            pos = None
        if pos is None or not np.all(np.isfinite(pos.astype(float))) or np.any(pos != np.round(pos)):
            bad = items[0] if pos is None else items[np.flatnonzero(~np.isfinite(pos.astype(float))
                                                                      | (pos != np.round(pos)))[0]]
            raise ValueError(f"{what}: item {show_value(bad)} is not an item id in 0..n_items-1={N - 1}")
        pos = pos.astype(np.int64)
        out = (pos < 0) | (pos >= N)
        if out.any():
            raise ValueError(f"{what}: item {show_value(items[np.flatnonzero(out)[0]])} is not an item id in "
                             f"0..n_items-1={N - 1}")
        return pos
    pos = ids.get_indexer(items)
    if (pos < 0).any():
        raise ValueError(f"{what}: item {show_value(items[np.flatnonzero(pos < 0)[0]])} is not in the catalogue "
                         "(n_items lists the item ids)")
    return pos.astype(np.int64)


def check_inputs(held_out, n_items, exclude=None):
    """The checked inputs of a staged evaluation: a dict with ``users`` (Index), ``held`` (catalogue positions),
    ``N``, ``ids`` (Index or None), ``ptr`` and ``bad`` (each user's excluded positions and its held-out one,
    sorted, CSR), ``n_items`` (N_u) and ``unused_exclude_users`` (users of ``exclude`` without a held-out item).

    Examples
    --------
    >>> d = check_inputs({"a": 3, "b": 0}, 10, {"a": [1, 2], "c": [5]})
    >>> d["n_items"].tolist(), d["bad"].tolist(), d["unused_exclude_users"]
    ([8, 10], [1, 2, 3, 0], 1)
    """
    users, items = _held_out_frame(held_out)
    N, ids = _catalogue(n_items)
    held = _positions(items, ids, N, "held_out")
    M = users.size
    eu = np.zeros(0, np.int64)
    ei = np.zeros(0, np.int64)
    unused = 0
    if exclude is not None:
        if isinstance(exclude, pd.DataFrame):
            if "user" not in exclude.columns or "item" not in exclude.columns:
                raise ValueError(f"exclude as a DataFrame holds the columns user, item; got {list(exclude.columns)}")
            xu, xi = exclude["user"].to_numpy(), exclude["item"].to_numpy()
        elif isinstance(exclude, dict):
            lists = [np.asarray(list(v)) for v in exclude.values()]
            xu = np.repeat(pd.Index(list(exclude.keys())).to_numpy(), [x.size for x in lists])
            xi = np.concatenate(lists) if lists else np.zeros(0)
        else:
            raise TypeError(f"exclude must be a DataFrame with columns user, item or a dict {{user: items}}; got "
                            f"{type(exclude).__name__}")
        code = users.get_indexer(xu)
        unused = int(pd.Index(xu[code < 0]).nunique())
        keep = code >= 0
        eu = code[keep].astype(np.int64)
        ei = _positions(xi[keep], ids, N, "exclude")
        hit = ei == held[eu]
        if hit.any():
            j = int(np.flatnonzero(hit)[0])
            raise ValueError(f"exclude lists the held-out item {show_value(items[eu[j]])} of user "
                             f"{show_value(users[eu[j]])}: a held-out item is ranked, never excluded (is the "
                             "test split inside the history?)")
    key = unique_ints(np.r_[eu * N + ei, np.arange(M, dtype=np.int64) * N + held])
    bu, bad = key // N, key % N
    ptr = np.r_[0, np.cumsum(np.bincount(bu, minlength=M))].astype(np.int64)
    C = N - np.diff(ptr)                       # candidate negatives: N_u - 1
    if (C < 1).any():
        u = int(np.flatnonzero(C < 1)[0])
        raise ValueError(f"user {show_value(users[u])} has no candidates: exclude covers every item of the "
                         "catalogue but its held-out one")
    return {"users": users, "held": held, "N": N, "ids": ids, "ptr": ptr, "bad": bad, "n_items": C + 1,
            "unused_exclude_users": unused}


def _fingerprint(inputs, config):
    h = hashlib.sha256()
    h.update(json.dumps(config, sort_keys=True).encode())
    from .io import id_text

    h.update("\x1f".join(id_text(inputs["users"].to_numpy()).tolist()).encode())
    for a in (inputs["held"], inputs["ptr"], inputs["bad"]):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    h.update(str(inputs["N"]).encode())
    if inputs["ids"] is not None:
        h.update("\x1f".join(id_text(inputs["ids"].to_numpy()).tolist()).encode())
    return h.hexdigest()


def _unit_keys(seed_key, a, b):
    """Uniform keys in [0, 1) of the pairs (a, b): a keyed hash (the tie keys of the random rule)."""
    x = a.astype(np.uint64) * np.uint64(0x100000001B3) ^ b.astype(np.uint64)
    out = np.empty_like(x)
    _round(x, np.full(x.shape, seed_key, np.uint64), out)
    return (out >> np.uint64(11)).astype(np.float64) / float(1 << 53)


# ----------------------------------------------------------------------------
# the state machine
# ----------------------------------------------------------------------------

def _batches(start, stop, size):
    """The slices start[j]..stop[j] - 1 of the entries j, laid end to end and cut into batches of ``size``
    places: per batch the entries it touches (idx) and the part of each slice it holds (lo..hi - 1)."""
    length = stop - start
    ends = np.cumsum(length)
    total = int(ends[-1]) if ends.size else 0
    for a in range(0, total, size):
        b = min(a + size, total)
        i0, i1 = int(np.searchsorted(ends, a, side="right")), int(np.searchsorted(ends, b - 1, side="right"))
        idx = np.arange(i0, i1 + 1)
        first = ends[idx] - length[idx]                          # flat offset of each entry's slice
        yield idx, np.maximum(a - first, 0) + start[idx], np.minimum(b - first, length[idx]) + start[idx]


class StagedRun:
    """A staged evaluation in progress (module docstring).

    Parameters
    ----------
    held_out, n_items, exclude
        As :func:`sampling_lib.evaluate`.
    config : dict
        The design's settings: ``n``, ``metrics``, ``target_ratio``, ``max_cost``, ``seed``, ``ties``,
        ``assurance``, ``growth`` (checked by :func:`check_config`).
    """

    def __init__(self, held_out, n_items, exclude=None, *, config, inputs=None):
        self.inputs = check_inputs(held_out, n_items, exclude) if inputs is None else inputs
        self.config = check_config(config, self.inputs)
        self.fingerprint = _fingerprint(self.inputs, self.config)
        M = self.inputs["users"].size
        N_u = self.inputs["n_items"]
        seq = np.random.SeedSequence(self.config["seed"])
        order_seq, tie_seq = seq.spawn(2)
        self.order = NestedOrder(N_u - 1, rng=np.random.default_rng(order_seq))
        self.candidates = CandidateMap(self.inputs["ptr"], self.inputs["bad"])   # positions -> item ids
        self._tie_key = np.uint64(np.random.default_rng(tie_seq).integers(0, 2**63))
        self.models = None                      # fixed by the first scores
        self.sizes = np.zeros(M, np.int64)      # current set sizes (0 before stage 1)
        self.above = {}                         # model -> items scored above the held-out one (tie rule applied)
        self.pos = {}                           # model -> the held-out item's score
        self.last_above = {}                    # model -> the last chunk's negatives above (tie rule applied)
        self.first = {}                         # model -> rank within the first stage's set
        self.stages = []                        # one dict per stage scored
        self.decisions = []                     # one dict per decision
        self.plans = []                         # PlanResult of every plan (not persisted)
        self.run = None                         # the Run in progress (staged.Run)
        self.run_stages = 0
        self.replans = 0
        self.predicted = None                   # items per user the last plan predicted for the whole design
        self.pending = self._stage_one()
        self.done = False

    def input_notes(self):
        """What reading the inputs decided, for ``evaluate``'s notes: exclude users without a held-out item."""
        unused = self.inputs["unused_exclude_users"]
        return [f"exclude: {unused:,} users without a held-out item were not used"] if unused else []

    # -- the stages --------------------------------------------------------------
    @property
    def M(self):
        return int(self.inputs["users"].size)

    def _stage_one(self):
        new = staged.first_stage_sizes(self.config["n"], self.inputs["n_items"])
        users = np.arange(self.M)
        return {"stage": 1, "users": users, "start": np.zeros(self.M, np.int64), "stop": new - 1, "new": new}

    def pending_pairs(self):
        """Pairs the pending stage asks for (held-out items included at stage 1); 0 when done."""
        if self.pending is None:
            return 0
        p = self.pending
        return int((p["stop"] - p["start"]).sum()) + (self.M if p["stage"] == 1 else 0)

    def chunks(self, size):
        """The pending stage's pairs, ``size`` at a time: (user index, item position, held-out?) arrays, the
        held-out items first (stage 1), then each user's slice of its order, users in turn."""
        p = self.pending
        if p is None:
            return
        size = check_int(size, "batch_size", low=1)
        if p["stage"] == 1:
            for a in range(0, self.M, size):
                u = np.arange(a, min(a + size, self.M))
                yield u, self.inputs["held"][u], np.ones(u.size, bool)
        for idx, lo, hi in _batches(p["start"], p["stop"], size):
            users = p["users"][idx]
            places = self.order.positions(users, lo, hi)
            u = np.repeat(users, hi - lo)
            items = self.candidates.items(places, u)
            yield u, items, np.zeros(u.size, bool)

    def absorb(self, users, items, held, scores):
        """Count the scores of one chunk of :meth:`chunks` (``scores``: {model: float array, one per pair})."""
        if self.models is None:
            self.models = list(scores)
            for m in self.models:
                self.above[m] = np.zeros(self.M, np.int64)
                self.pos[m] = np.full(self.M, np.nan)
        elif list(scores) != self.models:
            raise ValueError(f"scores must name the models {self.models}; got {list(scores)}")
        ties = self.config["ties"]
        mixed = bool(held.any())              # stage 1's held-out items (their chunks hold nothing else)
        neg = ~held if mixed else None
        u = users[neg] if mixed else users
        tie_below = None
        if ties == "random":
            it = items[neg] if mixed else items
            tie_below = (_unit_keys(self._tie_key, u, it)
                         < _unit_keys(self._tie_key, u, np.full(u.size, self.inputs["N"], np.int64)))
        # the users come in runs (a batch holds each user's slice in one piece): one held-out score per run
        starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]]) if u.size else np.zeros(0, np.int64)
        run_users, lengths = u[starts], np.diff(np.r_[starts, u.size])
        for m in self.models:
            s = np.asarray(scores[m], dtype=float)
            if mixed:
                self.pos[m][users[held]] = s[held]
                s = s[neg]
            if not u.size:
                continue
            p = self.pos[m][run_users]
            if np.isnan(p).any():
                raise RuntimeError("a negative was scored before its user's held-out item")
            p = np.repeat(p, lengths)
            if ties == "pessimistic":
                above = s >= p
            else:
                above = s > p
                if ties == "random":
                    above |= (s == p) & tie_below
            np.add.at(self.above[m], run_users, np.add.reduceat(above, starts, dtype=np.int64))
            self.last_above[m] = above

    def ranks(self):
        """{model: current sampled ranks (M,)} (1 = first)."""
        return {m: 1 + a for m, a in self.above.items()}

    # -- the decisions -----------------------------------------------------------
    def finish_stage(self, plan_progress=False):
        """The pending stage is scored: record it, take the next decision(s), pose the next stage (or end)."""
        p = self.pending
        added = int((p["stop"] - p["start"]).sum())
        self.sizes[p["users"]] = p["new"]
        self.stages.append({"stage": p["stage"], "users": int(p["users"].size),
                            "pairs": added + (self.M if p["stage"] == 1 else 0),
                            "sizes": _sizes_text(p["new"]), "full": int((p["new"] == self.inputs["n_items"][p["users"]]).sum()),
                            "design": "first stage" if p["stage"] == 1 else self.run.design.describe(),
                            "_users": p["users"], "_start": p["start"], "_stop": p["stop"]})
        if p["stage"] == 1:
            self.first = {m: r.copy() for m, r in self.ranks().items()}
        else:
            self.run_stages += 1
        self.pending = None
        while self.pending is None and not self.done:
            if self.run is None:
                self._plan(first_stage=True, progress=plan_progress)
                continue
            run = self.run
            best = np.min(np.stack(list(self.ranks().values())), axis=0)
            first_best = np.min(np.stack(list(self.first.values())), axis=0)
            new = self.sizes
            if run.design is not None and (run.design.kind == "ladder" or self.run_stages == 0):
                new = staged.next_sizes(run, self.sizes, best, first_best, self.inputs["n_items"],
                                        rng=np.random.default_rng([self.config["seed"], 2, len(self.stages)]))
            go = np.flatnonzero(new > self.sizes)
            if go.size:
                self.pending = {"stage": len(self.stages) + 1, "users": go, "start": self.sizes[go] - 1,
                                "stop": new[go] - 1, "new": new[go]}
            elif run.replan:
                self._plan(first_stage=False, progress=plan_progress)
            else:
                self.done = True
                self._decide("done", f"the design is complete after stage {len(self.stages)}")

    def _decide(self, action, text, **extra):
        self.decisions.append({"after_stage": len(self.stages), "action": action, "decision": text, **extra})

    def _pilot_users(self):
        return np.flatnonzero(self.sizes >= self.config["n"])

    def _plan(self, first_stage, progress=False):
        from .design import candidate_designs, plan

        c = self.config
        keep = self._pilot_users()
        N_u = self.inputs["n_items"]
        max_size = int(N_u.max())
        ranks = self.ranks() if not first_stage else self.first
        pilot = {m: r[keep] for m, r in ranks.items()}
        # the budget is a share of full ranking's cost, sum_u N_u; plan's cost_share is per user over max N_u
        budget = None if c["max_cost"] is None else c["max_cost"] * float(N_u.mean()) / max_size
        kw = dict(M=self.M, metrics=c["metrics"], target_ratio=c["target_ratio"], max_cost=budget,
                  scheme="hypergeometric", max_size=max_size, assurance=c["assurance"], progress=progress,
                  ranges=False)
        ran_to = None
        if first_stage:
            designs = candidate_designs(max_size, c["n"], growths=(c["growth"],))
            res = plan(pilot, N_u[keep], c["n"], designs=designs, **kw)
        else:
            ran_to = int(self.run.run_to)
            designs = staged.replan_candidates(c["n"], ran_to, max_size, c["growth"])
            res = plan(pilot, N_u[keep], c["n"], sample_sizes=self.sizes[keep],
                       first_ranks={m: self.first[m][keep] for m in pilot}, designs=designs, **kw)
            self.replans += 1
        self.plans.append(res)
        per = res.designs().set_index("design")
        best, meets = res.best, True
        if best is None:            # nothing meets the target, no budget: the most precise candidate
            ratio = per.ratio.dropna()
            name = ratio.idxmin() if len(ratio) else per.index[0]     # no ratio at all: a metric that is constant
            best = designs[[d.describe() for d in designs].index(name)]
        meets = bool(per.meets[best.describe()])
        below = staged.below_resolution([K for _, _, K in parse_metrics(c["metrics"])], max_size, c["n"])
        metric_names = [m for m, _, K in parse_metrics(c["metrics"]) if K in below]
        run = staged.after_plan(best, n=c["n"], first_stage=first_stage, ran_to=ran_to, below=metric_names,
                                max_size=max_size, replans=self.replans, meets=meets)
        row = per.loc[best.describe()]
        self.predicted = float(row.cost)
        self._decide("plan" if first_stage else "re-plan", run.reason, chosen=best.describe(),
                     predicted_items_per_user=float(row.cost), predicted_ratio=float(row.ratio), meets=meets)
        self.run, self.run_stages = run, 0
        if run.design is None:
            self.done = True

    # -- persistence -------------------------------------------------------------
    def save(self, folder):
        """Write the state into ``folder`` (atomically: a crash leaves the previous state)."""
        folder = Path(folder)
        arrays = {"sizes": self.sizes}
        for k, m in enumerate(self.models or []):
            arrays[f"above_{k}"], arrays[f"pos_{k}"], arrays[f"first_{k}"] = (
                self.above[m], self.pos[m], self.first.get(m, np.zeros(0, np.int64)))
        for j, st in enumerate(self.stages):
            arrays[f"stage{j}_users"], arrays[f"stage{j}_start"], arrays[f"stage{j}_stop"] = (
                st["_users"], st["_start"], st["_stop"])
        if self.pending is not None:
            for k in ("users", "start", "stop", "new"):
                arrays[f"pending_{k}"] = self.pending[k]
        tmp = folder / (_ARRAYS + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, folder / _ARRAYS)
        run = None if self.run is None else {
            "design": None if self.run.design is None else _design_dict(self.run.design),
            "run_to": int(self.run.run_to), "replan": bool(self.run.replan), "reason": self.run.reason}
        state = {"format": _FORMAT, "fingerprint": self.fingerprint, "config": self.config, "models": self.models,
                 "stages": [{k: v for k, v in st.items() if not k.startswith("_")} for st in self.stages],
                 "decisions": self.decisions, "run": run, "run_stages": self.run_stages, "replans": self.replans,
                 "predicted": self.predicted, "done": self.done,
                 "pending_stage": None if self.pending is None else int(self.pending["stage"])}
        tmp = folder / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
        os.replace(tmp, folder / STATE_FILE)

    def restore(self, folder):
        """Take the state saved in ``folder`` (the same inputs and settings, checked by their fingerprint)."""
        folder = Path(folder)
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        if state.get("format") != _FORMAT:
            raise ValueError(f"{folder}: written by another version of sampling-lab (format {state.get('format')})")
        if state["fingerprint"] != self.fingerprint:
            raise ValueError(f"{folder} holds a staged evaluation of other inputs or settings (held_out, n_items, "
                             "exclude, n, metrics, target, seed, ties): resume it with the same ones, or give a "
                             "new folder")
        with np.load(folder / _ARRAYS) as a:
            self.sizes = a["sizes"]
            self.models = state["models"]
            if self.models is not None:
                self.above = {m: a[f"above_{k}"] for k, m in enumerate(self.models)}
                self.pos = {m: a[f"pos_{k}"] for k, m in enumerate(self.models)}
                self.first = {m: a[f"first_{k}"] for k, m in enumerate(self.models)
                              if a[f"first_{k}"].size}
            self.stages = [dict(st, _users=a[f"stage{j}_users"], _start=a[f"stage{j}_start"],
                                _stop=a[f"stage{j}_stop"]) for j, st in enumerate(state["stages"])]
            self.pending = None
            if state["pending_stage"] is not None:
                self.pending = {"stage": state["pending_stage"],
                                **{k: a[f"pending_{k}"] for k in ("users", "start", "stop", "new")}}
        self.decisions = state["decisions"]
        r = state["run"]
        self.run = None if r is None else staged.Run(None if r["design"] is None else Design(**r["design"]),
                                                     r["run_to"], r["replan"], r["reason"])
        self.run_stages, self.replans = state["run_stages"], state["replans"]
        self.predicted, self.done = state["predicted"], state["done"]
        return self

    def save_inputs(self, folder):
        """Write the inputs into ``folder`` (the file route rebuilds the run from them): ``held_out.csv``
        (user, item as given), ``items.csv`` (the catalogue's ids, when given) and ``inputs.npz`` (the
        held-out items' positions, each user's excluded positions, N)."""
        from .io import id_text

        folder = Path(folder)
        inp = self.inputs
        ids = inp["ids"]
        held = inp["held"] if ids is None else ids.to_numpy()[inp["held"]]
        pd.DataFrame({"user": id_text(inp["users"].to_numpy()), "item": id_text(held)}).to_csv(
            folder / "held_out.csv", index=False)
        if ids is not None:
            pd.DataFrame({"item": id_text(ids.to_numpy())}).to_csv(folder / "items.csv", index=False)
        with open(folder / "inputs.npz", "wb") as fh:
            np.savez(fh, held=inp["held"], ptr=inp["ptr"], bad=inp["bad"], N=np.int64(inp["N"]),
                     unused=np.int64(inp["unused_exclude_users"]))

    @classmethod
    def from_folder(cls, folder):
        """The run saved in ``folder`` by :meth:`save_inputs` and :meth:`save` (ids as text)."""
        folder = Path(folder)
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        users = pd.read_csv(folder / "held_out.csv", dtype=str, keep_default_na=False)
        ids = None
        if (folder / "items.csv").exists():
            ids = pd.Index(pd.read_csv(folder / "items.csv", dtype=str, keep_default_na=False)["item"].to_numpy())
        with np.load(folder / "inputs.npz") as a:
            held, ptr, bad, N, unused = a["held"], a["ptr"], a["bad"], int(a["N"]), int(a["unused"])
        inputs = {"users": pd.Index(users["user"].to_numpy()), "held": held, "N": N, "ids": ids, "ptr": ptr,
                  "bad": bad, "n_items": N - np.diff(ptr) + 1, "unused_exclude_users": unused}
        return cls(None, None, config=state["config"], inputs=inputs).restore(folder)

    # -- what was run ----------------------------------------------------------
    def stage_negatives(self, j):
        """Stage j's negatives (j from 0) as (user index, item position) arrays, users in turn."""
        st = self.stages[j]
        places = self.order.positions(st["_users"], st["_start"], st["_stop"])
        u = np.repeat(st["_users"], st["_stop"] - st["_start"])
        return u, self.candidates.items(places, u)

    def ranks_table(self):
        """The merged ranks as the ``sampling-lib ranks`` table: user, model, rank, sample_size, n_items,
        first_rank, scheme (users in input order; the users scored so far)."""
        from .io import id_text

        seen = np.flatnonzero(self.sizes > 0)
        users = id_text(self.inputs["users"].to_numpy()[seen]) if self.inputs["users"].dtype == object \
            else self.inputs["users"].to_numpy()[seen]
        frames = [pd.DataFrame({"user": users, "model": m, "rank": 1 + self.above[m][seen],
                                "sample_size": self.sizes[seen], "n_items": self.inputs["n_items"][seen],
                                "first_rank": self.first[m][seen] if m in self.first else 1 + self.above[m][seen],
                                "scheme": "hypergeometric"}) for m in self.models]
        return pd.concat(frames, ignore_index=True)

    def stages_table(self):
        """One row per stage: stage, design, users, pairs scored, their share of full ranking, sizes, users
        ranked in full."""
        total = float(self.inputs["n_items"].sum())
        rows = [{k: v for k, v in st.items() if not k.startswith("_")} for st in self.stages]
        t = pd.DataFrame(rows, columns=["stage", "design", "users", "pairs", "sizes", "full"])
        t["share_of_full"] = t.pairs / total
        return t


def _sizes_text(new):
    u = np.unique(new)
    return f"{u[0]:,}" if u.size == 1 else f"{u[0]:,}..{u[-1]:,}"


def _design_dict(d):
    return {"kind": d.kind, "n": int(d.n), "threshold": int(d.threshold), "n2": int(d.n2), "n_max": int(d.n_max),
            "fraction": float(d.fraction), "growth": float(d.growth)}


def check_config(config, inputs):
    """The settings of a staged evaluation, checked (one line naming the bad argument)."""
    c = dict(config)
    N_u = inputs["n_items"]
    c["n"] = check_int(c.get("n", 100), "n", low=2)
    metrics = c.get("metrics", ("recall@10", "ndcg@10"))
    c["metrics"] = [p[0] for p in parse_metrics(metrics)]
    if c.get("ties", "pessimistic") not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}; got {show_value(c.get('ties'))}")
    c["ties"] = c.get("ties", "pessimistic")
    seed = c.get("seed", 0)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0; got {show_value(seed)}")
    c["seed"] = int(seed)
    c["assurance"] = check_float(c.get("assurance", 0.9), "assurance", 0.5, 1.0, high_open=True)
    from .sampling import check_growth

    c["growth"] = check_growth(c.get("growth", 2.0))
    max_cost = c.get("max_cost")
    target = c.get("target_ratio")
    if max_cost is not None:
        max_cost = check_float(max_cost, "max_cost", 0.0, 1.0, low_open=True)
        first = float(np.minimum(c["n"], N_u).sum() / N_u.sum())
        if max_cost < first:
            raise ValueError(f"max_cost={max_cost:g} is below the first stage's own cost ({first:.2%} of full "
                             f"ranking: n={c['n']} of N_u items, {int(np.median(N_u)):,} at the median): raise "
                             "max_cost or lower n")
    c["max_cost"] = max_cost
    # with a budget and no target: the most precise design within the budget (a target of 1 is met by none)
    c["target_ratio"] = (1.0 if max_cost is not None else 1.3) if target is None else check_float(
        target, "target_ratio", low=1.0)
    return c
