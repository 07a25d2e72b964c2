"""PNG figures comparing policies. Uses matplotlib's object API with the Agg canvas, never pyplot, so no
display is touched and no global figure state is left behind.

Every function takes already-computed arrays, writes one PNG and returns its path. Curves with more than
``MAX_CDF_POINTS`` samples are thinned to order statistics (``cdf_points``): beyond that a PNG cannot show
more, and drawing fewer points keeps a report with several policies well under a second. Each policy keeps
its colour, dash pattern, marker and width (``styles.py``) in every figure, so identical curves stay
distinguishable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slosched.metrics.styles import PolicyStyle, policy_styles

MAX_CDF_POINTS = 2000
_DPI = 100


def _new_axes(figsize: tuple[float, float] = (9.0, 4.5)) -> tuple[Figure, Axes]:
    figure = Figure(figsize=figsize, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=_DPI)
    return path


def cdf_points(values: np.ndarray, max_points: int = MAX_CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(sorted finite values, cumulative share in (0, 1]), thinned to about ``max_points`` order statistics.

    Three quarters of the points are evenly spaced ranks (the body); the rest are log-spaced towards the
    largest value, since the tail (p99, p99.9) is what a latency comparison is about and even spacing
    would give it one or two points. The first and last points are always kept, so the curve spans the
    full range and ends at 1.
    """
    finite = np.sort(values[np.isfinite(values)])
    n = finite.size
    shares = np.arange(1, n + 1) / n if n else np.empty(0)
    if n > max_points:
        body = np.linspace(0, n - 1, max_points - max_points // 4)
        tail = (n - 1) - np.geomspace(1, max(n / 100, 1), max_points // 4)
        keep = np.unique(np.concatenate([body, tail, [n - 1]]).round().astype(np.int64))
        return finite[keep], shares[keep]
    return finite, shares


def _line_style(style: PolicyStyle) -> dict[str, Any]:
    # markevery as a fraction of the drawn path: about ten markers per curve whatever its point count.
    return {
        "color": style.colour,
        "linestyle": style.mpl_dash,
        "linewidth": style.width * 0.7,
        "marker": style.mpl_marker,
        "markevery": 0.1,
        "markersize": 5,
        "markerfacecolor": "none",
    }


def plot_cdfs(samples: Mapping[str, np.ndarray], path: Path, *, title: str, xlabel: str) -> Path:
    """Empirical CDF per policy (step curve) over the finite samples; policies without any are left out.

    The x axis is logarithmic when every value is positive and they span more than a decade, since
    serving latencies are heavy-tailed and a linear axis would squash the body of the distribution.
    """
    figure, axes = _new_axes()
    styles = policy_styles(list(samples))
    all_positive, low, high = True, math.inf, -math.inf
    for name, values in samples.items():
        xs, ys = cdf_points(values)
        if xs.size == 0:
            continue
        count = int(np.isfinite(values).sum())
        axes.step(xs, ys, where="post", label=f"{name} (n={count})", **_line_style(styles[name]))
        all_positive = all_positive and bool(xs[0] > 0)
        low, high = min(low, float(xs[0])), max(high, float(xs[-1]))
    if all_positive and high > 10 * low:
        axes.set_xscale("log")
    axes.set(title=title, xlabel=xlabel, ylabel="cumulative share", ylim=(0.0, 1.02))
    _finish(axes)
    return _save(figure, path)


def plot_slo_scale(
    scales: np.ndarray, curves: Mapping[str, np.ndarray], path: Path, *, targets: tuple[float, ...]
) -> Path:
    """Attainment against SLO scale per policy (log x), with dashed lines at the target attainments."""
    figure, axes = _new_axes()
    styles = policy_styles(list(curves))
    for name, curve in curves.items():
        if np.isnan(curve).all():
            continue
        axes.step(scales, curve, where="post", label=name, **_line_style(styles[name]))
    for target in targets:
        axes.axhline(target, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xscale("log")
    axes.set(
        title="SLO-scale attainment",
        xlabel="SLO scale (x no-contention latency)",
        ylabel="share of jobs within scaled SLO",
        ylim=(0.0, 1.02),
    )
    _finish(axes)
    return _save(figure, path)


def plot_attainment_bars(counts: Mapping[str, tuple[int, int]], path: Path) -> Path:
    """One horizontal bar per policy from ``(met, total)`` jobs: the share that *missed* its SLO on a log
    axis, so 90%, 99% and 99.9% attainment are a decade apart instead of a hair apart on a 0-1 axis. A
    policy without misses is drawn at half a job's share, one without jobs as an empty ``n/a`` bar."""
    names = list(counts)
    figure, axes = _new_axes((9.0, 1.2 + 0.38 * max(len(names), 1)))
    styles = policy_styles(names)
    heights, labels = [], []
    for met, total in counts.values():
        missed = total - met
        heights.append(math.nan if total == 0 else (missed / total if missed else 0.5 / total))
        labels.append("n/a" if total == 0 else f" {met / total:.2%} met ({missed} missed)")
    finite = [h for h in heights if math.isfinite(h)]
    bars = axes.barh(
        range(len(names)),
        [h if math.isfinite(h) else 0.0 for h in heights],
        color=[styles[n].colour for n in names],
        hatch=[styles[n].mpl_hatch for n in names],
        edgecolor="white",
    )
    axes.bar_label(bars, labels=labels, fontsize="small")
    axes.set_yticks(range(len(names)), names)
    axes.invert_yaxis()  # first policy on top, as in the tables
    if finite:
        axes.set_xscale("log")
        # Room on the right for the labels: they run about two decades past the longest bar.
        low, high = min(finite) / 3, max(finite) * 60
        axes.set_xlim(low, high)
        decades = range(math.floor(math.log10(low)) + 1, 1)
        axes.set_xticks(
            [10.0**k for k in decades], [f"{10.0**k:g}\n({1 - 10.0**k:.{max(-k - 2, 0)}%})" for k in decades]
        )
    axes.set(
        title="SLO misses (shorter is better; rejected and failed count as missed)",
        xlabel="missed share (attainment), log scale",
    )
    axes.grid(True, axis="x", which="both", alpha=0.3)
    return _save(figure, path)


def _finish(axes: Axes) -> None:
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        # Outside the axes: with many policies an inside legend hides the curves it names.
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0.0)
