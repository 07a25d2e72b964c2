"""Plotly figures of the HTML report, built from already-computed arrays (no run records in here).

Every policy keeps one style (``styles.py``) and one ``legendgroup`` across all subplots, so clicking it
in a legend hides or shows it everywhere in that figure. Shares that sit near 1 (attainment) are shown as
misses (1 - share) on a log axis: 90%, 99% and 99.9% are then a decade apart instead of a hair apart.

Legends sit right of the plot (plotly widens the right margin to fit them) and every figure is tall enough
for all its entries, so no legend is cut or scrolls. Plotly reads ``<b>``-like tags and entities in text,
so every name from the input passes through ``label`` (escaped; plotly shows it literally).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from slosched.metrics.groups import GroupStats, group_names
from slosched.metrics.plots import cdf_points
from slosched.metrics.styles import COLOURS, PolicyStyle

_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 13}
MISS_AXIS_TITLE = "missed SLO (1 - attainment), log scale"
# Vertical space per legend entry (13 px font, 3 px between entries: every policy is its own legend group,
# and plotly's default 10 px gap between groups made 11 policies overflow into a scrolled legend) and for
# the title and x axis around the legend.
_ENTRY_PX = 24
_FRAME_PX = 150


def label(text: str) -> str:
    """``text`` as plotly should show it: literally, tags and entities included."""
    return html.escape(text, quote=False)


def _layout(figure: go.Figure, title: str, height: int = 420, entries: int = 0) -> go.Figure:
    """Common layout; the height grows to fit ``entries`` legend entries (a taller plot beats a cut legend)."""
    figure.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left"},
        template="plotly_white",
        font=_FONT,
        height=max(height, _FRAME_PX + _ENTRY_PX * entries),
        margin={"l": 70, "r": 20, "t": 60, "b": 50},
        legend={
            "groupclick": "togglegroup",
            "itemclick": "toggle",
            "itemdoubleclick": "toggleothers",
            "tracegroupgap": 3,
        },
        hovermode="closest",
    )
    return figure


def _line(style: PolicyStyle, name: str, *, markers: bool, first: bool) -> dict[str, object]:
    """Trace keywords for ``name``'s style; ``first`` shows the legend entry (once per figure)."""
    keywords: dict[str, object] = {
        "name": label(name),
        "legendgroup": name,
        "showlegend": first,
        "line": {"color": style.colour, "dash": style.plotly_dash, "width": style.width},
        "mode": "lines+markers" if markers else "lines",
    }
    if markers:
        # maxdisplayed thins the markers only (the line keeps every point): a few per curve tell them apart.
        keywords["marker"] = {"symbol": style.plotly_marker, "size": 8, "color": style.colour, "maxdisplayed": 14}
    return keywords


def slo_scale_figure(
    scales: np.ndarray, curves: Mapping[str, np.ndarray], styles: Mapping[str, PolicyStyle], targets: Sequence[float]
) -> go.Figure:
    figure = go.Figure()
    for name, curve in curves.items():
        if np.isnan(curve).all():
            continue
        figure.add_trace(
            go.Scatter(x=scales, y=curve, line_shape="hv", **_line(styles[name], name, markers=True, first=True))
        )
    for target in targets:
        figure.add_hline(y=target, line={"color": "grey", "dash": "dot", "width": 1}, annotation_text=f"{target:.0%}")
    span = [math.log10(float(scales[0])), math.log10(float(scales[-1]))] if len(scales) else None
    figure.update_xaxes(type="log", title="SLO scale (x no-contention latency)", range=span)
    figure.update_yaxes(title="share of jobs within scaled SLO", range=[0, 1.02])
    return _layout(figure, "SLO-scale attainment", height=440, entries=len(curves))


