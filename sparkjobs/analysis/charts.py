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
# Whole seconds that make round bucket widths and axis steps; past a day, whole days.
_ROUND_SECONDS: tuple[int, ...] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800)
_ROUND_SECONDS += (3600, 7200, 10800, 21600, 43200, 86400)
_DAY = 86400
_UNITS = ((_DAY, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
MAX_POINTS = 300
"""Points of a line over time: a few hundred fill a chart 700 px wide; more add bytes,
not anything the eye can see."""
MIN_POINTS = 3
"""Fewer points than this are no line (one is a flat line across, which reads as a steady
rate): the page writes their numbers instead."""


# --- time buckets ------------------------------------------------------------------------


def round_seconds(at_least: float, finest: int = 1) -> int:
    """The smallest round width in seconds (1, 2, 5 ... 12 hours, 1 day, whole days) that
    is at least ``at_least`` and a whole number of ``finest``."""
    for seconds in _ROUND_SECONDS:
        if seconds >= at_least and seconds % finest == 0:
            return seconds
    days = _DAY * max(1, math.ceil(at_least / _DAY))
    return days if days % finest == 0 else finest * max(1, math.ceil(at_least / finest))


def bucket_seconds(span: float, finest: int = 1) -> int:
    """The time bucket of a chart of data from its first to its last record ``span``
    seconds later: the finest round width that keeps the line within MAX_POINTS points
    wherever the span falls on the buckets (a second for a minute, a minute for four
    hours, an hour for a week), and a whole number of the data's own (``finest``)."""
    return max(finest, round_seconds(span / (MAX_POINTS - 2), finest))


def bucket_words(seconds: int) -> tuple[str, str]:
    """A bucket as people name it: ``("second", "1-second")``, ``("15 minutes",
    "15-minute")``, ``("2 hours", "2-hour")``."""
    size, unit = next((size, unit) for size, unit in _UNITS if seconds % size == 0)
    n = seconds // size
    return (unit if n == 1 else f"{n} {unit}s"), f"{n}-{unit}"


def _at(second: int) -> datetime:
    return datetime.fromtimestamp(second, UTC)


# --- axes and labels ---------------------------------------------------------------------


def _compact(value: float) -> str:
    """Axis labels: 950, 12k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _clip(text: str, length: int = 32) -> str:
    """Shorten a chart label; the full text stays in the SVG ``<title>`` tooltip."""
    return text if len(text) <= length else text[: length - 3] + "..."


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
    """Lines over time: ``series[i].values[j]`` is at epoch second ``start + j * step``, the
    sum of a bucket ``step`` seconds wide (named under the time axis). Takes at least two
    points (:data:`MIN_POINTS` is where the page stops drawing)."""
    n = max(len(s.values) for s in series)
    peak = max((v for s in series for v in s.values), default=0.0)
    ticks = _ticks(peak)
    plot = _Plot(left=64, top=24, width=WIDTH - 64 - 200, height=240, top_value=ticks[-1])
    span = (n - 1) * step  # seconds from the first point to the last

    def x_of(second: float) -> float:
        return plot.left + (plot.width * (second - start) / span if span else 0.0)

    parts = _y_axis(plot, ticks, y_title)
    axis_y = plot.top + plot.height
    tick_step = round_seconds(span / 8)
    # HH:MM alone repeats every day; below a minute a step needs its seconds.
    stamp = "%m-%d %H:%M" if span >= _DAY else "%H:%M" if tick_step % 60 == 0 else "%H:%M:%S"
    for second in range(math.ceil(start / tick_step) * tick_step, start + span + 1, tick_step):
        x = x_of(second)
        parts.append(
            f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 4}" stroke="#888"/>'
        )
        parts.append(_text(x, axis_y + 16, _at(second).strftime(stamp), "middle"))
    x_title = f"time (UTC), {bucket_words(step)[1]} buckets"
    parts.append(_text(plot.left + plot.width / 2, axis_y + 34, x_title, "middle"))
    for s in series:
        points = [f"{x_of(start + i * step):.1f},{plot.y(v):.1f}" for i, v in enumerate(s.values)]
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
