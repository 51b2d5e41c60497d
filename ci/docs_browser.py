"""Check the built HTML docs in a real browser (Debian's headless Chromium).

Called by ci/docs_browser.sh after ci/docs.sh. No CDP and no browser driver
(pyppeteer/playwright would download a browser): Chromium loads a small probe
page (written into the build, removed afterwards) with
``--allow-file-access-from-files``, so the probe may read same-origin file://
pages. The probe's script, running in Chromium,

1. crawls from index.html: it loads each page in an iframe of a fixed width and
   follows the toctree links (the main-text ``.toctree-wrapper`` and the
   navigation sidebars), breadth first;
2. on every page measures each code block and API signature: one is *cut off*
   when its content is wider than its box and the box does not scroll
   (overflow visible/hidden/clip), or when the box reaches past the article's
   right edge (hidden under the sidebar or off the page);

and writes the results as JSON into the DOM, which ``--dump-dom`` prints. This
script then asserts: every content page Sphinx wrote was reached, each loaded
with a title, and no code block is cut off, at every width checked. It also
takes a screenshot of every page (``--screenshot``) into the output folder to
look at.

Usage: python ci/docs_browser.py HTML_DIR OUT_DIR [--chromium PATH] [--self-test]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

WIDTHS = (1280, 800)  # desktop, and a narrow window where the sidebars collapse
PROBE_NAME = "_browser_probe.html"
NOT_CONTENT = {"genindex.html", "search.html", "py-modindex.html", PROBE_NAME}

PROBE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>probe</title></head>
<body>
<pre id="result">pending</pre>
<script>
const WIDTH = __WIDTH__;
const frame = document.createElement("iframe");
frame.style.width = WIDTH + "px";
frame.style.height = "900px";
document.body.appendChild(frame);
const base = new URL("index.html", location.href);
const queue = [base.href];
const seen = new Set(queue);
const pages = {};

function pageKey(href) {
  const u = new URL(href);
  u.hash = ""; u.search = "";
  return u.href;
}

function check(doc, win) {
  const article = doc.querySelector(".bd-article") || doc.querySelector("article") || doc.body;
  const limit = Math.min(article.getBoundingClientRect().right, win.innerWidth) + 1;
  const cut = [];
  let blocks = 0;
  for (const el of doc.querySelectorAll("div.highlight pre, pre.literal-block, dl > dt.sig")) {
    if (el.closest(".d-none")) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;  // not displayed
    blocks += 1;
    const ox = win.getComputedStyle(el).overflowX;
    const scrolls = ox === "auto" || ox === "scroll";
    const text = el.textContent.trim().slice(0, 80);
    if (!scrolls && el.scrollWidth > el.clientWidth + 1)
      cut.push({why: "content wider than its box, which does not scroll (overflow-x: " + ox + ")",
                text, scrollWidth: el.scrollWidth, clientWidth: el.clientWidth});
    else if (r.right > limit)
      cut.push({why: "box reaches past the article's right edge", text,
                right: Math.round(r.right), limit: Math.round(limit)});
  }
  return {blocks, cut};
}

function links(doc) {
  const out = [];
  const sel = ".toctree-wrapper a.reference.internal, nav.bd-docs-nav a.reference.internal, " +
              ".bd-navbar-elements a.nav-link, .toctree-l1 > a, .toctree-l2 > a";
  for (const a of doc.querySelectorAll(sel)) {
    const href = a.getAttribute("href");
    if (!href || href.startsWith("http:") || href.startsWith("https:") || href.startsWith("#")) continue;
    out.push(pageKey(new URL(href, doc.location.href).href));
  }
  return out;
}

function next() {
  if (queue.length === 0) {
    document.getElementById("result").textContent = JSON.stringify({width: WIDTH, pages});
    return;
  }
  const href = queue.shift();
  frame.onload = () => {
    const doc = frame.contentDocument, win = frame.contentWindow;
    let entry;
    try {
      entry = {title: doc.title, h1: (doc.querySelector("h1") || {}).textContent || "", ...check(doc, win)};
      for (const l of links(doc)) if (!seen.has(l)) { seen.add(l); queue.push(l); }
    } catch (e) {
      entry = {error: String(e)};
    }
    pages[href] = entry;
    setTimeout(next, 0);
  };
  frame.src = href;
}
next();
</script>
</body></html>
"""


def chromium_cmd(chromium: str, *args: str) -> list[str]:
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", "--mute-audio", *args]


def content_pages(html: Path) -> set[str]:
    pages = set()
    for p in html.rglob("*.html"):
        rel = p.relative_to(html)
        if rel.parts[0].startswith("_") or rel.as_posix() in NOT_CONTENT:
            continue
        pages.add(rel.as_posix())
    return pages


def probe(chromium: str, html: Path, width: int) -> dict:
    page = html / PROBE_NAME
    page.write_text(PROBE.replace("__WIDTH__", str(width)), encoding="utf-8")
    try:
        proc = subprocess.run(
            chromium_cmd(chromium, "--allow-file-access-from-files", "--virtual-time-budget=60000",
                         f"--window-size={width + 40},1000", "--dump-dom", page.resolve().as_uri()),
            capture_output=True, text=True, timeout=300)
    finally:
        page.unlink()
    m = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, re.S)
    if not m or m.group(1) == "pending":
        raise SystemExit(f"docs_browser: the probe did not finish at width {width}\n{proc.stderr[-2000:]}")
    text = m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    return json.loads(text)


