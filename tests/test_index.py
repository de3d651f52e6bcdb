"""reports/index.html for a reader (issue 19): readable, linked to the checking cells, opens from file://.

One small report is built once (two tiny notebooks through the real runner,
papermill and nbconvert) and examined: the per-paper summary, claims and
observations apart, values to meaningful digits, a link to the anchor of the
cell that checked each claim, one command per claim, the environment and the
discrepancies with the papers. A headless Chromium (Debian's ``chromium``
package; the test skips when no browser is installed) opens the page from
``file://`` and checks that every link resolves and that there is no console
error.
"""
import html
import json
import re
import shutil
import subprocess
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from conftest import REPO
from sampling_lib import reporting


def _write(path, cells, smoke):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["sampling_lab"] = {"smoke_parameters": smoke}
    nbformat.write(nb, str(path))


@pytest.fixture(scope="session")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    nbdir = root / "notebooks"
    nbdir.mkdir()
    shutil.copy(REPO / "notebooks" / "discrepancies.csv", nbdir / "discrepancies.csv")
    _write(nbdir / "01_math.ipynb", [
        new_code_cell("x = 0.1\nn_draws = 1000", metadata={"tags": ["parameters"]}),
        new_markdown_cell("# Exact identities\n\nThe global rank $R_u$ of user $u$, and\n"
                          "$$\\sum_{k=1}^{n} f(k) = \\frac{N}{n}$$"),
        new_code_cell("import numpy as np\nfrom sampling_lib.reporting import ClaimLedger\n"
                      "ledger = ClaimLedger('01_math')"),
        new_code_cell("ledger.check_close('KDD20-eq4-sum', 'KDD20 eq 4', 'the closed form equals the *sum*',\n"
                      "                   measured=x + 0.2, expected=0.3, rtol=1e-12)"),
        new_code_cell("rng = np.random.default_rng(0)\nm = rng.random(n_draws).mean()\n"
                      "ledger.check_z('TORS24-mc', 'TORS24 eq 42', 'Monte Carlo mean vs 1/2', estimate=m,\n"
                      "               expected=0.5, se=np.sqrt(1 / 12 / n_draws))\n"
                      "ledger.check_close('AP25-tiny', 'AP25 Thm 4.2', 'a difference that is zero',\n"
                      "                   measured=-8.548717289613705e-15, expected=0, atol=1e-12)"),
        new_code_cell("ledger.finalize()"),
    ], {"x": 0.1, "n_draws": 100})
    _write(nbdir / "02_data.ipynb", [
        new_code_cell("bound = 0.15", metadata={"tags": ["parameters"]}),
        new_code_cell("from sampling_lib.reporting import ClaimLedger\nledger = ClaimLedger('02_data')\n"
                      "ledger.check_true('LAB-shape', 'sampling-lab', 'the table has 3 rows', passed=True,\n"
                      "                  measured=3, expected=3)"),
        new_code_cell("ledger.check_le('S08-T4-recall-bound', 'TORS24 Table 4',\n"
                      "                'Recall@50 relative error below 15% for every model (this dataset)',\n"
                      "                measured=0.173, bound=bound, observation=True)\n"
                      "ledger.observe('TORS24-T5-MN', 'TORS24 Table 5', 'MN is among the two best', holds=True)"),
        new_code_cell("ledger.finalize()"),
    ], {"bound": 0.2})
    out = root / "reports"
    runs = reporting.run_notebooks(out, notebooks_dir=nbdir, log=lambda m: None)
    assert all(r.ok for r in runs), [(r.name, r.error) for r in runs]
    return {"root": root, "nbdir": nbdir, "out": out, "html": (out / "index.html").read_text(),
            # commit labels and cell ids are hex strings that can look numeric ("1234e567"): read as text
            "claims": pd.read_csv(out / "claims.csv", dtype={"commit": str, "cell_id": str})}


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "href" in a:
            self.links.append(a["href"])


def _parse(text):
    p = _Links()
    p.feed(text)
    return p


# --------------------------------------------------------------------------- content


