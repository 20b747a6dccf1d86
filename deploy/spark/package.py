"""Zip the project's Python packages for ``spark-submit --py-files``.

Only ``.py`` files of ``consumer`` and ``sparkjobs`` go in (no caches, no node_modules):
the driver imports the job's settings and logging from ``consumer``, the executors
import ``sparkjobs``. Usage: ``python deploy/spark/package.py dist/lander-jobs.zip``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("consumer", "sparkjobs")


def package(target: Path) -> Path:
    """Write the zip; return its path."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in PACKAGES:
            for path in sorted((ROOT / name).rglob("*.py")):
                if "node_modules" in path.parts or "__pycache__" in path.parts:
                    continue
                archive.write(path, path.relative_to(ROOT).as_posix())
    return target


if __name__ == "__main__":
    print(package(Path(sys.argv[1] if len(sys.argv) > 1 else "dist/lander-jobs.zip")))
