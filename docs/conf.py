"""Sphinx configuration of topoplan's documentation site.

Build it with ``make docs`` (HTML in ``docs/_build/html``); ``tests/test_docs_site.py`` builds it with
warnings as errors. Pages are Markdown (MyST); the API reference is generated from the package's numpydoc
docstrings (autodoc + numpydoc); the theme is the PyData theme.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document the checkout's package, installed or not

from topoplan import __version__  # noqa: E402  (after the path above)

project = "topoplan"
author = "the topoplan authors"
copyright = "2026, the topoplan authors"
version = release = __version__

extensions = [
    "myst_parser",          # Markdown pages
    "sphinx.ext.autodoc",   # the API reference, from the docstrings
    "numpydoc",             # numpydoc sections (Parameters, Returns, Examples, ...)
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# code blocks without a language are terminal sessions and outputs: shown as they are, not highlighted
highlight_language = "none"

# MyST: anchors for headings down to level 3, so pages can link to a section (`circuits.md#heading`)
myst_heading_anchors = 3

# autodoc + numpydoc: a module's members are the names it lists in __all__, in source order; the types are
# in the numpydoc Parameters sections, so signatures show no annotations
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autosummary_generate = False  # numpydoc loads autosummary; no page here uses it

html_theme = "pydata_sphinx_theme"
html_title = f"topoplan {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 8,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False

_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def _module_sections_as_rubrics(app, what, name, obj, options, lines):
    """numpydoc formats the sections of functions and classes, not of module docstrings: there an underlined
    ``Examples`` would become a section of the page, with the same title (and anchor) once per module. Make
    each underlined heading of a module docstring a rubric, as numpydoc does for functions."""
    if what != "module":
        return
    out, i = [], 0
    while i < len(lines):
        title = lines[i].strip()
        if title and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) and len(lines[i + 1].strip()) >= len(title):
            out += [f".. rubric:: {title}", ""]
            i += 2
        else:
            out.append(lines[i])
            i += 1
    lines[:] = out


# A page links to a section of the README as GitHub shows it (../README.md#a-short-tour); on the site the README
# is the index page (index.md includes it), whose headings have the same anchors.
_README_LINK = re.compile(r"\]\(\.\./README\.md(#[^)\s]*)?\)")


def _readme_links_to_index(app, docname, source):
    if "/" not in docname:   # a page beside index.md
        source[0] = _README_LINK.sub(lambda m: f"](index.md{m.group(1) or ''})", source[0])


def setup(app):
    app.connect("autodoc-process-docstring", _module_sections_as_rubrics)
    app.connect("source-read", _readme_links_to_index)
    # numpydoc also parses every docstring a second time, to read a signature written on its first line (the
    # way C extensions document theirs). Every documented object here is Python, whose signature autodoc reads
    # itself, so that listener only costs time: about a quarter of the API reference's build (measured).
    from numpydoc.numpydoc import mangle_signature

    for listener in list(app.events.listeners["autodoc-process-signature"]):
        if listener.handler is mangle_signature:
            app.disconnect(listener.id)
