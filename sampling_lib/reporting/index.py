"""``index.html``: the reader's page of a report (self-contained, opens from ``file://``)."""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re

import pandas as pd

from .environment import commit_label
from .ledger import PAPERS, finite_scalar

__all__ = ["index_html", "format_value"]


def _fmt_num(x, scale=None):
    """A number with the digits that matter: one digit beyond the tolerance, 2..12 significant.

    Without a tolerance 4 significant digits; integers stay integers.
    """
    if x == 0:
        return "0"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):d}"
    if scale is not None and scale > 0:
        sig = int(math.floor(math.log10(abs(x))) - math.floor(math.log10(scale))) + 2
        sig = min(12, max(2, sig))
    else:
        sig = 4
    return f"{x:.{sig}g}"


def format_value(v, scale=None):
    if v is None or (isinstance(v, float) and math.isnan(v)):  # missing (a measured "nan" is a string)
        return ""
    if isinstance(v, bool):
        return str(v)
    s = str(v).strip()
    if s == "" or s.lower() in ("none", "nan"):
        return s if s.lower() == "nan" else ""
    try:
        x = float(s)
    except ValueError:
        return s
    if not math.isfinite(x) or s.lower() in ("true", "false"):
        return s
    sc = finite_scalar(scale) if scale not in (None, "") else None
    return _fmt_num(x, sc)


def _num_class(shown):
    """'num' (right-aligned, one line) for a number, 'txt' for a phrase like 'max |z| 2.4 over 40'."""
    try:
        float(shown)
        return "num"
    except ValueError:
        return "txt"


def _inline_md(text):
    """Escape, then ``*x*`` -> <em>x</em> and ``code`` -> <code>code</code>."""
    s = html.escape(str(text))
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", s)
    return s


def _claim_command(claim_id, notebook, ambiguous):
    cmd = f"sampling-lib run --claim {claim_id}"
    if ambiguous:
        cmd += f" --only {notebook[:2]}"
    return cmd


_INDEX_CSS = """
body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;line-height:1.4}
table{border-collapse:collapse;width:100%;margin-bottom:1.5em;font-size:0.88em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-size:0.92em}
code.cmd{display:block;color:#555;font-size:0.8em;margin-top:2px;overflow-wrap:anywhere}
td.txt{font-size:0.92em;min-width:7em}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}
.holds{color:#1a7f37}.nothold{color:#9a6700;font-weight:bold}
.kept{color:#777}
#filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #ddd;z-index:1}
#filters input[type=search]{width:22em}
.note{color:#555;font-size:0.9em}
tr.hidden,div.group.hidden{display:none}
h2,h3,tr{scroll-margin-top:3em}
"""

_INDEX_JS = """
(function () {
  var box = document.getElementById('filter');
  var notOk = document.getElementById('notok');
  var count = document.getElementById('shown');
  function apply() {
    var q = box.value.toLowerCase();
    var rows = document.querySelectorAll('tr.rec');
    var n = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var show = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
                 (!notOk.checked || r.getAttribute('data-ok') === 'false');
      r.className = show ? 'rec' : 'rec hidden';
      if (show) { n++; }
    }
    // a group (a paper's heading, note and table) whose rows the filter hid all is hidden too
    var filtering = q || notOk.checked;
    var groups = document.querySelectorAll('div.group');
    for (var j = 0; j < groups.length; j++) {
      var left = groups[j].querySelectorAll('tr.rec:not(.hidden)').length;
      groups[j].className = (filtering && !left) ? 'group hidden' : 'group';
    }
    count.textContent = n + ' of ' + rows.length + ' rows shown';
  }
  box.addEventListener('input', apply);
  notOk.addEventListener('change', apply);
  apply();
})();
"""


def _commit_html(env):
    """The environment table's commit row: the code's commit, HEAD if later, the uncommitted changes."""
    esc = html.escape
    out = f"<code>{esc(str(env.get('commit')))}</code>"
    sources = ", ".join(f"{s}/" if "." not in s else s for s in env.get("sources") or [])
    if sources:
        out += f" (the last commit that changed the sources: {esc(sources)}"
        head = env.get("head")
        if head and head != env.get("commit"):
            out += f"; checked out: <code>{esc(str(head))}</code>, which changed none of them"
        out += ")"
    if env.get("dirty"):
        changed = env.get("changed_sources") or []
        out += (" <span class='fail'>with uncommitted changes to the sources</span>"
                + (f": {esc(', '.join(changed))}" if changed else ""))
    elif env.get("dirty") is False:
        out += "; no uncommitted changes to the sources"
    return out


