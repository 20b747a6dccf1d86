"""Settings fail at start with one clear line; sequence numbers compare as integers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.config import ConfigError, load_settings
from consumer.sequence import (
    Position,
    Sentinel,
    checkpoint_from_item,
    checkpoint_to_item,
    parse_sequence_number,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("LANDER_"):
            monkeypatch.delenv(key)


def test_missing_settings_are_named_in_one_line() -> None:
    """Without a stream and a table, start-up fails naming both variables."""
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "\n" not in message
    assert "LANDER_STREAM is required" in message
    assert "LANDER_LEASE_TABLE is required" in message


def test_bad_values_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad value is reported with its variable and what is allowed."""
    monkeypatch.setenv("LANDER_STREAM", "s")
    monkeypatch.setenv("LANDER_LEASE_TABLE", "leases")
    monkeypatch.setenv("LANDER_INITIAL_POSITION", "yesterday")
    with pytest.raises(ConfigError, match="LANDER_INITIAL_POSITION must be TRIM_HORIZON"):
        load_settings()
    with pytest.raises(ConfigError, match=r"LANDER_RENEW_SECONDS \(6\) must be below LANDER_FAIL"):
        load_settings(initial_position="LATEST", failover_seconds=5, renew_seconds=6)
    with pytest.raises(ConfigError, match="LANDER_ARCHIVE"):
        load_settings(initial_position="LATEST", archive="ftp://x")


def test_the_isal_codec_without_its_wheel_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LANDER_GZIP_CODEC=isal where the isal wheel is missing: one line naming the
    setting and the fix, not an ImportError on the first landed run."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "isal" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"LANDER_GZIP_CODEC.*isal wheel"):
        load_settings(stream="s", lease_table="leases", gzip_codec="isal")
    assert load_settings(stream="s", lease_table="leases", gzip_codec="ZLIB").gzip_codec == "zlib"


def test_an_advertised_host_needs_the_metrics_port() -> None:
    """Other workers wake this one on its metrics port: a host set without the port is
    refused at start, in one line; auto and off need nothing."""
    base = {"stream": "s", "lease_table": "leases"}
    with pytest.raises(ConfigError, match=r"LANDER_ADVERTISE_HOST \(pod-1\) needs LANDER_METR"):
        load_settings(**base, advertise_host="pod-1")
    with pytest.raises(ConfigError, match="LANDER_ADVERTISE_HOST must be a host name"):
        load_settings(**base, advertise_host="http://pod-1/", metrics_port=9100)
    assert load_settings(**base, advertise_host="pod-1", metrics_port=9100).metrics_port == 9100
    assert load_settings(**base).advertise_host == "auto"
    assert load_settings(**base, advertise_host="off").advertise_host == "off"


def test_env_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment gives the settings, flags (overrides) win, defaults fill the rest."""
    monkeypatch.setenv("LANDER_STREAM", "orders")
    monkeypatch.setenv("LANDER_LEASE_TABLE", "orders-leases")
    monkeypatch.setenv("LANDER_FAILOVER_SECONDS", "12")
    settings = load_settings(stream="payments", initial_position="2026-01-02T03:04:05")
    assert settings.stream == "payments"
    assert settings.failover_seconds == 12
    assert settings.renew_interval == 4
    assert settings.start_position == (
        Sentinel.AT_TIMESTAMP,
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


@given(st.integers(0, 10**128 - 1), st.integers(0, 10**128 - 1))
def test_sequence_numbers_order_as_integers(a: int, b: int) -> None:
    """Parsed sequence numbers order by value, whatever their string lengths."""
    assert (parse_sequence_number(str(a)) < parse_sequence_number(str(b))) == (a < b)


@given(st.integers(0, 10**128 - 1), st.integers(0, 2**31))
def test_checkpoints_round_trip_through_the_item_form(sequence: int, sub: int) -> None:
    """A position survives the (checkpoint, checkpointSubSequenceNumber) pair."""
    position = Position(sequence, sub)
    assert checkpoint_from_item(*checkpoint_to_item(position)) == position
    for sentinel in Sentinel:
        assert checkpoint_from_item(*checkpoint_to_item(sentinel)) is sentinel


@pytest.mark.parametrize("bad", ["", "12a", "-1", "1" * 129, "١٢"])
def test_garbage_is_not_a_sequence_number(bad: str) -> None:
    """Anything but up to 128 ASCII digits is refused."""
    with pytest.raises(ValueError, match="not a Kinesis sequence number"):
        parse_sequence_number(bad)
