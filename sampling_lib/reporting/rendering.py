"""The HTML of an executed notebook, readable offline.

nbconvert's ``lab`` template loads MathJax 2 and require.js from a CDN (and
mermaid when a diagram is present): offline, a reader sees raw ``$R_u$``.
The runner's template extends ``lab`` and loads instead MathJax 3 from a file
beside the HTML, :data:`MATHJAX_FILE`, which :func:`render_html` writes there:
MathJax's own combined ``tex-svg-full`` component (TeX input with every
extension, SVG output with its fonts inside, so no further file is fetched)
followed by its ``ui/safe`` component (the protection nbconvert's MathJax 2
configuration asked for with ``Safe``: no ``javascript:`` links from TeX).
Both come from the ``django-static-mathjax`` package (MathJax 3.2.2 as
released, Apache 2.0; it needs no Django). require.js (only for widgets,
which the notebooks do not use) and mermaid are left out. The page then
references no remote script.
"""
from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from .folders import current_umask

__all__ = ["MATHJAX_FILE", "render_html", "write_mathjax", "mathjax_source"]

#: The MathJax file the rendered notebooks load, written beside them.
MATHJAX_FILE = "mathjax-tex-svg.js"

# MathJax 3 configured as nbconvert configures MathJax 2 ($...$ and \(...\) inline, $$...$$ and \[...\]
# displayed, \$ for a dollar sign, AMS numbering).
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
        processEscapes: true, processEnvironments: true, tags: 'ams'},
  svg: {fontCache: 'global'},
  options: {enableMenu: false}
};
</script>
<script src="MATHJAX_FILE"></script>
{%- endblock html_head_js_mathjax -%}
""".replace("MATHJAX_FILE", MATHJAX_FILE)


def mathjax_source():
    """The text of :data:`MATHJAX_FILE`: MathJax's ``tex-svg-full`` then ``ui/safe`` components."""
    from importlib import resources

    es5 = resources.files("mathjax") / "static" / "mathjax" / "es5"
    parts = [(es5 / "tex-svg-full.js").read_text(encoding="utf-8"), (es5 / "ui" / "safe.js").read_text(encoding="utf-8")]
    return "\n;\n".join(parts) + "\n"


@functools.lru_cache(maxsize=1)
def _mathjax_bytes():
    return mathjax_source().encode("utf-8")


def write_mathjax(folder):
    """Write :data:`MATHJAX_FILE` into ``folder`` unless it is there already (atomically: a worker
    of the runner may write it beside another)."""
    dst = Path(folder) / MATHJAX_FILE
    if dst.is_file() and dst.stat().st_size == len(_mathjax_bytes()):
        return dst
    fd, tmp = tempfile.mkstemp(prefix=f".{MATHJAX_FILE}-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_mathjax_bytes())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dst


@functools.lru_cache(maxsize=1)
def _html_exporter():
    """One nbconvert HTML exporter per process: its Jinja template is compiled once, not per
    notebook (0.5-1 s each on the project's machine; a runner worker renders several)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"sampling_lab.html.j2": _TEMPLATE})],
                        template_file="sampling_lab.html.j2")


def render_html(nb, out):
    """Render the notebook node ``nb`` to ``out`` and write :data:`MATHJAX_FILE` beside it.

    nbconvert's lab template: every cell is ``<div id="cell-id=<cell id>">``
    (the index links there).
    """
    out = Path(out)
    body, _ = _html_exporter().from_notebook_node(nb)
    out.write_text(body, encoding="utf-8")
    write_mathjax(out.parent)
    return out
