"""Several stages of negatives (a nested design) -> one candidates table; writing a stage's negatives.

A nested design (:class:`sampling_lib.sampling.Design`: a second stage for
the users at rank <= t, the doubling ladder of TORS24 Algorithm 1, full
ranking of some users) adds items to the sets of the users that need them.
A framework scores each stage's file; :func:`read_stages` puts the stages
back together -- per user, the held-out item and the negatives of every stage
-- and checks that they fit, so that :func:`ranks_from_negatives` gives each
user's final set size n_u and rank r_u per model (the likelihood of a nested
design is the kernel at the final (n_u, r_u): :func:`sampling_lib.estimators.logspline_fit`).
:func:`write_stage_negatives` writes a later stage in the first stage's format.
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .._validation import check_columns, check_int, check_scheme, show_value
from ._files import SOURCE, STAGES, id_text, source_at, table_lines, table_name
from ._negatives import (_pair_keys, id_table, pair_key, negatives_lines, read_elliot_negatives, read_ncf_negatives,
                         read_negatives)

__all__ = ["STAGE_FORMATS", "read_stages", "write_stage_negatives", "stage_file_name", "check_stage_sizes"]

#: The negatives files a stage can be read from and written to: the project's ``user,item`` CSV
#: (``sampling-lib negatives``), NCF's ``*.test.negative`` lines and Elliot's negatives TSV.
STAGE_FORMATS = ("negatives", "ncf", "elliot")


def stage_file_name(table, k):
    """How errors name stage ``k``'s input: its path, or ``"the stage-k negatives table"``."""
    if isinstance(table, pd.DataFrame):
        return f"the stage-{k} negatives table"
    return os.fspath(table)


def _read_later(table, fmt, k):
    """A later stage's file as ``user, item, label, line`` (label 1 rows only when the lines name the held-out item)."""
    name = stage_file_name(table, k)
    if fmt in ("ncf", "elliot") and not isinstance(table, pd.DataFrame):
        return negatives_lines(table, f"stage-{k} {'NCF' if fmt == 'ncf' else 'Elliot'} negatives")
    if fmt in ("ncf", "elliot"):
        raise TypeError(f"{fmt} stages are files; got a DataFrame for stage {k}")
    df, ids = id_table(table, ("user", "item"), f"stage-{k} negatives")
    extra = [c for c in df.columns if c not in ("user", "item")]
    if extra:
        raise ValueError(f"{name} holds the columns user, item (one row per added negative); column(s) {extra} "
                         "are not read" + (" (popularity negatives: see sampling-lib negatives --stage)"
                                           if "q" in extra else ""))
    lines = table_lines(df)
    return pd.DataFrame({"user": ids["user"].to_numpy(), "item": ids["item"].to_numpy(), "label": 0,
                         "line": np.arange(1, len(df) + 1) if lines is None else lines})


