"""One visual identity per policy, shared by the PNG figures and the HTML report (the only style source).

A comparison often has more than ten policies (the demo has 11), and two of them often produce identical
curves (e.g. two engines that never disagree at a light load). So each policy gets a colour *and* a dash
pattern *and* a marker (lines) or hatch (bars): 12 colours, so the first 12 policies differ by colour
alone; dashes and markers cycle with periods coprime to 12 and to each other (5 and 7), so the first
``12 * 5 * 7 = 420`` policies get pairwise-distinct (colour, dash, marker) triples and no two policies
with the same colour share a dash before the 61st (or a marker before the 85th). Earlier policies are drawn wider, so an
identical later curve leaves them visible as a halo.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Okabe-Ito (colour-blind safe) without its yellow, which vanishes on white, then five Tableau 10 colours
# chosen to stay apart from those seven in hue or lightness (red, brown, lilac, teal, grey).
COLOURS = (
    "#0072B2",  # Okabe-Ito blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#E15759",  # Tableau red
    "#9C755F",  # brown
    "#B07AA1",  # lilac
    "#76B7B2",  # teal
    "#79706E",  # dark grey
)
# (plotly name, matplotlib dash): the same pattern in both renderers.
DASHES: tuple[tuple[str, str | tuple[float, tuple[float, ...]]], ...] = (
    ("solid", "-"),
    ("dash", (0, (5, 2))),
    ("dot", (0, (1, 1.5))),
    ("dashdot", (0, (5, 2, 1, 2))),
    ("longdash", (0, (9, 3))),
)
# (plotly symbol, matplotlib marker): shapes both renderers draw alike.
MARKERS = (
    ("circle", "o"),
    ("square", "s"),
    ("triangle-up", "^"),
    ("diamond", "D"),
    ("x", "x"),
    ("star", "*"),
    ("triangle-down", "v"),
)
# (plotly pattern shape, matplotlib hatch) for bars: 7, coprime to the 12 colours.
HATCHES = (
    ("", ""),
    ("/", "//"),
    (".", ".."),
    ("x", "xx"),
    ("\\", "\\\\"),
    ("+", "++"),
    ("-", "--"),
)
_WIDEST = 3.2
_NARROWEST = 1.4


@dataclass(frozen=True, slots=True)
class PolicyStyle:
    """``plotly_*`` values are plotly's names, ``mpl_*`` matplotlib's; ``width`` is in points/pixels."""

    colour: str
    plotly_dash: str
    mpl_dash: str | tuple[float, tuple[float, ...]]
    plotly_marker: str
    mpl_marker: str
    plotly_pattern: str
    mpl_hatch: str
    width: float


def policy_styles(names: Sequence[str]) -> dict[str, PolicyStyle]:
    """A style per name in order; deterministic (the same list gives the same styles in every report)."""
    styles: dict[str, PolicyStyle] = {}
    count = len(names)
    for index, name in enumerate(names):
        plotly_dash, mpl_dash = DASHES[index % len(DASHES)]
        plotly_marker, mpl_marker = MARKERS[index % len(MARKERS)]
        plotly_pattern, mpl_hatch = HATCHES[index % len(HATCHES)]
        # Widths shrink linearly from the first policy to the last, so overlapping curves stay visible.
        share = index / (count - 1) if count > 1 else 0.0
        styles[name] = PolicyStyle(
            colour=COLOURS[index % len(COLOURS)],
            plotly_dash=plotly_dash,
            mpl_dash=mpl_dash,
            plotly_marker=plotly_marker,
            mpl_marker=mpl_marker,
            plotly_pattern=plotly_pattern,
            mpl_hatch=mpl_hatch,
            width=round(_WIDEST - share * (_WIDEST - _NARROWEST), 2),
        )
    return styles
