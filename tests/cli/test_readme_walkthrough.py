"""The README's "All of it on your machine", run as written: bash, in an empty folder,
with the venv's ``bin`` first on the PATH (what ``. .venv/bin/activate`` does).

The block is found by the ``<!-- walkthrough -->`` marker above it, so a change to the
README's commands is what this test runs; it must end with every event read once by
pyiceberg from the table the walkthrough compacted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EVENTS = 2000

pytestmark = [
    pytest.mark.emulator,
    pytest.mark.processes,
    pytest.mark.spark,
    pytest.mark.deep,  # a whole pipeline in processes; the demo test is the fast tier's
    pytest.mark.timeout(600),
]


def walkthrough() -> str:
    """The shell block that follows the marker in README.md."""
    text = (REPO / "README.md").read_text()
    match = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)\n```", text, re.DOTALL)
    assert match, "README.md has no walkthrough block"
    return match[1]


def test_the_block_is_a_path_from_nothing_to_a_query() -> None:
    """What the walkthrough must keep doing, whatever its wording."""
    block = walkthrough()
    for step in ("lander local-stack", "lander run --check", "lander run &", "lander produce"):
        assert step in block, step
    assert "lander status" in block
    assert "lander compact" in block
    assert "lander analyse" in block
    assert "pyiceberg" in block


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["LANDER_LOG_LEVEL"] = "warning"  # the worker's lines would bury the output
    env["LANDER_SPARK_MASTER"] = "local[2]"
    script = "set -euo pipefail\n" + walkthrough() + "\n"
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert f"produced {EVENTS} events" in out
    assert "start-up would create the lease table orders-leases" in out
    assert out.strip().splitlines()[-1] == f"{EVENTS} rows, {EVENTS} event ids", out[-2000:]
    assert "Traceback" not in done.stderr
    reports = list((tmp_path / "compacted" / "reports" / "stream=orders").rglob("report.html"))
    assert len(reports) == 1, out[-2000:]
    page = reports[0].read_text()
    assert "shardId-000000000000" in page
    assert "shardId-000000000001" in page  # both shards' records were analysed
