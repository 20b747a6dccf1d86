"""The analysis report: one well-formed, self-contained, escaped page, and a short summary.

No Spark here: the report renders plain :mod:`sparkjobs.analysis.findings` data.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.analysis.charts import MAX_POINTS, bucket_seconds
from sparkjobs.analysis.findings import (
    Analysis,
    BadInput,
    DeadLetterStat,
    DuplicateStat,
    HotKey,
    Lateness,
    RescuedStat,
    SequenceGaps,
    ShardShare,
    VolumePoint,
)
from sparkjobs.analysis.report import render_html, render_text

START = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
HOSTILE = '<script>alert(1)</script> & "quote'
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class PageChecker(HTMLParser):
    """Records tags, attributes and text, and every end tag that closes the wrong element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.errors: list[str] = []
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += attrs
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += attrs

    def handle_endtag(self, tag: str) -> None:
        if self.open and self.open[-1] == tag:
            self.open.pop()
        else:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check(page: str) -> PageChecker:
    """Parse the page and assert it is well formed and self-contained."""
    checker = PageChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == []
    assert checker.open == [], f"never closed: {checker.open}"
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert "http://" not in page
    assert "https://" not in page
    assert "url(" not in page
    assert "@import" not in page
    for name, value in checker.attrs:
        assert not name.startswith("on"), name
        assert name != "src", value
        if name == "href":
            assert value is not None
            assert value.startswith("#"), value
    return checker


def realistic(**changes: object) -> Analysis:
    """Four shards over two hours, with something to show in every section."""
    shards = [f"shardId-00000000000{i}" for i in range(4)]
    volume = [
        VolumePoint(
            START + timedelta(minutes=m),
            shard,
            records=int(500 + 300 * (i + 1) * (1 + math.sin(m / 9 + i))),
            bytes=1000,
        )
        for m in range(120)
        for i, shard in enumerate(shards)
        if not (i == 3 and 40 <= m < 50)  # shard 3 was quiet for ten minutes
    ]
    total = sum(p.records for p in volume)
    per_shard = Counter[str]()
    for p in volume:
        per_shard[p.shard_id] += p.records
    analysis = Analysis(
        stream="orders",
        window="2024-05-01T10:00Z/PT2H",
        generated_at=START + timedelta(hours=2, minutes=5),
        records=total,
        bytes=total * 310,
        volume=volume,
        duplicates=[
            DuplicateStat(START, 50_000, transport=1_234, producer=56, output_rows=48_710),
            DuplicateStat(START + timedelta(hours=1), 60_000, 2_000, 44, 57_956),
        ],
        remaining_duplicates=3,
        lateness=[
            Lateness("event", None, 9_000, 850, 3_200, 250_000, 3_700_000),
            Lateness("landing", START + timedelta(hours=1), 5_000, 2_900, 4_100, 5_600, 7_000),
            Lateness("landing", None, 10_000, 3_000, 4_000, 5_500, 9_000),
            Lateness("landing", START, 5_000, 3_100, 3_900, 5_400, 9_000),
            Lateness("event", START, 9_000, -40, 3_000, 240_000, 3_700_000),
        ],
        shards=[ShardShare(s, n, n / total) for s, n in sorted(per_shard.items())],
        hot_keys=[
            HotKey("customer-42", shards[3], 9_000, 0.2, 0.05),
            HotKey("customer-7", shards[1], 4_000, 0.1, 0.02),
        ],
        sequence_field="seq",
        gaps=[
            SequenceGaps("producer-a", 1_000, 1, 1_010, gaps=2, missing=10, reorders=0),
            SequenceGaps("producer-b", 1_000, 1, 1_000, gaps=0, missing=0, reorders=3),
            SequenceGaps("producer-c", 1_000, 1, 1_000, gaps=0, missing=0, reorders=0),
        ],
        event_time_field="ts",
        bad_inputs=[
            BadInput("landed/2024/05/01/10/a.gz", "truncated", 1, "gzip stream ends early"),
            BadInput("landed/2024/05/01/10/b.gz", "malformed", 17, "line 3: not JSON"),
        ],
        dead_letters=[DeadLetterStat("payload too large", 12), DeadLetterStat("not json", 4)],
        tables="s3://lake/analysis/orders/2024-05-01/",
    )
    return dataclasses.replace(analysis, **changes)  # type: ignore[arg-type]


