"""LANDER_STREAMS_FILE: per-stream settings read from TOML, validated at start, the
stream's own table over a pattern's, refusals in one line naming the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumer.config import ConfigError, load_settings
from consumer.config.streams_file import PER_STREAM, overrides_for, read_streams_file


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("LANDER_"):
            monkeypatch.delenv(key)


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "streams.toml"
    path.write_text(text)
    return str(path)


def test_a_stream_takes_its_own_table_else_the_first_matching_pattern(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        '[streams."orders-*"]\npayload_format = "raw"\n'
        '[streams."orders-eu"]\narchive = "s3://b/eu"\nevent_id_pointer = "/id"\n'
        '[streams."*"]\ninitial_position = "LATEST"\n',
    )
    base = load_settings(
        streams="orders-*,clicks", lease_table="leases", archive="s3://b/all", streams_file=path
    )
    eu = base.for_stream("orders-eu")  # its own table wins over the patterns before it
    assert (eu.archive, eu.payload_format, eu.event_id_pointer) == ("s3://b/eu", "json", "/id")
    us = base.for_stream("orders-us")
    assert (us.archive, us.payload_format, us.initial_position) == (
        "s3://b/all",
        "raw",
        "TRIM_HORIZON",
    )
    clicks = base.for_stream("clicks")
    assert (clicks.archive, clicks.initial_position) == ("s3://b/all", "LATEST")
    assert clicks.stream == "clicks"
    assert clicks.streams is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[streams.orders]\npayload_format = "xml"\n', '[streams."orders"]: LANDER_PAYLOAD_FORMAT'),
        ('[streams.orders]\nworker_id = "w"\n', "sets worker_id; a stream may set only archive"),
        ('[streams.orders]\narchive = "ftp://x"\n', "LANDER_ARCHIVE must be s3://"),
        ('[streams.orders]\npayload_format = "raw"\nsequence_pointer = "/n"\n', "are base64"),
        ("[orders]\n", "every table goes under"),
        ("not toml [", "is not TOML"),
        ('[streams."bad name!"]\n', "is no stream name"),
        ('[streams."arn:aws:kinesis:eu-west-1:123456789012:stream/x"]\n', "not its ARN"),
        ("[streams]\norders = 1\n", "must be a table"),
        ("[streams.orders]\narchive = 1\n", "archive must be a string"),
    ],
)
def test_a_bad_file_is_refused_in_one_line_naming_the_table(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(streams="orders", lease_table="leases", streams_file=path)
    message = str(info.value)
    assert "\n" not in message
    assert "LANDER_STREAMS_FILE" in message
    assert problem in message


def test_the_file_needs_several_streams_and_must_exist(tmp_path: Path) -> None:
    path = _file(tmp_path, "")
    with pytest.raises(ConfigError, match="it needs LANDER_STREAMS"):
        load_settings(stream="orders", lease_table="leases", streams_file=path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(streams="orders", lease_table="leases", streams_file=str(tmp_path / "no"))


def test_only_the_documented_settings_may_differ(tmp_path: Path) -> None:
    text = "[streams.s]\n" + "".join(f'{key} = "x"\n' for key in PER_STREAM)
    tables = read_streams_file(_file(tmp_path, text))
    assert overrides_for(tables, "s") == dict.fromkeys(PER_STREAM, "x")
    assert overrides_for(tables, "t") == {}
