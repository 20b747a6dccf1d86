"""The `lander` command as a user meets it: help, and one clear line for bad settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # each test runs `python -m consumer.cli`

REPO = Path(__file__).resolve().parents[2]


def _lander(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    return subprocess.run(
        [sys.executable, "-m", "consumer.cli", *args],
        env={**clean, "AWS_REGION": "us-east-1", **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_help_names_the_commands_and_the_settings() -> None:
    """`lander --help` lists the commands and says where settings come from."""
    result = _lander("--help")
    assert result.returncode == 0
    for command in ("run", "status", "produce", "demo", "local-stack", "compact"):
        assert f"lander {command}" in result.stdout, command
    assert "LANDER_" in result.stdout
    assert "docs/configuration.md" in result.stdout


def test_missing_settings_stop_start_up_with_one_line() -> None:
    """Without a stream or table, `lander run` exits 2 naming both, on one line."""
    result = _lander("run")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "LANDER_STREAM is required" in lines[0]
    assert "LANDER_LEASE_TABLE is required" in lines[0]


def test_the_lander_without_an_archive_names_that_setting() -> None:
    """The default processor needs LANDER_ARCHIVE, and says so."""
    result = _lander("run", LANDER_STREAM="s", LANDER_LEASE_TABLE="leases")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lander: LANDER_ARCHIVE is required by the lander: s3://bucket/prefix or file:///path"
    ]


def test_a_secret_never_reaches_the_error() -> None:
    """A bad setting's message does not echo credentials from the environment."""
    result = _lander(
        "run",
        LANDER_STREAM="bad stream name!",
        LANDER_LEASE_TABLE="leases",
        AWS_SECRET_ACCESS_KEY="SECRET-VALUE-123",
    )
    assert result.returncode == 2
    assert "LANDER_STREAM" in result.stderr
    assert "SECRET-VALUE-123" not in result.stderr + result.stdout
