"""How the ``sampling-lib`` command shows its tables at a terminal (the compact view).

:func:`estimate_view` and :func:`compare_view` turn the full tables of
:func:`sampling_lib.correct.estimate` / :func:`~sampling_lib.correct.compare`
(or their popularity-sampled counterparts) into a screen a person reads: a
header line with what is the same on every row (N, n, users, method,
confidence level, replicates), then one short row per model and metric
(naive, estimate, interval, a mark), then a legend for the marks that appear.
The full tables stay what ``--format csv/json`` (and ``--wide``) print.
"""
from __future__ import annotations

import math
import shutil

import numpy as np

__all__ = ["estimate_view", "compare_view", "wide_view", "resolution_note", "resolution_width", "table_kind",
           "format_range", "COLUMN_NOTES", "constant_value", "is_known", "terminal_width", "wrap", "wrap_command",
           "render", "MAX_WIDTH"]

#: The widest the views go, even on a wider terminal (a line longer than this is hard to read).
MAX_WIDTH = 100
#: The narrowest they go, whatever the terminal says.
MIN_WIDTH = 40

#: the legend of ``--wide``: a line for each of these columns the table has
COLUMN_NOTES = {
    "se": "se: bootstrap standard deviation of the estimate; naive_ci_low/high: the naive metric's interval",
    "sensitivity_low": "sensitivity_low/high: the range of the point estimate under the estimator's "
                       "alternative tuning (the default's smoothness penalty divided and multiplied by 10); "
                       "NaN for estimators without one",
    "below_resolution": "below_resolution: K < (N-1)/(n-1), the metric lies inside the first sampled bin "
                        "(see the compact view's note)",
    "clipped": "clipped: True when the estimator's value fell outside the metric's range (possible for the "
               "linear estimators BV, MN, CLS) and was set to the nearest end of the range",
    "bound_low": "bound_low/high: popularity-sampled input: point bounds from the ranks and item weights alone "
                 "(no logs); no sampling uncertainty, so the truth can fall outside them. A cascade's top m + "
                 "random negatives: the design-only interval (no prior, user sampling included); its top m only: "
                 "the bounds over these users (their interval is ci_low/high)",
    "N": "N, n: empty (or -1) when they vary per user",
    "full_halfwidth": "full_halfwidth: the half-width of the interval full ranking of these users would give, "
                      "estimated (z sqrt(Var F(R) / M), Var F(R) from the fit); precision_ratio: the interval's "
                      "width over twice it",
}

_BELOW, _CLIPPED = "*", "!"
#: the compact view's column of the precision ratio (interval width over full ranking's, estimated)
_RATIO = "ratio"
#: How a metric below resolution is resolved: more items only where the held-out item is near the top.
_RESOLVE = ("To resolve it at a few percent of full ranking's cost, `sampling-lib plan` on these ranks picks a "
            "staged design that adds items only where the held-out item is near the top (README: 'Resolving "
            "a metric below resolution').")
#: The same for popularity-sampled negatives, which get no later stage (``sampling-lib negatives --stage``).
_RESOLVE_POPULARITY = ("Popularity-sampled negatives get no staged design (choosing the users that go on by "
                       "their ranks would bias pop_mle and the Horvitz-Thompson estimate): a larger n at the "
                       "one stage resolves more; uniform negatives can be staged (README: 'Resolving a metric "
                       "below resolution').")


def table_kind(table):
    """What an estimate table is, for its notes: ``popularity`` (popularity-sampled negatives), ``stratified``
    (a proxy's head and a sampled tail), ``bounds`` (``bound_low/high`` filled), ``design`` (a cascade's
    design-only interval there), ``head_only`` (a cascade's top m only: bounds, no estimate) and
    ``bounds_label``, what the views call the bounds."""
    from .cascade import BOUNDS_LABEL, BOUNDS_METHOD, DESIGN_BOUNDS_LABEL

    method = table["method"].astype(str) if "method" in table.columns else None
    stratified = method is not None and bool(method.str.endswith("(stratified)").any())
    head_only = method is not None and bool(method.eq(BOUNDS_METHOD).any())
    bounds = "bound_low" in table.columns and bool(table["bound_low"].notna().any())
    design = stratified and bounds
    return {"popularity": _is_popularity(table), "stratified": stratified, "bounds": bounds, "design": design,
            "head_only": head_only,
            "bounds_label": BOUNDS_LABEL if head_only else DESIGN_BOUNDS_LABEL if design else "bounds without logs"}


