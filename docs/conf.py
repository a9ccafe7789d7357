"""Sphinx configuration of the scrapy-aopic docs.

Build (warnings are errors, as in CI)::

    python -m sphinx -W -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))  # the package, for the generated settings reference

import scrapy_aopic  # noqa: E402

project = "scrapy-aopic"
author = "the scrapy-aopic authors"
copyright = "the scrapy-aopic authors"  # noqa: A001 - Sphinx's name
version = release = scrapy_aopic.__version__

extensions = ["aopic_docs"]

root_doc = "index"
exclude_patterns = ["_build", "_ext", "_static", "README*", "**/.*"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_theme = "alabaster"
html_theme_options = {
    "description": "AOPIC crawl ordering for Scrapy broad crawls",
    "fixed_sidebar": True,
    "show_relbars": True,
}
html_title = f"scrapy-aopic {release}"
pygments_style = "sphinx"
# Keep the build independent of the network (no intersphinx) and quick.
html_copy_source = False