def index_html(df, runs, mode, env, discrepancies=None, generated=None):
    """The index page: environment, notebooks, per-paper summary, claims, observations, discrepancies.

    Self-contained (inline CSS and a small script for the filter), so it opens
    from ``file://`` without a server; every link is relative.
    """
    esc = html.escape
    generated = generated or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    claims = df[df["kind"] == "claim"]
    obs = df[df["kind"] == "observation"]
    n_pass = int(claims["passed"].astype(bool).sum())
    n_hold = int(obs["passed"].astype(bool).sum())
    ids_notebooks = df.groupby("claim_id")["notebook"].nunique()
    ambiguous = set(ids_notebooks[ids_notebooks > 1].index)
    html_names = {r.name for r in runs}

    p = []
    add = p.append
    add("<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        "<title>sampling-lab: verified claims</title>")
    add(f"<style>{_INDEX_CSS}</style></head><body>")
    add("<h1>sampling-lab: index of verified claims</h1>")
    add(f"<p>Generated {esc(generated)} from commit <code>{esc(commit_label(env))}</code> with "
        f"<b>{esc(mode)}</b> parameters. <b>{n_pass} of {len(claims)} claims pass</b>; "
        f"{len(obs)} observations ({n_hold} hold, {len(obs) - n_hold} do not).</p>")
    add("<p class='note'>A <b>claim</b> must hold for any data (mathematics, exactness, Monte Carlo against a "
        "formula) and fails the run when it does not. An <b>observation</b> is a statement about the data at hand "
        "(which estimator wins, an error level, a paper's empirical table): its verdict is shown, it never fails "
        "the run. Raw values are in <a href='claims.csv'>claims.csv</a>; the environment in "
        "<a href='environment.json'>environment.json</a>. Check one claim again with the command under its id "
        "(it re-executes only its notebook; add <code>--smoke</code> for the small parameters).</p>")
    add("<p>Contents: <a href='#environment'>environment</a> &middot; <a href='#notebooks'>notebooks</a> &middot; "
        "<a href='#papers'>summary by paper</a> &middot; <a href='#claims'>claims</a> &middot; "
        "<a href='#observations'>observations</a> &middot; <a href='#discrepancies'>discrepancies with the "
        "papers</a></p>")

    # environment
    add("<h2 id='environment'>Environment</h2><table>")
    lock = env["lock"]
    if lock["matches"] is None:
        lock_s = "no lock file found"
    elif lock["matches"]:
        lock_s = f"installed packages match <code>{esc(lock['file'])}</code> (sha256 {esc(lock['sha256'] or '')}…)"
    else:
        lock_s = (f"<span class='fail'>differs from <code>{esc(lock['file'])}</code></span>: "
                  + esc(", ".join(lock["differs"])))
    rows_env = [
        ("commit", _commit_html(env)),
        ("python", esc(f"{env['python']} ({env['implementation']})")),
        ("platform", esc(env["platform"])),
        ("CPU", esc(f"{env['cpu']}; {env['cpu_count']} CPUs, {env['cpus_usable']} usable")),
        ("BLAS", esc(env["blas"]) + "; threads: " + esc(", ".join(f"{k}={v or 'unset'}"
                                                                   for k, v in env["blas_threads"].items()))),
        ("packages", esc(", ".join(f"{k} {v}" for k, v in env["packages"].items()))),
        ("lock", lock_s),
    ]
    for k, v in rows_env:
        add(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>")
    add("</table>")

    # notebooks
    add("<h2 id='notebooks'>Notebooks</h2><table><tr><th>notebook</th><th>status</th><th>claims passed</th>"
        "<th>observations hold</th><th>parameters</th><th>run</th><th>run time (s)</th></tr>")
    for r in runs:
        recs = df[df["notebook"] == r.name]
        rc, ro = recs[recs["kind"] == "claim"], recs[recs["kind"] == "observation"]
        status = "<span class='pass'>ok</span>" if r.ok else f"<span class='fail'>FAILED</span> {esc(r.error)}"
        if r.kept:
            first = recs.iloc[0] if len(recs) else None
            run_s = (f"<span class='kept'>kept from an earlier run: {esc(str(first['run']) if first is not None else '')}"
                     f" parameters, commit <code>{esc(str(first['commit']) if first is not None else '')}</code></span>")
        else:
            run_s = esc(mode)
        params = esc(json.dumps(r.parameters, sort_keys=True)) if r.parameters else "defaults"
        add(f"<tr id='nb-{esc(r.name)}'><td><a href='{esc(r.name)}.html'>{esc(r.name)}</a> "
            f"(<a href='{esc(r.name)}.ipynb'>ipynb</a>)</td><td>{status}</td>"
            f"<td class='num'>{int(rc['passed'].sum())} / {len(rc)}</td>"
            f"<td class='num'>{int(ro['passed'].sum())} / {len(ro)}</td><td><code>{params}</code></td>"
            f"<td>{run_s}</td><td class='num'>{'' if math.isnan(r.seconds) else f'{r.seconds:.1f}'}</td></tr>")
    add("</table>")

    # per paper
    add("<h2 id='papers'>Summary by paper</h2><table><tr><th>paper</th><th>reference</th>"
        "<th>claims passed / total</th><th>observations (hold / total)</th></tr>")
    papers = [k for k in PAPERS if k in set(df["paper"])] + sorted(set(df["paper"]) - set(PAPERS))
    for paper in papers:
        g = df[df["paper"] == paper]
        gc, go = g[g["kind"] == "claim"], g[g["kind"] == "observation"]
        add(f"<tr><td><a href='#paper-{esc(paper)}'>{esc(paper)}</a></td><td>{esc(PAPERS.get(paper, 'other sources'))}"
            f"</td><td class='num'>{int(gc['passed'].sum())} / {len(gc)}</td>"
            f"<td class='num'>{int(go['passed'].sum())} / {len(go)}</td></tr>")
    add("</table>")

    add("<div id='filters'><label>Filter rows: <input type='search' id='filter' "
        "placeholder='claim id, paper, equation, words'></label> <label><input type='checkbox' id='notok'> only "
        "failed claims / observations that do not hold</label> <span id='shown' class='note'></span></div>")

    def record_rows(g, kind):
        head = ("<table><tr><th>verdict</th><th>id and command</th><th>source</th><th>statement</th>"
                "<th>measured</th><th>expected / bound</th><th>tolerance</th><th>checked in</th></tr>")
        out = [head]
        for _, c in g.iterrows():
            ok = bool(c["passed"])
            if kind == "claim":
                st = "<span class='pass'>pass</span>" if ok else "<span class='fail'>FAIL</span>"
            else:
                st = "<span class='holds'>holds</span>" if ok else "<span class='nothold'>does not hold</span>"
            nb, cid = str(c["notebook"]), str(c["claim_id"])
            cell = str(c.get("cell_id") or "")
            if nb in html_names:
                target = f"{nb}.html" + (f"#cell-id={cell}" if cell else "")
                where = f"<a href='{esc(target)}'>{esc(nb[:2])}{' cell' if cell else ''}</a>"
            else:
                where = esc(nb)
            cmd = _claim_command(cid, nb, cid in ambiguous)
            scale = c.get("scale")
            mv, ev = format_value(c["measured"], scale), format_value(c["expected"], scale)
            out.append(
                f"<tr class='rec' id='{esc(kind)}-{esc(nb)}-{esc(cid)}' data-ok='{'true' if ok else 'false'}'>"
                f"<td>{st}</td><td><code>{esc(cid)}</code><code class='cmd'>{esc(cmd)}</code></td>"
                f"<td>{esc(str(c['source']))}</td><td>{_inline_md(c['description'])}</td>"
                f"<td class='{_num_class(mv)}' title='{esc(str(c['measured']))}'>{esc(mv)}</td>"
                f"<td class='{_num_class(ev)}' title='{esc(str(c['expected']))}'>{esc(ev)}</td>"
                f"<td>{esc(str(c['tolerance']))}</td><td>{where}</td></tr>"
            )
        out.append("</table>")
        return out

    add("<h2 id='claims'>Claims by paper</h2>")
    for paper in papers:
        g = claims[claims["paper"] == paper]
        add("<div class='group'>")
        add(f"<h3 id='paper-{esc(paper)}'>{esc(paper)}: {esc(PAPERS.get(paper, 'other sources'))}</h3>")
        if len(g):
            add(f"<p class='note'>{int(g['passed'].sum())} of {len(g)} claims pass.</p>")
            p.extend(record_rows(g, "claim"))
        else:
            add("<p class='note'>No claims (observations only).</p>")
        add("</div>")

    add("<h2 id='observations'>Observations (about the data at hand; never fail the run)</h2>")
    if len(obs):
        add(f"<p class='note'>{n_hold} of {len(obs)} observations hold on the data these notebooks ran on. "
            "They describe that data, not a property that must hold for every dataset.</p>")
        for paper in papers:
            g = obs[obs["paper"] == paper]
            if len(g):
                add(f"<div class='group'><h3>{esc(paper)}</h3>")
                p.extend(record_rows(g, "observation"))
                add("</div>")
    else:
        add("<p class='note'>No observations recorded.</p>")

    add("<h2 id='discrepancies'>Discrepancies with the papers</h2>")
    add("<p class='note'>Where a paper's printed statement disagrees with a careful derivation and a simulation that "
        "agree with each other, the notebooks show the disagreement (the code is never bent to a print).</p>")
    d = discrepancies if discrepancies is not None else pd.DataFrame()
    if len(d):
        add("<table><tr><th>paper</th><th>statement</th><th>what we measured</th><th>notebooks</th></tr>")
        for _, row in d.iterrows():
            links = []
            for num in str(row.get("notebooks", "")).replace(",", " ").split():
                match = [n for n in sorted(html_names) if n.startswith(num)]
                links.append(f"<a href='{esc(match[0])}.html'>{esc(num)}</a>" if match else esc(num))
            add(f"<tr><td>{esc(str(row['paper']))}</td><td>{_inline_md(row['statement'])}</td>"
                f"<td>{_inline_md(row['measured'])}</td><td>{', '.join(links)}</td></tr>")
        add("</table>")
    else:
        add("<p class='note'>None recorded.</p>")
    add(f"<script>{_INDEX_JS}</script>")
    add("</body></html>")
    return "\n".join(p) + "\n"