def empty(**changes: object) -> Analysis:
    """A window in which nothing arrived."""
    analysis = Analysis(stream="quiet", window="w", generated_at=START, records=0, bytes=0)
    return dataclasses.replace(analysis, **changes)  # type: ignore[arg-type]


def test_realistic_analysis_renders_one_well_formed_self_contained_page() -> None:
    """A full analysis gives a well-formed page with one SVG per chart and no outside links."""
    page = render_html(realistic())
    checker = check(page)
    # Volume over time, records per shard, duplicates per hour, lateness percentiles.
    assert checker.tags["svg"] == 4
    assert page.count("<svg") == 4
    assert checker.tags["polyline"] == 4  # one line per shard, none folded into "other"
    assert "no data" not in page
    for shard in ("shardId-000000000000", "shardId-000000000003"):
        assert shard in page
    assert "10:00" in page
    assert "11:00" in page
    assert "s3://lake/analysis/orders/2024-05-01/" in page


def test_sections_come_in_the_documented_order() -> None:
    """Header, volume, duplicates, lateness, hot keys, gaps, bad input, dead letters, footer."""
    page = render_html(realistic())
    anchors = ["volume", "duplicates", "lateness", "hot-keys", "gaps", "bad-input", "dead-letters"]
    places = [page.index(f'<section id="{anchor}">') for anchor in anchors]
    assert places == sorted(places)
    assert page.index("<header>") < places[0]
    assert page.index("<footer>") > places[-1]


def test_headline_numbers_and_warnings() -> None:
    """The header shows the totals, and warns when duplicates remain, or input went bad or dead."""
    page = render_html(realistic())
    header = page[page.index("<header>") : page.index("</header>")]
    assert "3,234" in header  # transport duplicates removed
    assert ">100<" in header  # producer duplicates removed
    assert "3.03%" in header  # (3,234 + 100) of 110,000 input rows
    assert "2 / 17" in header  # bad files / malformed lines
    assert header.count('class="card warn"') == 3
    assert 'class="alert"' in header

    clean = render_html(realistic(remaining_duplicates=0, bad_inputs=[], dead_letters=[]))
    assert "warn" not in clean[clean.index("<header>") : clean.index("</header>")]
    assert 'class="alert"' not in clean


def test_lateness_reads_as_human_durations_whole_window_first() -> None:
    """Milliseconds become 850 ms, 3.2 s, 4 min 10 s; each kind starts with its whole window."""
    page = render_html(realistic())
    for shown in ("850 ms", "3.2 s", "4 min 10 s", "1 h 2 min", "-40 ms"):
        assert shown in page
    rows = re.findall(r"<tr><td>(landing|event)</td><td>([^<]*)</td>", page)
    assert rows == [
        ("landing", "whole window"),
        ("landing", "2024-05-01 10:00"),
        ("landing", "2024-05-01 11:00"),
        ("event", "whole window"),
        ("event", "2024-05-01 10:00"),
    ]


def test_flags_are_named_when_event_time_or_sequences_are_not_configured() -> None:
    """Without the fields, the page and the summary name --event-time-field and --sequence-field."""
    analysis = realistic(event_time_field=None, sequence_field=None, gaps=[])
    page, text = render_html(analysis), render_text(analysis)
    for flag in ("--event-time-field", "--sequence-field"):
        assert flag in page
        assert flag in text


