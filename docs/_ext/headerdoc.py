"""headerdoc: the C contract text comes from the header comments, not from the pages.

The public headers (capi/include/tether/*.h) are the one place where a C
declaration's contract is written. A page quotes it instead of restating it::

    .. c:function:: tether_status_t tether_pool_resource_create(...)

       .. tether-header-comment:: tether_pool_resource_create

The directive inserts the ``/** ... */`` comment that precedes the declaration
of that name (a function, a struct or enum typedef, a macro) as paragraphs:
blank comment lines separate paragraphs, ```name``` and names followed by
``()`` become literals. No reST parsing of the comment, so header text never
breaks the docs build. A name without such a comment is an error (the build
runs with -W), so a declaration cannot lose its contract silently.
"""

from __future__ import annotations

import glob
import os
import re

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

_COMMENTS: dict[str, dict[str, str]] = {}  # include dir -> name -> comment text


def header_comments(include_dir: str) -> dict[str, str]:
    """name -> the text of the /** */ comment right before its declaration, in every public header."""
    cached = _COMMENTS.get(include_dir)
    if cached is not None:
        return cached
    out: dict[str, str] = {}
    decl = re.compile(r"/\*\*(?P<body>(?:(?!\*/).)*?)\*/\s*"
                      r"(?P<decl>TETHER_API[^;]*?\b(?P<fn>tether_\w+)\s*\(|"
                      r"typedef\s+(?:struct|enum)\s+(?P<tag>tether_\w+)|"
                      r"#\s*define\s+(?P<macro>TETHER_\w+))", re.S)
    for path in sorted(glob.glob(os.path.join(include_dir, "*.h"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in decl.finditer(text):
            name = m.group("fn") or m.group("tag") or m.group("macro")
            out[name] = _clean(m.group("body"))
    _COMMENTS[include_dir] = out
    return out


def _clean(body: str) -> str:
    lines = []
    for line in body.splitlines():
        line = re.sub(r"^\s*\*( |$)", "", line.rstrip())
        lines.append(line.strip())
    return "\n".join(lines).strip()


_INLINE = re.compile(r"`([^`]+)`|\b(tether_\w+\(\)|TETHER_\w+)")


def _paragraph(text: str) -> nodes.paragraph:
    para = nodes.paragraph()
    pos = 0
    for m in _INLINE.finditer(text):
        if m.start() > pos:
            para += nodes.Text(text[pos:m.start()])
        para += nodes.literal(text=m.group(1) or m.group(2))
        pos = m.end()
    if pos < len(text):
        para += nodes.Text(text[pos:])
    return para


class HeaderComment(SphinxDirective):
    """``.. tether-header-comment:: NAME``: the header's comment of NAME, as paragraphs."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        root = self.config.apicheck_root
        include_dir = os.path.join(root, "capi", "include", "tether")
        for path in glob.glob(os.path.join(include_dir, "*.h")):
            self.env.note_dependency(path)
        text = header_comments(include_dir).get(name)
        if not text:
            logger.warning(f"headerdoc: no /** */ comment precedes {name} in capi/include/tether/*.h",
                           location=self.get_location(), type="headerdoc")
            return []
        out: list[nodes.Node] = []
        for block in re.split(r"\n\s*\n", text):
            out.append(_paragraph(" ".join(block.split())))
        return out


def setup(app):
    app.add_directive("tether-header-comment", HeaderComment)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
