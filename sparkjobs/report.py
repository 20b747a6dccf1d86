"""Render an :class:`~sparkjobs.findings.Analysis` as one HTML page or a short text summary.

Standard library only. The charts are inline SVG drawn by the small functions below, so
the page opens from a laptop, a console download or a mail attachment with no network,
fonts or JavaScript. Everything that came from the stream or the bucket (stream name,
partition keys, producers, file names, reasons, details) goes through ``html.escape``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape

from sparkjobs.findings import Analysis, Lateness, ShardShare, VolumePoint

__all__ = ["render_html", "render_text"]

MAX_BUCKETS = 1500  # points per volume line: more add bytes, not anything the eye can see
MAX_LINES = 12  # volume lines, "other" included: beyond a dozen colours nobody can tell
MAX_BARS = 40  # shards in the records-per-shard chart, "other" included
MAX_GAP_ROWS = 50
MAX_TABLE_ROWS = 200  # a window full of malformed files must not make a 100 MB page

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

_CSS = """
:root{--fg:#1d2733;--muted:#5b6875;--panel:#f3f5f7;--line:#d9dee3;--warn:#a4261d;
--warn-bg:#fdecea}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
max-width:1000px;margin:0 auto;padding:24px}
h1{font-size:1.5rem;margin:0 0 4px}
h2{font-size:1.2rem;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:16px 0 4px}
.meta,.note,.empty,footer{color:var(--muted)}
.empty{font-style:italic}
nav a{margin-right:12px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:16px 0}
.card{background:var(--panel);border-radius:6px;padding:8px 12px;min-width:100px}
.card .value{font-size:1.25rem;font-weight:600;font-variant-numeric:tabular-nums}
.card .label{font-size:.8rem;color:var(--muted)}
.card.warn,.alert{background:var(--warn-bg);color:var(--warn)}
.card.warn .label{color:var(--warn)}
.alert{padding:8px 12px;border-radius:6px}
table{border-collapse:collapse;font-size:.9rem;margin:8px 0;width:100%}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
.num{text-align:right;font-variant-numeric:tabular-nums}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}
svg text{font:11px system-ui,sans-serif;fill:#444}
"""


# --- numbers, times and durations as people read them ------------------------------------


def _utc(moment: datetime) -> datetime:
    """The same instant in UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _epoch_minute(moment: datetime) -> int:
    return int(_utc(moment).timestamp()) // 60


def _from_minute(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, UTC)


def _count(n: int) -> str:
    return f"{n:,}"


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "n/a"


def _share(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def _bytes(n: int) -> str:
    if abs(n) < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} PiB"


def _duration(ms: float) -> str:
    """850 ms, 3.2 s, 4 min 10 s, 2 h 5 min; negative when clocks disagree."""
    if not math.isfinite(ms):
        return "n/a"
    if ms < 0:
        return "-" + _duration(-ms)
    if ms < 999.5:
        return f"{ms:.0f} ms"
    if ms < 59_950:
        return f"{ms / 1000:.1f} s"
    seconds = round(ms / 1000)
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    minutes = round(ms / 60_000)
    return f"{minutes // 60} h {minutes % 60} min"


def _compact(value: float) -> str:
    """Axis labels: 950, 12k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _plain(text: str) -> str:
    """Text for a terminal: control characters from the data must not drive it."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _hour(hour: datetime | None) -> str:
    return "whole window" if hour is None else _utc(hour).strftime("%Y-%m-%d %H:%M")


def _clip(text: str, length: int = 32) -> str:
    """Shorten a chart label; the full text stays in the SVG ``<title>`` tooltip."""
    return text if len(text) <= length else text[: length - 3] + "..."


def _round_minutes(at_least: float) -> int:
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
class _Series:
    name: str
    values: list[float]
    colour: str


@dataclass(frozen=True, slots=True)
class _Bar:
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


def _line_chart(label: str, start: int, step: int, series: list[_Series], y_title: str) -> str:
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
    tick_step = _round_minutes(span / 8)
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


def _stacked_bars(label: str, categories: list[str], series: list[_Series], y_title: str) -> str:
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


def _hbar_chart(label: str, bars: list[_Bar]) -> str:
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


# --- HTML pieces -------------------------------------------------------------------------

_NO_DATA = '<p class="empty">no data</p>'


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[int] = (),
    limit: int = MAX_TABLE_ROWS,
) -> str:
    """A table of plain strings, every cell escaped; at most ``limit`` rows are shown."""

    def cell(tag: str, i: int, text: str) -> str:
        css = ' class="num"' if i in numeric else ""
        return f"<{tag}{css}>{escape(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, c) for i, c in enumerate(row)) + "</tr>"
        for row in rows[:limit]
    )
    more = (
        f'<p class="note">Showing {limit} of {len(rows):,} rows.</p>' if len(rows) > limit else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _section(anchor: str, title: str, parts: list[str]) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{"".join(parts)}</section>'


@dataclass(frozen=True, slots=True)
class _Totals:
    input_rows: int
    transport: int
    producer: int
    dead_letters: int
    bad_files: int
    bad_lines: int
    shards: int


def _totals(a: Analysis) -> _Totals:
    return _Totals(
        input_rows=sum(d.input_rows for d in a.duplicates),
        transport=sum(d.transport for d in a.duplicates),
        producer=sum(d.producer for d in a.duplicates),
        dead_letters=sum(d.records for d in a.dead_letters),
        bad_files=len({b.file for b in a.bad_inputs}),
        # Only malformed entries count lines; truncated and corrupt ones are whole files.
        bad_lines=sum(b.count for b in a.bad_inputs if b.kind == "malformed"),
        shards=len(a.shards) or len({p.shard_id for p in a.volume}),
    )


def _warnings(a: Analysis, t: _Totals) -> list[str]:
    """What a reader must not miss, in plain words."""
    found = []
    if a.remaining_duplicates > 0:
        found.append(f"{a.remaining_duplicates:,} duplicates remain after compaction")
    if a.bad_inputs:
        found.append(f"bad input: {t.bad_files:,} files, {t.bad_lines:,} malformed lines")
    if a.dead_letters:
        found.append(f"{t.dead_letters:,} dead letters")
    return found


def _card(value: str, label: str, warn: bool = False) -> str:
    css = "card warn" if warn else "card"
    return (
        f'<div class="{css}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _header(a: Analysis) -> str:
    t = _totals(a)
    removed = t.transport + t.producer
    cards = [
        _card(_count(a.records), "records"),
        _card(_bytes(a.bytes), "bytes"),
        _card(_count(t.shards), "shards"),
        _card(_count(t.transport), "transport duplicates removed"),
        _card(_count(t.producer), "producer duplicates removed"),
        _card(_rate(removed, t.input_rows), "duplicate rate"),
        _card(_count(a.remaining_duplicates), "remaining duplicates", a.remaining_duplicates > 0),
        _card(_count(t.dead_letters), "dead letters", bool(a.dead_letters)),
        _card(f"{t.bad_files:,} / {t.bad_lines:,}", "bad files / lines", bool(a.bad_inputs)),
    ]
    warnings = _warnings(a, t)
    alert = f'<p class="alert">Attention: {escape("; ".join(warnings))}.</p>' if warnings else ""
    generated = _utc(a.generated_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    links = [("volume", "Volume"), ("duplicates", "Duplicates"), ("lateness", "Lateness")]
    links += [("hot-keys", "Hot keys"), ("gaps", "Sequence gaps"), ("bad-input", "Bad input")]
    links += [("dead-letters", "Dead letters")]
    nav = "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in links)
    return (
        f"<header><h1>Stream {escape(a.stream)}</h1>"
        f'<p class="meta">window {escape(a.window)} &middot; generated {generated}</p>'
        f'<div class="cards">{"".join(cards)}</div>{alert}<nav>{nav}</nav></header>'
    )


def _bucket_volume(points: list[VolumePoint]) -> tuple[int, int, list[_Series], int]:
    """Sum the volume into at most ~MAX_BUCKETS round buckets and MAX_LINES lines.

    Returns the first bucket's epoch minute, the bucket width in minutes, the lines
    (missing minutes count as zero) and how many quiet shards were folded into "other".
    """
    totals: dict[str, int] = defaultdict(int)
    for p in points:
        totals[p.shard_id] += p.records
    busiest = sorted(totals, key=lambda s: (-totals[s], s))
    shown = busiest if len(busiest) <= MAX_LINES else busiest[: MAX_LINES - 1]
    folded = len(busiest) - len(shown)
    first = min(_epoch_minute(p.minute) for p in points)
    last = max(_epoch_minute(p.minute) for p in points)
    width = _round_minutes((last - first + 1) / MAX_BUCKETS)
    start = first - first % width  # buckets on round times: 10:15, not 10:07
    count = (last - start) // width + 1
    names = sorted(shown) + ([f"other ({folded} shards)"] if folded else [])
    lines = {name: [0.0] * count for name in names}
    keep = set(shown)
    for p in points:
        name = p.shard_id if p.shard_id in keep else names[-1]
        lines[name][(_epoch_minute(p.minute) - start) // width] += p.records
    series = [
        _Series(name, lines[name], GREY if folded and i == len(names) - 1 else PALETTE[i])
        for i, name in enumerate(names)
    ]
    return start, width, series, folded


def _shard_bars(shards: list[ShardShare]) -> list[_Bar]:
    """Records per shard in shard order; past MAX_BARS the quietest become "other"."""
    busiest = sorted(shards, key=lambda s: (-s.records, s.shard_id))
    shown = busiest if len(busiest) <= MAX_BARS else busiest[: MAX_BARS - 1]
    rest = busiest[len(shown) :]
    bars = [
        _Bar(s.shard_id, s.records, f"{s.records:,} ({_share(s.share)})", PALETTE[0])
        for s in sorted(shown, key=lambda s: s.shard_id)
    ]
    if rest:
        records, share = sum(s.records for s in rest), sum(s.share for s in rest)
        note = f"{records:,} ({_share(share)})"
        bars.append(_Bar(f"other ({len(rest)} shards)", records, note, GREY))
    return bars


def _volume(a: Analysis) -> str:
    parts = ["<h3>Records per minute, by shard</h3>"]
    if a.volume:
        start, width, series, folded = _bucket_volume(a.volume)
        per = "records per minute" if width == 1 else f"records per {width} min"
        parts.append(_line_chart(f"{per.capitalize()} by shard", start, width, series, per))
        if width > 1:
            parts.append(
                f'<p class="note">Summed into {width}-minute buckets to keep the page small.</p>'
            )
        if folded:
            parts.append(
                f'<p class="note">The {folded} quietest shards are drawn as one line, "other".</p>'
            )
    else:
        parts.append(_NO_DATA)
    parts.append("<h3>Records per shard</h3>")
    parts.append(_hbar_chart("Records per shard", _shard_bars(a.shards)) if a.shards else _NO_DATA)
    return _section("volume", "Volume", parts)


def _duplicates(a: Analysis) -> str:
    if not a.duplicates:
        return _section("duplicates", "Duplicates", [_NO_DATA])
    hours = sorted(a.duplicates, key=lambda d: _utc(d.hour))
    with_date = _utc(hours[-1].hour) - _utc(hours[0].hour) >= timedelta(days=1)
    labels = [_utc(d.hour).strftime("%m-%d %H:%M" if with_date else "%H:%M") for d in hours]
    series = [
        _Series("transport", [float(d.transport) for d in hours], PALETTE[0]),
        _Series("producer", [float(d.producer) for d in hours], PALETTE[1]),
    ]
    chart = _stacked_bars("Duplicates removed per hour", labels, series, "duplicates")
    rows = [
        [
            _hour(d.hour),
            _count(d.input_rows),
            _count(d.transport),
            _count(d.producer),
            _rate(d.transport + d.producer, d.input_rows),
            _count(d.output_rows),
        ]
        for d in hours
    ]
    headers = ["hour (UTC)", "input rows", "transport", "producer", "rate", "output rows"]
    return _section("duplicates", "Duplicates", [chart, _table(headers, rows, (1, 2, 3, 4, 5))])


def _kinds(lateness: list[Lateness]) -> list[str]:
    """Landing first, then event, then anything newer the job may add."""
    order = {"landing": 0, "event": 1}
    return sorted({r.kind for r in lateness}, key=lambda k: (order.get(k, 2), k))


def _lateness(a: Analysis) -> str:
    parts = []
    if a.event_time_field is None:
        parts.append(
            '<p class="note">Event-time lateness is not configured: run the analyse job with '
            "<code>--event-time-field</code> naming the payload's event-time field.</p>"
        )
    else:
        parts.append(
            f'<p class="note">Event time is read from the payload field '
            f"<code>{escape(a.event_time_field)}</code>.</p>"
        )
    if not a.lateness:
        return _section("lateness", "Lateness", [*parts, _NO_DATA])
    rows, bars = [], []
    for k, kind in enumerate(_kinds(a.lateness)):
        mine = [r for r in a.lateness if r.kind == kind]
        # The whole-window row (hour None) first, then the hours in order.
        mine.sort(key=lambda r: (0.0, 0.0) if r.hour is None else (1.0, _utc(r.hour).timestamp()))
        for r in mine:
            values = (r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms)
            rows.append([kind, _hour(r.hour), _count(r.samples), *map(_duration, values)])
            if r.hour is None:
                # Each kind on its own scale: landing takes seconds, event time can take
                # hours, and on one scale the landing bars would vanish.
                top = max([v for v in values if math.isfinite(v)] + [1e-9])
                for name, v in zip(("p50", "p90", "p99", "max"), values, strict=True):
                    colour = PALETTE[k % len(PALETTE)]
                    bars.append(_Bar(f"{kind} {name}", v / top, _duration(v), colour))
    if bars:
        parts.append(_hbar_chart("Whole-window lateness percentiles", bars))
        parts.append('<p class="note">Bars are scaled per kind, to that kind\'s maximum.</p>')
    headers = ["kind", "hour (UTC)", "samples", "p50", "p90", "p99", "max"]
    parts.append(_table(headers, rows, (2, 3, 4, 5, 6), limit=10 * MAX_TABLE_ROWS))
    return _section("lateness", "Lateness", parts)


def _skew(shards: list[ShardShare]) -> tuple[ShardShare, float, float] | None:
    """The busiest shard, its records over the mean shard's, and that mean."""
    if not shards:
        return None
    mean = sum(s.records for s in shards) / len(shards)
    busiest = max(shards, key=lambda s: (s.records, s.shard_id))
    return (busiest, busiest.records / mean, mean) if mean > 0 else None


def _hot_keys(a: Analysis) -> str:
    skew = _skew(a.shards)
    if skew is None:
        sentence = '<p class="empty">Shard skew: no data.</p>'
    else:
        busiest, ratio, mean = skew
        sentence = (
            f"<p>Shard skew (busiest shard over the mean) is <strong>{ratio:.2f}</strong>: "
            f"<code>{escape(busiest.shard_id)}</code> has {busiest.records:,} records against "
            f"a mean of {mean:,.0f} over {len(a.shards):,} shards.</p>"
        )
    if not a.hot_keys:
        return _section("hot-keys", "Hot partition keys", [sentence, _NO_DATA])
    rows = [
        [
            k.partition_key,
            k.shard_id,
            _count(k.records),
            _share(k.share_of_shard),
            _share(k.share_of_stream),
        ]
        for k in a.hot_keys
    ]
    headers = ["partition key", "shard", "records", "share of shard", "share of stream"]
    return _section("hot-keys", "Hot partition keys", [sentence, _table(headers, rows, (2, 3, 4))])


def _gaps(a: Analysis) -> str:
    if a.sequence_field is None:
        note = (
            '<p class="note">Producer sequence checks are not configured: run the analyse job '
            "with <code>--sequence-field</code> naming the payload's per-producer counter.</p>"
        )
        return _section("gaps", "Producer sequence gaps", [note])
    gaps = sum(g.gaps for g in a.gaps)
    missing = sum(g.missing for g in a.gaps)
    reorders = sum(g.reorders for g in a.gaps)
    parts = [
        f"<p>Sequence field <code>{escape(a.sequence_field)}</code>: {len(a.gaps):,} producers, "
        f"{gaps:,} gaps, {missing:,} missing, {reorders:,} reorders.</p>"
    ]
    flawed = [g for g in a.gaps if g.gaps or g.reorders]
    if not a.gaps:
        parts.append(_NO_DATA)
    elif not flawed:
        parts.append("<p>No gaps or reorders.</p>")
    else:
        flawed.sort(key=lambda g: (-g.missing, -g.gaps, -g.reorders, g.producer))
        rows = [
            [
                g.producer,
                _count(g.records),
                str(g.first),
                str(g.last),
                _count(g.gaps),
                _count(g.missing),
                _count(g.reorders),
            ]
            for g in flawed
        ]
        headers = ["producer", "records", "first", "last", "gaps", "missing", "reorders"]
        parts.append(_table(headers, rows, (1, 2, 3, 4, 5, 6), limit=MAX_GAP_ROWS))
    return _section("gaps", "Producer sequence gaps", parts)


def _bad_input(a: Analysis) -> str:
    if not a.bad_inputs:
        return _section("bad-input", "Bad input", ['<p class="empty">none</p>'])
    rows = [[b.file, b.kind, _count(b.count), b.detail] for b in a.bad_inputs]
    return _section(
        "bad-input", "Bad input", [_table(["file", "kind", "count", "detail"], rows, (2,))]
    )


def _dead_letters(a: Analysis) -> str:
    if not a.dead_letters:
        return _section("dead-letters", "Dead letters", ['<p class="empty">none</p>'])
    ordered = sorted(a.dead_letters, key=lambda d: (-d.records, d.reason))
    rows = [[d.reason, _count(d.records)] for d in ordered]
    return _section("dead-letters", "Dead letters", [_table(["reason", "records"], rows, (1,))])


def _footer(a: Analysis) -> str:
    where = (
        f"Parquet tables: <code>{escape(a.tables)}</code>"
        if a.tables
        else "The Parquet tables were not written for this run."
    )
    return f"<footer><p>{where}</p><p>Rendered by kinesis-lander sparkjobs.report.</p></footer>"


def render_html(analysis: Analysis) -> str:
    """The analysis as one self-contained HTML5 page: inline CSS and SVG, no script, no links
    outside the page. Every string from the data is escaped."""
    body = [
        _header(analysis),
        "<main>",
        _volume(analysis),
        _duplicates(analysis),
        _lateness(analysis),
        _hot_keys(analysis),
        _gaps(analysis),
        _bad_input(analysis),
        _dead_letters(analysis),
        "</main>",
        _footer(analysis),
    ]
    title = escape(f"{analysis.stream} {analysis.window}: Kinesis analysis")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def render_text(analysis: Analysis) -> str:
    """A short plain-text summary for a terminal: headline numbers, duplicates by cause,
    whole-window lateness, skew, sequence gaps, bad input and dead letters."""
    a = analysis
    t = _totals(a)
    removed = t.transport + t.producer
    lines = [
        f"stream {_plain(a.stream)}, window {_plain(a.window)}",
        f"generated     {_utc(a.generated_at):%Y-%m-%d %H:%M:%S} UTC",
        f"records       {a.records:,} ({_bytes(a.bytes)}) on {t.shards:,} shards",
        f"duplicates    {removed:,} removed ({_rate(removed, t.input_rows)} of "
        f"{t.input_rows:,}): transport {t.transport:,}, producer {t.producer:,}",
        f"remaining     {a.remaining_duplicates:,} duplicates",
    ]
    whole = {r.kind: r for r in a.lateness if r.hour is None}
    for kind in _kinds(list(whole.values())):
        r = whole[kind]
        lines.append(f"lateness      {kind}: p50 {_duration(r.p50_ms)}, p99 {_duration(r.p99_ms)}")
    if not whole:
        lines.append("lateness      no data")
    if a.event_time_field is None:
        lines.append("              event: not configured (--event-time-field)")
    skew = _skew(a.shards)
    if skew is None:
        lines.append("skew          no data")
    else:
        lines.append(f"skew          {skew[1]:.2f}x the mean shard ({_plain(skew[0].shard_id)})")
    if a.sequence_field is None:
        lines.append("gaps          not configured (--sequence-field)")
    else:
        lines.append(
            f"gaps          {len(a.gaps):,} producers: {sum(g.gaps for g in a.gaps):,} gaps, "
            f"{sum(g.missing for g in a.gaps):,} missing, "
            f"{sum(g.reorders for g in a.gaps):,} reorders"
        )
    lines.append(f"bad input     {t.bad_files:,} files, {t.bad_lines:,} malformed lines")
    lines.append(f"dead letters  {t.dead_letters:,} records ({len(a.dead_letters):,} reasons)")
    if a.tables:
        lines.append(f"tables        {_plain(a.tables)}")
    lines += [f"ATTENTION     {w}" for w in _warnings(a, t)]
    return "\n".join(lines) + "\n"