def _is_popularity(table):
    """An estimate or compare table of popularity-sampled negatives (its method is a popularity estimator)."""
    from .estimators import POPULARITY_METHODS

    return "method" in table.columns and bool(table["method"].isin(POPULARITY_METHODS).any())


def resolution_width(n_items_max, sample_size_min):
    """w = (N - 1)/(n - 1) with the largest N and the smallest n: metrics at K < w are below resolution.

    Examples
    --------
    >>> round(resolution_width(3706, 100), 1)
    37.4
    """
    return (n_items_max - 1) / (sample_size_min - 1)


def format_range(lo, hi):
    """``"3706"`` for one value, ``"946..1663"`` for a range (thousands without separators: file values)."""
    lo, hi = int(lo), int(hi)
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


def _num(x, digits=4):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _interval(lo, hi):
    if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
        return "n/a"
    return f"[{lo:.4f}, {hi:.4f}]"


def _pvalue(p, floor=5e-5):
    """A p-value for the table; below ``floor`` (what the replicates resolve) shown as ``<floor``."""
    if isinstance(p, float) and math.isnan(p):
        return "n/a"
    return f"<{floor:.2g}" if p < floor else f"{p:.4f}"


def _pvalue_floor(n_boot, k, adjust):
    """The smallest p-value ``n_boot`` percentile-bootstrap replicates resolve, adjusted over ``k`` pairs.

    The two-sided percentile p-value moves in steps of about 2 / B (:func:`sampling_lib.inference.
    percentile_pvalue`: 0 when every replicate lies on one side), and Bonferroni or Holm multiply it by
    at most k. So 0 from 1,000 replicates and 3 pairs says p < 0.006, not p < 0.0001.
    """
    if n_boot is None or not n_boot >= 1:
        return 5e-5
    return min(1.0, 2.0 / float(n_boot) * (1 if adjust in (None, "none") else max(int(k), 1)))


def _render(columns, rows, right=()):
    """Plain text table: ``columns`` names, ``rows`` lists of strings; names in ``right`` right-aligned."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(cells):
        out = [(s.rjust(w) if c in right else s.ljust(w)) for s, w, c in zip(cells, widths, columns)]
        return "  ".join(out).rstrip()

    return "\n".join([line(columns)] + [line(r) for r in rows])


def constant_value(table, column):
    """The value of ``column`` when it is the same on every row, else None (also None when absent)."""
    if column not in table.columns:
        return None
    values = table[column].unique()
    return values[0] if len(values) == 1 else None


def is_known(value):
    """A count that is stated: not None, not missing (pd.NA) and not the old placeholder -1."""
    import pandas as pd

    return value is not None and not pd.isna(value) and value != -1


def _items_text(table, n_items, sample_size):
    """``N = 3706, n = 100`` (or the per-user ranges) for the header."""
    parts = []
    for col, label, given in (("N", "N", n_items), ("n", "n", sample_size)):
        v = constant_value(table, col)
        if given is not None:
            text = format_range(*given)
            parts.append(f"{label} = {text}" + (" (per user)" if given[0] != given[1] else ""))
        elif is_known(v):
            parts.append(f"{label} = {int(v)}")
        elif col in table.columns:
            parts.append(f"{label} varies per user")
    return parts


def _header(table, n_items, sample_size, *, extra=(), seed=None):
    """One line: N, n, users, method, ``extra``, then the intervals' level, replicates and seed."""
    parts = _items_text(table, n_items, sample_size)
    users = constant_value(table, "users")
    if is_known(users):
        parts.append(f"{int(users):,} users")
    method = constant_value(table, "method")
    if method is not None:
        parts.append(f"method {method}")
    if constant_value(table, "scheme") == "hypergeometric":        # the default, binomial, goes unsaid
        parts.append("distinct negatives (hypergeometric kernel)")
    parts += list(extra)
    level = constant_value(table, "confidence_level")
    n_boot = constant_value(table, "n_boot")
    if n_boot is not None and int(n_boot) == 0:
        parts.append("no bootstrap (--n-boot 0): no intervals")
    elif level is not None and n_boot is not None:
        parts.append(f"{level:.0%} intervals from {int(n_boot):,} bootstrap replicates"
                     + (f" (seed {seed})" if seed is not None else ""))
    return ", ".join(parts)




