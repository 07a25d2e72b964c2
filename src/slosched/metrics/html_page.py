"""The page around ``report.html``'s sections: blocks (note, table, figure), the template, plotly.js.

Size: plotly.js is 4.8 MB of JavaScript, more than half the old 9 MB page. It is inlined once, gzipped
and base64-encoded (about 2 MB), and unpacked by the browser's own ``DecompressionStream`` (Chrome 80+,
Firefox 113+, Safari 16.4+), so the page stays one file that works offline. Each figure is a JSON block
(numbers as plotly's typed arrays) drawn by one loader script after plotly.js is unpacked; plotly's
layout template (6 kB) is written once instead of once per figure.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.json import to_json_plotly
from plotly.offline import get_plotlyjs

from slosched.metrics.templating import render

TEMPLATES = Path(__file__).parent / "templates"
PLOTLY_TEMPLATE = "plotly_white"
_CONFIG = {"displaylogo": False, "responsive": True}


@dataclass(frozen=True, slots=True)
class Note:
    text: str
    kind: str = "note"


@dataclass(frozen=True, slots=True)
class Table:
    """``best[c - 1]``: the row indices to highlight in column ``c``."""

    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    best: Sequence[set[int]] = ()
    css_class: str = ""
    kind: str = "table"

    def marked(self, row: int, col: int) -> bool:
        return 0 < col <= len(self.best) and row in self.best[col - 1]


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    json: str
    kind: str = "figure"


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    anchor: str
    blocks: list[Note | Table | Figure] = field(default_factory=list)


def figure_block(figure: go.Figure, name: str) -> Figure:
    """``figure`` as a JSON block without its layout template (the page carries that once)."""
    document = figure.to_plotly_json()
    document["layout"].pop("template", None)
    return Figure(name=name, json=_script_safe(to_json_plotly(document, engine="json")))


def _script_safe(text: str) -> str:
    # Inside <script> only "</" could end the block early; plotly's encoder already writes \u003c for "<",
    # this makes sure of it for any encoder, and of ">" and "&" too.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def packed_plotlyjs() -> str:
    """plotly.js gzipped (mtime 0, so the same bytes every time) and base64-encoded."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)).decode("ascii")


def _template_json() -> str:
    return _script_safe(to_json_plotly(pio.templates[PLOTLY_TEMPLATE].to_plotly_json(), engine="json"))


def write_page(
    path: Path, title: str, description: str, files: Sequence[str], sections: Sequence[Section], css: str
) -> Path:
    document = render(
        TEMPLATES,
        "report.html.j2",
        title=title,
        description=description,
        files=files,
        sections=sections,
        css=css,
        plotly_js=packed_plotlyjs(),
        plotly_template=_template_json(),
        config=json.dumps(_CONFIG),
    )
    path.write_text(document, encoding="utf-8")
    return path