def cdf_figure(
    samples: Mapping[str, np.ndarray],
    styles: Mapping[str, PolicyStyle],
    title: str,
    xlabel: str,
    max_points: int = 300,
) -> go.Figure:
    """Empirical CDFs through at most ``max_points`` order statistics each, as float32 (7 significant
    digits, half the bytes); log x when every value is positive and they span a decade."""
    figure = go.Figure()
    low, high, positive = math.inf, -math.inf, True
    for name, values in samples.items():
        xs, ys = cdf_points(values, max_points)
        if xs.size == 0:
            continue
        text = label(f"{name} (n={int(np.isfinite(values).sum())})")
        keywords = _line(styles[name], name, markers=True, first=True) | {"name": text}
        figure.add_trace(go.Scatter(x=xs.astype(np.float32), y=ys.astype(np.float32), line_shape="hv", **keywords))
        positive = positive and bool(xs[0] > 0)
        low, high = min(low, float(xs[0])), max(high, float(xs[-1]))
    figure.update_xaxes(title=xlabel, type="log" if positive and high > 10 * low else "linear")
    figure.update_yaxes(title="cumulative share", range=[0, 1.02])
    return _layout(figure, title, height=440, entries=len(samples))


def miss_share(met: int, total: int) -> tuple[float, str]:
    """(bar height on the log miss axis, label): no misses sit at half a job's share, labelled as such."""
    if total == 0:
        return math.nan, "n/a"
    missed = total - met
    text = f"{met / total:.2%} met ({missed} missed)"
    return (missed / total if missed else 0.5 / total), text


def miss_axis(heights: Sequence[float], title: str = MISS_AXIS_TITLE) -> dict[str, object]:
    """A log axis over the finite ``heights`` with a tick per decade labelled with its attainment."""
    finite = [h for h in heights if math.isfinite(h) and h > 0]
    low, high = (min(finite) / 3, max(finite) * 3) if finite else (1e-3, 1.0)
    decades = range(math.floor(math.log10(low)) + 1, 1)
    ticks = [10.0**k for k in decades]
    labels = [f"{tick:g} ({1 - tick:.{max(-k - 2, 0)}%})" for k, tick in zip(decades, ticks, strict=True)]
    return {
        "type": "log",
        "range": [math.log10(low), math.log10(high)],
        "tickvals": ticks,
        "ticktext": labels,
        "title": title,
    }


def attainment_figure(counts: Mapping[str, tuple[int, int]], styles: Mapping[str, PolicyStyle]) -> go.Figure:
    """One horizontal bar per policy from ``(met, total)``: the missed share on a log axis, labelled with
    the attainment; the first policy on top, as in the tables."""
    figure = go.Figure()
    heights = []
    for name, (met, total) in counts.items():
        height, text = miss_share(met, total)
        heights.append(height)
        figure.add_trace(
            go.Bar(
                y=[label(name)],
                x=[height],
                text=[text],
                textposition="outside",
                orientation="h",
                name=label(name),
                legendgroup=name,
                showlegend=False,
                cliponaxis=False,
                marker={"color": styles[name].colour, "pattern": {"shape": styles[name].plotly_pattern}},
            )
        )
    axis = miss_axis(heights, "missed share (attainment), log scale")
    axis["range"] = [axis["range"][0], axis["range"][1] + 1.0]  # type: ignore[index]  # room for the labels
    figure.update_xaxes(**axis)
    figure.update_yaxes(autorange="reversed", automargin=True)
    title = "SLO misses per policy (shorter is better; rejected and failed jobs count as missed)"
    return _layout(figure, title, height=140 + 32 * max(len(counts), 1))


def group_figure(per_policy: Mapping[str, list[GroupStats]], styles: Mapping[str, PolicyStyle], what: str) -> go.Figure:
    """Grouped bars per ``what`` (template or tenant): misses (log), p50 and p99 latency, one colour per policy."""
    names = [label(name) for name in group_names(dict(per_policy))]
    figure = make_subplots(rows=1, cols=3, subplot_titles=("missed SLO (log)", "p50 latency (s)", "p99 latency (s)"))
    for policy, groups in per_policy.items():
        by_name = {label(stats.group): stats for stats in groups}
        rows = [by_name.get(name) for name in names]
        misses = [miss_share(s.deadline_met, s.jobs) if s else (math.nan, "") for s in rows]
        common = {
            "name": label(policy),
            "legendgroup": policy,
            "marker_color": styles[policy].colour,
            "marker_pattern_shape": styles[policy].plotly_pattern,
        }
        figure.add_trace(go.Bar(x=names, y=[m[0] for m in misses], hovertext=[m[1] for m in misses], **common), 1, 1)
        for col, values in (
            (2, [s.p50_latency_s if s else math.nan for s in rows]),
            (3, [s.p99_latency_s if s else math.nan for s in rows]),
        ):
            figure.add_trace(go.Bar(x=names, y=values, showlegend=False, **common), 1, col)
    figure.update_yaxes(**miss_axis([m for p in per_policy.values() for m in _misses(p)], "missed share"), row=1, col=1)
    figure.update_layout(barmode="group")
    title = f"Per {what}: missed SLO share (log, lower is better) and latency"
    return _layout(figure, title, height=440, entries=len(per_policy))


