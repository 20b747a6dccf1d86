"""The analysis page's sections (:mod:`sparkjobs.analysis.page`), in page order: volume,
duplicates, lateness, hot keys, sequence gaps, bad input, dead letters. Each is a short
function of the :class:`~sparkjobs.analysis.findings.Analysis`, sharing the page's
tables; numbers and times as :mod:`sparkjobs.analysis.formats` writes them.

Standard library only. Every string that came from the stream or the bucket (partition
keys, producers, file names, reasons, details) goes through ``html.escape``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from html import escape

from sparkjobs.analysis import formats as fmt
from sparkjobs.analysis.charts import (
    GREY,
    MIN_POINTS,
    PALETTE,
    Bar,
    Series,
    bucket_seconds,
    bucket_words,
    hbar_chart,
    line_chart,
    stacked_bars,
)
from sparkjobs.analysis.findings import Analysis, DuplicateStat, ShardShare, VolumePoint

MAX_LINES = 12  # volume lines, "other" included: beyond a dozen colours nobody can tell
MAX_BARS = 40  # shards in the records-per-shard chart, "other" included
MAX_GAP_ROWS = 50
MAX_TABLE_ROWS = 200  # a window full of malformed files must not make a 100 MB page


REORDER = (
    "A reorder is a record whose sequence value is lower than that of the record before it "
    "from the same producer within a shard. Kinesis keeps each shard in the order it "
    "accepted records, not the producer's: retried puts, puts in parallel, or several "
    "writers sharing one partition key reorder them. Reorders are not data loss; values "
    "that never arrived count as missing."
)
"""Under the gaps, where the count is: without it, thousands of reorders read as damage."""

# --- HTML pieces ----------------------------------------------------------------------

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


# --- the sections, in page order -------------------------------------------------------


def _bucket_volume(points: list[VolumePoint], own: int) -> tuple[int, int, list[Series], int]:
    """Sum the volume into round buckets and at most MAX_LINES lines: as the job counted
    them (``own`` seconds wide) or, for points that span too long for one chart, wider
    (:func:`bucket_seconds`: at most MAX_POINTS).

    Returns the first bucket's epoch second, the bucket width in seconds, the lines
    (missing buckets count as zero) and how many quiet shards were folded into "other".
    """
    totals: dict[str, int] = defaultdict(int)
    for p in points:
        totals[p.shard_id] += p.records
    busiest = sorted(totals, key=lambda s: (-totals[s], s))
    shown = busiest if len(busiest) <= MAX_LINES else busiest[: MAX_LINES - 1]
    folded = len(busiest) - len(shown)
    first = min(fmt.epoch_second(p.start) for p in points)
    last = max(fmt.epoch_second(p.start) for p in points)
    width = bucket_seconds(last - first, own)
    start = first - first % width  # buckets on round times: 10:15, not 10:07
    count = (last - start) // width + 1
    names = sorted(shown) + ([f"other ({folded} shards)"] if folded else [])
    lines = {name: [0.0] * count for name in names}
    keep = set(shown)
    for p in points:
        name = p.shard_id if p.shard_id in keep else names[-1]
        lines[name][(fmt.epoch_second(p.start) - start) // width] += p.records
    series = [
        Series(name, lines[name], GREY if folded and i == len(names) - 1 else PALETTE[i])
        for i, name in enumerate(names)
    ]
    return start, width, series, folded


def _too_few(start: int, width: int, series: list[Series]) -> str:
    """The numbers of a volume too short to draw (fewer than MIN_POINTS buckets)."""
    n = len(series[0].values)
    sums = [sum(s.values[i] for s in series) for i in range(n)]
    at = [datetime.fromtimestamp(start + i * width, UTC) for i in range(n)]
    clock = "%H:%M" if width % 60 == 0 else "%H:%M:%S"
    said = [f"{sums[0]:,.0f} records from {at[0]:%Y-%m-%d} {at[0].strftime(clock)}"]
    said += [f"{v:,.0f} from {t.strftime(clock)}" for v, t in zip(sums[1:], at[1:], strict=True)]
    adjective = bucket_words(width)[1]
    buckets = f"one {adjective} bucket" if n == 1 else f"{adjective} buckets"
    return f"<p>{' and '.join(said)} UTC, in {buckets}: too few points to draw a line.</p>"


def _shard_bars(shards: list[ShardShare]) -> list[Bar]:
    """Records per shard in shard order; past MAX_BARS the quietest become "other"."""
    busiest = sorted(shards, key=lambda s: (-s.records, s.shard_id))
    shown = busiest if len(busiest) <= MAX_BARS else busiest[: MAX_BARS - 1]
    rest = busiest[len(shown) :]
    bars = [
        Bar(s.shard_id, s.records, f"{s.records:,} ({fmt.share(s.share)})", PALETTE[0])
        for s in sorted(shown, key=lambda s: s.shard_id)
    ]
    if rest:
        records, share = sum(s.records for s in rest), sum(s.share for s in rest)
        note = f"{records:,} ({fmt.share(share)})"
        bars.append(Bar(f"other ({len(rest)} shards)", records, note, GREY))
    return bars


def volume(a: Analysis) -> str:
    if a.volume:
        start, width, series, folded = _bucket_volume(a.volume, a.volume_seconds)
        per = f"records per {bucket_words(width)[0]}"
        parts = [f"<h3>{per.capitalize()}, by shard</h3>"]
        if len(series[0].values) < MIN_POINTS:
            parts.append(_too_few(start, width, series))
        else:
            parts.append(line_chart(f"{per.capitalize()} by shard", start, width, series, per))
        if width > a.volume_seconds:
            adjective = bucket_words(width)[1]
            parts.append(
                f'<p class="note">Summed into {adjective} buckets to keep the page small.</p>'
            )
        if folded:
            parts.append(
                f'<p class="note">The {folded} quietest shards are drawn as one line, "other".</p>'
            )
    else:
        parts = ["<h3>Records over time, by shard</h3>", _NO_DATA]
    parts.append("<h3>Records per shard</h3>")
    parts.append(hbar_chart("Records per shard", _shard_bars(a.shards)) if a.shards else _NO_DATA)
    return _section("volume", "Volume", parts)


def _runs(hours: list[DuplicateStat]) -> list[DuplicateStat | tuple[datetime, datetime]]:
    """The hours in order, each run of consecutive hours without records (no input rows)
    as one (first, last) pair: a day compacted whole for minutes of data is three lines,
    not 24."""
    out: list[DuplicateStat | tuple[datetime, datetime]] = []
    for d in hours:
        last = out[-1] if out else None
        if d.input_rows:
            out.append(d)
        elif isinstance(last, tuple) and fmt.utc(d.hour) - fmt.utc(last[1]) == timedelta(hours=1):
            out[-1] = (last[0], d.hour)
        else:
            out.append((d.hour, d.hour))
    return out


def _no_records(first: datetime, last: datetime) -> str:
    """``2024-05-01 00:00 to 09:59``: from the first hour's start to the last one's end."""
    end = fmt.utc(last) + timedelta(minutes=59)
    same_day = end.date() == fmt.utc(first).date()
    return (
        f"{fmt.hour(first)} to {end:%H:%M}" if same_day else f"{fmt.hour(first)} to {fmt.hour(end)}"
    )


def duplicates(a: Analysis) -> str:
    if not a.duplicates:
        return _section("duplicates", "Duplicates", [_NO_DATA])
    hours = sorted(a.duplicates, key=lambda d: fmt.utc(d.hour))
    # Sequence duplicates (by producer sequence, no event id) get a column of their own
    # when any hour has one.
    by_sequence = any(d.sequence for d in hours)
    parts = []
    full = [i for i, d in enumerate(hours) if d.input_rows]
    if full:  # bars from the first hour with records to the last, not the whole window
        shown = hours[full[0] : full[-1] + 1]
        with_date = fmt.utc(shown[-1].hour) - fmt.utc(shown[0].hour) >= timedelta(days=1)
        stamp = "%m-%d %H:%M" if with_date else "%H:%M"
        labels = [fmt.utc(d.hour).strftime(stamp) for d in shown]
        series = [
            Series("transport", [float(d.transport) for d in shown], PALETTE[0]),
            Series("producer", [float(d.producer) for d in shown], PALETTE[1]),
        ]
        if by_sequence:
            series.append(Series("sequence", [float(d.sequence) for d in shown], PALETTE[2]))
        parts.append(stacked_bars("Duplicates removed per hour", labels, series, "duplicates"))
    headers = [
        "hour (UTC)",
        "input rows",
        "transport",
        "producer",
        *(["sequence"] if by_sequence else []),
        "rate",
        "output rows",
    ]
    rows = [
        [_no_records(*d), "no records", *[""] * (len(headers) - 2)]
        if isinstance(d, tuple)
        else [
            fmt.hour(d.hour),
            fmt.count(d.input_rows),
            fmt.count(d.transport),
            fmt.count(d.producer),
            *([fmt.count(d.sequence)] if by_sequence else []),
            fmt.rate(d.transport + d.producer + d.sequence, d.input_rows),
            fmt.count(d.output_rows),
        ]
        for d in _runs(hours)
    ]
    numeric = tuple(range(1, len(headers)))
    return _section("duplicates", "Duplicates", [*parts, _table(headers, rows, numeric)])


def lateness(a: Analysis) -> str:
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
    for k, kind in enumerate(fmt.lateness_kinds(a.lateness)):
        mine = [r for r in a.lateness if r.kind == kind]
        # The whole-window row (hour None) first, then the hours in order.
        mine.sort(
            key=lambda r: (0.0, 0.0) if r.hour is None else (1.0, fmt.utc(r.hour).timestamp())
        )
        for r in mine:
            values = (r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms)
            rows.append([kind, fmt.hour(r.hour), fmt.count(r.samples), *map(fmt.duration, values)])
            if r.hour is None:
                # Each kind on its own scale: landing takes seconds, event time can take
                # hours, and on one scale the landing bars would vanish.
                top = max([v for v in values if math.isfinite(v)] + [1e-9])
                for name, v in zip(("p50", "p90", "p99", "max"), values, strict=True):
                    colour = PALETTE[k % len(PALETTE)]
                    bars.append(Bar(f"{kind} {name}", v / top, fmt.duration(v), colour))
    if bars:
        parts.append(hbar_chart("Whole-window lateness percentiles", bars))
        parts.append('<p class="note">Bars are scaled per kind, to that kind\'s maximum.</p>')
    headers = ["kind", "hour (UTC)", "samples", "p50", "p90", "p99", "max"]
    parts.append(_table(headers, rows, (2, 3, 4, 5, 6), limit=10 * MAX_TABLE_ROWS))
    return _section("lateness", "Lateness", parts)


def hot_keys(a: Analysis) -> str:
    skew = fmt.skew(a.shards)
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
            fmt.count(k.records),
            fmt.share(k.share_of_shard),
            fmt.share(k.share_of_stream),
        ]
        for k in a.hot_keys
    ]
    headers = ["partition key", "shard", "records", "share of shard", "share of stream"]
    return _section("hot-keys", "Hot partition keys", [sentence, _table(headers, rows, (2, 3, 4))])


def gaps(a: Analysis) -> str:
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
        f"{gaps:,} gaps, {missing:,} missing, {reorders:,} reorders.</p>",
        f'<p class="note">{REORDER}</p>',
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
                fmt.count(g.records),
                str(g.first),
                str(g.last),
                fmt.count(g.gaps),
                fmt.count(g.missing),
                fmt.count(g.reorders),
            ]
            for g in flawed
        ]
        headers = ["producer", "records", "first", "last", "gaps", "missing", "reorders"]
        parts.append(_table(headers, rows, (1, 2, 3, 4, 5, 6), limit=MAX_GAP_ROWS))
    return _section("gaps", "Producer sequence gaps", parts)


def bad_input(a: Analysis) -> str:
    if not a.bad_inputs:
        return _section("bad-input", "Bad input", ['<p class="empty">none</p>'])
    rows = [[b.file, b.kind, fmt.count(b.count), b.detail] for b in a.bad_inputs]
    return _section(
        "bad-input", "Bad input", [_table(["file", "kind", "count", "detail"], rows, (2,))]
    )


def rescued(a: Analysis) -> str:
    title = "Rescued payload values"
    if not a.rescued:
        return _section("rescued", title, ['<p class="empty">none</p>'])
    rows = [[r.place, fmt.count(r.values)] for r in a.rescued]
    note = (
        "<p>Values that fit no typed column of the payload (a string where a number was): "
        "their column is null, the value is in <code>rescued</code>, and "
        "<code>data</code> holds the record as landed.</p>"
    )
    return _section("rescued", title, [note, _table(["place", "values"], rows, (1,))])


def dead_letters(a: Analysis) -> str:
    if not a.dead_letters:
        return _section("dead-letters", "Dead letters", ['<p class="empty">none</p>'])
    ordered = sorted(a.dead_letters, key=lambda d: (-d.records, d.reason))
    rows = [[d.reason, fmt.count(d.records)] for d in ordered]
    return _section("dead-letters", "Dead letters", [_table(["reason", "records"], rows, (1,))])