def resolution_note(metrics, w, *, widened, popularity=False, stratified=False, design=False):
    """The legend line of the below-resolution mark, describing the interval of the method used.

    Parameters
    ----------
    metrics : sequence of str
        The metrics below resolution.
    w : float
        (N - 1)/(n - 1) (:func:`resolution_width`).
    widened : bool
        True when the interval is the default's union over smoothness penalties (the table has
        ``sensitivity_low/high``); False for a plain bootstrap interval.
    popularity : bool, default False, keyword-only
        Popularity-sampled negatives: their estimators (notebook 11) and no staged design.
    stratified : bool, default False, keyword-only
        A stratified evaluation (a proxy's head and a sampled tail): its resolution is the tail's.
    design : bool, default False, keyword-only
        The table has a cascade's design-only interval (``bound_low/high``) beside the estimate.
    """
    if stratified:
        return (f"below resolution ({', '.join(metrics)}): for some users with fewer than K head items above "
                "the held-out item, K lies inside the tail's first sampled bin (K < x + T/s: x head items "
                "above, T tail items, s sampled), so the metric leans on the prior's extrapolation there; its "
                "interval is the union over the fitted, a 10x weaker and a 10x stronger smoothness penalty. Far "
                "below resolution that is not enough: with one sampled tail item per about 2,150 tail items "
                "(Gowalla, a cascade's top 20 + 19 random) it missed the truth in 10 of 10 draws, as on Yelp2018 "
                "(benchmarks/README.md, 'Published cascade protocols corrected'). "
                + ("The design-only interval beside it (bound_low/high) holds without the prior (it covered "
                   "the truth in every draw there) and shows how little the sample says: its low end near 0 "
                   "means the data alone cannot place any user in the top K. " if design else "")
                + "A larger head or tail_n_max in evaluate(..., proxy=) resolves it; a published cascade's file "
                "cannot.")
    width = f" = {w:.1f}" if w is not None and np.isfinite(w) else ""
    head = (f"below resolution ({', '.join(metrics)}): K < (N-1)/(n-1){width}, so the metric lies inside "
            "the first sampled bin and is extrapolated")
    if widened:
        body = ("from the smooth prior; its interval is the union of the bootstrap intervals under the fitted, "
                "a 10x weaker and a 10x stronger smoothness penalty, so it covers that extrapolation too.")
    elif popularity:
        body = ("from the estimator's assumptions about the popularity mass inside that bin; the bootstrap "
                "interval covers user and item sampling only, not the bias of that extrapolation (notebook 11).")
    else:
        body = ("from the estimator's assumptions about P(R) inside that bin; the bootstrap interval covers "
                "user and item sampling only, not the bias of that extrapolation, and is often too narrow "
                "there (notebooks 09, 10). The default method (logspline) widens its interval to cover it.")
    return f"{head} {body} {_RESOLVE_POPULARITY if popularity else _RESOLVE}"


def _marks(table, w):
    below = (table["below_resolution"].to_numpy(bool) if "below_resolution" in table.columns
             else (table["K"].to_numpy() < w if w is not None else np.zeros(len(table), bool)))
    clipped = table["clipped"].to_numpy(bool) if "clipped" in table.columns else np.zeros(len(table), bool)
    return below, clipped


def terminal_width():
    """The width to wrap to: the terminal's (``shutil.get_terminal_size``: ``COLUMNS``, else stdout's
    terminal), at most :data:`MAX_WIDTH` and at least :data:`MIN_WIDTH`; :data:`MAX_WIDTH` when the
    output is no terminal (a file, a pipe)."""
    cols = shutil.get_terminal_size(fallback=(MAX_WIDTH, 24)).columns
    return max(MIN_WIDTH, min(MAX_WIDTH, cols if cols > 0 else MAX_WIDTH))


