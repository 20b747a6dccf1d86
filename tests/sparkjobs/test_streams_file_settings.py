"""LANDER_STREAMS_FILE in the batch commands: the workers' per-stream file gives a
stream its archive, payload format and sequence pointer in `lander compact`,
`lander analyse` and `lander raw-table` too, so one environment serves both. No Spark
here: the settings only (tests/sparkjobs/test_compact_runs.py runs one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from consumer.config import ConfigError
from sparkjobs import cli
from sparkjobs.settings import AnalyseSettings, CompactSettings, load, with_scheme_of
from sparkjobs.table.declared import Declared, declared_setting


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


def declared_for(settings: CompactSettings) -> Declared | None:
    """What ``lander compact`` reads of a stream's LANDER_PAYLOAD_SCHEMA."""
    return declared_setting(settings.declared_document, settings.payload_schema)


def test_the_payload_schema_is_inferred_off_or_declared_per_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = tmp_path / "orders.schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"ts": {"type": "string", "format": "date-time"}}}'
    )
    _file(
        tmp_path,
        f'[streams."orders"]\npayload_schema = "{schema}"\n'
        '[streams."logs"]\npayload_schema = "off"\n',
        monkeypatch,
    )
    settings = load(
        CompactSettings, stream="orders,logs,clicks", archive="file:///a", compacted="file:///c"
    )
    orders = settings.for_stream("orders")
    assert orders.payload_mode == "declared"
    declared = declared_for(orders)
    assert declared is not None
    assert declared.timestamps == {("ts",): "iso"}
    assert settings.for_stream("logs").payload_mode == "off"
    clicks = settings.for_stream("clicks")  # the default: inferred typed columns
    assert (clicks.payload_mode, declared_for(clicks)) == ("infer", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, r"LANDER_PAYLOAD_SCHEMA must be infer, off or a JSON Schema file; cannot read"),
        ("{", r"LANDER_PAYLOAD_SCHEMA .* is not JSON"),
        ("[]", r"LANDER_PAYLOAD_SCHEMA .* is not a JSON Schema \(an object\)"),
    ],
)
def test_a_bad_payload_schema_is_refused_at_start_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, message: str
) -> None:
    path = tmp_path / "schema.json"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv("LANDER_PAYLOAD_SCHEMA", str(path))
    with pytest.raises(ConfigError, match=message) as refused:
        load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c")
    assert "\n" not in str(refused.value)


def test_a_declared_schema_needs_json_payloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"type": "object", "properties": {}}')
    monkeypatch.setenv("LANDER_PAYLOAD_SCHEMA", str(path))
    monkeypatch.setenv("LANDER_PAYLOAD_FORMAT", "raw")
    with pytest.raises(ConfigError, match="with LANDER_PAYLOAD_FORMAT=raw payloads are base64"):
        load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c")


def test_a_declared_schema_this_reader_does_not_take_is_refused_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"type": "object", "properties": {"a": {"oneOf": []}}}')
    monkeypatch.setenv("LANDER_PAYLOAD_SCHEMA", str(path))
    settings = load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c")
    with pytest.raises(ConfigError) as refused:
        declared_for(settings)
    assert str(refused.value) == (
        f"LANDER_PAYLOAD_SCHEMA {path}: /a: oneOf is not supported; give one type"
    )


def test_lander_compact_refuses_a_bad_declared_schema_in_one_line_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"type": "object", "properties": {"a": {"oneOf": []}}}')
    monkeypatch.setenv("LANDER_PAYLOAD_SCHEMA", str(path))
    argv = ["compact", "--stream", "s", "--archive", (tmp_path / "a").as_uri()]
    argv += ["--compacted", (tmp_path / "c").as_uri(), "--window", "2026-11-21"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err == f"lander: LANDER_PAYLOAD_SCHEMA {path}: /a: oneOf is not supported; give one type\n"
    )
