"""Render an :class:`~sparkjobs.analysis.findings.Analysis` as one HTML page or a short
text summary.

Standard library only. The charts are inline SVG (:mod:`sparkjobs.analysis.charts`), so the page
opens from a laptop, a console download or a mail attachment with no network, fonts or
JavaScript. Everything that came from the stream or the bucket (stream name, partition
keys, producers, file names, reasons, details) goes through ``html.escape``.

Long module: one page, section by section in page order, each section a short function
of the Analysis sharing the page's number formats, tables and cards.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape

from sparkjobs.analysis.charts import (
    GREY,
    PALETTE,
    Bar,
    Series,
    hbar_chart,
    line_chart,
    round_minutes,
    stacked_bars,
)
from sparkjobs.analysis.findings import Analysis, Lateness, ShardShare, VolumePoint

__all__ = ["render_html", "render_text"]

MAX_BUCKETS = 1500  # points per volume line: more add bytes, not anything the eye can see
MAX_LINES = 12  # volume lines, "other" included: beyond a dozen colours nobody can tell
MAX_BARS = 40  # shards in the records-per-shard chart, "other" included
MAX_GAP_ROWS = 50
MAX_TABLE_ROWS = 200  # a window full of malformed files must not make a 100 MB page

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


def _plain(text: str) -> str:
    """Text for a terminal: control characters from the data must not drive it."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _hour(hour: datetime | None) -> str:
    return "whole window" if hour is None else _utc(hour).strftime("%Y-%m-%d %H:%M")


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
    sequence: int
    dead_letters: int
    bad_files: int
    bad_lines: int
    shards: int


def _totals(a: Analysis) -> _Totals:
    return _Totals(
        input_rows=sum(d.input_rows for d in a.duplicates),
        transport=sum(d.transport for d in a.duplicates),
        producer=sum(d.producer for d in a.duplicates),
        sequence=sum(d.sequence for d in a.duplicates),
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
    removed = t.transport + t.producer + t.sequence
    cards = [
        _card(_count(a.records), "records"),
        _card(_bytes(a.bytes), "bytes"),
        _card(_count(t.shards), "shards"),
        _card(_count(t.transport), "transport duplicates removed"),
        _card(_count(t.producer), "producer duplicates removed"),
        *([_card(_count(t.sequence), "sequence duplicates removed")] if t.sequence else []),
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


def _bucket_volume(points: list[VolumePoint]) -> tuple[int, int, list[Series], int]:
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
    width = round_minutes((last - first + 1) / MAX_BUCKETS)
    start = first - first % width  # buckets on round times: 10:15, not 10:07
    count = (last - start) // width + 1
    names = sorted(shown) + ([f"other ({folded} shards)"] if folded else [])
    lines = {name: [0.0] * count for name in names}
    keep = set(shown)
    for p in points:
        name = p.shard_id if p.shard_id in keep else names[-1]
        lines[name][(_epoch_minute(p.minute) - start) // width] += p.records
    series = [
        Series(name, lines[name], GREY if folded and i == len(names) - 1 else PALETTE[i])
        for i, name in enumerate(names)
    ]
    return start, width, series, folded


def _shard_bars(shards: list[ShardShare]) -> list[Bar]:
    """Records per shard in shard order; past MAX_BARS the quietest become "other"."""
    busiest = sorted(shards, key=lambda s: (-s.records, s.shard_id))
    shown = busiest if len(busiest) <= MAX_BARS else busiest[: MAX_BARS - 1]
    rest = busiest[len(shown) :]
    bars = [
        Bar(s.shard_id, s.records, f"{s.records:,} ({_share(s.share)})", PALETTE[0])
        for s in sorted(shown, key=lambda s: s.shard_id)
    ]
    if rest:
        records, share = sum(s.records for s in rest), sum(s.share for s in rest)
        note = f"{records:,} ({_share(share)})"
        bars.append(Bar(f"other ({len(rest)} shards)", records, note, GREY))
    return bars


def _volume(a: Analysis) -> str:
    parts = ["<h3>Records per minute, by shard</h3>"]
    if a.volume:
        start, width, series, folded = _bucket_volume(a.volume)
        per = "records per minute" if width == 1 else f"records per {width} min"
        parts.append(line_chart(f"{per.capitalize()} by shard", start, width, series, per))
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
    parts.append(hbar_chart("Records per shard", _shard_bars(a.shards)) if a.shards else _NO_DATA)
    return _section("volume", "Volume", parts)


def _duplicates(a: Analysis) -> str:
    if not a.duplicates:
        return _section("duplicates", "Duplicates", [_NO_DATA])
    hours = sorted(a.duplicates, key=lambda d: _utc(d.hour))
    with_date = _utc(hours[-1].hour) - _utc(hours[0].hour) >= timedelta(days=1)
    labels = [_utc(d.hour).strftime("%m-%d %H:%M" if with_date else "%H:%M") for d in hours]
    # Sequence duplicates (by producer sequence, no event id) get a column of their own
    # when any hour has one.
    by_sequence = any(d.sequence for d in hours)
    series = [
        Series("transport", [float(d.transport) for d in hours], PALETTE[0]),
        Series("producer", [float(d.producer) for d in hours], PALETTE[1]),
    ]
    if by_sequence:
        series.append(Series("sequence", [float(d.sequence) for d in hours], PALETTE[2]))
    chart = stacked_bars("Duplicates removed per hour", labels, series, "duplicates")
    rows = [
        [
            _hour(d.hour),
            _count(d.input_rows),
            _count(d.transport),
            _count(d.producer),
            *([_count(d.sequence)] if by_sequence else []),
            _rate(d.transport + d.producer + d.sequence, d.input_rows),
            _count(d.output_rows),
        ]
        for d in hours
    ]
    headers = [
        "hour (UTC)",
        "input rows",
        "transport",
        "producer",
        *(["sequence"] if by_sequence else []),
        "rate",
        "output rows",
    ]
    numeric = tuple(range(1, len(headers)))
    return _section("duplicates", "Duplicates", [chart, _table(headers, rows, numeric)])


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
                    bars.append(Bar(f"{kind} {name}", v / top, _duration(v), colour))
    if bars:
        parts.append(hbar_chart("Whole-window lateness percentiles", bars))
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
    removed = t.transport + t.producer + t.sequence
    by_sequence = f", sequence {t.sequence:,}" if t.sequence else ""
    lines = [
        f"stream {_plain(a.stream)}, window {_plain(a.window)}",
        f"generated     {_utc(a.generated_at):%Y-%m-%d %H:%M:%S} UTC",
        f"records       {a.records:,} ({_bytes(a.bytes)}) on {t.shards:,} shards",
        f"duplicates    {removed:,} removed ({_rate(removed, t.input_rows)} of "
        f"{t.input_rows:,}): transport {t.transport:,}, producer {t.producer:,}{by_sequence}",
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