def read_stages(files, file_format="negatives", *, held_out=None, exclude=None, scheme="hypergeometric",
                n_items=None, duplicates="count"):
    """The candidates of a nested design's stages, checked and merged into one table.

    Parameters
    ----------
    files : path, DataFrame or sequence of them
        The stages' negatives, first stage first: stage 1 as the framework's
        file (every user), each later stage with the negatives *added* for the
        users that went on (e.g. :func:`write_stage_negatives`).
    file_format : {"negatives", "ncf", "elliot"}
        ``"negatives"``: CSV ``user, item`` (:func:`read_negatives`, the
        held-out items in ``held_out``); ``"ncf"``: ``*.test.negative`` lines
        ``(user,item)<tab>neg...`` (:func:`read_ncf_negatives`); ``"elliot"``:
        ``(user,item)`` or ``(user,)`` lines (:func:`read_elliot_negatives`).
    held_out : DataFrame or path, optional, keyword-only
        ``user, item``: the held-out items, when the first stage does not name
        them (``"negatives"``; Elliot ``(user,)`` lines). Later stages take
        the held-out items of the first.
    exclude : DataFrame or path, optional, keyword-only
        ``user, item``: each user's history; no negative of any stage may be
        in it.
    scheme : {"hypergeometric", "binomial"}, keyword-only
        How the negatives were drawn. Without replacement (default) a later
        stage's negative may not repeat a negative of an earlier stage (nor
        of its own stage) of the user, nor may the first stage list a negative
        twice (unless ``duplicates="collapse"``); with replacement it may.
    n_items : int, dict or Series {user: N_u}, optional, keyword-only
        The users' candidate counts N_u: a merged set larger than N_u is an
        error.
    duplicates : {"count", "collapse"}, keyword-only
        How the ranks will treat a negative listed twice in the first stage
        (:func:`ranks_from_negatives`). Without replacement, ``"count"``
        (default) refuses such a repeat, as for the later stages: counted twice
        it would enter the user's set twice, which a draw of distinct items
        cannot give. ``"collapse"`` lets the first stage repeat an item (it is
        then kept once, as NCF's and RecBole's own metrics do).

    Returns
    -------
    pandas.DataFrame
        ``user, item, label, line, stage``: the held-out item (label 1, from
        the first stage) and every stage's negatives (label 0) of each user,
        users in the first stage's order; ``line`` is the line of the stage's
        file. Feed it to :func:`ranks_from_negatives` with the scores of every
        stage's candidates: each user's sample size is its merged set.

    Raises
    ------
    ValueError
        In one line naming the file and line: a file given twice (the same
        file, or one holding the same negatives as an earlier stage's, under
        any scheme: its negatives would all be counted twice); a later stage names a user that
        the stage before did not extend (or lists a user twice), or a held-out
        item other than the first stage's; a negative that is the user's
        held-out item, or (without replacement) one of its earlier negatives,
        or in its history; a merged set larger than N_u.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "s1.test.negative").write_text("(a,5)\\t1\\t2\\n(b,6)\\t3\\t4\\n")
    >>> _ = (d / "s2.test.negative").write_text("(a,5)\\t7\\t8\\t9\\n")
    >>> t = read_stages([d / "s1.test.negative", d / "s2.test.negative"], "ncf")
    >>> t.groupby("user").size().to_dict(), t.stage.max()
    ({'a': 6, 'b': 3}, np.int64(2))
    >>> _ = (d / "bad.test.negative").write_text("(b,6)\\t3\\n")
    >>> read_stages([d / "s1.test.negative", d / "bad.test.negative"], "ncf")
    Traceback (most recent call last):
    ...
    ValueError: .../bad.test.negative, line 1: negative '3' of user 'b' is already a negative of stage 1 (.../s1.test.negative, line 2); the stages draw without replacement
    """
    if file_format not in STAGE_FORMATS:
        raise ValueError(f"file_format must be one of {STAGE_FORMATS}; got {show_value(file_format)}")
    replace = check_scheme(scheme) == "binomial"
    if isinstance(files, (str, os.PathLike, pd.DataFrame)):
        files = [files]
    files = list(files)
    if not files:
        raise ValueError("files must name at least the first stage")
    if duplicates not in ("count", "collapse"):
        raise ValueError(f"duplicates must be one of ('count', 'collapse'); got {show_value(duplicates)}")
    names = [stage_file_name(f, k) for k, f in enumerate(files, start=1)]
    _check_given_once(files, names)
    if file_format == "ncf":
        first = read_ncf_negatives(files[0])
    elif file_format == "elliot":
        first = read_elliot_negatives(files[0], held_out=held_out)
    else:
        first = read_negatives(files[0], held_out)
        if "line" not in first.columns:
            first = first.assign(line=_first_lines(first))
    first = first[["user", "item", "label", "line"]].assign(stage=1)
    if held_out is not None and file_format == "ncf":
        raise ValueError("held_out does not apply to NCF files: their lines name the held-out items")
    hold = first[first.label == 1].set_index("user")["item"]
    parts = [first]
    prev_users = pd.Index(hold.index)
    for k in range(2, len(files) + 1):
        t = _read_later(files[k - 1], file_format, k)
        name = names[k - 1]
        users = pd.Index(pd.unique(t["user"]))
        stray = ~users.isin(prev_users)
        if stray.any():
            u = users[np.flatnonzero(stray)[0]]
            line = int(t.loc[t.user == u, "line"].iloc[0])
            what = "the first stage" if k == 2 else f"stage {k - 1} (only the users it extended go on)"
            raise ValueError(f"{source_at(name, line)}: user {show_value(u)} is not a user of {what} ({names[k - 2]})")
        own = t[t.label == 1]
        if len(own):
            differ = own["item"].to_numpy() != hold.reindex(own["user"]).to_numpy()
            if differ.any():
                r = own.iloc[int(np.flatnonzero(differ)[0])]
                raise ValueError(f"{source_at(name, r['line'])}: the held-out item of user {show_value(r['user'])} "
                                 f"is {show_value(r['item'])} here but {show_value(hold[r['user']])} in the first "
                                 f"stage ({names[0]})")
        neg = t[t.label == 0]
        is_held = neg["item"].to_numpy() == hold.to_numpy()[hold.index.get_indexer(neg["user"])]
        if is_held.any():
            r = neg.iloc[int(np.flatnonzero(is_held)[0])]
            raise ValueError(f"{source_at(name, r['line'])}: negative {show_value(r['item'])} of user "
                             f"{show_value(r['user'])} is its held-out item")
        parts.append(neg.assign(stage=k))
        prev_users = users
    out = pd.concat(parts, ignore_index=True)
    if not replace and (len(files) > 1 or duplicates == "count"):
        _check_repeats(out, names, first=duplicates == "count")
    if exclude is not None:
        _check_history(out, exclude, names)
    if n_items is not None:
        check_stage_sizes(out, n_items, files)
    order = pd.Series(np.arange(len(hold)), index=hold.index)
    out = (out.assign(_o=out["user"].map(order).to_numpy(), _l=-out["label"])
           .sort_values(["_o", "_l", "stage"], kind="stable").drop(columns=["_o", "_l"]).reset_index(drop=True))
    out.attrs[SOURCE] = names[0]
    out.attrs[STAGES] = names
    return out


