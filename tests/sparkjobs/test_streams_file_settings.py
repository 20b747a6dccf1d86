"""LANDER_STREAMS_FILE in the batch commands: the workers' per-stream file gives a
stream its archive, payload format and sequence pointer in `lander compact`,
`lander analyse` and `lander raw-table` too, so one environment serves both. No Spark
here: the settings only (tests/sparkjobs/test_compact_runs.py runs one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from consumer.config import ConfigError
from sparkjobs.settings import AnalyseSettings, CompactSettings, load, with_scheme_of


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("LANDER_")]:
        monkeypatch.delenv(key)


def _file(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "streams.toml"
    path.write_text(text)
    monkeypatch.setenv("LANDER_STREAMS_FILE", str(path))


def test_a_stream_takes_its_table_and_the_others_keep_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _file(
        tmp_path,
        '[streams."pay*"]\narchive = "s3://other/pay"\npayload_format = "raw"\n'
        'initial_position = "LATEST"\nevent_id_pointer = "/id"\n'
        '[streams."orders"]\nsequence_pointer = "/seq"\n',
        monkeypatch,
    )
    settings = load(
        CompactSettings,
        stream="orders,payments",
        archive="s3a://bucket/landed",
        compacted="s3a://bucket/compacted",
    )
    payments = settings.for_stream("payments")
    # The workers write s3://; this job reads through s3a://, as LANDER_ARCHIVE says.
    assert (payments.archive, payments.payload_format) == ("s3a://other/pay", "raw")
    assert payments.sequence_pointer is None
    orders = settings.for_stream("orders")
    assert (orders.archive, orders.payload_format) == ("s3a://bucket/landed", "json")
    assert orders.sequence_pointer == "/seq"
    assert (payments.stream, orders.stream) == ("payments", "orders")


def test_without_a_file_each_stream_has_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(CompactSettings, stream="a,b", archive="file:///x", compacted="file:///y")
    assert settings.for_stream("b").archive == "file:///x"
    assert settings.for_stream("b").stream == "b"


def test_an_analysis_without_an_archive_reads_none_for_any_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _file(tmp_path, '[streams."a"]\narchive = "s3://other/a"\n', monkeypatch)
    settings = load(AnalyseSettings, stream="a", compacted="file:///y")
    assert settings.for_stream("a").archive is None


def test_a_bad_table_for_a_stream_of_the_run_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _file(tmp_path, '[streams."b"]\npayload_format = "xml"\n', monkeypatch)
    with pytest.raises(ConfigError) as refused:
        load(CompactSettings, stream="a,b", archive="file:///x", compacted="file:///y")
    message = str(refused.value)
    assert "\n" not in message
    assert "LANDER_STREAMS_FILE, stream b: LANDER_PAYLOAD_FORMAT" in message
    _file(tmp_path, '[streams."b"\n', monkeypatch)
    with pytest.raises(ConfigError, match=r"LANDER_STREAMS_FILE .* is not TOML"):
        load(CompactSettings, stream="a", archive="file:///x", compacted="file:///y")


@pytest.mark.parametrize(
    ("uri", "like", "expected"),
    [
        ("s3://b/p", "s3a://x/y", "s3a://b/p"),
        ("s3a://b/p", "s3://x/y", "s3://b/p"),
        ("s3://b/p", "file:///x", "s3://b/p"),
        ("file:///b/p", "s3a://x/y", "file:///b/p"),
    ],
)
def test_an_s3_archive_is_read_with_the_jobs_scheme(uri: str, like: str, expected: str) -> None:
    assert with_scheme_of(uri, like) == expected
