"""The read modes by name (``LANDER_READ_MODE``): the one place a mode is registered.

Each mode is a module of its own with a :class:`~consumer.stream.readers.ReadMode`
object; the daemon's assembly (:mod:`consumer.lifecycle.assembly`) starts the one a
stream's settings name. ``tests/stream/test_read_modes.py`` holds the setting's choices
to this registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer.stream import efo, polling
from consumer.stream.readers import ReaderFactory, ReadMode

if TYPE_CHECKING:
    from consumer.config import Settings

MODES: dict[str, ReadMode] = {
    "polling": polling.MODE,
    "efo": efo.MODE,
}


def read_mode(name: str) -> ReadMode:
    """The mode registered under ``name`` (a setting's value, already validated)."""
    return MODES[name]


def unstarted(settings: Settings | None = None) -> ReaderFactory:
    """The reader of a mode that needs nothing started (polling, paced by ``settings``
    when given): the default of a worker or a shard built without an assembly."""
    if settings is None:
        return polling.polling()
    return polling.reader_of(settings)
