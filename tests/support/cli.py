"""Running ``lander`` as an operator does, in a subprocess, and reading its refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from consumer.errors import EXIT_MISSING
from tests.support.cluster import REPO

LANDER = Path(sys.executable).parent / "lander"
EXIT_REFUSED = EXIT_MISSING
"""``lander run``'s exit status when the environment refuses the worker."""


def clean_env(aws: dict[str, str], **settings: str) -> dict[str, str]:
    """This process's environment without its LANDER_ and AWS_ variables, then ``aws``
    (endpoints, region, credentials) and ``settings`` (LANDER_ variables)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    return {**clean, **aws, **settings}


def run_lander(
    env: dict[str, str], *args: str, cwd: Path = REPO, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``lander ARGS`` with exactly ``env``; its output captured, stdin closed."""
    return subprocess.run(
        [str(LANDER), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal: one line on stderr starting with 'lander:', and no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("lander:")]
    assert len(lines) == 1, done.stderr
    return lines[0]
