"""Logs are structured and never carry a secret."""

from __future__ import annotations

import json

import pytest
import structlog

from consumer.telemetry import configure_logging, redact


def test_secret_keys_and_inline_credentials_are_masked() -> None:
    """Secret-looking fields and credentials inside messages are replaced by ***."""
    event = redact(
        None,
        "info",
        {
            "event": "connect",
            "aws_secret_access_key": "abc",
            "session_token": "t",
            "detail": "failed with aws_secret_access_key=XYZ123 in config",
            "shard_id": "shardId-1",
        },
    )
    assert event["aws_secret_access_key"] == "***"
    assert event["session_token"] == "***"
    assert "XYZ123" not in event["detail"]
    assert event["shard_id"] == "shardId-1"


def test_json_lines_carry_the_bound_ids(capsys: pytest.CaptureFixture[str]) -> None:
    """In JSON mode every line is one object, with the shard and worker ids bound."""
    configure_logging("json", "info")
    try:
        structlog.get_logger("t").bind(shard_id="s-1", worker_id="w-1").info(
            "hello", password="hunter2"
        )
    finally:
        # The logger factory captured this test's stderr; later tests must not use it.
        structlog.reset_defaults()
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert (line["event"], line["shard_id"], line["worker_id"]) == ("hello", "s-1", "w-1")
    assert line["password"] == "***"
