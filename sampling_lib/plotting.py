"""Figures of corrected metrics: naive vs corrected with intervals (``sampling-lib estimate --plot``).

Needs matplotlib, the extra ``[plot]`` (``pip install 'sampling-lab[plot]'``);
without it :func:`plot_estimates` raises an ImportError that says so.
"""
from __future__ import annotations

import math

import numpy as np

from ._display import constant_value, is_known, table_kind
from ._extras import require

__all__ = ["plot_estimates"]

_NAIVE, _CORRECTED, _BELOW = "0.45", "C0", "#fde7c8"


def _resolution_width(table, n_items, sample_size):
    Nmax = n_items[1] if n_items is not None else constant_value(table, "N")
    nmin = sample_size[0] if sample_size is not None else constant_value(table, "n")
    if not (is_known(Nmax) and is_known(nmin)) or nmin < 2:
        return None
    return (int(Nmax) - 1) / (int(nmin) - 1)


def _subtitle(table, n_items, sample_size):
    parts = []
    for label, col, given in (("N", "N", n_items), ("n", "n", sample_size)):
        if given is not None:
            parts.append(f"{label} = {given[0]}" if given[0] == given[1] else f"{label} = {given[0]}..{given[1]}")
        elif is_known(constant_value(table, col)):
            parts.append(f"{label} = {int(constant_value(table, col))}")
    if is_known(constant_value(table, "users")):
        parts.append(f"{int(constant_value(table, 'users')):,} users")
    if constant_value(table, "method") is not None:
        parts.append(f"method {constant_value(table, 'method')}")
    return ", ".join(parts)


