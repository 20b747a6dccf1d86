"""LANDER_EVENT_TIME_POINTER and LANDER_COMPACT_PARTITION (issue 48, item 4): what a run
is given, and the settings refused at start in one line (fast: no Spark)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from consumer.config import ConfigError
from sparkjobs import cli
from sparkjobs.compaction import eventtime
from sparkjobs.compaction.job import CompactionError, CompactJob, jobs_of
from sparkjobs.compaction.lines import pointer_path
from sparkjobs.settings import AnalyseSettings, CompactSettings, load
from sparkjobs.table.declared import read_declared
from sparkjobs.table.table import PARTITIONS
from sparkjobs.window import Window


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("LANDER_")]:
        monkeypatch.delenv(key)


def _settings(**values: str) -> CompactSettings:
    return load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c", **values)


def test_the_pointer_and_the_partition_reach_each_stream_s_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "streams.toml"
    path.write_text('[streams."orders"]\nevent_time_pointer = "/placed_at"\n')
    monkeypatch.setenv("LANDER_STREAMS_FILE", str(path))
    monkeypatch.setenv("LANDER_EVENT_TIME_POINTER", "/ts")
    monkeypatch.setenv("LANDER_COMPACT_PARTITION", "arrival_hour,event_day")
    settings = load(
        CompactSettings, stream="orders,clicks", archive="file:///a", compacted="file:///c"
    )
    jobs = {job.stream: job for job in jobs_of(settings)}
    assert jobs["orders"].event_time_pointer == "/placed_at"  # the file's, for its stream
    assert jobs["clicks"].event_time_pointer == "/ts"
    assert {job.partition for job in jobs.values()} == {"arrival_hour,event_day"}
    analysis = load(AnalyseSettings, stream="orders", compacted="file:///c")
    assert analysis.for_stream("orders").event_time_pointer == "/placed_at"


def test_the_default_is_arrival_hours_and_no_event_time() -> None:
    (job,) = jobs_of(_settings(window="2026-11-21"))
    assert (job.partition, job.event_time_pointer) == ("arrival_hour", None)
    assert eventtime.folders(job) == ["dt", "hour"]
    assert eventtime.written(job) == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"compact_partition": "event_day"},
            "LANDER_COMPACT_PARTITION=event_day partitions by the event time: set "
            "LANDER_EVENT_TIME_POINTER (e.g. /ts)",
        ),
        (
            {"compact_partition": "day"},
            "LANDER_COMPACT_PARTITION Input should be 'arrival_hour', 'arrival_hour,event_day' "
            "or 'event_day'",
        ),
        ({"event_time_pointer": "ts"}, "must be a JSON pointer starting with '/', got 'ts'"),
        (
            {"event_time_pointer": "/ts", "payload_format": "raw"},
            "LANDER_EVENT_TIME_POINTER points into JSON payloads; with "
            "LANDER_PAYLOAD_FORMAT=raw they are base64",
        ),
    ],
)
def test_bad_event_time_settings_are_refused_in_one_line(
    values: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as refused:
        _settings(**values)
    assert "\n" not in str(refused.value)


def test_lander_compact_refuses_event_days_without_a_pointer_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compact", "--stream", "s", "--archive", (tmp_path / "a").as_uri()]
    argv += ["--compacted", (tmp_path / "c").as_uri(), "--window", "2026-11-21"]
    assert cli.main([*argv, "--partition", "arrival_hour,event_day"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "set LANDER_EVENT_TIME_POINTER" in err


def test_a_job_names_a_partition_it_can_write() -> None:
    window = Window.parse("2026-11-21")
    with pytest.raises(CompactionError, match="'day' is not one of arrival_hour"):
        CompactJob("file:///a", "s", window, "file:///c", partition="day")
    with pytest.raises(CompactionError, match="needs the event time"):
        CompactJob("file:///a", "s", window, "file:///c", partition="event_day")
    job = CompactJob(
        "file:///a", "s", window, "file:///c", event_time_pointer="/t", partition="event_day"
    )
    assert eventtime.folders(job) == ["dt", "hour", "event_day"]
    assert eventtime.written(job) == ["event_ts"]
    assert set(PARTITIONS) == {"arrival_hour", "arrival_hour,event_day", "event_day"}


def test_a_declared_timestamp_says_how_the_event_time_is_written() -> None:
    declared = read_declared(
        {
            "type": "object",
            "properties": {
                "meta": {
                    "type": "object",
                    "properties": {"sent~at/ms": {"type": "integer", "format": "unix-time-ms"}},
                },
                "ts": {"type": "string", "format": "date-time"},
            },
        }
    )
    window = Window.parse("2026-11-21")

    def notation(pointer: str) -> str | int | None:
        job = CompactJob(
            "file:///a", "s", window, "file:///c", declared=declared, event_time_pointer=pointer
        )
        return eventtime.notation(job)

    assert notation("/meta/sent~0at~1ms") == 1000
    assert notation("/ts") == "iso"
    assert notation("/other") is None  # not declared: ISO text or an epoch number
    assert pointer_path("/a~1b/c~0d") == ("a/b", "c~d")
