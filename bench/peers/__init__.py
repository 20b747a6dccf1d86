"""Other Kinesis consumers to compare against, each run in ``.venv-peers`` as a subprocess.

Their dependencies may not agree with the project's pins, so they get a virtualenv of
their own at the repository root, installed from ``bench/requirements-peers.txt`` the
first time a benchmark needs it (and again when that file changes): bench/sidevenv.py.
"""

from __future__ import annotations

from pathlib import Path

from bench.sidevenv import REPO, SideVenvError, ensure_venv

VENV = REPO / ".venv-peers"
REQUIREMENTS = REPO / "bench" / "requirements-peers.txt"
ASYNC_KINESIS_DRAIN = Path(__file__).resolve().with_name("async_kinesis_drain.py")


class PeersUnavailableError(RuntimeError):
    """The peers' virtualenv could not be created or installed."""


def peers_python() -> Path:
    """The interpreter of the peers' virtualenv."""
    return VENV / "bin" / "python"


def ensure_peers_venv() -> Path:
    """Create and install ``.venv-peers`` if missing or stale; return its python.

    Raises :class:`PeersUnavailableError` when it fails (no registry, no ``venv``
    module), so that a benchmark can go on without the peers.
    """
    try:
        return ensure_venv(VENV, REQUIREMENTS, "peers")
    except SideVenvError as exc:
        raise PeersUnavailableError(str(exc)) from exc