def wrap(text, width=None, indent="  ", first=""):
    """``text`` in lines of at most ``width`` (default :func:`terminal_width`) characters, broken between
    words only (a word longer than the line stays whole), the first line starting with ``first`` and the
    others with ``indent``.

    Examples
    --------
    >>> print(wrap("the quick brown fox jumps over the lazy dog", width=20))
    the quick brown fox
      jumps over the
      lazy dog
    """
    width = terminal_width() if width is None else width
    words, lines, cur = text.split(), [], first
    for word in words:
        if cur.strip() and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = indent + word
        else:
            cur = f"{cur} {word}" if cur.strip() else cur + word
    lines.append(cur)
    return "\n".join(lines)


_wrap = wrap


def wrap_command(cmd, width=None, first="  ", indent="      "):
    """A shell command in lines of at most ``width`` characters, continued with `` \\`` (so that it still
    pastes into a shell as one command): broken before an option where it can be, between arguments only.

    Examples
    --------
    >>> print(wrap_command("sampling-lib plan merged.csv -n 100 -N 3706 --scheme hypergeometric", width=40))
      sampling-lib plan merged.csv -n 100 \\
          -N 3706 --scheme hypergeometric
    """
    width = terminal_width() if width is None else width
    words = cmd.split()
    # an option and its value stay together: the units are "--opt value" (or a lone argument)
    units, i = [], 0
    while i < len(words):
        w = words[i]
        if w.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("-"):
            units.append(f"{w} {words[i + 1]}")
            i += 2
        else:
            units.append(w)
            i += 1
    lines, cur = [], first
    for u in units:
        if cur.strip() and len(cur) + 1 + len(u) + 2 > width:
            lines.append(cur + " \\")
            cur = indent + u
        else:
            cur = f"{cur} {u}" if cur.strip() else cur + u
    lines.append(cur)
    return "\n".join(lines)


def render(columns, rows, right=()):
    """A plain text table (:func:`_render`): ``columns`` names, ``rows`` lists of strings, the columns
    named in ``right`` right-aligned, two spaces between columns."""
    return _render(columns, rows, right)


