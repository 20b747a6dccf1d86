"""Zip what the Spark jobs need for ``spark-submit --py-files``, and nothing else.

``sparkjobs`` and the few modules of ``consumer`` it imports (tests/test_layout.py
keeps that list closed): the archive format, settings and errors, sequences and
logging, and the small pure modules the settings validate with (stream names and
patterns, lease keys, the archive's protection settings). The daemon (leases, reading,
landing), the operator layer, caches and node_modules stay out;
tests/deploy/test_spark_package.py imports the jobs from the zip alone.
Usage: ``python deploy/spark/package.py dist/lander-jobs.zip``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = (
    "consumer/__init__.py",
    "consumer/errors.py",
    "consumer/sequence.py",
    "consumer/telemetry.py",
    "consumer/landing/__init__.py",
    "consumer/landing/fingerprint.py",
    "consumer/landing/protection.py",
    "consumer/leases/__init__.py",
    "consumer/leases/keys.py",
    "consumer/leases/model.py",
    "consumer/stream/__init__.py",
    "consumer/stream/streams.py",
)
FOLDERS = ("consumer/archive", "consumer/config", "sparkjobs")


def package(target: Path) -> Path:
    """Write the zip; return its path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    paths = [ROOT / name for name in FILES]
    for folder in FOLDERS:
        paths.extend(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(paths):
            archive.write(path, path.relative_to(ROOT).as_posix())
    return target


if __name__ == "__main__":
    print(package(Path(sys.argv[1] if len(sys.argv) > 1 else "dist/lander-jobs.zip")))