@pytest.mark.notebooks
def test_claims_and_observations_are_apart_with_a_summary_per_paper(report):
    html = report["html"]
    claims, obs = html.split("id='claims'", 1)[1].split("id='observations'", 1)
    assert "KDD20-eq4-sum" in claims and "S08-T4-recall-bound" not in claims
    assert "S08-T4-recall-bound" in obs and "does not hold" in obs and "TORS24-T5-MN" in obs
    assert "4 of 4 claims pass</b>; 2 observations (1 hold, 1 do not)" in html
    summary = html.split("id='papers'", 1)[1].split("</table>", 1)[0]
    rows = {m[0]: m[1:] for m in re.findall(
        r"href='#paper-([\w-]+)'>.*?<td class='num'>(\d+ / \d+)</td><td class='num'>(\d+ / \d+)</td>", summary)}
    assert rows == {"KDD20": ("1 / 1", "0 / 0"), "TORS24": ("1 / 1", "1 / 2"), "AP25": ("1 / 1", "0 / 0"),
                    "sampling-lab": ("1 / 1", "0 / 0")}


@pytest.mark.notebooks
def test_values_are_formatted_and_raw_values_stay_in_the_csv(report):
    html, df = report["html"], report["claims"]
    assert "-8.548717289613705e-15" in df.measured.astype(str).tolist()       # raw in claims.csv
    assert ">-8.5e-15<" in html and "title='-8.548717289613705e-15'" in html  # shown short, raw on hover
    assert ">0.3<" in html and "0.30000000000000004<" not in html               # rtol 1e-12: 12 digits, rounded
    assert "0.3479611844281517" not in html


@pytest.mark.notebooks
def test_each_claim_links_to_the_anchor_of_its_cell(report):
    out, df = report["out"], report["claims"]
    by_id = {}
    for name in df.notebook.unique():
        by_id.update({c.id: c for c in nbformat.read(str(out / f"{name}.ipynb"), as_version=4).cells})
    for _, row in df.iterrows():
        cell = by_id[row.cell_id]
        assert row.claim_id in cell.source, (row.claim_id, cell.source)   # the cell that checks it
    page = _parse(report["html"])
    target = _parse((out / "01_math.html").read_text())
    links = [h for h in page.links if h.startswith("01_math.html#")]
    assert len(links) == 3 and len(set(links)) == 2     # two claims are checked in the same cell
    for h in links:
        assert h.split("#", 1)[1] in target.ids


@pytest.mark.notebooks
def test_index_shows_the_command_per_claim_and_the_environment(report):
    html, df = report["html"], report["claims"]
    for cid in df.claim_id:
        assert f"sampling-lib run --claim {cid}" in html
    env = json.loads((report["out"] / "environment.json").read_text())
    assert env["commit"] in html and "BLAS" in html and str(env["cpu_count"]) in html
    assert env["packages"]["numpy"] in html and env["blas"] in html
    for col in ("kind", "cell_id", "run", "commit", "environment"):
        assert col in df.columns
    assert df.commit.str.startswith(env["commit"][:12]).all()
    assert df.environment.str.contains(f"numpy {env['packages']['numpy']}").all()
    assert df.environment.str.contains("BLAS").all() and df.environment.str.contains("CPUs").all()


@pytest.mark.notebooks
def test_notebook_html_references_no_remote_script(report):
    # issue 27: MathJax came from a CDN, so offline a reader saw raw $R_u$; now a file beside the HTML
    out = report["out"]
    for page in sorted(out.glob("[0-9][0-9]_*.html")):
        text = page.read_text(encoding="utf-8")
        srcs = re.findall(r"<(?:script|link|img|iframe)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)", text)
        remote = [u for u in srcs if re.match(r"(?i)(https?:)?//", u)]
        assert remote == [], f"{page.name} loads {remote}"
        inline = " ".join(re.findall(r"<script\b[^>]*>(.*?)</script>", text, flags=re.S))
        assert not re.search(r"(?i)https?://", inline), f"{page.name}: a script fetches a remote URL"
        assert f'<script src="{reporting.rendering.MATHJAX_FILE}"></script>' in text
    mathjax = out / reporting.rendering.MATHJAX_FILE
    assert mathjax.stat().st_size > 1_000_000 and "MathJax" in mathjax.read_text(encoding="utf-8")[:100_000]
    assert reporting.rendering.MATHJAX_FILE in reporting.folders.read_marker(out)   # part of the report


