"""A stratified staged evaluation: a proxy's head scored exactly, then a sampled tail for the users who need it.

The state behind :func:`sampling_lib.evaluate` with ``proxy=``: a :class:`StrataRun` is a
:class:`sampling_lib.stagerun.StagedRun` whose stages are

1. **the head**: every user's held-out item and its proxy's top m_u candidates
   (:mod:`sampling_lib.proxy`), scored by the costly model(s); x_u, the head items at or above the
   held-out item, is then known exactly per model. With ``head_ladder`` (the default of
   :func:`sampling_lib.evaluate`) the head is scored in rungs (:func:`sampling_lib.design.head_rungs`:
   the head halved down to k_max, smallest first): a user leaves the ladder at the first rung where
   every model has k_max or more items at or above the held-out item, since its top-K metrics are then 0
   whatever the rest of its head holds. The estimate is the whole head's, item for item: only the cost
   falls. A pilot's outcomes up to each user's last rung price the smaller heads and their ladders
   (:func:`sampling_lib.design.head_ladder_cost`, :func:`sampling_lib.design.smaller_head_cells`: a
   settled user's unscored items make its block a censored one, "tail rank > y", with no tail sample),
   and the head items of its uniform first stage beyond a user's last rung are scored with that stage;
2. **the tail**, for the users for whom some model has x_u < k_max (the largest K of the metrics; the
   others have F(R_u) = 0 exactly): ``tail_n`` negatives drawn uniformly from the rest of its
   candidates (the nested prefixes of a seeded order of the tail, :class:`sampling_lib.nested.NestedOrder`,
   so no pair is asked twice), then a ladder within the tail (TORS24 Algorithm 1): a user goes on, its
   tail sample doubled up to ``tail_n_max``, while some model with x_u < k_max ranks no sampled tail
   item above the held-out one.

A *planned* run (``tail_n_max`` None) is a pilot: given no head (``head_climb``), its head ladder climbs rung by
rung while its last rung paid for itself (:meth:`StrataRun._climb`, :func:`sampling_lib.design.head_climb_pays`:
the tails to resolution its settled users need not run against its pairs; the heads are resized a rung at a
time, asked of the proxy again), its tail ladder runs to resolution (:meth:`StrataRun._pilot_ladder`),
and its cells then plan the others' head size, their tail and whether the proxy pays
(:func:`sampling_lib.design.plan_strata`); given ``pilot_cells`` (seen as the planned head's), a run of the
other users plans its tail after its first tail sample on both. A pilot that decides for other users
(``uniform_first``) draws for every user the uniform first stage the fall-back would draw, as a share of its
head and the first items of its tail's order (:meth:`StrataRun.first_ranks`). Where the part of it not yet
scored is cheap against the other users' cost (:data:`UNIFORM_STAGE_SHARE`), the pilot's last stage scores
it, and the uniform ladder is priced by its own planner on it, as it would be on the other users' first
stage; else on the pilot's cells, which may price it off its own planner's price either way
(:func:`sampling_lib.design.plan_strata`).

After a planned run, :func:`sampling_lib.evaluate` checks the estimate's precision ratio against the
target and may reopen the run (:meth:`StrataRun.extend_tail`: the precision check). Every rule looks at
observed data only, so the design is ignorable; the estimate is the default estimator on the stratified
cells (:func:`sampling_lib.estimators.strata_estimate`: one log-spline prior per group of head counts x, the
kernel of the tail shifted by x).

References
----------
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System. ACM TORS
   2024, Sec 6 (Algorithm 1).
.. [YA06] Yilmaz, Aslam. Estimating average precision with incomplete and imperfect judgments. CIKM 2006.
"""
from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np
import pandas as pd

from ._validation import check_int, show_value
from .kernels import next_tail_size
from .metrics import parse_metrics
from .nested import CandidateMap, NestedOrder
from .proxy import (head_enrichment, head_enrichment_stage, head_sizes, heads_and_edge_ties, heads_from_callable,
                    heads_from_table, prefix_edge_ties, table_head_notes, tail_exclusions)
from .design import describe_strata, head_climb_pays, head_climb_top
from .stagerun import StagedRun, _batches, _sizes_text

__all__ = ["StrataRun", "check_proxy_settings", "UNIFORM_STAGE_SHARE"]

#: A pilot prices the uniform ladder on a uniform first stage of its users when the stage's pairs not yet
#: scored are at most this share of the other users' cost at the pilot's pairs per user.
UNIFORM_STAGE_SHARE = 0.05
_ON_STAGE = "on the pilot's uniform first stage"    # what the verdict on the head judged (_judge_proxy)
_RANDOM_HEAD = "proxy: its head holds no more of the items ranked above the held-out one than a random set"


def check_proxy_settings(head, tail_n, tail_n_max):
    """(head, tail_n, tail_n_max) checked: a head size >= 1, a first tail sample >= 1 and a largest one >= it
    (None: planned after the first tail sample, :func:`sampling_lib.design.plan_strata`)."""
    head = check_int(head, "head", low=1)
    tail_n = check_int(tail_n, "tail_n", low=1)
    tail_n_max = None if tail_n_max is None else check_int(tail_n_max, "tail_n_max", low=tail_n)
    return head, tail_n, tail_n_max


def _joined(pilot, own):
    """A pilot's cells (5-tuple, or 7 with a known tail) and a run's own (5-tuple) as one set of cells."""
    if len(pilot) == 7:
        own = tuple(own) + (np.zeros_like(own[0]), np.zeros_like(own[0]))
    return tuple(np.concatenate(a) for a in zip(pilot, own))


