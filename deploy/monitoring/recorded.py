"""Recorded ``/metrics`` pages as promtool unit-test input.

A recording is a list of text expositions (what ``/metrics`` answered), taken at a
regular period. :func:`input_series` turns it into promtool's ``input_series``: one
entry per series, ``name{labels,instance="w1"}``, with one value per sample, that is,
one per interval of the unit test, and ``_`` where a page lacks the series (not created
yet, or removed, as a shard's gauges are when its worker lets it go).

Time can be scaled: with samples taken every 0.5 s and a test interval of 1m, a few
seconds of a real worker become minutes for the rules. Values that are themselves
durations (``DURATIONS``) are multiplied by the same factor, so that a checkpoint 3 s old
after 6 samples reads 360 s, as old as the 6 minutes those samples stand for. Counters
need nothing: a rate per interval is what it was per sample.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import TypedDict

from prometheus_client.parser import text_string_to_metric_families

DURATIONS = frozenset({"lander_checkpoint_age_seconds", "lander_behind_latest_seconds"})
"""Gauges whose value is an elapsed time, scaled with the recording's time."""


class InputSeries(TypedDict):
    """One entry of a promtool test group's ``input_series``."""

    series: str
    values: str


def series_name(name: str, labels: dict[str, str]) -> str:
    """``name{a="1",b="2"}`` with labels sorted and values escaped as PromQL wants."""
    if not labels:
        return name
    body = ",".join(f'{key}="{_escape(value)}"' for key, value in sorted(labels.items()))
    return f"{name}{{{body}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def input_series(
    expositions: Sequence[str],
    *,
    instance: str,
    time_scale: float = 1.0,
    prefix: str = "lander_",
    durations: Collection[str] = DURATIONS,
) -> list[InputSeries]:
    """Every ``prefix`` series of the expositions, one value per exposition.

    ``instance`` is added to every series, as the scrape would (an ``instance`` label
    already there becomes ``exported_instance``, as Prometheus renames it). Counters'
    ``_created`` samples are left out. The values of ``durations`` series are multiplied
    by ``time_scale`` (the test interval over the sampling period).
    """
    columns: dict[str, list[str]] = {}
    for index, text in enumerate(expositions):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if not sample.name.startswith(prefix) or sample.name.endswith("_created"):
                    continue
                labels = dict(sample.labels)
                if "instance" in labels:
                    labels["exported_instance"] = labels.pop("instance")
                labels["instance"] = instance
                value = float(sample.value)
                if sample.name in durations:
                    value *= time_scale
                column = columns.setdefault(series_name(sample.name, labels), [])
                column.extend(["_"] * (index - len(column)))
                column.append(_number(value))
    total = len(expositions)
    for column in columns.values():
        column.extend(["_"] * (total - len(column)))
    return [
        {"series": name, "values": " ".join(values)} for name, values in sorted(columns.items())
    ]