def estimate_view(table, *, n_items=None, sample_size=None, seed=None):
    """The compact terminal view of an estimate table (text ending in a newline).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`sampling_lib.correct.estimate`'s table, with a ``model`` column when there are
        several models (or the popularity table of :func:`sampling_lib.popularity.estimate_popularity`).
    n_items, sample_size : (int, int), optional
        (smallest, largest) N_u and n_u behind the table, for the header and the resolution
        note when they vary per user (the table then says -1).
    seed : int, optional
        The bootstrap seed, shown in the header.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"metric": ["recall@10", "recall@50"], "K": [10, 50], "naive": [0.44, 0.79],
    ...                   "estimate": [0.13, 0.23], "ci_low": [0.106, 0.21], "ci_high": [0.152, 0.251],
    ...                   "method": "mle", "users": 2000, "N": 3706, "n": 100, "confidence_level": 0.95,
    ...                   "n_boot": 1000, "below_resolution": [True, False], "clipped": False})
    >>> print(estimate_view(t))  # doctest: +NORMALIZE_WHITESPACE
    N = 3706, n = 100, 2,000 users, method mle, 95% intervals from 1,000 bootstrap replicates
    <BLANKLINE>
    metric      naive  estimate  95% interval
    recall@10  0.4400    0.1300  [0.1060, 0.1520]  *
    recall@50  0.7900    0.2300  [0.2100, 0.2510]
    <BLANKLINE>
    * below resolution (recall@10): K < (N-1)/(n-1) = 37.4, so the metric lies inside the first sampled bin
      and is extrapolated from the estimator's assumptions about P(R) inside that bin; the bootstrap
    ...
    """
    w = _width(table, n_items, sample_size)
    level = constant_value(table, "confidence_level")
    varying = [c for c in ("N", "n", "users", "method") if c in table.columns and constant_value(table, c) is None]
    header = _header(table, n_items, sample_size, seed=seed)
    columns = (["model"] if "model" in table.columns else []) + ["metric"] + varying
    columns += ["naive", "estimate", f"{level:.0%} interval" if level is not None else "interval"]
    from .cascade import BOUNDS_METHOD

    kind = table_kind(table)
    popular, stratified, bounds, design = kind["popularity"], kind["stratified"], kind["bounds"], kind["design"]
    head_only = kind["head_only"]
    if bounds:
        columns.append(kind["bounds_label"])
    ratio = "precision_ratio" in table.columns and bool(table["precision_ratio"].notna().any())
    if ratio:
        columns.append(_RATIO)
    columns.append("")
    below, clipped = _marks(table, w)
    if head_only:        # bounds, not an estimate: no extrapolation to mark (the note below says what they are)
        below = below & ~table["method"].astype(str).eq(BOUNDS_METHOD).to_numpy()
    rows = []
    for i, r in enumerate(table.itertuples(index=False)):
        d = r._asdict()
        row = ([str(d["model"])] if "model" in table.columns else []) + [str(d["metric"])]
        row += [str(d[c]) for c in varying]
        row += [_num(d["naive"]), _num(d["estimate"]), _interval(d["ci_low"], d["ci_high"])]
        if bounds:
            row.append(_interval(d["bound_low"], d["bound_high"]))
        if ratio:
            row.append(_num(d["precision_ratio"], 2))
        row.append(" ".join(m for m, on in ((_BELOW, below[i]), (_CLIPPED, clipped[i])) if on))
        rows.append(row)
    text = [_wrap(header, indent=""), "", _render(columns, rows, right=("naive", "estimate")), ""]
    if below.any():
        metrics = list(dict.fromkeys(table["metric"][below]))
        widened = "sensitivity_low" in table.columns and bool(table["sensitivity_low"][below].notna().all())
        text.append(_wrap(f"{_BELOW} " + resolution_note(metrics, w, widened=widened, popularity=popular,
                                                         stratified=stratified, design=design)))
    if clipped.any():
        text.append(_wrap(f"{_CLIPPED} clipped: the estimator's value fell outside the metric's range (the "
                          "linear estimators BV, MN and CLS can do that) and was set to the nearest end of it."))
    text += _one_step_note(table, n_items)
    if bounds and head_only:
        text.append(_wrap(f"{kind['bounds_label']}: only the retriever's top m were scored, so each user's global rank "
                          "lies anywhere from 1 + x (x head items above the held-out one; every unscored item "
                          "below it) to 1 + x + T (all T unscored items above): the metric is bounded, not "
                          "estimated, and the interval runs from the user bootstrap's lower end of the low bound "
                          "to its upper end of the high one. Scoring random negatives from the rest (stratum "
                          "'tail'; in a rank table tail_size and tail_rank) turns the bounds into an estimate."))
    elif design:
        text.append(_wrap(f"{kind['bounds_label']}: where the metric lies whatever the tail ranks, from the design "
                          "alone (no prior): each user's global rank lies between 1 + x + c (x head and c sampled "
                          "tail items above the held-out one) and that plus the unsampled tail items; the high end "
                          "also weighs each user whose sample holds no item above by the inverse chance of missing "
                          "the items that would keep it in the top K (the smaller of the two, Bonferroni). A sample "
                          "of s from T tail items cannot tell no item above from K of them when Ks is far below T: "
                          "the low end is then near 0, and where the estimate lies inside this range is the prior's "
                          "extrapolation, not the data's."))
    elif bounds:
        text.append(_wrap("bounds without logs: the range of the metric that holds whatever the logged "
                          "negatives (popularity-sampled evaluation)."))
    if ratio:
        text.append(_wrap(f"{_RATIO}: the interval's width over the width full ranking of these users would "
                          "give (z sqrt(Var F(R) / M) each side, Var F(R) from the fit, so the ratio is itself an estimate: "
                          "within 4% of the realized one once a ladder resolves the metric, 16% below to 30% above "
                          "it on one stage below resolution; benchmarks, 'The precision-ratio column'): the "
                          "precision ratio "
                          + ("that sampling-lib plan targets for uniform negatives; with popularity-sampled "
                             "negatives a larger n narrows it." if popular else
                             "of the stratified design; above your target, a larger head or tail narrows it."
                             if stratified else
                             "that sampling-lib plan targets; above your target, a staged design (sampling-lib "
                             "plan) or, after one, one more rung of its ladder narrows it.")))
    text.append(_wrap("naive: the sampled metric read as a global one (what most papers report); estimate: "
                      "the corrected global metric. Every column: --wide, --format csv or --format json."))
    return "\n".join(text) + "\n"