def test_sequence_gaps_list_the_worst_fifty_producers_most_missing_first() -> None:
    """Only producers with gaps or reorders are listed, most missing first, at most 50."""
    gaps = [SequenceGaps(f"p{i:03}", 100, 1, 100 + i, 1, i, 0) for i in range(1, 61)]
    gaps.append(SequenceGaps("clean", 100, 1, 100, 0, 0, 0))
    page = render_html(realistic(gaps=gaps))
    section = page[page.index('<section id="gaps">') : page.index('<section id="bad-input">')]
    assert "61 producers" in section
    assert section.index(">p060<") < section.index(">p059<") < section.index(">p011<")
    assert ">p010<" not in section
    assert ">clean<" not in section
    assert "Showing 50 of 60" in section

    clean = render_html(realistic(gaps=[gaps[-1]]))
    assert "No gaps or reorders" in clean


def test_hostile_strings_are_escaped_everywhere() -> None:
    """Markup in names, keys, files, reasons and details shows as text, never as markup."""
    analysis = realistic(
        stream=HOSTILE,
        window=HOSTILE,
        volume=[VolumePoint(START, HOSTILE, 10, 100)],
        shards=[ShardShare(HOSTILE, 10, 1.0)],
        hot_keys=[HotKey(HOSTILE, HOSTILE, 10, 1.0, 1.0)],
        gaps=[SequenceGaps(HOSTILE, 10, 1, 12, 1, 2, 0)],
        sequence_field=HOSTILE,
        event_time_field=HOSTILE,
        lateness=[Lateness(HOSTILE, None, 1, 1, 1, 1, 1)],
        bad_inputs=[BadInput(HOSTILE, HOSTILE, 1, HOSTILE)],
        dead_letters=[DeadLetterStat(HOSTILE, 1)],
        tables=HOSTILE,
    )
    page = render_html(analysis)
    checker = check(page)
    assert "<script" not in page
    assert '"quote' not in page
    assert '& "' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quote" in page
    # Escaped, not dropped: the reader sees the string as it was, in the tables and charts.
    text = "".join(checker.text)
    assert text.count(HOSTILE) >= 10
    assert "\x1b" not in render_text(dataclasses.replace(analysis, stream="s\x1b[2Jx"))


def test_empty_analysis_says_no_data() -> None:
    """With no records and every list empty, both renderings work and say there is no data."""
    for analysis in (empty(), empty(sequence_field="seq", event_time_field="ts")):
        page = render_html(analysis)
        checker = check(page)
        assert checker.tags["svg"] == 0
        assert page.count("no data") >= 4  # volume, shards, duplicates, lateness, hot keys
        assert "n/a" in page  # a duplicate rate with no input rows
        bad_input = page[page.index('<section id="bad-input">') :]
        assert bad_input.count(">none<") == 3  # bad input, dead letters, rescued values
        text = render_text(analysis)
        assert "no data" in text
        assert 10 <= len(text.splitlines()) <= 20


def test_degenerate_series_still_draw() -> None:
    """All-zero counts, clock skew and NaN give charts and "n/a", not errors; one bucket
    of volume and an hour without records are lines that say so, not charts."""
    analysis = realistic(
        volume=[VolumePoint(START, "shardId-0", 0, 0)],
        shards=[ShardShare("shardId-0", 0, 0.0)],
        duplicates=[DuplicateStat(START, 0, 0, 0, 0)],
        lateness=[
            Lateness("event", None, 3, -500, -200, -100, -1),
            Lateness("landing", None, 0, math.nan, math.nan, math.nan, math.nan),
        ],
    )
    page = render_html(analysis)
    assert check(page).tags["svg"] == 2  # shards, lateness
    assert "0 records from 2024-05-01 10:00 UTC, in one 1-minute bucket" in page
    assert "2024-05-01 10:00 to 10:59" in _section(page, "duplicates")
    assert "-500 ms" in page
    assert "n/a" in page
    assert "nan" not in page.lower()
    render_text(analysis)


