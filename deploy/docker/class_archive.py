"""Build the AppCDS archive of `lander compact` into the Spark image (or anywhere).

``python deploy/docker/class_archive.py PATH`` compacts a window of one object of
three lines, written to a temporary folder, with ``LANDER_SPARK_CDS=PATH``: the JVM
writes the classes it loaded as it exits, and ``lander compact`` moves the archive to
PATH (sparkjobs/session.py). The image sets ``LANDER_SPARK_CDS`` to the same PATH, so
every nightly run starts from it. Exit status: 0 when PATH exists afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from consumer.archive.sample import write_sample

STREAM = "class-archive"


def build(path: Path) -> int:
    """Write the archive at ``path``; the exit status of the compaction, or 1."""
    with tempfile.TemporaryDirectory(prefix="lander-class-archive-") as work:
        root = Path(work)
        write_sample(root / "archive", STREAM, "s", datetime(2026, 1, 1, tzinfo=UTC))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
        env |= {"LANDER_SPARK_CDS": str(path), "LANDER_SPARK_MASTER": "local[1]"}
        argv = ["compact", "--stream", STREAM, "--archive", f"file://{root / 'archive'}"]
        argv += ["--compacted", f"file://{root / 'out'}", "--window", "2026-01-01T00"]
        done = subprocess.run([sys.executable, "-m", "consumer.cli", *argv], env=env, check=False)
    if done.returncode != 0:
        return done.returncode
    return 0 if path.is_file() else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python deploy/docker/class_archive.py PATH")
    sys.exit(build(Path(sys.argv[1])))