def _same_input(a, b):
    """True when two stage inputs are one: the same file (also through a link), the same bytes, or the same
    DataFrame (the same object or equal contents)."""
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        return isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame) and (a is b or a.equals(b))
    try:
        if os.path.samefile(a, b):
            return True
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:           # a missing file: its reader names it
        return False


def _check_given_once(files, names):
    """Every stage's input once: a file given twice (or a copy of an earlier stage's) would count each of its
    negatives twice under any scheme -- with replacement nothing else would notice (every rank about doubles)."""
    for k in range(1, len(files)):
        for j in range(k):
            if _same_input(files[j], files[k]):
                same = "is given twice" if names[j] == names[k] else f"holds the same negatives as {names[j]}"
                raise ValueError(f"{names[k]} (stage {k + 1}) {same} (stage {j + 1}): each stage's file once, first "
                                 "stage first; a later stage holds only the negatives added at that stage "
                                 "(sampling-lib negatives --stage)")


def _check_repeats(out, names, first=False):
    """Without replacement, a later stage's negatives repeat neither each other nor an earlier stage's (per
    user), and with ``first`` neither do the first stage's; the first repeat in stage and file order is
    reported. One factorization of every stage's (user, item) pairs (a stage-by-stage check re-read the
    earlier stages at each: quadratic in the stages)."""
    neg = out[out.label == 0]
    key = pd.Series(pair_key(neg))      # (user, item) as one integer
    stage = neg["stage"].to_numpy()
    dup = key.duplicated().to_numpy()
    if not first:
        dup = dup & (stage > 1)         # stage 1 is the framework's file, read as it is (repeats collapsed)
    if not dup.any():
        return
    i = int(np.flatnonzero(dup)[0])
    r, e = neg.iloc[i], neg.iloc[int(np.flatnonzero(key.to_numpy() == key.iloc[i])[0])]
    if int(r["stage"]) == 1:
        raise ValueError(f"{source_at(names[0], r['line'])}: negative {show_value(r['item'])} of user "
                         f"{show_value(r['user'])} is listed twice; drawn without replacement (--scheme "
                         "hypergeometric) a user's negatives are distinct. Keep each item once (--duplicates "
                         "collapse: what NCF's and RecBole's metrics do), or, drawn with replacement, read them with "
                         "--scheme binomial")
    if int(e["stage"]) == int(r["stage"]):
        raise ValueError(f"{source_at(names[int(r['stage']) - 1], r['line'])}: negative {show_value(r['item'])} of "
                         f"user {show_value(r['user'])} is listed twice; the stages draw without replacement")
    raise ValueError(f"{source_at(names[int(r['stage']) - 1], r['line'])}: negative {show_value(r['item'])} of user "
                     f"{show_value(r['user'])} is already a negative of stage {int(e['stage'])} "
                     f"({source_at(names[int(e['stage']) - 1], e['line'])}); the stages draw without replacement")


def _first_lines(t):
    """Row numbers (1-based) of the negatives of a table read from a DataFrame (the held-out rows: the user's first)."""
    neg = (t["label"] == 0).to_numpy()
    line = np.zeros(len(t), np.int64)
    line[neg] = np.arange(1, neg.sum() + 1)
    first = pd.Series(line[neg], index=t["user"][neg]).groupby(level=0, sort=False).min()
    line[~neg] = first.reindex(t["user"][~neg]).fillna(0).to_numpy(np.int64)
    return line


