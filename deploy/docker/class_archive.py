"""Build the AppCDS archive of `lander compact` into the Spark image (or anywhere).

``python deploy/docker/class_archive.py PATH`` compacts a window of one object of
three lines, written to a temporary folder, with ``LANDER_SPARK_CDS=PATH``: the JVM
writes the classes it loaded as it exits, and ``lander compact`` moves the archive to
PATH (sparkjobs/session.py). The image sets ``LANDER_SPARK_CDS`` to the same PATH, so
every nightly run starts from it. Exit status: 0 when PATH exists afterwards.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
from pathlib import Path

STREAM = "class-archive"


def build(path: Path) -> int:
    """Write the archive at ``path``; the exit status of the compaction, or 1."""
    with tempfile.TemporaryDirectory(prefix="lander-class-archive-") as work:
        root = Path(work)
        folder = root / "archive" / f"stream={STREAM}/dt=2026-01-01/hour=00/minute=00/shard=s"
        folder.mkdir(parents=True)
        lines = "".join(
            f'{{"stream":"{STREAM}","shard_id":"s","sequence_number":"{n}",'
            f'"subsequence_number":0,"partition_key":"p",'
            f'"arrival_ts":"2026-01-01T00:00:0{n}.000Z","event_id":"e{n}","data":{{"n":{n}}}}}\n'
            for n in (1, 2, 3)
        )
        (folder / "1-3.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
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