class StrataRun(StagedRun):
    """A stratified evaluation in progress (module docstring).

    Parameters
    ----------
    held_out, n_items, exclude, config
        As :class:`sampling_lib.stagerun.StagedRun` (``config`` adds ``head``, ``tail_n``, ``tail_n_max``
        (None: planned), ``plan_users`` (the users a plan prices, default this run's), ``pilot_cells``
        (a pilot's :meth:`cells`), ``uniform_first`` (bool: draw a uniform first stage of n items per
        user, scored at the end of a planned pilot when it pays, :meth:`first_ranks`) and ``head_ladder``
        (bool, default False: score the head in rungs, module docstring)).
    proxy : array_like, callable or DataFrame
        One proxy score per catalogue item, a callable ``proxy(users, items) -> scores``, or a top-m table
        ``user, item[, rank]`` (:mod:`sampling_lib.proxy`).
    inputs : dict, optional
        Checked inputs (:func:`sampling_lib.stagerun.check_inputs`) instead of held_out, n_items, exclude.

    Attributes
    ----------
    head_above : dict {model: ndarray of bool}
        After the head: per head item (users in order, each head in the proxy's order), whether the model
        ranks it at or above the held-out item (the tie rule applied; False for the items a head ladder
        did not score); a plan prices smaller heads with them (:func:`sampling_lib.design.smaller_head_cells`).
    head_scored : ndarray of int
        Per user, the head items scored (m_u, or fewer where the head ladder settled the user).
    """

    def __init__(self, held_out, n_items, exclude=None, *, config, proxy, inputs=None):
        config = dict(config)
        head, tail_n, tail_n_max = check_proxy_settings(config.get("head"), config.get("tail_n"),
                                                        config.get("tail_n_max"))
        plan_users = config.get("plan_users")
        #: a pilot's cells {model: (n_items, heads, above, tail_sizes, ranks)}: a planned run then plans its
        #: tail after its first tail sample on them and its own cells together (the other users of a pilot)
        self.pilot_cells = config.get("pilot_cells")
        #: whether the run holds a uniform first stage per user (a pilot that decides for other users)
        self.uniform_first = bool(config.get("uniform_first", False))
        super().__init__(held_out, n_items, exclude, inputs=inputs, config={
            k: v for k, v in config.items()
            if k not in ("head", "tail_n", "tail_n_max", "plan_users", "pilot_cells", "uniform_first",
                         "head_ladder", "head_climb")})
        self.config.update(head=head, tail_n=tail_n, tail_n_max=tail_n_max,
                           plan_users=self.M if plan_users is None else check_int(plan_users, "plan_users",
                                                                                   low=self.M))
        self.strata_plan = None           # the tail's plan (StrataPlan) when tail_n_max is planned
        self.planned = tail_n_max is None
        self.head_ladder = bool(config.get("head_ladder", False))
        self.config["head_ladder"] = self.head_ladder
        inp = self.inputs
        C = inp["n_items"] - 1
        cutoffs = [K for _, _, K in parse_metrics(self.config["metrics"])]
        self.k_max, self.k_min = max(cutoffs), min(cutoffs)
        # a planned pilot given no head climbs its head ladder while a rung pays (_climb; not a top-m table's heads)
        self.climb = (bool(config.get("head_climb", False)) and self.head_ladder and self.planned
                      and self.pilot_cells is None and not isinstance(proxy, pd.DataFrame))
        self.config["head_climb"] = self.climb
        self.climb_notes = []             # each climbing rung's verdict, said with the head's decision
        top = head                        # the largest rung the head ladder may reach
        if self.climb:
            mc = self.config["max_cost"]
            room = None if mc is None else mc * float(inp["n_items"].mean()) - 1 - tail_n
            top = head_climb_top(head, C, self.k_min, room)
        m = head_sizes(head, C)
        self._head_builder = None         # sizes -> (head_ptr, head_items, edge ties): the climb's longer heads
        self._proxy_scores = None         # per-item proxy scores (a cut head's edge ties are counted on them)
        self.head_ties = 0                # users whose head edge the tie rule decided (per-item scores only)
        self.head_notes = []              # what a top-m table's reading decided (evaluate's notes)
        if isinstance(proxy, pd.DataFrame):
            users = inp["users"]
            ids = inp["ids"]

            def user_index(u):
                k = users.get_indexer(u)
                if (k < 0).any():
                    raise ValueError(f"the proxy's top-m table names user {show_value(u[np.flatnonzero(k < 0)[0]])}, "
                                     "who has no held-out item")
                return k.astype(np.int64)

            from .stagerun import _positions

            hp, hi, listed = heads_from_table(proxy, user_index, lambda it: _positions(it, ids, inp["N"], "proxy"),
                                              inp["held"], inp["ptr"], inp["bad"])
            # a retriever's list is the head as it is (its length per user), capped at m; said in the notes
            given = np.diff(hp)
            self.head_notes += table_head_notes(listed, given, m, head, self.M)
            sizes = np.minimum(given, m)
            keep = np.concatenate([np.arange(hp[u], hp[u] + sizes[u]) for u in range(self.M)]) if self.M else hp[:0]
            hp, hi = np.r_[0, np.cumsum(sizes)].astype(np.int64), hi[keep]
        elif callable(proxy):
            ids = None if inp["ids"] is None else inp["ids"].to_numpy()

            def build(sizes):
                return (*heads_from_callable(proxy, inp["users"].to_numpy(), inp["N"], inp["ptr"], inp["bad"], sizes,
                                             ids=ids), 0)

            self._head_builder = build
            hp, hi, _ = build(m)
        else:
            scores = np.asarray(proxy, dtype=float)
            if scores.shape != (inp["N"],):
                raise ValueError(f"proxy as scores must hold one score per catalogue item ({inp['N']}); got shape "
                                 f"{scores.shape}")
            self._head_builder = lambda sizes: heads_and_edge_ties(scores, inp["ptr"], inp["bad"], sizes)
            self._proxy_scores = scores
            hp, hi, self.head_ties = self._head_builder(m)
        self._set_heads(hp, hi)
        self.x = {}                                           # model -> head items at or above the held-out
        self.head_above = {}          # model -> per head item (head_items' order): above the held-out one
        self._head_flags = {}         # the same, filled rung by rung
        self._head_chunks = deque()   # the head chunks given out: their places in head_items (checked on return)
        from .design import head_rungs
        self.rungs = head_rungs(top, self.k_max) if self.head_ladder else [head]
        self.head_scored = np.zeros(self.M, np.int64)
        self.head_random = False      # after the first tail sample: no model's head beats a random one (z < 1.645)
        self._judged = None           # on what head_random was judged (_judge_proxy)
        self._item_scored = np.zeros(self.head_items.size, bool)      # per head item: scored
        self._stage_head_above = {}   # the uniform first stage's head items scored after the head (first_ranks)
        self.tail_sizes = np.zeros(self.M, np.int64)
        self.checked = False          # reopened by the precision check (extend_tail): no plan again at its end
        self.pending = {"stage": 1, "kind": "head", "users": np.arange(self.M), "start": self.head_scored.copy(),
                        "stop": np.minimum(self.rungs[0], self.heads), "rung": self.rungs[0]}
        self._first_chunks = deque()  # the tail stages' chunks: (users, items, within the uniform first stage)
        self._uniform_asked = False
        self.uniform_stage = False        # whether the plan prices the fall-back on the uniform first stage
        if self.uniform_first:
            self._draw_uniform_first()

    def _set_heads(self, hp, hi):
        """The heads (CSR: each user's proxy-ordered head items) and what follows from them: each user's tail
        (its candidates less the head), T_u, and the tail's seeded order (its own stream of the seed)."""
        inp = self.inputs
        self.head_ptr, self.head_items = hp, hi
        self.heads = np.diff(hp).astype(np.int64)
        self._head_owner = np.repeat(np.arange(self.M), self.heads)        # per head item, its user
        # (the exclusions are not kept: the map holds what it needs, 8 bytes a head item)
        self.tail_candidates = CandidateMap(*tail_exclusions(inp["ptr"], inp["bad"], hp, hi))
        self.tails = inp["n_items"] - 1 - self.heads                     # T_u
        seq = np.random.SeedSequence(self.config["seed"]).spawn(3)[2]
        self.tail_order = NestedOrder(self.tails, rng=np.random.default_rng(seq))

    def _resize_head(self, size):
        """A climbing pilot's heads made the proxy's first ``size`` items per user, between the head's rungs (no
        tail drawn yet, nothing scored beyond ``size``): longer, asked of the proxy again (the heads are built no
        longer than the climb has reached, so memory follows the head, not the catalogue); shorter, the prefix
        of the heads held. The scored items keep their outcomes, the tail becomes the rest, and its order and
        the uniform first stage are drawn afresh from their streams of the seed, as for a run given
        ``head=size``. Returns False, changing nothing, if the old and new heads disagree on the items they
        share (a callable that ranks differently when asked again)."""
        if self._head_chunks or self._tail_stages():
            raise RuntimeError("the head changes size between its rungs, before the tail")
        old_ptr, old_items, old = self.head_ptr, self.head_items, self.heads
        sizes = head_sizes(size, self.inputs["n_items"] - 1)
        place = np.arange(old_items.size) - np.repeat(old_ptr[:-1], old)       # within its user's head
        if size < int(self.config["head"]):
            hp = np.r_[0, np.cumsum(np.minimum(old, sizes))].astype(np.int64)
            hi = old_items[place < sizes[self._head_owner]]
            ties = 0 if self._proxy_scores is None else prefix_edge_ties(self._proxy_scores, old_ptr, old_items, sizes)
        else:
            hp, hi, ties = self._head_builder(sizes)
        keep = place < np.minimum(old, np.diff(hp))[self._head_owner]    # the old head items the new heads hold
        if (self._item_scored & ~keep).any():
            raise RuntimeError("the head cannot be cut below an item already scored")
        at = hp[:-1][self._head_owner[keep]] + place[keep]   # their places in the new heads
        if not np.array_equal(hi[at], old_items[keep]):
            return False
        scored = np.zeros(hi.size, bool)
        scored[at] = self._item_scored[keep]
        flags = {}
        for m, f in self._head_flags.items():
            flags[m] = np.zeros(hi.size, bool)
            flags[m][at] = f[keep]
        self._item_scored, self._head_flags, self.head_ties = scored, flags, ties
        self._set_heads(hp, hi)
        self.config["head"] = int(size)
        if self.uniform_first:
            self._draw_uniform_first()
        return True

    def _climb(self, p, go, open_):
        """A climbing pilot's head ladder after a rung (``p``, the stage just scored; ``go``, the users it
        leaves unsettled; ``open_``, per user, some model below k_max): the ladder climbs one rung more while
        the last rung paid for itself (:func:`sampling_lib.design.head_climb_pays`), from its first rung on
        (``n`` halved down to k_max, then doubled: 13, 25, 50, 100, 200, ... for n = 100 and K = 10); the
        heads are resized to each rung as it comes (:meth:`_resize_head`: built at ``n``, grown above it, cut
        to its prefix where the climb stops below it). Returns the users of the next rung (none: the head is
        complete, the last rung scored)."""
        top = int(p["rung"])
        k_min = self.k_min
        users, stop = p["users"], p["stop"]
        settled = ~open_[users]
        pairs = int((stop - p["start"]).sum())
        tails = self.inputs["n_items"][users[settled]] - 1 - stop[settled]
        gain = float(tails.sum()) / k_min
        last = top == self.rungs[-1]
        what = f"{int(settled.sum()):,} users settled, {gain:,.0f} tail items saved against {pairs:,} scored"
        if go.size and not last and head_climb_pays(pairs, tails, k_min):
            up = self.rungs[self.rungs.index(top) + 1]
            if up <= int(self.config["head"]) or self._resize_head(up):
                self.climb_notes.append(f"the rung to {top:,} paid ({what})")
                return go
            why = (f"it paid ({what}), but asked again for heads of {up:,}, the proxy ranked some user's candidates "
                   "differently (a proxy must rank the same way each time it is asked): the head stays")
        else:
            why = ("no user left unsettled" if not go.size else "the largest rung a climb may reach" if last
                   else f"{what}: it did not pay")
        self.climb_notes.append(f"the rung to {top:,}: {why}")
        if top < int(self.config["head"]):
            self._resize_head(top)                    # a prefix of the heads held: it cannot disagree
        self.rungs = [r for r in self.rungs if r <= top]
        return go[:0]

    def _draw_uniform_first(self):
        """The uniform first stage each user would get from the uniform route: n - 1 negatives drawn without
        replacement from its C_u candidates (all of them if C_u < n - 1). Drawn as h_u ~ hypergeometric(C_u,
        m_u, n - 1) head items, a uniform h_u of the head, and the first n - 1 - h_u items of the tail's
        order (uniform too: :class:`sampling_lib.nested.NestedOrder`), so the set is uniform over the
        candidates and every item in it is scored by the head and the first tail sample anyway. Its own
        stream of the seed (the tail's order keeps its stream)."""
        rng = np.random.default_rng(np.random.SeedSequence(self.config["seed"]).spawn(4)[3])
        n1 = np.minimum(self.config["n"] - 1, self.heads + self.tails)
        h = np.zeros(self.M, np.int64)
        go = n1 > 0
        h[go] = rng.hypergeometric(self.heads[go], self.tails[go], n1[go])
        owner = self._head_owner
        keys = rng.random(owner.size)
        order = np.lexsort((keys, owner))                  # within each user's head, by a uniform key
        place = np.empty(owner.size, np.int64)
        place[order] = np.arange(owner.size) - np.repeat(self.head_ptr[:-1], self.heads)
        self.first_head = place < h[owner]                 # per head item: in the uniform first stage
        self.first_tail = n1 - h                           # the first tail items of the order in it
        self.first_sizes = 1 + n1                          # held-out item included
        self._first_tail_above = {}

    def _uniform_stage_pays(self):
        """At the end of a pilot's ladder (once), after its plan on the cells: whether to score the rest of the
        uniform first stage (the users the head settled, and those whose tail stopped short of their part of
        it) and plan again, pricing the fall-back on it.

        Whatever the plan on the cells said: the cells price the uniform ladder off its own planner's price in
        both directions (at 0.72-0.89 of its realized cost behind item-KNN on the panel, about right behind a
        random head on MovieLens 100K, and at 1.4-1.6 times it behind popularity on Last.fm 2K, where a
        verdict that the proxy paid then cost 5.97% of full ranking against the ladder's 5.13%;
        benchmarks/README.md, "The uniform ladder priced on the pilot"). Only when the stage's pairs are at
        most :data:`UNIFORM_STAGE_SHARE` of what the other users would cost at the pilot's own pairs per user
        (the scale of what a wrong verdict loses). Said as a decision."""
        if not self.uniform_first or self._uniform_asked or not (self.planned and self.pilot_cells is None):
            return False
        self._uniform_asked = True
        if not self._tail_stages():
            return False
        self._plan_tail()                                 # on the cells
        extra = int(np.maximum(self.first_tail - self.tail_sizes, 0).sum()) + int(self._stage_head_places().size)
        others = self.config["plan_users"] - self.M
        scale = float(sum(st["pairs"] for st in self.stages)) / self.M * others
        self.uniform_stage = extra <= UNIFORM_STAGE_SHARE * scale
        lean = ("the cells do not price the uniform ladder as its planner does, so these users' uniform first "
                f"stage of {self.config['n']:,} items (the head's share of it, some beyond the rung where the head "
                "ladder settled a user, and the first tail items) decides")
        if self.uniform_stage:
            text = (f"{lean}: its {extra:,} pairs not yet scored are {extra / scale:.1%} of the other users' cost at "
                    f"the pilot's pairs per user (at most {UNIFORM_STAGE_SHARE:.0%})" if extra else
                    f"{lean}: all of it is already scored")
        else:
            text = (f"the cells do not price the uniform ladder as its planner does, but a uniform first stage would "
                    f"take {extra:,} more pairs, {extra / scale:.1%} of the other users' cost at the pilot's pairs per "
                    f"user (more than {UNIFORM_STAGE_SHARE:.0%}): the verdict stands")
        self._decide("plan", text)
        if self.uniform_stage and not extra:
            self._plan_tail()                             # on the stage, already complete
        return self.uniform_stage and extra > 0

    def _stage_head_places(self):
        """The places in head_items of the uniform first stage's head items not scored yet (beyond the rung where
        the head ladder settled their user)."""
        if not self.uniform_first:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.first_head & ~self._item_scored)

    def first_ranks(self):
        """{model: ndarray}: each user's sampled rank in the uniform first stage (1..n; :meth:`_draw_uniform_first`),
        1 + the head items in it and the first tail items in it at or above the held-out item (the tie rule
        applied). Complete once every user's tail sample covers its part of the stage (after a planned pilot's
        last stage, "the uniform first stage's tail part"); users with fewer than n candidates (N_u < n) are
        ranked in full there. Only a run with ``uniform_first``."""
        if not self.uniform_first:
            raise RuntimeError("this run holds no uniform first stage (config uniform_first)")
        short = self.first_tail > self.tail_sizes
        if self._stage_head_places().size:
            raise RuntimeError("the uniform first stage is not complete: some of its head items are not scored")
        if short.any():
            raise RuntimeError(f"the uniform first stage is not complete: {int(short.sum()):,} users' tail samples are "
                               "shorter than their part of it")
        owner = self._head_owner
        out = {}
        for m in self.models:
            above = self.head_above[m] | self._stage_head_above.get(m, False)
            head = np.bincount(owner[self.first_head & above], minlength=self.M)
            out[m] = 1 + head + self._first_tail_above.get(m, np.zeros(self.M, np.int64))
        return out

    def input_notes(self):
        """:meth:`StagedRun.input_notes` and what the proxy's heads decided (a top-m table's notes, ties at
        the head's edge)."""
        notes = super().input_notes() + self.head_notes
        if self.head_ties:
            notes.append(f"proxy: for {self.head_ties:,} users the head's last proxy score equals the best one "
                         "outside it; the tie went to the item first in the catalogue (the design stays valid: the "
                         "head is fixed before any costly score is seen)")
        return notes

    # -- stages ----------------------------------------------------------------
    def pending_pairs(self):
        p = self.pending
        if p is None:
            return 0
        pairs = int(p["places"].size) if "places" in p else int((p["stop"] - p["start"]).sum())
        return pairs + self.M if p["kind"] == "head" and p["stage"] == 1 else pairs

    def chunks(self, size):
        p = self.pending
        if p is None:
            return
        size = check_int(size, "batch_size", low=1)
        if p["kind"] == "head":
            if p["stage"] == 1:
                for a in range(0, self.M, size):
                    u = np.arange(a, min(a + size, self.M))
                    yield u, self.inputs["held"][u], np.ones(u.size, bool)
            places = p["places"] if "places" in p else self._head_places(p["users"], p["start"], p["stop"])
            for a in range(0, places.size, size):
                at = places[a:a + size]
                self._head_chunks.append(at)
                yield self._head_owner[at], self.head_items[at], np.zeros(at.size, bool)
            return
        for idx, lo, hi in _batches(p["start"], p["stop"], size):
            users = p["users"][idx]
            places = self.tail_order.positions(users, lo, hi)
            u = np.repeat(users, hi - lo)
            items = self.tail_candidates.items(places, u)
            if self.uniform_first:
                # which pairs are in the uniform first stage (the first n - 1 - h_u of each order; None: none of
                # this chunk's, as on a pilot's upper rungs)
                inside = None
                if (lo < self.first_tail[users]).any():
                    at = np.arange(u.size) - np.repeat(np.cumsum(hi - lo) - (hi - lo), hi - lo) + np.repeat(lo, hi - lo)
                    inside = at < self.first_tail[u]
                self._first_chunks.append((u, items, inside))
            yield u, items, np.zeros(u.size, bool)

    def absorb(self, users, items, held, scores):
        """:meth:`StagedRun.absorb`; in the head stage each head item's outcome is also kept (a plan prices
        smaller heads with them, :func:`sampling_lib.design.plan_strata`)."""
        super().absorb(users, items, held, scores)
        if self.pending is not None and self.pending["kind"] == "head" and not held.any():
            # the head's chunks come in the order :meth:`chunks` gave them: checked here, chunk by chunk
            at = self._head_chunks.popleft() if self._head_chunks else None
            if at is None or not (np.array_equal(items, self.head_items[at])
                                  and np.array_equal(users, self._head_owner[at])):
                raise RuntimeError("the head's scores did not arrive in the order of its chunks")
            self._item_scored[at] = True
            for m in self.models:
                if self.pending.get("uniform_part"):
                    # head items of the uniform first stage, scored after the head was complete: they count in
                    # the stage's ranks (first_ranks), not in the cells' x, tail rank or head outcomes
                    self._stage_head_above.setdefault(m, np.zeros(self.head_items.size, bool))[at] = \
                        self.last_above[m]
                    self.above[m] -= np.bincount(users[self.last_above[m]], minlength=self.M)
                else:
                    self._head_flags.setdefault(m, np.zeros(self.head_items.size, bool))[at] = self.last_above[m]
        elif self.uniform_first and self.pending is not None and self.pending["kind"] == "tail":
            # the tail's chunks come in the order :meth:`chunks` gave them (checked)
            u, it, inside = self._first_chunks.popleft() if self._first_chunks else (None, None, None)
            if u is None or not (np.array_equal(users, u) and np.array_equal(items, it)):
                raise RuntimeError("the tail's scores did not arrive in the order of its chunks")
            for m in self.models if inside is not None else ():
                add = np.bincount(users[inside & self.last_above[m]], minlength=self.M)
                self._first_tail_above[m] = self._first_tail_above.get(m, 0) + add

    def _head_places(self, users, start, stop):
        """The places in head_items of each user's head items start..stop - 1 (users in order)."""
        n = stop - start
        off = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        return np.repeat(self.head_ptr[users] + start, n) + off

    def _head_text(self):
        """What the head stage scored, for the decision after it."""
        c = self.config
        climbed = ""
        if self.climb_notes:
            climbed = (f" (the ladder climbs while its last rung paid for itself: the tails to resolution its settled "
                       f"users need not run, T_u / K each, against its pairs; {'; '.join(self.climb_notes)})")
        if len(self.rungs) == 1:
            return f"head of {c['head']:,} proxy candidates scored{climbed}"
        left = int((self.head_scored < self.heads).sum())
        return (f"head of {c['head']:,} proxy candidates{climbed} scored in rungs of "
                f"{', '.join(f'{r:,}' for r in self.rungs)}: "
                f"{left:,} of {self.M:,} users left at a rung short of their head (every model with {self.k_max} or "
                f"more items at or above the held-out item there, so their metrics are 0); "
                f"{int(self.head_scored.sum()):,} of the heads' {int(self.heads.sum()):,} items scored")

    def _tail_stages(self):
        """How many tail stages have been scored."""
        return sum(st.get("_kind") == "tail" for st in self.stages)

    def _keep_head_outcomes(self):
        """The head items' outcomes in head_items' order, from the chunks :meth:`absorb` checked (items a head
        ladder did not score: False)."""
        if self._head_chunks:
            raise RuntimeError("the head's scores did not cover every chunk given out")
        self.head_above = {m: self._head_flags.get(m, np.zeros(self.head_items.size, bool)) for m in self.models}
        self._head_flags = {}

    def finish_stage(self, plan_progress=False):
        p = self.pending
        if p["kind"] == "head" and p.get("uniform_part"):
            at = p["places"]
            self.sizes += np.bincount(self._head_owner[at], minlength=self.M)
            self.stages.append({"stage": p["stage"], "users": int(p["users"].size), "pairs": int(at.size),
                                "sizes": _sizes_text(np.bincount(self._head_owner[at])[p["users"]]), "full": 0,
                                "design": p["design"], "_kind": "head", "_users": p["users"], "_places": at})
            self._stage_tail_part(p)
            return
        if p["kind"] == "head":
            users = p["users"]
            self.head_scored[users] = p["stop"]
            self.sizes[users] = 1 + p["stop"]
            pairs = int((p["stop"] - p["start"]).sum()) + (self.M if p["stage"] == 1 else 0)
            top = int(p["stop"].max()) if users.size else 0
            design = "the proxy's head" if len(self.rungs) == 1 else f"the proxy's head, rung {top:,}"
            self.stages.append({"stage": p["stage"], "users": int(users.size), "pairs": pairs,
                                "sizes": _sizes_text(1 + p["stop"]),
                                "full": int((p["stop"] == self.inputs["n_items"][users] - 1).sum()), "design": design,
                                "_kind": "head", "_users": users, "_start": p["start"], "_stop": p["stop"]})
            open_ = np.zeros(self.M, bool)
            for m in self.models:
                open_ |= self.above[m] < self.k_max
            if self.climb:                # the users a climb could take further (their candidates not exhausted)
                go = self._climb(p, np.flatnonzero(open_ & (self.head_scored < self.inputs["n_items"] - 1)), open_)
            else:
                go = np.flatnonzero(open_ & (self.head_scored < self.heads))
            if go.size:                   # the head ladder's next rung for the users it has not settled
                rungs = np.asarray(self.rungs)
                rung = int(rungs[np.searchsorted(rungs, p["rung"], side="right")])
                new = np.minimum(rung, self.heads[go])
                self.pending = {"stage": len(self.stages) + 1, "kind": "head", "users": go,
                                "start": self.head_scored[go], "stop": new, "rung": rung}
                return
            self.x = {m: a.copy() for m, a in self.above.items()}
            self._keep_head_outcomes()
            need = np.zeros(self.M, bool)
            for m in self.models:
                need |= self.x[m] < self.k_max
            need &= self.tails > 0
            ladder = ("a ladder planned after it" if self.config["tail_n_max"] is None else
                      f"a ladder to {self.config['tail_n_max']:,} while no sampled tail item ranks above")
            self._decide("plan", f"{self._head_text()}; {int(need.sum()):,} of {self.M:,} users have x < {self.k_max} "
                         f"for some model and get a tail sample of {self.config['tail_n']:,} ({ladder})")
            new = np.minimum(self.config["tail_n"], self.tails)
        else:
            self.tail_sizes[p["users"]] = p["stop"]
            self.sizes[p["users"]] = 1 + self.head_scored[p["users"]] + p["stop"]
            self.stages.append({"stage": p["stage"], "users": int(p["users"].size),
                                "pairs": int((p["stop"] - p["start"]).sum()), "sizes": _sizes_text(p["stop"]),
                                "full": int((p["stop"] == self.tails[p["users"]]).sum()),
                                "design": p.get("design", "the tail"), "_kind": "tail",
                                "_users": p["users"], "_start": p["start"], "_stop": p["stop"]})
            if self._tail_stages() == 1:
                self._judge_proxy()
                if self.config["tail_n_max"] is None and self.pilot_cells is not None:
                    self._plan_tail()             # the other users: planned on the pilot's cells and theirs
                    self.config["tail_n_max"] = max(int(self.strata_plan.tail_n_max), self.config["tail_n"])
                elif self.config["tail_n_max"] is None:
                    self._pilot_ladder()
            need = self.open_tails() & (self.tail_sizes < self.config["tail_n_max"])
            new = next_tail_size(self.tail_sizes, self.config["tail_n_max"], self.tails)
        go = np.flatnonzero(need & (new > self.tail_sizes))
        if not go.size and self._uniform_stage_pays():
            # the pilot's last stages: the head items of each user's uniform first stage not yet scored (beyond
            # the rung where the head ladder settled it), then its tail part not yet scored
            at = self._stage_head_places()
            if at.size:
                self.pending = {"stage": len(self.stages) + 1, "kind": "head", "uniform_part": True, "places": at,
                                "users": np.unique(self._head_owner[at]),
                                "design": "the uniform first stage's head part"}
                return
            self._stage_tail_part(p)
            return
        self._next_tail(go, new, "the tail", p)

    def _stage_tail_part(self, p):
        """The uniform first stage's tail part not yet scored as the pilot's last stage (else the end)."""
        go = np.flatnonzero(self.first_tail > self.tail_sizes)
        self._next_tail(go, np.maximum(self.tail_sizes, self.first_tail), "the uniform first stage's tail part", p)

    def _next_tail(self, go, new, design, p):
        """The next tail stage for the users ``go`` (their samples to ``new``), or the end of the design."""
        if go.size:
            self.pending = {"stage": len(self.stages) + 1, "kind": "tail", "users": go,
                            "start": self.tail_sizes[go], "stop": new[go], "new": new[go], "design": design}
        else:
            self.pending = None
            self.done = True
            if self.planned and not self.checked and self._tail_stages() and (
                    self.strata_plan is None or (self.uniform_stage and p.get("design") != "the tail")):
                self._plan_tail()             # (again, after the uniform first stage: on it)
            self._decide("done", f"the design is complete after stage {len(self.stages)}")

    def _pilot_ladder(self):
        """After the first tail sample of a planned design: these users' tail ladder runs to the first rung
        at which a tail sample holds one item per k_min tail items or fewer (k_min the smallest K of the
        metrics; the whole tail if none does), so that the plan is made on cells that resolve every
        metric. A first tail sample far below resolution leaves every user at tail rank 1 and the prior
        at its limit (all mass at tail rank 1), under which every design looks exact.

        The doubling rung, not the smallest multiple of ``tail_n`` that resolves: that one costs less (on
        Last.fm 2K 1,800 instead of 3,200, 0.73% of full ranking against 1.05%), but on Gowalla (10
        draws, head 200) its plans realized a mean Recall@10 ratio of 1.33 and passed 1.3 in 7 single
        evaluations, where the doubling rung's realized 1.28 and 3, at 0.95% against 0.84% of full ranking
        (benchmarks/README.md, "The head ladder"): the deeper pilot prices the tail better. Tried again with
        the precision check, by a rule written before the runs, it cost less on Last.fm and Yelp2018 but left
        one Yelp2018 evaluation at 1.302 ("The precision check"), so the doubling rung stays."""
        from .design import tail_candidates

        c = self.config
        k_min = self.k_min
        live = self.tails[self.tails >= 1]
        if not live.size:
            c["tail_n_max"] = c["tail_n"]
            return
        T_max = int(live.max())
        rungs = tail_candidates(c["tail_n"], int(live.min()))
        top = next((t for t in rungs if T_max / t <= k_min), rungs[-1])
        capped = ""
        if c["max_cost"] is not None:     # within the budget even if every user climbed to the top
            room = c["max_cost"] * float(self.inputs["n_items"].mean()) - 1 - float(self.head_scored.mean())
            fit = [t for t in rungs if t <= room]
            if not fit or fit[-1] < top:
                top = fit[-1] if fit else c["tail_n"]
                capped = f"; capped at {top:,} by max_cost (resolution not reached: the plan extrapolates)"
        c["tail_n_max"] = top
        self._decide("plan", f"planning the tail: these users' tail ladder runs to {top:,} (one sampled item per "
                     f"{T_max / top:.1f} tail items or fewer, K = {k_min}{capped}), and the plan is made on their "
                     "cells")

    def _plan_tail(self):
        """The tail ladder's top for the target (or the budget) from stratified cells
        (:func:`sampling_lib.design.plan_strata`), said as a decision: at the end of a planned design's pilot
        (its users ran the resolving ladder of :meth:`_pilot_ladder`) on its cells, beside the uniform designs
        the same cells predict (whether the proxy pays); for the other users, after their first tail sample,
        on the pilot's cells and theirs."""
        from .design import head_candidates, plan_strata

        c = self.config
        pilots = self.cells()
        if self.pilot_cells is not None:
            pilots = {m: _joined(self.pilot_cells[m], pilots[m]) for m in self.models}
        decide = self.pilot_cells is None            # whether the proxy pays is the pilot's decision
        # the pilot of other users prices the heads up to its own (their outcomes seen as a smaller head's)
        heads = head_candidates(c["head"]) if decide and c["plan_users"] > self.M else None
        first = self.first_ranks() if decide and self.uniform_stage else None
        if first is not None and self._judged != _ON_STAGE:
            self._judge_proxy(stage=True)
        # what the head costs the users planned for: a ladder run's own, or the ladder the others will run
        costs = None
        if heads and c["head_ladder"]:       # a pilot's outcomes: exact for a ladder's rungs (module docstring)
            from .design import head_ladder_cost

            costs = {h: float(head_ladder_cost(self.head_above, self.heads, h, self.k_max).mean()) for h in heads}
        elif self.head_ladder:
            costs = {None: float(self.head_scored.mean())}
        pl = plan_strata(pilots, n=c["n"], tail_n=c["tail_n"], metrics=c["metrics"], M=c["plan_users"],
                         target_ratio=c["target_ratio"], max_cost=c["max_cost"], assurance=c["assurance"],
                         uniform=decide, heads=heads, head_above=self.head_above, first_ranks=first,
                         growth=c["growth"], head_costs=costs)
        # a head no better than random: the plan's price of it is not trusted (a random proxy kept on the panel
        # cost more than the fall-back in every draw, benchmarks/README.md "The head ladder"); it falls back
        distrust = decide and self.head_random and pl.kind == "stratified"
        if distrust:
            pl = dataclasses.replace(pl, kind="uniform")
        self.strata_plan = pl
        t = pl.table
        mine = t[(t.kind == "stratified") & (t.tail_n_max == pl.tail_n_max)
                 & ((t["head"] == pl.head) if pl.head is not None else t["head"].isna())]
        ratio, cost, share = float(mine.ratio.max()), float(mine.cost.max()), float(mine.cost_share.max())
        meets = bool(mine.meets.all())
        who = ("re-planned on the pilot's cells and these users' first tail samples" if self.pilot_cells is not None
               else "for the other users (re-planned after their first tail sample)" if c["plan_users"] > self.M
               else "the plan on these cells (every user is in them: nothing else runs)")
        what = (f"a head of {pl.head:,} (of the {', '.join(f'{h:,}' for h in heads)} priced) and a tail ladder to "
                f"{pl.tail_n_max:,}" if heads else f"a tail ladder to {pl.tail_n_max:,}")
        text = (f"{who}: {what} ({pl.target}: predicted ratio {ratio:.2f}, "
                f"{share:.2%} of full ranking" + ("" if meets else "; no design of the proxy meets the target") + ")")
        uni = pl.cheapest_uniform()
        if uni is not None:
            on = "uniform first stage" if pl.uniform_on == "first stage" else pl.uniform_on
            text += (f"; the cheapest uniform design predicted to meet it from these users' {on}: {uni.design}, "
                     f"{float(uni.cost_share):.2%}")
        if distrust:
            text += ("; the proxy does not pay: its head is no better than a random one for any model (one-sided z "
                     f"below 1.645, {self._judged}), so the plan's price of it is not trusted")
        elif decide:
            text += "; the proxy pays" if pl.kind == "stratified" else "; the proxy does not pay"
        self._decide("plan", text, predicted_items_per_user=cost, predicted_ratio=ratio,
                     chosen=describe_strata(c["head"] if pl.head is None else pl.head, c["tail_n"], pl.tail_n_max),
                     meets=meets)

    def open_tails(self):
        """Per user: whether its tail ladder would go on above the current top (some model with x_u < k_max
        ranks no sampled tail item above the held-out one, and the tail has items not yet drawn)."""
        out = np.zeros(self.M, bool)
        if not self.x:
            return out
        for m in self.models:
            out |= (self.x[m] < self.k_max) & (self.above[m] == self.x[m])
        return out & (self.tail_sizes > 0) & (self.tail_sizes < self.tails)

    def extend_tail(self, top, why):
        """Reopen a finished design: the tail ladder's top is raised to ``top`` and the users :meth:`open_tails`
        names (their ladder stopped at its top with no sampled tail item above the held-out one) go on
        climbing (doubling, as before, capped at ``top``) while none ranks above. Every rule still looks at
        observed data only, so the design stays ignorable and the final cells keep their hypergeometric
        kernel. ``why`` is said as the decision. Returns the users going on (0: nothing to do, the run stays
        done). Used by :func:`sampling_lib.evaluate`'s precision check (``evaluation._precision_check``)."""
        if not self.done:
            raise RuntimeError("extend_tail reopens a finished design; this one is still running")
        top = check_int(top, "top", low=int(self.config["tail_n_max"] or 1) + 1)
        new = next_tail_size(self.tail_sizes, top, self.tails)
        go = np.flatnonzero(self.open_tails() & (new > self.tail_sizes))
        if not go.size:
            return 0
        self.config["tail_n_max"] = top
        self.done = False
        self.checked = True
        self._decide("check", f"{why}: the tail ladder goes on to {top:,} for the {go.size:,} users whose sample "
                     "holds no tail item above the held-out one")
        self.pending = {"stage": len(self.stages) + 1, "kind": "tail", "users": go, "start": self.tail_sizes[go],
                        "stop": new[go], "new": new[go], "design": "the tail, after the precision check"}
        return int(go.size)

    def _judge_proxy(self, stage=False):
        """After the first tail sample: does the head hold more of the items above the held-out one than a
        random set of its size would (:func:`sampling_lib.proxy.head_enrichment`, per model)? With ``stage``, a
        pilot's complete uniform first stage asks every pilot user (:func:`~sampling_lib.proxy.head_enrichment_stage`;
        the first sees only those the head left unsettled) and its verdict replaces the first. Said as a decision;
        where no model shows it (one-sided z < 1.645 for every model with information), also in the notes: a
        proxy no better than random makes every user pay the head for nothing."""
        if stage:
            hit, zero = self._stage_head_above, 0 * self.first_tail
            out = {m: head_enrichment_stage(self.first_head, self._head_owner, self.head_above[m] | hit.get(m, False),
                                            self.first_tail, self._first_tail_above.get(m, zero)) for m in self.models}
        else:
            out = {m: head_enrichment(self.heads, self.x[m], self.tail_sizes, self.above[m] - self.x[m], self.k_max)
                   for m in self.models}
        self._judged = _ON_STAGE if stage else "after the first tail sample"
        text = "; ".join(f"{m}: {r:.2f}x (z = {z:.1f}, {k:,} users)" if np.isfinite(z) else f"{m}: no information"
                         for m, (z, r, k) in out.items())
        self._decide("proxy", f"the head's items above the held-out one, against a random head of its size "
                              f"({self._judged}): " + text)
        z = [z for z, _, _ in out.values() if np.isfinite(z)]
        self.head_random = bool(z) and max(z) < 1.645     # (no user with information: nothing to say)
        self.head_notes = [x for x in self.head_notes if not x.startswith(_RANDOM_HEAD)]    # the verdict replaced
        if self.head_random:
            self.head_notes.append(
                f"{_RANDOM_HEAD} of its size would ({self._judged}: {text}; one-sided z below 1.645). With a proxy "
                "no better than random the head is paid for nothing: a planned evaluation (no tail_n_max) falls back "
                "to the uniform ladder (README, 'A cheap proxy ranker first')")

    def cells(self):
        """{model: (n_items, heads, above, tail_sizes, ranks)}: every user's stratified cell so far (the
        arguments of :func:`sampling_lib.estimators.strata_estimate`). A user the head ladder settled at a rung
        keeps its whole head m_u with x_u the items above among those scored (>= k_max): its metrics are 0
        either way, and the estimator's grid, set by the users' heads, stays the whole head's."""
        return {m: (self.inputs["n_items"], self.heads, self.x[m], self.tail_sizes, 1 + self.above[m] - self.x[m])
                for m in self.models}

    def estimate_table(self, *, n_boot, confidence_level):
        """The estimate table: the default on the stratified cells, per model (``strata_estimate``)."""
        from .estimators import strata_estimate

        out = []
        for m, cells in self.cells().items():
            out.append(strata_estimate(*cells, metrics=self.config["metrics"], n_boot=n_boot, rng=self.config["seed"],
                                       confidence_level=confidence_level, model=m))
        return pd.concat(out, ignore_index=True)

    def ranks_table(self):
        """The stratified cells per user and model: user, model, n_items, head, head_above, tail_size, tail_rank,
        head_scored (a head ladder's users settled at a rung: head_above counts the items scored, at least
        k_max, and head is the head they would have had)."""
        from .io import id_text

        users = self.inputs["users"].to_numpy()
        users = id_text(users) if users.dtype == object else users
        return pd.concat([pd.DataFrame({"user": users, "model": m, "n_items": self.inputs["n_items"],
                                        "head": self.heads, "head_above": self.x[m], "tail_size": self.tail_sizes,
                                        "tail_rank": 1 + self.above[m] - self.x[m], "head_scored": self.head_scored})
                          for m in self.models], ignore_index=True)

    def stage_negatives(self, j):
        st = self.stages[j]
        if st["_kind"] == "head":
            at = st["_places"] if "_places" in st else self._head_places(st["_users"], st["_start"], st["_stop"])
            return self._head_owner[at], self.head_items[at]
        places = self.tail_order.positions(st["_users"], st["_start"], st["_stop"])
        u = np.repeat(st["_users"], st["_stop"] - st["_start"])
        return u, self.tail_candidates.items(places, u)

    def save(self, folder):
        raise NotImplementedError("a stratified evaluation keeps no workdir yet: run it without workdir")
