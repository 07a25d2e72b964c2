"""One visual identity per policy, shared by the PNG figures and the HTML report.

Two policies often produce identical curves (e.g. two engines that never disagree at a light load); with
colour alone the one drawn last hides the other. So each policy gets a colour *and* a dash pattern *and*
a marker, cycling with coprime periods (7 colours, 5 dashes, 6 markers: the first 210 policies differ
in every pairing), and earlier policies are drawn wider so that an identical later curve leaves them
visible as a halo.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Okabe-Ito (colour-blind safe) without its yellow, which vanishes on white, plus black.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DASHES = (
    ("solid", "-"),
    ("dash", (0, (5, 2))),
    ("dot", (0, (1, 1.5))),
    ("dashdot", (0, (5, 2, 1, 2))),
    ("longdash", (0, (9, 3))),
)
_MARKERS = (("circle", "o"), ("square", "s"), ("triangle-up", "^"), ("diamond", "D"), ("x", "x"), ("star", "*"))
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
    width: float


def policy_styles(names: Sequence[str]) -> dict[str, PolicyStyle]:
    """A style per name in order; deterministic (the same list gives the same styles in every report)."""
    styles: dict[str, PolicyStyle] = {}
    count = len(names)
    for index, name in enumerate(names):
        plotly_dash, mpl_dash = _DASHES[index % len(_DASHES)]
        plotly_marker, mpl_marker = _MARKERS[index % len(_MARKERS)]
        # Widths shrink linearly from the first policy to the last, so overlapping curves stay visible.
        share = index / (count - 1) if count > 1 else 0.0
        styles[name] = PolicyStyle(
            colour=COLOURS[index % len(COLOURS)],
            plotly_dash=plotly_dash,
            mpl_dash=mpl_dash,
            plotly_marker=plotly_marker,
            mpl_marker=mpl_marker,
            width=round(_WIDEST - share * (_WIDEST - _NARROWEST), 2),
        )
    return styles
