"""Sphinx configuration of the tether documentation.

The pages are written by hand (no autodoc): the Python package is a compiled
extension, and the docs must build without it. Instead, the local extension
``_ext/apicheck.py`` compares the pages with the sources - the C headers, the
C++ wrapper and the Python package - and warns (an error under ``-W``) when a
documented name does not exist or a public one is not documented.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "_ext"))


def _header_version():
    """MAJOR.MINOR.PATCH from capi/include/tether/version.h (the one place it lives)."""
    with open(os.path.join(ROOT, "capi", "include", "tether", "version.h"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(rf"#define TETHER_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def _header_c_types():
    """Every typedef name tether_*_t declared in capi/include/tether/*.h."""
    import glob
    names = set()
    for path in glob.glob(os.path.join(ROOT, "capi", "include", "tether", "*.h")):
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r"\b(tether_\w+_t)\s*;", f.read()))
    return sorted(names)


project = "tether"
author = "tether developers"
copyright = "tether developers"
release = _header_version()
version = release

extensions = ["apicheck", "headerdoc"]

# Where apicheck finds the sources it checks the pages against.
apicheck_root = ROOT

root_doc = "index"
exclude_patterns = ["_build"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["tether.css"]
# pydata-sphinx-theme (as RAPIDS uses): docs/requirements.txt. Everything it
# would fetch from the network (icons, analytics, a version switcher) is off:
# the build and the pages work offline.
html_theme = "pydata_sphinx_theme"
html_title = f"tether {release}"
html_theme_options = {
    "navbar_align": "left",
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "show_nav_level": 2,
    "navigation_depth": 3,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
    "pygments_light_style": "default",
    "pygments_dark_style": "monokai",
    "primary_sidebar_end": [],
}
html_context = {"default_mode": "auto"}
html_show_sourcelink = False


def _no_empty_section_nav(app, pagename, templatename, context, doctree):
    """Top-level pages have no section below them in the navigation bar: drop
    the (empty) left sidebar there, so the text and the code get its width.
    Pages in a section (hooks/, resources/, ...) keep the section's navigation."""
    if "/" not in pagename:
        context["sidebars"] = []


def setup(app):
    app.connect("html-page-context", _no_empty_section_nav)

primary_domain = None
highlight_language = "none"

# Every cross-reference must resolve, except the standard types the pages
# mention (they have no declaration here, and there is no intersphinx: the
# build never touches the network).
nitpicky = True
nitpick_ignore = [
    ("c:identifier", name)
    for name in ("size_t", "uint32_t", "int32_t", "uint64_t", "uintptr_t")
] + [
    ("cpp:identifier", name)
    for name in ("std", "tether", "std::size_t", "std::uint32_t", "std::string", "size_t", "uint32_t",
                 "TETHER_OBJECT_ANY", "TETHER_IPC_HANDLE_NONE", "Stream", "Properties")
] + [
    # The C types the C++ pages mention are documented in the C domain: every
    # tether_*_t typedef of the headers (derived, so a new type needs no entry here).
    ("cpp:identifier", name) for name in _header_c_types()
] + [
    ("py:class", name)
    for name in ("int", "str", "bool", "bytes", "bytearray", "memoryview", "dict", "tuple",
                 "None", "object", "Exception", "MemoryError", "ValueError", "RuntimeError",
                 "NotImplementedError", "enum.IntEnum", "typing.NamedTuple", "BufferError",
                 "TypeError")
]

# Thrust and CUDA runtime names in tether::thrust_allocator's signatures (docs/cpp_libraries.rst).
nitpick_ignore += [("cpp:identifier", name) for name in ("thrust", "thrust::device_ptr<T>", "cudaStream_t")]

# C types in the signatures of the callback types' C++ factories (docs/resources/callback.rst).
nitpick_ignore += [("cpp:identifier", "tether_callback_vtable_t")]