def _misses(groups: Sequence[GroupStats]) -> list[float]:
    return [miss_share(stats.deadline_met, stats.jobs)[0] for stats in groups]


def load_figure(
    loads: Sequence[float],
    attainment: Mapping[str, Sequence[float]],
    goodput: Mapping[str, Sequence[float]],
    styles: Mapping[str, PolicyStyle],
) -> go.Figure:
    """Attainment (as misses, log) and goodput against the offered load, one line per policy."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=(MISS_AXIS_TITLE, "goodput (SLO-meeting jobs/s)"))
    for name in attainment:
        misses = [1.0 - a if a < 1.0 else math.nan for a in attainment[name]]
        figure.add_trace(
            go.Scatter(x=list(loads), y=misses, **_line(styles[name], name, markers=True, first=True)), 1, 1
        )
        figure.add_trace(
            go.Scatter(x=list(loads), y=list(goodput[name]), **_line(styles[name], name, markers=True, first=False)),
            1,
            2,
        )
    figure.update_yaxes(
        **miss_axis([m for ms in attainment.values() for m in (1.0 - a for a in ms) if m > 0], "missed share"),
        row=1,
        col=1,
    )
    figure.update_xaxes(title="offered load (jobs/s)")
    return _layout(figure, "Attainment and goodput vs load", entries=len(attainment))


def series_figure(
    rows: Mapping[str, Sequence[tuple[str, np.ndarray, np.ndarray]]], title: str, ylabel: str
) -> go.Figure:
    """One subplot row per policy, one line per instance (same colour for an instance in every row, one
    legend entry per instance that toggles it in every row). ``rows``: policy -> (instance, times, values)."""
    policies = list(rows)
    figure = make_subplots(
        rows=len(policies),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[label(policy) for policy in policies],
        vertical_spacing=0.08 / max(len(policies), 1) + 0.03,
    )
    seen: list[str] = []
    for row, policy in enumerate(policies, start=1):
        for instance, times, values in rows[policy]:
            if instance not in seen:
                seen.append(instance)
            colour = COLOURS[seen.index(instance) % len(COLOURS)]
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=values,
                    name=label(instance),
                    legendgroup=instance,
                    showlegend=row == 1,
                    mode="lines",
                    line={"color": colour, "width": 1.5},
                ),
                row,
                1,
            )
        figure.update_yaxes(title_text=ylabel, row=row, col=1)
    figure.update_xaxes(title_text="simulated time (s)", row=len(policies), col=1)
    return _layout(figure, title, height=120 + 190 * len(policies))


def policy_series_figure(
    lines: Mapping[str, Sequence[tuple[str, np.ndarray, np.ndarray]]],
    title: str,
    ylabel: str,
    styles: Mapping[str, PolicyStyle],
) -> go.Figure:
    """One line per policy in one plot (runs of one instance each): ``lines`` policy -> [(name, times, values)]."""
    figure = go.Figure()
    for policy, series in lines.items():
        for _, times, values in series:
            figure.add_trace(go.Scatter(x=times, y=values, **_line(styles[policy], policy, markers=False, first=True)))
    figure.update_xaxes(title_text="simulated time (s)")
    figure.update_yaxes(title_text=ylabel)
    return _layout(figure, title, height=380, entries=len(lines))