def _one_step_note(table, n_items):
    """[note] when the table's per-user-N replicates are first order in a fitted prior, else []."""
    one_step = _one_step_methods(table, n_items)
    if not one_step:
        return []
    return [_wrap(f"note: with per-user N, the bootstrap replicates of {', '.join(one_step)} are first order in "
                  "the fitted prior, not refits (on an NCF ml-1m-like file within 0.06 bootstrap standard "
                  "deviations of refits; README, 'Per-user candidate counts').")]


def _one_step_methods(table, n_items):
    """The table's methods whose per-user-N bootstrap is first order in a fitted prior (MN with an MLE
    or MES prior), when N varies per user and there are replicates; else []."""
    if "method" not in table.columns or "n_boot" not in table.columns or not (table["n_boot"] > 0).any():
        return []
    import pandas as pd

    N = pd.to_numeric(table["N"], errors="coerce") if "N" in table.columns else None
    per_user = (n_items is not None and n_items[0] != n_items[1]) or (
        N is not None and bool((N.isna() | (N == -1)).any()))
    if not per_user:
        return []
    from .estimators import estimator_spec
    from .estimators._registry import ONE_STEP_PRIOR_KINDS

    out = []
    for m in dict.fromkeys(table["method"].astype(str)):
        try:
            spec = estimator_spec(m)
        except ValueError:
            continue
        if spec.bootstrap == "linear" and spec.prior is not None and spec.linear_kind in ONE_STEP_PRIOR_KINDS:
            out.append(m)
    return out


def _width(table, n_items, sample_size):
    """w from the context ranges, else from the table's N and n (None when unknown)."""
    Nmax = n_items[1] if n_items is not None else constant_value(table, "N")
    nmin = sample_size[0] if sample_size is not None else constant_value(table, "n")
    if not (is_known(Nmax) and is_known(nmin)) or nmin < 2:
        return None
    return resolution_width(int(Nmax), int(nmin))