def test_long_windows_with_many_shards_are_downsampled_and_grouped() -> None:
    """20,000 minutes of 20 shards make a page under 2 MB: wider buckets (at most
    MAX_POINTS), quiet shards as other."""
    volume = [
        VolumePoint(START + timedelta(minutes=m), f"shardId-{s:012}", 100 + s, 1000)
        for m in range(20_000)
        for s in range(20)
    ]
    shards = [ShardShare(f"shardId-{s:012}", 20_000 * (100 + s), 0.05) for s in range(20)]
    page = render_html(realistic(volume=volume, shards=shards))
    assert len(page.encode()) < 2_000_000
    checker = check(page)
    assert checker.tags["polyline"] == 12
    for points in re.findall(r'<polyline [^>]*points="([^"]*)"', page):
        assert len(points.split()) <= MAX_POINTS
    assert "other (9 shards)" in page
    assert "Summed into 2-hour buckets" in page
    assert "Records per 2 hours, by shard" in page
    # The quietest shards (0-8) are folded; the busiest one still has its own line.
    assert "<title>shardId-000000000019</title></polyline>" in page
    assert "<title>shardId-000000000000</title></polyline>" not in page


def test_text_summary_gives_duplicates_by_cause_and_what_remains() -> None:
    """The terminal summary names both duplicate causes, the remainder and the other totals."""
    text = render_text(realistic())
    assert 10 <= len(text.splitlines()) <= 20
    assert "transport 3,234" in text
    assert "producer 100" in text
    assert "3 duplicates" in text
    assert "ATTENTION" in text
    assert "landing: p50 3.0 s, p99 5.5 s" in text
    assert "event: p50 850 ms, p99 4 min 10 s" in text
    assert "2 gaps, 10 missing, 3 reorders" in text
    assert "2 files, 17 malformed lines" in text
    assert "16 records" in text
    assert "<" not in text


def test_sequence_duplicates_are_counted_apart_where_there_are_any() -> None:
    """Duplicates by producer sequence get their own card, column and summary count, and
    join the rate; a window with none shows neither."""
    hours = [
        DuplicateStat(START, 1_000, 10, 5, 960, sequence=25),
        DuplicateStat(START + timedelta(hours=1), 1_000, 0, 0, 1_000),
    ]
    text = render_text(realistic(duplicates=hours))
    assert "40 removed (2.00% of 2,000): transport 10, producer 5, sequence 25" in text
    page = render_html(realistic(duplicates=hours))
    assert "sequence duplicates removed" in page
    assert "<th>sequence</th>" in page or ">sequence<" in page
    plain = render_html(realistic())
    assert "sequence duplicates removed" not in plain
    assert ", sequence" not in render_text(realistic())


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}">')
    return page[start : page.index("</section>", start)]


def _polylines(page: str) -> list[list[tuple[float, float]]]:
    """Each line's points, as (x, y) pairs."""
    return [
        [(float(x), float(y)) for x, y in (pair.split(",") for pair in points.split())]
        for points in re.findall(r'<polyline [^>]*points="([^"]*)"', page)
    ]


@pytest.mark.parametrize(
    ("span", "seconds"),
    [
        (0, 1),
        (60, 1),  # a one-minute window: a point a second
        (298, 1),
        (299, 2),
        (3_600, 15),
        (4 * 3_600, 60),  # hours: a point a minute
        (86_400, 300),
        (7 * 86_400, 3_600),  # a week: a point an hour
        (60 * 86_400, 21_600),
        (365 * 86_400, 2 * 86_400),  # past a day, whole days
    ],
)
def test_chart_buckets_follow_the_span_of_the_data(span: float, seconds: int) -> None:
    """The finest round bucket that keeps a line within MAX_POINTS points."""
    assert bucket_seconds(span) == seconds


@given(st.floats(min_value=0, max_value=400 * 86_400), st.sampled_from([1, 5, 60, 3_600]))
def test_chart_buckets_give_a_few_hundred_points_and_divide_by_the_datas_own(
    span: float, finest: int
) -> None:
    """At most MAX_POINTS buckets however the span falls on them, each a whole number of
    the data's own buckets, and no coarser than needed: over ~100 points when wider than
    the data's own."""
    seconds = bucket_seconds(span, finest)
    assert seconds % finest == 0
    assert span // seconds + 2 <= MAX_POINTS  # first and last bucket partly covered
    if seconds > finest:
        assert span / seconds > (MAX_POINTS - 2) / 2.5