@pytest.mark.notebooks
def test_discrepancies_with_the_papers_have_their_own_section(report):
    section = report["html"].split("id='discrepancies'", 1)[1]
    d = reporting.read_discrepancies(REPO / "notebooks" / "discrepancies.csv")
    assert len(d) >= 5
    for paper in d.paper:
        assert html.escape(paper) in section
    assert "f(k;a) <em>increases</em> with a" in section


def test_readme_shows_the_discrepancies_file():
    d = reporting.read_discrepancies(REPO / "notebooks" / "discrepancies.csv")
    readme = (REPO / "README.md").read_text()
    for _, r in d.iterrows():
        cells = [r.paper, r.statement, r.measured, ", ".join(r.notebooks.split())]
        row = "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
        assert row in readme, f"README.md lacks the row of notebooks/discrepancies.csv:\n{row}"


def test_committed_notebooks_have_unique_stable_cell_ids():
    # the index links to `NN.html#cell-id=<id>`: ids must be committed (nbformat >= 4.5) and unique
    for path in reporting.list_notebooks(REPO / "notebooks"):
        nb = nbformat.read(str(path), as_version=4)
        ids = [c.get("id") for c in nb.cells]
        assert all(ids) and len(set(ids)) == len(ids), path.name


# --------------------------------------------------------------------------- in a real browser


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium installed (Debian: apt-get install chromium)")


class _CDP:
    """A minimal Chrome DevTools Protocol client over one websocket."""

    def __init__(self, ws_url):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method, timeout=30):
        end = time.monotonic() + timeout
        for e in self.events:
            if e.get("method") == method:
                return e
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    exe = _browser()
    pytest.importorskip("websocket", reason="websocket-client is needed to drive the browser")
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        port = None
        end = time.monotonic() + 30
        while time.monotonic() < end:
            line = proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
            if not line and proc.poll() is not None:
                break
        if port is None:
            pytest.skip(f"{exe} did not start in headless mode")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        cdp = _CDP(pages[0]["webSocketDebuggerUrl"])
        yield cdp
        cdp.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


_LINKS_JS = """
(() => {
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id);
  return {links, ids, rows: document.querySelectorAll('tr.rec').length,
          shown: document.getElementById('shown').textContent};
})()
"""