def compare_view(table, *, n_items=None, sample_size=None, seed=None):
    """The compact terminal view of a compare table (text ending in a newline).

    Uses the table's ``below_resolution`` column when it has one, else K < w from
    ``n_items``/``sample_size`` (see :func:`estimate_view`).
    """
    w = _width(table, n_items, sample_size)
    extra = []
    if "paired" in table.columns and constant_value(table, "paired") is not None:
        extra.append("paired bootstrap (same users)" if bool(constant_value(table, "paired"))
                     else "unpaired bootstrap (counts)")
    header = _header(table, n_items, sample_size, extra=extra)
    ci_level, n_boot = constant_value(table, "ci_level"), constant_value(table, "n_boot")
    k = int(table["n_comparisons"].max()) if "n_comparisons" in table.columns else 1
    tests = []
    seed_text = f" (seed {seed})" if seed is not None else ""
    if ci_level is not None and n_boot is not None:
        if k > 1:    # Bonferroni: each interval at 1 - (1 - level) / k
            level = 1 - (1 - ci_level) * k
            tests.append(f"{level:.0%} intervals from {int(n_boot):,} bootstrap replicates{seed_text}, "
                         f"simultaneous over the {k} pairs of a metric (each at {ci_level:.2%})")
        else:
            tests.append(f"{ci_level:.0%} intervals from {int(n_boot):,} bootstrap replicates{seed_text}")
    adjust, alpha = constant_value(table, "adjust"), constant_value(table, "alpha")
    if adjust is not None and alpha is not None:
        tests.append(f"decisions at family-wise error {alpha:g}" + (f", p-values adjusted by {adjust}"
                                                                    if adjust != "none" else ""))
    # short headers (the legend says what they are): the table fits 100 columns with models named like
    # "modelA"; the full names (estimate_a, ...) are the columns of --wide and --format csv/json
    columns = ["metric", "model_a", "model_b", "a", "b", "a - b", "interval", "p adj.", "decision", ""]
    below, _ = _marks(table, w)
    floor = _pvalue_floor(n_boot, k, adjust)
    rows, contradictions = [], []
    for i, r in enumerate(table.itertuples(index=False)):
        d = r._asdict()
        rows.append([str(d["metric"]), str(d["model_a"]), str(d["model_b"]), _num(d["estimate_a"]),
                     _num(d["estimate_b"]), _num(d["difference"]), _interval(d["ci_low"], d["ci_high"]),
                     _pvalue(d.get("pvalue_adjusted", float("nan")), floor), _decision(d),
                     _BELOW if below[i] else ""])
        lo, hi, rej = d.get("ci_low"), d.get("ci_high"), d.get("reject")
        if rej is not None and not any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
            if bool(rej) == (lo <= 0 <= hi):
                contradictions.append(i)
    text = [_wrap("; ".join([header] + tests), indent=""), "",
            _render(columns, rows, right=("a", "b", "a - b", "p adj.")), ""]
    if below.any():
        metrics = list(dict.fromkeys(table["metric"][below]))
        text.append(_wrap(f"{_BELOW} below resolution ({', '.join(metrics)}): K < (N-1)/(n-1)"
                          + (f" = {w:.1f}" if w is not None else "")
                          + ": both models' estimates are extrapolated inside the first sampled bin; the "
                          "difference shares that extrapolation, and its interval covers sampling noise "
                          f"only. {_RESOLVE_POPULARITY if _is_popularity(table) else _RESOLVE}"))
    if contradictions:
        why = []
        if adjust == "holm":
            why.append("Holm's step-down tests the pairs after the first at less strict levels than the "
                       "Bonferroni level of the simultaneous intervals")
        if alpha is not None and ci_level is not None and abs(alpha - (1 - ci_level) * k) > 1e-12:
            why.append(f"the decisions are at family-wise error {alpha:g}, the intervals at "
                       f"{1 - (1 - ci_level) * k:.0%}")
        text.append(_wrap("note: on row(s) " + ", ".join(str(i + 1) for i in contradictions) + " the decision "
                          "and the interval disagree: both come from the same percentile bootstrap, but "
                          + ("; ".join(why) if why else "they are at different levels")
                          + ". With --adjust bonferroni and --alpha equal to 1 - --confidence-level the decisions match the "
                          "intervals exactly."))
    text += _one_step_note(table, n_items)
    if ci_level is not None and n_boot is not None:
        tail = (1 - ci_level) / 2 * float(n_boot)
        if tail < 10:
            need = int(math.ceil(10 / ((1 - ci_level) / 2) / 100.0) * 100)
            text.append(_wrap(f"note: each end of the intervals rests on {tail:.1f} bootstrap replicate(s) "
                              f"(level {ci_level:.2%}, {int(n_boot):,} replicates); for stable ends and "
                              f"p-values use --n-boot {need:,} or more."))
    text.append(_wrap("a, b: the corrected global metric of model_a and of model_b; a - b: their difference, with "
                      "its interval and adjusted p-value; decision: a > b or a < b where that p-value is below the "
                      "family-wise error, else n.s. (no significant difference). Every column: --wide, --format csv "
                      "or --format json."))
    return "\n".join(text) + "\n"


def _decision(row):
    """The decision of a compare row as the compact view shows it: "a > b", "a < b" or "n.s."."""
    reject, diff = row.get("reject"), row.get("difference")
    if reject is None or diff is None or (isinstance(diff, float) and math.isnan(diff)):
        return str(row.get("decision", ""))
    if not bool(reject):
        return "n.s."
    return "a > b" if diff > 0 else "a < b"


def wide_view(table):
    """Every column of the table (``--wide``), then a legend of the columns that need one."""
    import pandas as pd

    with pd.option_context("display.width", 250, "display.max_columns", 100):
        text = table.to_string(index=False, float_format=lambda x: f"{x:.4f}")
    legend = [note for c, note in COLUMN_NOTES.items() if c in table.columns
              and (c != "N" or not all(is_known(v) for col in ("N", "n") if col in table.columns for v in table[col]))]
    return text + "\n" + ("\n" + "\n".join(_wrap(s) for s in legend) + "\n" if legend else "")