def _check_history(out, exclude, names):
    df, ids = id_table(exclude, ("user", "item"), "exclude")
    neg = out[out.label == 0]
    # (user, item) pairs as integers over the ids of both tables (a merge on text hashes every row's text)
    nkey, hkey = _pair_keys(neg, ids)
    hit = pd.Series(nkey).isin(hkey).to_numpy()
    if hit.any():
        r = neg[hit].sort_values(["stage", "line"]).iloc[0]
        raise ValueError(f"{source_at(names[int(r['stage']) - 1], r['line'])}: negative {show_value(r['item'])} of "
                         f"user {show_value(r['user'])} is in its history ({table_name(df, 'exclude')}); negatives "
                         "are drawn from the items outside the history")


def check_stage_sizes(candidates, n_items, files):
    """Raise when a user's merged set (:func:`read_stages`) holds more than its N_u items (names file and line).

    ``n_items``: an int, or a dict / Series {user: N_u}; ``files``: the stages' inputs, as given to
    :func:`read_stages`.
    """
    out, names = candidates, [stage_file_name(f, k) for k, f in enumerate(files, start=1)]
    size = out.groupby("user", sort=False).size()
    if np.ndim(n_items) == 0 and not isinstance(n_items, dict):
        cap = pd.Series(check_int(n_items, "n_items", low=2), index=size.index)
    else:
        cap = pd.Series(n_items)
        cap.index = id_text(cap.index)
        cap = cap.reindex(size.index)
        if cap.isna().any():
            u = cap.index[np.flatnonzero(cap.isna().to_numpy())[0]]
            raise ValueError(f"n_items has no N_u for user {show_value(u)}")
    over = (size > cap).to_numpy()
    if over.any():
        u = size.index[np.flatnonzero(over)[0]]
        last = out[out.user == u].sort_values(["stage", "line"]).iloc[-1]
        raise ValueError(f"{source_at(names[int(last['stage']) - 1], last['line'])}: user {show_value(u)} has "
                         f"{int(size[u])} candidates over the stages (its held-out item and {int(size[u]) - 1} "
                         f"negatives), more than its N_u = {int(cap[u])} items")


def write_stage_negatives(negatives, path, file_format="negatives", *, held_out=None):
    """Write a stage's negatives in a framework's format (the first stage's, for :func:`read_stages`).

    Parameters
    ----------
    negatives : DataFrame
        ``user, item`` rows (e.g. :func:`sampling_lib.sampling.sample_added_negatives`),
        the rows of a user together in draw order.
    path : path or writable text file
    file_format : {"negatives", "ncf", "elliot"}
        ``"negatives"``: CSV ``user, item``; ``"ncf"``: one line per user,
        ``(user,item)`` and the negatives, tab-separated (``held_out``
        required); ``"elliot"``: the same with ``(user,item)``, or ``(user,)``
        without ``held_out``.
    held_out : dict or Series {user: held-out item}, optional, keyword-only

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> write_stage_negatives(pd.DataFrame({"user": ["a", "a", "b"], "item": [7, 8, 9]}), buf, "ncf",
    ...                       held_out={"a": 5, "b": 6})
    >>> print(buf.getvalue(), end="")
    (a,5)	7	8
    (b,6)	9
    """
    if file_format not in STAGE_FORMATS:
        raise ValueError(f"file_format must be one of {STAGE_FORMATS}; got {show_value(file_format)}")
    check_columns(negatives, ["user", "item"], "the negatives table")
    users, items = id_text(negatives["user"]), id_text(negatives["item"])
    if file_format == "negatives":
        text = pd.DataFrame({"user": users, "item": items}).to_csv(index=False)
    else:
        hold = None
        if held_out is not None:
            hold = pd.Series(held_out)
            hold = pd.Series(id_text(hold.to_numpy()), index=id_text(hold.index))
        elif file_format == "ncf":
            raise ValueError("an NCF negatives file names each user's held-out item: give held_out")
        code, uniq = pd.factorize(users, sort=False)
        if hold is not None and not pd.Index(uniq).isin(hold.index).all():
            u = uniq[np.flatnonzero(~pd.Index(uniq).isin(hold.index))[0]]
            raise ValueError(f"held_out has no held-out item for user {show_value(u)}")
        order = np.argsort(code, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(code, minlength=len(uniq)))]
        it = items[order]
        lines = []
        for j, u in enumerate(uniq):
            head = f"({u},{hold[u]})" if hold is not None else f"({u},)"
            lines.append("\t".join([head, *it[bounds[j]:bounds[j + 1]]]) + "\n")
        text = "".join(lines)
    if hasattr(path, "write"):
        path.write(text)
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