@pytest.mark.notebooks
def test_index_in_headless_chromium(report, browser):
    out = report["out"]
    cdp = browser
    for domain in ("Page", "Runtime", "Log"):
        cdp.call(f"{domain}.enable")
    cdp.events.clear()
    url = (out / "index.html").as_uri()
    cdp.call("Page.navigate", url=url)
    cdp.wait_for("Page.loadEventFired")
    page = cdp.evaluate(_LINKS_JS)

    # the filter script ran: it counts the rows; typing filters them
    assert page["rows"] == 6 and page["shown"] == "6 of 6 rows shown"
    shown = cdp.evaluate("(() => { const b = document.getElementById('filter'); b.value = 'recall-bound';"
                         " b.dispatchEvent(new Event('input')); return document.getElementById('shown')"
                         ".textContent; })()")
    assert shown == "1 of 6 rows shown"
    # no table is left with its header alone: the groups the filter emptied are hidden
    visible = cdp.evaluate("Array.from(document.querySelectorAll('table')).filter(t => t.offsetParent !== null"
                           " && t.querySelector('tr.rec') && !t.querySelector('tr.rec:not(.hidden)')).length")
    assert visible == 0
    assert cdp.evaluate("Array.from(document.querySelectorAll('div.group')).filter(g => g.offsetParent !== null)"
                        ".map(g => g.querySelector('h3').textContent)") == ["TORS24"]   # the observation's
    shown = cdp.evaluate("(() => { const b = document.getElementById('filter'); b.value = '';"
                         " b.dispatchEvent(new Event('input')); const c = document.getElementById('notok');"
                         " c.checked = true; c.dispatchEvent(new Event('change'));"
                         " return document.getElementById('shown').textContent; })()")
    assert shown == "1 of 6 rows shown"   # only the observation that does not hold

    errors = [e for e in cdp.events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == [], errors

    # every link resolves: local files exist, anchors exist in their target page
    assert page["links"], "no links"
    own_ids = set(page["ids"])
    targets = {}
    for href in page["links"]:
        u = urlparse(href)
        assert u.scheme == "file", f"the index must work offline; found {href}"
        path = Path(unquote(u.path))
        assert path.exists(), f"broken link {href}"
        if u.fragment:
            if path == out / "index.html":
                ids = own_ids
            else:
                if path not in targets:
                    targets[path] = _parse(path.read_text(encoding="utf-8")).ids
                ids = targets[path]
            assert unquote(u.fragment) in ids, f"missing anchor {href}"
    # and a cell anchor works in the browser too
    cell_link = next(h for h in page["links"] if "01_math.html#cell-id=" in h)
    cdp.events.clear()
    cdp.call("Page.navigate", url=cell_link)
    cdp.wait_for("Page.loadEventFired")
    frag = unquote(urlparse(cell_link).fragment)
    assert cdp.evaluate(f"document.getElementById({json.dumps(frag)}) !== null")

    # the notebook typesets its math offline (MathJax from the file beside it; nothing fetched remotely)
    cdp.call("Network.enable")
    cdp.call("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1,
             uploadThroughput=-1)
    cdp.events.clear()
    cdp.call("Page.navigate", url=(out / "01_math.html").as_uri())
    cdp.wait_for("Page.loadEventFired")
    end = time.monotonic() + 30
    while time.monotonic() < end and cdp.evaluate("document.querySelectorAll('mjx-container').length") < 3:
        time.sleep(0.2)
    assert cdp.evaluate("document.querySelectorAll('mjx-container').length") == 3   # $R_u$, $u$ and the sum
    assert "$R_u$" not in cdp.evaluate("document.body.innerText")
    urls = [e["params"]["request"]["url"] for e in cdp.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(("file:", "data:")) for u in urls), urls


# --------------------------------------------------------------------------- one command per claim


@pytest.mark.notebooks
def test_run_one_claim_with_smoke_parameters(report, capsys):
    # passes with smoke parameters (n_draws = 100): exit 0 and the claim's row, fresh and recorded
    rc = reporting.main(["run", "--claim", "TORS24-mc", "--smoke", "--out", str(report["out"]),
                         "--notebooks", str(report["nbdir"])])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "running 01_math.ipynb with smoke parameters" in text
    assert text.count("[pass] claim TORS24-mc (TORS24 eq 42): Monte Carlo mean vs 1/2") == 2
    assert not list(report["out"].parent.glob(".reports-tmp-*"))


@pytest.mark.notebooks
def test_run_one_failing_claim_exits_non_zero(report, capsys):
    # the smoke value x = 0.1 keeps the claim; a notebook whose smoke parameter breaks it must fail
    broken = report["root"] / "broken"
    shutil.copytree(report["nbdir"], broken)
    nb = nbformat.read(str(broken / "01_math.ipynb"), as_version=4)
    nb.metadata["sampling_lab"]["smoke_parameters"]["x"] = 0.2
    nbformat.write(nb, str(broken / "01_math.ipynb"))
    before = (report["out"] / "claims.csv").read_text()
    rc = reporting.main(["run", "--claim", "KDD20-eq4-sum", "--smoke", "--out", str(report["out"]),
                         "--notebooks", str(broken)])
    text = capsys.readouterr().out
    assert rc == 1, text
    assert "[FAIL] claim KDD20-eq4-sum" in text and "[pass] claim KDD20-eq4-sum" in text   # fresh vs recorded
    assert (report["out"] / "claims.csv").read_text() == before      # the report is not modified


def test_unknown_or_ambiguous_claim_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "reports"
    out.mkdir()
    pd.DataFrame({"notebook": ["01_a", "02_b", "02_b"], "claim_id": ["same", "same", "KDD20-eq4-mc"],
                  "source": "KDD20 eq 4", "description": "d", "measured": 1, "expected": 1, "tolerance": "",
                  "passed": True}).to_csv(out / "claims.csv", index=False)
    assert reporting.main(["run", "--claim", "KDD20-eq4-m", "--out", str(out)]) == 2   # refused input: 2
    assert "claim 'KDD20-eq4-m' is not in the ledger; close matches: KDD20-eq4-mc" in capsys.readouterr().err
    assert reporting.main(["run", "--claim", "same", "--out", str(out)]) == 2
    assert "recorded by several notebooks (01_a, 02_b); add --only NN" in capsys.readouterr().err
    assert reporting.main(["run", "--claim", "x", "--out", str(tmp_path / "none")]) == 2
    assert "no claims ledger at" in capsys.readouterr().err
