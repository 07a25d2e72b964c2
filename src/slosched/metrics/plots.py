"""PNG figures comparing policies. Uses matplotlib's object API with the Agg canvas, never pyplot, so no
display is touched and no global figure state is left behind.

Every function takes already-computed arrays, writes one PNG and returns its path. Curves with more than
``MAX_CDF_POINTS`` samples are thinned to evenly spaced order statistics: beyond that a PNG cannot show
more, and drawing fewer points keeps a report with several policies well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

MAX_CDF_POINTS = 2000
_DPI = 100


def _new_axes() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(6.4, 4.0), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=_DPI)
    return path


def cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted finite values, cumulative share in (0, 1]), thinned to at most ``MAX_CDF_POINTS``.

    The first and last points are always kept, so the curve spans the full range and ends at 1.
    """
    finite = np.sort(values[np.isfinite(values)])
    n = finite.size
    shares = np.arange(1, n + 1) / n if n else np.empty(0)
    if n > MAX_CDF_POINTS:
        keep = np.unique(np.linspace(0, n - 1, MAX_CDF_POINTS).round().astype(np.int64))
        return finite[keep], shares[keep]
    return finite, shares


def plot_cdfs(samples: Mapping[str, np.ndarray], path: Path, *, title: str, xlabel: str) -> Path:
    """Empirical CDF per policy (step curve) over the finite samples; policies without any are left out.

    The x axis is logarithmic when every value is positive and they span more than a decade, since
    serving latencies are heavy-tailed and a linear axis would squash the body of the distribution.
    """
    figure, axes = _new_axes()
    all_positive, low, high = True, math.inf, -math.inf
    for name, values in samples.items():
        xs, ys = cdf_points(values)
        if xs.size == 0:
            continue
        count = int(np.isfinite(values).sum())
        axes.step(xs, ys, where="post", label=f"{name} (n={count})")
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
    for name, curve in curves.items():
        if np.isnan(curve).all():
            continue
        axes.step(scales, curve, where="post", label=name)
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


def plot_attainment_bars(attainment: Mapping[str, float], path: Path) -> Path:
    """One bar per policy; an undefined (NaN) attainment is drawn as an empty bar labelled ``n/a``."""
    figure, axes = _new_axes()
    names = list(attainment)
    heights = [0.0 if math.isnan(v) else v for v in attainment.values()]
    bars = axes.bar(range(len(names)), heights, color="tab:blue")
    labels = ["n/a" if math.isnan(v) else f"{v * 100:.1f}%" for v in attainment.values()]
    axes.bar_label(bars, labels=labels, fontsize="small")
    axes.set_xticks(range(len(names)), names, rotation=20 if len(names) > 4 else 0)
    axes.set(title="SLO attainment (rejected and failed count as missed)", ylabel="share", ylim=(0, 1.1))
    axes.grid(True, axis="y", alpha=0.3)
    return _save(figure, path)


def _finish(axes: Axes) -> None:
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="lower right", fontsize="small")
