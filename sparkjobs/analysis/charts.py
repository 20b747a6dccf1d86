"""Inline SVG charts for the analysis report: lines over time, stacked bars, bars.

Standard library only, and nothing of the analysis: each chart takes its series or bars
and returns one ``<svg>`` element, so the page opens with no network, fonts or
JavaScript. Labels and titles go through ``html.escape``; values that cannot be drawn
(negative from clock skew, NaN without samples) draw nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

WIDTH = 960
# Tableau 10 and two more: distinguishable, and calm enough for a page people keep open.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#1f77b4",
    "#8c564b",
    "#17becf",
)
GREY = "#9e9e9e"
# Whole minutes that make round bucket widths and axis steps; past a day, whole days.
_ROUND_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
_DAY = 1440


# --- axes and labels ---------------------------------------------------------------------


def _from_minute(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, UTC)


def _compact(value: float) -> str:
    """Axis labels: 950, 12k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _clip(text: str, length: int = 32) -> str:
    """Shorten a chart label; the full text stays in the SVG ``<title>`` tooltip."""
    return text if len(text) <= length else text[: length - 3] + "..."


def round_minutes(at_least: float) -> int:
    """The smallest round width in minutes (1, 2, 5 ... 1 day, whole days) >= at_least."""
    for minutes in _ROUND_MINUTES:
        if minutes >= at_least:
            return minutes
    return _DAY * math.ceil(at_least / _DAY)


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round axis ticks from 0 to at least ``top`` (1, 2, 2.5 or 5 times a power of ten)."""
    if not math.isfinite(top) or top <= 0:
        top = 1.0  # an all-zero chart still gets an axis
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


# --- SVG ---------------------------------------------------------------------------------


def _drawable(value: float) -> float:
    """The length to draw: negative (clock skew) and NaN (no samples) values draw nothing;
    the number written next to them still tells the truth."""
    return value if math.isfinite(value) and value > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Series:
    """One line (or one layer of stacked bars): a value per point, in order."""

    name: str
    values: list[float]
    colour: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One horizontal bar; ``note`` is written next to it (the value as people read it)."""

    label: str
    value: float
    note: str
    colour: str


@dataclass(frozen=True, slots=True)
class _Plot:
    """The plotting area inside a chart, and the value at its top edge."""

    left: float
    top: float
    width: float
    height: float
    top_value: float

    def y(self, value: float) -> float:
        return self.top + self.height - _drawable(value) / self.top_value * self.height


