"""``LANDER_WINDOW`` as a list: days, hours and ranges, in time order, never overlapping."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.window import Window, WindowError, parse_windows

START = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def disjoint_windows(draw: st.DrawFn) -> list[Window]:
    """Distinct days, and hours of other days: windows no two of which overlap."""
    days = draw(st.sets(st.integers(0, 400), max_size=8))
    windows = [Window(START + timedelta(days=d), 24) for d in days]
    hour_days = draw(st.sets(st.integers(0, 400).filter(lambda d: d not in days), max_size=4))
    for day in hour_days:
        for hour in draw(st.sets(st.integers(0, 23), min_size=1, max_size=5)):
            windows.append(Window(START + timedelta(days=day, hours=hour), 1))
    return windows


@given(disjoint_windows().filter(bool), st.randoms())
def test_any_order_of_disjoint_windows_parses_to_them_in_time_order(
    windows: list[Window], rng: random.Random
) -> None:
    given_order = list(windows)
    rng.shuffle(given_order)
    text = " , ".join(w.label for w in given_order)
    assert parse_windows(text) == sorted(windows, key=lambda w: w.start)


@given(st.integers(0, 400), st.integers(0, 60), st.booleans())
def test_a_range_is_every_day_or_hour_from_one_end_to_the_other(
    first: int, count: int, hours: bool
) -> None:
    step = timedelta(hours=1) if hours else timedelta(days=1)
    size = 1 if hours else 24
    ends = [Window(START + timedelta(days=first) + step * i, size) for i in (0, count)]
    expanded = parse_windows(f"{ends[0].label}..{ends[1].label}")
    assert expanded == [Window(ends[0].start + step * i, size) for i in range(count + 1)]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2026-11-21,2026-11-21", "window 2026-11-21: given twice"),
        ("2026-11-21T05,2026-11-21", "window 2026-11-21T05: overlaps 2026-11-21"),
        ("2026-11-20..2026-11-22,2026-11-22T23", "2026-11-22T23: overlaps 2026-11-22"),
        ("2026-11-22..2026-11-21", "ends before it starts"),
        ("2026-11-21..2026-11-22T03", "both ends must be days or both hours"),
        ("2026-11-21,,2026-11-22", "an empty item"),
        ("2026-11-21..", "expected a day YYYY-MM-DD or an hour"),
        ("2026-02-30", "day is out of range"),
    ],
)
def test_a_bad_list_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(WindowError, match=why):
        parse_windows(text)