def plot_estimates(table, *, n_items=None, sample_size=None, title=None, panels_per_row=3):
    """Naive vs corrected metrics with their confidence intervals, one panel per metric.

    Each panel has one row per model: the naive sampled metric (grey circle,
    with its own bootstrap interval as a thin line) and the corrected global
    estimate (blue square with its interval); a dotted line joins the two, so
    the size of the correction shows. A metric below resolution
    (``below_resolution``: K < (N-1)/(n-1), inside the first sampled bin, so
    extrapolated) has its panel shaded and says so in its title. Popularity
    tables (:func:`sampling_lib.popularity.estimate_popularity`) add their
    no-log bounds as a light band.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`sampling_lib.correct.estimate`'s table, with a ``model``
        column for several models (the CLI's ``--format csv`` output read
        back works too).
    n_items, sample_size : (int, int), optional
        (smallest, largest) N_u and n_u when they vary per user (the table
        then says -1), for the subtitle and the resolution width.
    title : str, optional
        Figure title; default "Naive sampled vs corrected global metrics".
    panels_per_row : int, default 3

    Returns
    -------
    matplotlib.figure.Figure
        Not attached to pyplot (no window opens); ``fig.savefig(path)``
        writes it, and Jupyter displays it.

    Raises
    ------
    ImportError
        Without matplotlib: "plot_estimates needs matplotlib (not installed):
        pip install 'sampling-lab[plot]'".

    Examples
    --------
    >>> from sampling_lib.correct import estimate
    >>> t = estimate([1, 2, 3, 5, 8, 13, 21, 34] * 20, 1000, 50, ["recall@10", "recall@100"], n_boot=50, rng=0)
    >>> fig = plot_estimates(t)
    >>> [ax.get_title() for ax in fig.axes]
    ['recall@10 (below resolution)', 'recall@100']
    """
    require("matplotlib", "plot_estimates")
    from matplotlib import figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    required = {"metric", "naive", "estimate", "ci_low", "ci_high"}
    if not hasattr(table, "columns") or not required <= set(table.columns):
        got = list(table.columns) if hasattr(table, "columns") else type(table).__name__
        raise ValueError(f"table must be estimate()'s table with columns {sorted(required)}; got {got}")
    if len(table) == 0:
        raise ValueError("table is empty: nothing to plot")
    panels_per_row = int(panels_per_row)
    if panels_per_row < 1:
        raise ValueError(f"panels_per_row must be >= 1; got {panels_per_row}")
    metrics = list(dict.fromkeys(table["metric"]))
    models = list(dict.fromkeys(table["model"])) if "model" in table.columns else [""]
    w = _resolution_width(table, n_items, sample_size)
    cols = min(panels_per_row, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig = figure.Figure(figsize=(4.2 * cols, 0.9 + 0.55 * len(models) * rows + 0.9 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    level = constant_value(table, "confidence_level")
    ci_label = f"corrected, {level:.0%} interval" if level is not None else "corrected, interval"
    any_below = False
    # a head-only cascade (sampling_lib.cascade): bounds of the tail left unscored, no estimate to extrapolate
    kind = table_kind(table)
    head_only, bounds_label = kind["head_only"], kind["bounds_label"]
    for ax, metric in zip(axes, metrics):
        sub = table[table["metric"] == metric]
        if "model" in sub.columns:
            sub = sub.set_index("model").reindex(models)
        y = np.arange(len(sub))[::-1].astype(float)
        below = bool(sub["below_resolution"].fillna(False).any()) if "below_resolution" in sub.columns else (
            w is not None and "K" in sub.columns and bool((sub["K"] < w).any()))
        below = below and not head_only
        any_below |= below
        if below:
            ax.set_facecolor(_BELOW)
        if {"bound_low", "bound_high"} <= set(sub.columns) and sub["bound_low"].notna().any():
            ax.barh(y, sub["bound_high"] - sub["bound_low"], left=sub["bound_low"], height=0.5, color="C2",
                    alpha=0.18, label=bounds_label)
        for yi, (_, r) in zip(y, sub.iterrows()):
            ax.plot([r["naive"], r["estimate"]], [yi + 0.12, yi - 0.12], ":", color="0.6", lw=1)
        if {"naive_ci_low", "naive_ci_high"} <= set(sub.columns):
            ax.hlines(y + 0.12, sub["naive_ci_low"], sub["naive_ci_high"], color=_NAIVE, lw=1)
        ax.plot(sub["naive"], y + 0.12, "o", mfc="white", mec=_NAIVE, ms=7, label="naive (sampled)")
        lo, hi = sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float)
        est = sub["estimate"].to_numpy(float)
        if head_only:          # no estimate: the interval of the bounds alone, from its low end to its high one
            ax.errorbar((lo + hi) / 2, y - 0.12, xerr=(hi - lo) / 2, fmt="none", color=_CORRECTED, capsize=3,
                        lw=1.5)
        err = np.vstack([est - lo, hi - est])
        ax.errorbar(est, y - 0.12, xerr=np.where(np.isfinite(err), err, 0), fmt="s", color=_CORRECTED, ms=6,
                    capsize=3, lw=1.5, label=ci_label)
        ax.set_yticks(y, [str(m) for m in sub.index] if "model" in table.columns else [""])
        ax.set_ylim(y.min() - 0.7, y.max() + 0.7)
        hi_x = np.nanmax(np.concatenate([sub[c].to_numpy(float) for c in
                                         ("naive", "estimate", "ci_high", "naive_ci_high", "bound_high")
                                         if c in sub.columns]))
        ax.set_xlim(0, min(1.0, hi_x * 1.1) if np.isfinite(hi_x) and hi_x > 0 else 1.0)
        ax.set_xlabel(f"{metric}")
        ax.set_title(f"{metric} (below resolution)" if below else metric)
        ax.grid(axis="x", color="0.85", lw=0.8)
        ax.set_axisbelow(True)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    handles = [Line2D([], [], ls="", marker="o", mfc="white", mec=_NAIVE, ms=7, label="naive (sampled ranks "
                      "read as global)"),
               Line2D([], [], ls="-", marker="" if head_only else "s", color=_CORRECTED, ms=6,
                      label=f"{level:.0%} interval of the bounds" if head_only and level is not None else ci_label)]
    if "bound_low" in table.columns and table["bound_low"].notna().any():
        handles.append(Patch(color="C2", alpha=0.18, label=bounds_label))
    if any_below:
        handles.append(Patch(facecolor=_BELOW, edgecolor="0.7", label=(
            f"below resolution: K < (N-1)/(n-1) = {w:.1f}, extrapolated" if w is not None
            else "below resolution: extrapolated")))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 2), fontsize=8, frameon=False)
    sub_title = _subtitle(table, n_items, sample_size)
    fig.suptitle((title or "Naive sampled vs corrected global metrics") + (f"\n{sub_title}" if sub_title else ""),
                 fontsize=10)
    return fig