def _svg(height: float, label: str, parts: list[str]) -> str:
    return (
        f'<svg class="chart" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{''.join(parts)}</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'


def _y_axis(plot: _Plot, ticks: list[float], title: str) -> list[str]:
    """Grid lines with labels, and the axis title above them."""
    right = plot.left + plot.width
    parts = [_text(plot.left - 8, plot.top - 6, title)]
    for tick in ticks:
        y = plot.y(tick)
        parts.append(
            f'<line x1="{plot.left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e3e6ea"/>'
        )
        parts.append(_text(plot.left - 6, y + 4, _compact(tick), "end"))
    return parts


def _legend(x: float, y: float, entries: list[tuple[str, str]]) -> list[str]:
    parts = []
    for i, (name, colour) in enumerate(entries):
        row = y + 16 * i
        parts.append(f'<rect x="{x}" y="{row - 9}" width="10" height="10" fill="{colour}"/>')
        parts.append(_text(x + 16, row, _clip(name, 26)))
    return parts


def line_chart(label: str, start: int, step: int, series: list[Series], y_title: str) -> str:
    """Lines over time: ``series[i].values[j]`` is at epoch minute ``start + j * step``."""
    n = max(len(s.values) for s in series)
    peak = max((v for s in series for v in s.values), default=0.0)
    ticks = _ticks(peak)
    plot = _Plot(left=64, top=24, width=WIDTH - 64 - 200, height=240, top_value=ticks[-1])
    span = (n - 1) * step  # minutes from the first point to the last

    def x_of(minute: float) -> float:
        return plot.left + (plot.width * (minute - start) / span if span else 0.0)

    parts = _y_axis(plot, ticks, y_title)
    axis_y = plot.top + plot.height
    tick_step = round_minutes(span / 8)
    with_date = span >= _DAY  # HH:MM alone repeats every day
    for minute in range(math.ceil(start / tick_step) * tick_step, start + span + 1, tick_step):
        x = x_of(minute)
        stamp = _from_minute(minute).strftime("%m-%d %H:%M" if with_date else "%H:%M")
        parts.append(
            f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="#888"/>'
        )
        parts.append(_text(x, axis_y + 16, stamp, "middle"))
    parts.append(_text(plot.left + plot.width / 2, axis_y + 34, "time (UTC)", "middle"))
    for s in series:
        points = [f"{x_of(start + i * step):.1f},{plot.y(v):.1f}" for i, v in enumerate(s.values)]
        if len(points) == 1:  # one minute of data: draw it across instead of not at all
            points.append(f"{plot.left + plot.width:.1f},{plot.y(s.values[0]):.1f}")
        parts.append(
            f'<polyline fill="none" stroke="{s.colour}" stroke-width="1.5" '
            f'points="{" ".join(points)}"><title>{escape(s.name)}</title></polyline>'
        )
    parts += _legend(
        plot.left + plot.width + 20, plot.top + 8, [(s.name, s.colour) for s in series]
    )
    return _svg(axis_y + 44, label, parts)


def stacked_bars(label: str, categories: list[str], series: list[Series], y_title: str) -> str:
    """One stacked bar per category; labels thinned to about eight."""
    n = len(categories)
    peak = max((sum(s.values[i] for s in series) for i in range(n)), default=0.0)
    ticks = _ticks(peak)
    plot = _Plot(left=64, top=24, width=WIDTH - 64 - 140, height=200, top_value=ticks[-1])
    parts = _y_axis(plot, ticks, y_title)
    slot = plot.width / n
    bar = max(slot * 0.7, 1.0)
    every = math.ceil(n / 8)  # a date and time label is ~70 px wide
    axis_y = plot.top + plot.height
    for i, category in enumerate(categories):
        x = plot.left + i * slot + (slot - bar) / 2
        tip = ", ".join(f"{s.name} {s.values[i]:,.0f}" for s in series)
        rects, base = [], 0.0
        for s in series:
            y0, y1 = plot.y(base), plot.y(base + s.values[i])
            rects.append(
                f'<rect x="{x:.1f}" y="{y1:.1f}" width="{bar:.1f}" height="{y0 - y1:.1f}" '
                f'fill="{s.colour}"/>'
            )
            base += s.values[i]
        parts.append(f"<g><title>{escape(f'{category}: {tip}')}</title>{''.join(rects)}</g>")
        if i % every == 0:
            parts.append(_text(x + bar / 2, axis_y + 16, category, "middle"))
    parts += _legend(
        plot.left + plot.width + 20, plot.top + 8, [(s.name, s.colour) for s in series]
    )
    return _svg(axis_y + 28, label, parts)


def hbar_chart(label: str, bars: list[Bar]) -> str:
    """Horizontal bars with a label on the left and the value written on the right."""
    label_width = 12 + 7 * min(max(len(b.label) for b in bars), 32)
    room = WIDTH - label_width - 180
    top_value = max(_drawable(b.value) for b in bars)
    parts = []
    for i, b in enumerate(bars):
        y = 8 + 22 * i
        width = room * _drawable(b.value) / top_value if top_value > 0 else 0.0
        parts.append(
            f"<g><title>{escape(f'{b.label}: {b.note}')}</title>"
            f'<rect x="{label_width}" y="{y}" width="{width:.1f}" height="16" fill="{b.colour}"/>'
            f"</g>"
        )
        parts.append(_text(label_width - 8, y + 12, _clip(b.label), "end"))
        parts.append(_text(label_width + width + 6, y + 12, b.note))
    return _svg(16 + 22 * len(bars), label, parts)
