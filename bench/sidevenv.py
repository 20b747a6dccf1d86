"""Virtualenvs of their own, at the repository root, for tools whose pins disagree with
the project's: other Kinesis consumers (``.venv-peers``, bench/peers) and the engines
that read the compacted table without project code (``.venv-readers``,
tests/sparkjobs/test_table_readers.py).

Each is installed from its requirements file the first time it is needed, and again when
that file changes (a stamp holds the file's digest), the way ``deploy/validate.py``
installs ``.venv-deploy``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class SideVenvError(RuntimeError):
    """The virtualenv could not be created or installed (no registry, no ``venv``)."""


def ensure_venv(venv: Path, requirements: Path, label: str) -> Path:
    """Create and install ``venv`` from ``requirements`` if missing or stale; its python.

    Prints each command it runs, prefixed with ``label``.
    """
    stamp = venv / ".installed"
    python = venv / "bin" / "python"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        _ignore_contents(venv)
        return python
    base = shutil.which("python3") or sys.executable
    commands = [
        [base, "-m", "venv", str(venv)],
        [
            str(venv / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
        ],
    ]
    for command in commands:
        given = ["python3", *command[1:]] if command[0] == base else command
        shown = [_short(part) for part in given]
        print(f"{label}: $ {' '.join(shown)}", flush=True)
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise SideVenvError(f"{shown[0]}: {exc}") from exc
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise SideVenvError(f"`{' '.join(shown)}` exited with {done.returncode}:\n{tail}")
    _ignore_contents(venv)
    stamp.write_text(digest + "\n")
    return python


def _short(part: str) -> str:
    """A path inside the repository as a relative one, for the printed command."""
    path = Path(part)
    return str(path.relative_to(REPO)) if path.is_absolute() and path.is_relative_to(REPO) else part


def _ignore_contents(venv: Path) -> None:
    """A ``.gitignore`` of ``*`` inside the venv (as Python 3.13's venv writes), so git,
    and ruff with it, leave the installed packages alone even without a root entry."""
    marker = venv / ".gitignore"
    if venv.is_dir() and not marker.exists():
        marker.write_text("# created by bench/sidevenv.py: the whole venv is ignored\n*\n")
