"""Other Kinesis consumers to compare against, each run in ``.venv-peers`` as a subprocess.

Their dependencies may not agree with the project's pins, so they get a virtualenv of
their own at the repository root, installed from ``bench/requirements-peers.txt`` the
first time a benchmark needs it (and again when that file changes), the way
``deploy/validate.py`` installs ``.venv-deploy``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-peers"
REQUIREMENTS = REPO / "bench" / "requirements-peers.txt"
ASYNC_KINESIS_DRAIN = Path(__file__).resolve().with_name("async_kinesis_drain.py")


class PeersUnavailableError(RuntimeError):
    """The peers' virtualenv could not be created or installed."""


def peers_python() -> Path:
    """The interpreter of the peers' virtualenv."""
    return VENV / "bin" / "python"


def _digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ensure_peers_venv() -> Path:
    """Create and install ``.venv-peers`` if missing or stale; return its python.

    Prints each command it runs. Raises :class:`PeersUnavailableError` when it fails
    (no registry, no ``venv`` module), so that a benchmark can go on without the peers.
    """
    stamp = VENV / ".installed"
    python = peers_python()
    if python.exists() and stamp.exists() and stamp.read_text().strip() == _digest():
        _ignore_contents()
        return python
    base = shutil.which("python3") or sys.executable
    commands = [
        [base, "-m", "venv", VENV.name],
        [
            str(Path(VENV.name) / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS.relative_to(REPO)),
        ],
    ]
    for command in commands:
        shown = ["python3", *command[1:]] if command[0] == base else command
        print(f"peers: $ {' '.join(shown)}", flush=True)
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise PeersUnavailableError(f"{shown[0]}: {exc}") from exc
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise PeersUnavailableError(
                f"`{' '.join(shown)}` exited with {done.returncode}:\n{tail}"
            )
    _ignore_contents()
    stamp.write_text(_digest() + "\n")
    return python


def _ignore_contents() -> None:
    """A ``.gitignore`` of ``*`` inside the venv (as Python 3.13's venv writes), so git,
    and ruff with it, leave the installed packages alone even without a root entry."""
    marker = VENV / ".gitignore"
    if VENV.is_dir() and not marker.exists():
        marker.write_text("# created by bench/peers: the whole venv is ignored\n*\n")