def test_a_one_minute_window_is_drawn_per_second_not_as_a_flat_line() -> None:
    """Sixty one-second buckets draw sixty points that rise and fall, and the axes say
    the bucket is a second."""
    volume = [
        VolumePoint(START + timedelta(seconds=s), "shardId-0", 100 + 50 * (s % 7), 1_000)
        for s in range(60)
    ]
    total = sum(p.records for p in volume)
    analysis = realistic(
        volume=volume, volume_seconds=1, shards=[ShardShare("shardId-0", total, 1.0)]
    )
    section = _section(render_html(analysis), "volume")
    (line,) = _polylines(section)
    assert len({x for x, _ in line}) == 60
    assert len({y for _, y in line}) == 7  # not flat: seven different counts
    assert "Records per second, by shard" in section
    assert "1-second buckets" in section
    assert "10:00:30" in section  # the time axis in seconds


def test_a_single_bucket_is_written_as_its_number_not_drawn_as_a_line() -> None:
    """Records that all arrived in one bucket have no line to draw: a flat line across
    the chart would look like a steady rate. The page says the number instead."""
    volume = [
        VolumePoint(START, "shardId-0", 1_234, 1_000),
        VolumePoint(START, "shardId-1", 766, 1_000),
    ]
    section = _section(render_html(realistic(volume=volume)), "volume")
    assert "<polyline" not in section
    assert "2,000 records" in section
    assert "10:00" in section


def test_hours_without_records_are_one_line_not_a_row_each() -> None:
    """A day compacted whole with records in two hours: the empty runs between and
    around them are one line each, and the chart spans only the hours with records."""
    hours = [DuplicateStat(START.replace(hour=h), 0, 0, 0, 0) for h in range(24)]
    hours[10] = DuplicateStat(START.replace(hour=10), 1_000, 10, 5, 985)
    hours[13] = DuplicateStat(START.replace(hour=13), 2_000, 20, 0, 1_980)
    section = _section(render_html(realistic(duplicates=hours)), "duplicates")
    rows = re.findall(r"<tr><td>([^<]*)</td><td[^>]*>([^<]*)</td>", section)
    assert rows == [
        ("2024-05-01 00:00 to 09:59", "no records"),
        ("2024-05-01 10:00", "1,000"),
        ("2024-05-01 11:00 to 12:59", "no records"),
        ("2024-05-01 13:00", "2,000"),
        ("2024-05-01 14:00 to 23:59", "no records"),
    ]
    assert section.count("<g><title>") == 4  # bars for 10:00 to 13:00, not 24


def test_reorders_are_explained_where_they_are_counted() -> None:
    """Under the sequence gaps, one sentence says what a reorder is and that it is not
    a lost record."""
    section = _section(render_html(realistic()), "gaps")
    assert "3 reorders" in section
    assert "A reorder is a record" in section
    assert "within a shard" in section
    assert "not data loss" in section
    assert "3 reorders (out of order within a shard, not lost)" in render_text(realistic())


def test_rescued_values_are_listed_by_place_in_both_renderings() -> None:
    """The typed columns' rescued values (issue 48), by place, a name escaped."""
    analysis = realistic(rescued=[RescuedStat("/user/<age>", 3), RescuedStat("/price", 1)])
    page = render_html(analysis)
    section = page[page.index('<section id="rescued">') :]
    assert "/user/&lt;age&gt;" in section
    assert "<age>" not in section
    assert section.index("/user/&lt;age&gt;") < section.index("/price")
    assert "rescued       4 values: /user/<age> 3, /price 1" in render_text(analysis)
    assert "rescued" not in render_text(realistic())
