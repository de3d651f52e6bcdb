"""What :func:`sampling_lib.evaluate` returns: :class:`EvaluationResult` and its tables.

The result of an evaluation in progress or done, built from its state (:class:`sampling_lib.stagerun.StagedRun`
or :class:`sampling_lib.stratarun.StrataRun`, or a planned stratified evaluation's pilot and rest): the cost
and design tables, the notes, the stages' negatives regenerated from the seed (:class:`StageNegatives`) and
the printed summary. Split from :mod:`sampling_lib.evaluation`, which runs the evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._validation import show_value

__all__ = ["EvaluationResult", "StageNegatives"]


def _cost_table(run):
    """One row: users, pairs scored (per model), items per user, share of full ranking; the plans' predictions.
    ``run`` may be a list of runs on disjoint users (a planned stratified evaluation's pilot and rest)."""
    runs = run if isinstance(run, list) else [run]
    N_u = np.concatenate([r.inputs["n_items"] for r in runs])
    sizes = np.concatenate([r.sizes for r in runs])
    M = int(N_u.size)
    pairs = int(sizes.sum())
    pred = [d for d in runs[0].decisions if "predicted_items_per_user" in d]
    first = pred[0]["predicted_items_per_user"] if pred else np.nan
    last = ([d for r in runs for d in r.decisions if "predicted_items_per_user" in d] or [{}])[-1].get(
        "predicted_items_per_user", np.nan)
    return pd.DataFrame([{
        "users": M, "models": len(runs[0].models or []), "pairs_per_model": pairs,
        "items_per_user": pairs / M, "share_of_full": pairs / float(N_u.sum()),
        "predicted_items_per_user": last, "predicted_share": last * M / float(N_u.sum()),
        "first_plan_items_per_user": first, "stages": sum(len(r.stages) for r in runs),
        "users_ranked_in_full": int((sizes == N_u).sum())}])


def _design_table(run):
    """The stages table with the decision taken after each stage."""
    t = run.stages_table()
    dec = pd.DataFrame(run.decisions)
    if dec.empty:
        t["decision"] = ""
        return t
    text = dec.groupby("after_stage").decision.agg("; ".join)
    t["decision"] = t.stage.map(text).fillna("")
    for col in ("chosen", "predicted_items_per_user", "predicted_ratio"):
        if col in dec.columns:
            last = dec.dropna(subset=[col]).groupby("after_stage")[col].last()
            t[col] = t.stage.map(last)
    return t


def _notes(run, table):
    return run.input_notes() + _unmet_notes([run], table)


def _unmet_notes(runs, table):
    """The note of a plan whose chosen design is not predicted to meet the target (the last such decision of
    ``runs``), with the precision ratios ``table`` reached."""
    unmet = [d for r in runs for d in r.decisions if d.get("meets") is False]
    if not unmet:
        return []
    d = unmet[-1]
    reached = table.groupby("metric", sort=False).precision_ratio.max()
    within = " within the budget" if runs[0].config.get("max_cost") is not None else ""
    return [f"no design{within} met the target: {d['chosen']} ran (the most precise{within}; predicted ratio "
            f"{d['predicted_ratio']:.2f}); it reached precision ratios "
            + ", ".join(f"{v:.2f} ({m})" for m, v in reached.items())]


class StageNegatives:
    """Every stage's negatives, regenerated from the seed on demand (nothing is stored).

    ``len()`` stages; ``[j]`` the DataFrame ``user, item`` of stage j + 1 (users in input order, each user's
    items in draw order); ``to_frame()`` all of them with a ``stage`` column.
    """

    def __init__(self, run):
        self._run = run

    def __len__(self):
        return len(self._run.stages)

    def __getitem__(self, j):
        if not -len(self) <= j < len(self):
            raise IndexError(f"stage index {j} out of range ({len(self)} stages)")
        j %= len(self)
        u, it = self._run.stage_negatives(j)
        users = self._run.inputs["users"].to_numpy()[u]
        ids = self._run.inputs["ids"]
        return pd.DataFrame({"user": users, "item": it if ids is None else ids.to_numpy()[it]})

    def __iter__(self):
        return (self[j] for j in range(len(self)))

    def to_frame(self):
        return pd.concat([f.assign(stage=j + 1) for j, f in enumerate(self)], ignore_index=True)[
            ["stage", "user", "item"]]

    def __repr__(self):
        pairs = [st["pairs"] - (self._run.M if st["stage"] == 1 else 0) for st in self._run.stages]
        return f"<StageNegatives: {len(self)} stages, {sum(pairs):,} negatives ({', '.join(f'{p:,}' for p in pairs)})>"


def _text(head, cost, design, notes, width=100):
    """``print(result)``'s text: the estimate view, then the cost, the decisions and the notes, each wrapped
    to ``width`` columns (continuation lines indented)."""
    import textwrap

    def wrap(line, indent):
        return textwrap.fill(line, width=width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False)

    return "\n".join([head.rstrip(), "", wrap(cost, "  "), "design:"] + [wrap(d, "      ") for d in design]
                     + [wrap(f"note: {x}", "  ") for x in notes])


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns.

    Attributes
    ----------
    table : pandas.DataFrame
        :func:`sampling_lib.estimate`'s table: one row per model and metric (``estimate``, ``ci_low/high``,
        ``precision_ratio``, ...).
    cost : pandas.DataFrame
        One row: ``pairs_per_model`` scored (held-out items included), ``items_per_user``,
        ``share_of_full`` (pairs / sum of N_u), the last plan's ``predicted_items_per_user`` and
        ``predicted_share``, the first plan's prediction, ``stages``, ``users_ranked_in_full``.
    design : pandas.DataFrame
        One row per stage: the design it ran, users, pairs, set sizes, users ranked in full, share of full
        ranking, and the decision taken after it (a plan, a re-plan, the end) with the chosen design and its
        predictions.
    ranks : pandas.DataFrame
        The merged ranks, the table ``sampling-lib ranks`` writes (user, model, rank, sample_size, n_items,
        first_rank, scheme): ``sampling_lib.estimate(io.ranks_from_table(ranks), ...)`` re-estimates with
        another method.
    negatives : StageNegatives
        Every stage's negatives.
    plans : list of PlanResult
        Every plan's candidate table.
    notes : list of str
        What the run says beside the table (a budget that bounded the design, unused ids).
    parts : dict or None
        With one proxy per model (``proxy={model: proxy}``): each model's own evaluation (its own heads
        and tails); then ``cost`` and ``design`` have a ``model`` column, ``negatives`` is a dict
        {model: StageNegatives} and ``save`` writes one folder per model. With a planned stratified
        design whose pilot is not every user: {"pilot": ..., "rest": ...}, each part's own evaluation
        (its own table); ``design`` and ``ranks`` have a ``part`` column, ``table`` and ``cost`` are the
        whole evaluation's, and ``save`` writes a folder per part beside the joint ``estimate.csv``.
    """

    table: pd.DataFrame
    cost: pd.DataFrame
    design: pd.DataFrame
    ranks: pd.DataFrame
    negatives: StageNegatives
    plans: list = field(repr=False)
    notes: list
    config: dict = field(repr=False)
    parts: dict = field(default=None, repr=False)

    def save(self, folder, file_format="negatives"):
        """Write the evaluation into a new (or empty) ``folder``, nothing overwritten.

        ``held_out.csv`` (user, item), ``n_items.csv`` (user, n_items), each stage's negatives
        (``stage-K.csv`` as ``sampling-lib negatives`` writes them; ``file_format="ncf"``: NCF's
        ``stage-K.test.negative``; ``"elliot"``: ``stage-K.tsv``), ``ranks.csv``, ``estimate.csv``,
        ``design.csv`` and ``cost.csv``. Scored again, the stage files give the same ranks: ``sampling-lib
        estimate stage-1.csv ... --input-format negatives --held-out held_out.csv --scores SCORES.csv
        --n-items-file n_items.csv --scheme hypergeometric --seed SEED`` prints this table.

        A stratified evaluation (``proxy=``) is not a sequence of uniform stages, so its stage files would
        be misread as one: it writes ``candidates.csv`` instead (``user, item, label, stratum``: each
        user's held-out item, label 1; its proxy head, stratum "head"; every tail item drawn, stratum
        "tail"). Scored again (a ``score`` column added), that file is a cascade's scores table:
        ``sampling-lib estimate SCORED.csv --n-items-file n_items.csv --seed SEED`` prints this table
        (the tail ladder's final cell is all its likelihood needs: notebook 14).

        Returns the folder's path.
        """
        from .io import STAGE_FORMATS, id_text, write_stage_negatives

        if file_format not in STAGE_FORMATS:
            raise ValueError(f"file_format must be one of {STAGE_FORMATS}; got {show_value(file_format)}")
        folder = Path(folder)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise ValueError(f"folder {str(folder)!r} exists and is not empty: give a new or empty folder (nothing "
                             "is overwritten)")
        if self.parts is not None:            # one folder per model (one proxy each) or per part of the users
            for m, part in self.parts.items():
                part.save(folder / m, file_format)
            if self._by_users:                # the pilot and the other users: the joint table beside them
                self.table.to_csv(folder / "estimate.csv", index=False)
                self.cost.to_csv(folder / "cost.csv", index=False)
            return folder
        run = self.negatives._run
        stratified = hasattr(run, "head_items")
        if stratified and file_format != "negatives":
            raise ValueError(f"file_format={file_format!r} does not apply to a stratified evaluation (proxy=): it is "
                             "saved as one candidates table (candidates.csv, a cascade's layout), not as stage files")
        folder.mkdir(parents=True, exist_ok=True)
        users = run.inputs["users"].to_numpy()
        ids = run.inputs["ids"]
        held = run.inputs["held"] if ids is None else ids.to_numpy()[run.inputs["held"]]
        pd.DataFrame({"user": users, "item": held}).to_csv(folder / "held_out.csv", index=False)
        pd.DataFrame({"user": users, "n_items": run.inputs["n_items"]}).to_csv(folder / "n_items.csv", index=False)
        if stratified:
            parts = [pd.DataFrame({"user": users, "item": held, "label": 1, "stratum": "head"})]
            kinds = [st.get("_kind", "head" if j == 0 else "tail") for j, st in enumerate(run.stages)]
            parts += [neg.assign(label=0, stratum=kinds[j]) for j, neg in enumerate(self.negatives)]
            order = pd.Series(np.arange(users.size), index=users)
            cand = pd.concat(parts, ignore_index=True)
            cand = cand.iloc[np.lexsort((-cand["label"].to_numpy(), order[cand["user"]].to_numpy()))]
            cand.to_csv(folder / "candidates.csv", index=False)
        else:
            ext = {"negatives": "csv", "ncf": "test.negative", "elliot": "tsv"}[file_format]
            hold = pd.Series(id_text(held), index=id_text(users))
            for j, neg in enumerate(self.negatives):
                write_stage_negatives(neg, folder / f"stage-{j + 1}.{ext}", file_format, held_out=hold)
        self.ranks.to_csv(folder / "ranks.csv", index=False)
        self.table.to_csv(folder / "estimate.csv", index=False)
        self.design.to_csv(folder / "design.csv", index=False)
        self.cost.to_csv(folder / "cost.csv", index=False)
        return folder

    @property
    def _by_users(self):
        """Whether ``parts`` split the users (a planned stratified evaluation) rather than the models."""
        return self.parts is not None and self.config.get("parts") == "pilot and rest"

    def compare(self, metrics=None, **kwargs):
        """Pairwise differences of the models' corrected metrics, paired (:func:`sampling_lib.compare` on
        the merged ranks; the same seed as the table unless ``rng`` is given)."""
        from .correct import compare
        from .io import ranks_from_table

        if "sample_size" not in self.ranks.columns:
            raise ValueError("compare takes the ranks of a uniform design; a stratified evaluation's (proxy=) "
                             "cells are not paired sampled ranks: compare its models' tables instead")
        kwargs.setdefault("rng", self.config["seed"])
        kwargs.setdefault("n_boot", self.config["n_boot"] or 1000)
        return compare(ranks_from_table(self.ranks), metrics=metrics or self.config["metrics"], **kwargs)

    def summary(self):
        """The table, the cost and the design as text (what ``print(result)`` shows)."""
        from ._display import estimate_view

        if self.parts is not None and not self._by_users:
            return "\n\n".join(f"== model {m!r} (its own proxy)\n{part.summary()}" for m, part in self.parts.items())
        if self.parts is not None:            # a planned stratified evaluation: the pilot and the other users
            from ._display import estimate_view

            t = self.table
            c = self.cost.iloc[0]
            head = estimate_view(t.drop(columns="model") if t.model.nunique() == 1 else t, seed=self.config["seed"])
            cost = (f"cost: {int(c.pairs_per_model):,} pairs per model, {c.items_per_user:,.0f} items per user, "
                    f"{c.share_of_full:.2%} of full ranking; {int(c.stages)} stages")
            design = [f"  {r.part}, after stage {r.stage}: {r.decision}" for r in self.design.itertuples()
                      if r.decision]
            return _text(head, cost, design, self.notes)
        c = self.cost.iloc[0]
        t = self.table
        r = self.ranks
        scored = (r.sample_size if "sample_size" in r.columns else      # stratified cells (a head ladder: scored)
                  1 + r["head_scored" if "head_scored" in r.columns else "head"] + r.tail_size)
        head = estimate_view(t.drop(columns="model") if t.model.nunique() == 1 else t,
                             n_items=(int(r.n_items.min()), int(r.n_items.max())),
                             sample_size=(int(scored.min()), int(scored.max())), seed=self.config["seed"])
        predicted = "" if np.isnan(c.predicted_share) else f" (predicted {c.predicted_share:.2%})"
        cost = (f"cost: {int(c.pairs_per_model):,} pairs per model, {c.items_per_user:,.0f} items per user, "
                f"{c.share_of_full:.2%} of full ranking{predicted}; {int(c.stages)} stages, "
                f"{int(c.users_ranked_in_full):,} users ranked in full")
        design = [f"  after stage {r.stage}: {r.decision}" for r in self.design.itertuples() if r.decision]
        return _text(head, cost, design, self.notes)

    def __str__(self):
        return self.summary()