def check(chromium: str, html: Path, out: Path, screenshots: bool = True) -> list[str]:
    """Every failure found in the built pages under html (empty: all good)."""
    html = html.resolve()
    out.mkdir(parents=True, exist_ok=True)
    expected = content_pages(html)
    failures: list[str] = []
    report = {}

    def rel(href: str) -> str:
        return Path(re.sub(r"^file://", "", href)).resolve().relative_to(html).as_posix()

    for width in WIDTHS:
        result = probe(chromium, html, width)
        report[width] = result
        reached = {rel(k) for k in result["pages"]}
        for missing in sorted(expected - reached):
            failures.append(f"width {width}: {missing} is not reachable from index.html through the toctree")
        for href, entry in sorted(result["pages"].items()):
            name = rel(href)
            if "error" in entry:
                failures.append(f"width {width}: {name}: {entry['error']}")
                continue
            if not entry["title"] or not entry["h1"]:
                failures.append(f"width {width}: {name}: no title or heading (did it load?)")
            for c in entry["cut"]:
                failures.append(f"width {width}: {name}: code block cut off ({c['why']}): {c['text']!r} {c}")
        blocks = sum(e.get("blocks", 0) for e in result["pages"].values())
        print(f"docs_browser: width {width}px: {len(reached)} pages reached from index.html "
              f"({len(expected)} content pages built), {blocks} code blocks and signatures measured")
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")

    if screenshots:
        for page in sorted(expected):
            shot = out / (page.replace("/", "_").removesuffix(".html") + ".png")
            subprocess.run(chromium_cmd(chromium, f"--window-size={WIDTHS[0]},1600",
                                        f"--screenshot={shot}", (html / page).as_uri()),
                           capture_output=True, text=True, timeout=120)
            if not shot.is_file() or shot.stat().st_size == 0:
                failures.append(f"no screenshot of {page}")
        print(f"docs_browser: screenshots of {len(expected)} pages in {out}")
    return failures


SELF_TEST_INDEX = """<!DOCTYPE html><html><head><title>index</title></head><body><article class="bd-article">
<h1>index</h1><div class="toctree-wrapper"><ul><li class="toctree-l1">
<a class="reference internal" href="a.html">a</a></li><li class="toctree-l1">
<a class="reference internal" href="b.html">b</a></li></ul></div>
<div class="highlight"><pre>short line, fits</pre></div></article></body></html>"""
SELF_TEST_A = """<!DOCTYPE html><html><head><title>a</title></head><body><article class="bd-article">
<h1>a</h1><div class="highlight"><pre style="width: 200px; overflow: hidden">
this_line_is_much_wider_than_two_hundred_pixels_and_the_block_hides_the_rest_of_it()</pre></div>
</article></body></html>"""

SELF_TEST_B = """<!DOCTYPE html><html><head><title>b</title></head><body><article class="bd-article"
style="width: 400px; overflow: hidden"><h1>b</h1><div class="highlight"><pre style="width: 900px">
a box wider than the article, clipped by it</pre></div></article></body></html>"""


def self_test(chromium: str, tmp: Path) -> int:
    """The check must fail on a page it cannot reach and on cut-off blocks of both kinds."""
    html = tmp / "html"
    html.mkdir(parents=True, exist_ok=True)
    (html / "index.html").write_text(SELF_TEST_INDEX)
    (html / "a.html").write_text(SELF_TEST_A)
    (html / "b.html").write_text(SELF_TEST_B)
    (html / "orphan.html").write_text(SELF_TEST_A.replace("<title>a", "<title>orphan"))
    failures = check(chromium, html, tmp / "out", screenshots=False)
    want = {"orphan.html is not reachable": 2, "a.html: code block cut off (content wider": 2,
            "b.html: code block cut off (box reaches past": 2}
    for needle, count in want.items():
        got = sum(needle in f for f in failures)
        if got != count:
            print(f"docs_browser: self-test FAILED: {got} failures with {needle!r}, expected {count}:",
                  *failures, sep="\n  ", file=sys.stderr)
            return 1
    if any(": index.html:" in f for f in failures):
        print("docs_browser: self-test FAILED: the good page was flagged", *failures, sep="\n  ", file=sys.stderr)
        return 1
    print("docs_browser: self-test passed (an unreachable page and both kinds of cut-off block are caught)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path, help="the built HTML (docs/_build/html)")
    ap.add_argument("out", type=Path, help="where screenshots and report.json go")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    ap.add_argument("--self-test", action="store_true",
                    help="first check that the check fails on bad pages (written under OUT/self-test)")
    args = ap.parse_args(argv)
    if not args.chromium:
        print("docs_browser: no chromium (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    if args.self_test and self_test(args.chromium, args.out.resolve() / "self-test") != 0:
        return 1
    failures = check(args.chromium, args.html, args.out)
    for f in failures:
        print(f"docs_browser: FAIL {f}", file=sys.stderr)
    if failures:
        return 1
    print("docs_browser: every page reachable, no code block cut off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
