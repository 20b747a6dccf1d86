"""Structured logging: JSON lines in containers, readable columns on a terminal.

Every line about a shard carries ``shard_id`` and ``worker_id`` (bound where the
shard's logger is made). Values whose key looks like a secret are masked before any
renderer sees them, so a credential passed around by mistake never reaches a log.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog

_SECRET_KEY = re.compile(r"secret|password|token|credential|authorization|session_key", re.I)
_SECRET_VALUE = re.compile(r"(aws_secret_access_key|aws_session_token)\s*[=:]\s*\S+", re.I)


def redact(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor that masks secret-looking keys and inline credentials."""
    for key, value in list(event.items()):
        if _SECRET_KEY.search(key) and value is not None:
            event[key] = "***"
        elif isinstance(value, str) and _SECRET_VALUE.search(value):
            event[key] = _SECRET_VALUE.sub(r"\1=***", value)
    return event


def _stderr_logger(*_: Any) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)


def configure_logging(
    fmt: Literal["auto", "json", "console"] = "auto", level: str = "info"
) -> None:
    """Set up structlog (and the stdlib root logger it renders through) once."""
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # sys.stderr as it is when a logger is made, not when this ran: a caller that
        # swaps stderr (a test's capture, a wrapper) never leaves a closed one behind.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    # Libraries log through the stdlib; keep their noise out unless debugging.
    logging.basicConfig(level=logging.WARNING if numeric > logging.DEBUG else logging.DEBUG)
