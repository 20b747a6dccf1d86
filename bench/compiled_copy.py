"""A copy of the project with the landing hot path compiled by mypyc, for the hotpath
benchmark and the tests that run against it (never compiled in place: an extension
module would shadow its ``.py`` in the working tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from consumer.compiled import HOT_PATH

REPO = Path(__file__).resolve().parents[1]


def can_compile() -> bool:
    """Whether this machine has a C compiler (mypy, and so mypyc, is a dev dependency)."""
    return shutil.which("cc") is not None


def compile_copy(into: Path) -> Path:
    """Copy ``consumer``, ``bench`` and ``tests`` under ``into`` and compile the hot
    path there, as ``KINESIS_LANDER_MYPYC=1`` does for the wheel; returns the copy's root."""
    root = into / "compiled"
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.so")
    for folder in ("consumer", "bench", "tests"):
        shutil.copytree(REPO / folder, root / folder, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    # The emulators the end-to-end tests start (installed by `make`, not copied).
    modules = REPO / "consumer" / "cli" / "emulators" / "node_modules"
    if modules.is_dir():
        (root / "consumer" / "cli" / "emulators" / "node_modules").symlink_to(modules)
    subprocess.run(
        [sys.executable, "-m", "mypyc", *HOT_PATH],
        cwd=root,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return root
