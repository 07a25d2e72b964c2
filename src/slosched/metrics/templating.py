"""Jinja2 templates for the HTML pages (``report.html``, the sweep page), autoescaped.

Every value a template prints is HTML-escaped unless the template says ``|safe``, and only values built
here are marked safe (the stylesheet, the loader script, JSON that escapes ``<``, ``>`` and ``&``), so a
policy, scenario or tenant name cannot inject markup, whatever it contains.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2


@cache
def _environment(directory: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt variable fails loudly instead of rendering empty
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(directory: Path, name: str, **context: Any) -> str:
    """Render template ``name`` from ``directory`` (a package's ``templates`` folder) with ``context``."""
    return _environment(str(directory)).get_template(name).render(**context)
