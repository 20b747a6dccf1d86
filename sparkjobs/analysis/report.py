"""Render an :class:`~sparkjobs.analysis.findings.Analysis` as one HTML page
(:func:`render_html`, :mod:`sparkjobs.analysis.page`) or a short text summary
(:func:`render_text`, here), both in :mod:`sparkjobs.analysis.formats`' words.

Standard library only. Everything that came from the stream or the bucket is made safe
for where it goes: escaped in the page, control characters replaced in the summary.
"""

from __future__ import annotations

from sparkjobs.analysis import formats as fmt
from sparkjobs.analysis.findings import Analysis
from sparkjobs.analysis.page import render_html

__all__ = ["render_html", "render_text"]


def render_text(analysis: Analysis) -> str:
    """A short plain-text summary for a terminal: headline numbers, duplicates by cause,
    whole-window lateness, skew, sequence gaps, bad input and dead letters."""
    a = analysis
    t = fmt.totals(a)
    removed = t.transport + t.producer + t.sequence
    by_sequence = f", sequence {t.sequence:,}" if t.sequence else ""
    lines = [
        f"stream {fmt.plain(a.stream)}, window {fmt.plain(a.window)}",
        f"generated     {fmt.utc(a.generated_at):%Y-%m-%d %H:%M:%S} UTC",
        f"records       {a.records:,} ({fmt.size(a.bytes)}) on {t.shards:,} shards",
        f"duplicates    {removed:,} removed ({fmt.rate(removed, t.input_rows)} of "
        f"{t.input_rows:,}): transport {t.transport:,}, producer {t.producer:,}{by_sequence}",
        f"remaining     {a.remaining_duplicates:,} duplicates",
    ]
    whole = {r.kind: r for r in a.lateness if r.hour is None}
    for kind in fmt.lateness_kinds(list(whole.values())):
        r = whole[kind]
        lines.append(
            f"lateness      {kind}: p50 {fmt.duration(r.p50_ms)}, p99 {fmt.duration(r.p99_ms)}"
        )
    if not whole:
        lines.append("lateness      no data")
    if a.event_time_field is None:
        lines.append("              event: not configured (--event-time-field)")
    skew = fmt.skew(a.shards)
    if skew is None:
        lines.append("skew          no data")
    else:
        lines.append(f"skew          {skew[1]:.2f}x the mean shard ({fmt.plain(skew[0].shard_id)})")
    if a.sequence_field is None:
        lines.append("gaps          not configured (--sequence-field)")
    else:
        reorders = sum(g.reorders for g in a.gaps)
        lines.append(
            f"gaps          {len(a.gaps):,} producers: {sum(g.gaps for g in a.gaps):,} gaps, "
            f"{sum(g.missing for g in a.gaps):,} missing, {reorders:,} reorders"
            + (" (out of order within a shard, not lost)" if reorders else "")
        )
    lines.append(f"bad input     {t.bad_files:,} files, {t.bad_lines:,} malformed lines")
    lines.append(f"dead letters  {t.dead_letters:,} records ({len(a.dead_letters):,} reasons)")
    if a.rescued:
        places = ", ".join(f"{fmt.plain(r.place)} {r.values:,}" for r in a.rescued)
        lines.append(f"rescued       {sum(r.values for r in a.rescued):,} values: {places}")
    if a.tables:
        lines.append(f"tables        {fmt.plain(a.tables)}")
    lines += [f"ATTENTION     {w}" for w in fmt.warnings(a, t)]
    return "\n".join(lines) + "\n"
