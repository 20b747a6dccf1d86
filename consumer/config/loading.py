"""Loading settings: one line for everything wrong, unknown variables included.

Every command loads its settings through :func:`load_class`, which folds pydantic's
report into one :class:`ConfigError` line naming each ``LANDER_*`` variable (values are
never quoted), and refuses a ``LANDER_*`` variable no command reads, with the closest
name (:func:`unknown_variables`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import AliasChoices, ValidationError
from pydantic_settings import BaseSettings

from consumer.config.fields import PREFIX
from consumer.errors import EXIT_CONFIG, LanderError


class ConfigError(LanderError):
    """Bad or missing configuration, with one line that names the setting."""

    exit_code = EXIT_CONFIG


S = TypeVar("S", bound=BaseSettings)


def load_class(kind: type[S], **overrides: Any) -> S:
    """Settings of class ``kind`` from the environment and overrides (None: not given).

    Every command loads its settings here, so every command also refuses a ``LANDER_*``
    variable that no command reads (:func:`unknown_variables`). All problems, unknown
    variables first, go into one :class:`ConfigError` line.
    """
    clean = {key: value for key, value in overrides.items() if value is not None}
    found = unknown_variables()
    try:
        settings = kind(**clean)
    except ValidationError as exc:
        raise ConfigError(_line([*found, *problems(exc)])) from None
    if found:
        raise ConfigError(_line(found))
    return settings


def one_line(exc: ValidationError) -> str:
    """A validation error as one line naming each LANDER_* variable."""
    return _line(problems(exc))


def _line(found: list[str]) -> str:
    return "invalid configuration: " + "; ".join(found)


def problems(exc: ValidationError) -> list[str]:
    """Each error of a validation as ``LANDER_NAME what is wrong``.

    Field errors are named by their variable. A model-level error (empty ``loc``: a
    check across fields, such as renew below failover) is taken as it is: its message
    names the variables itself. Input values are never added (pydantic's ``input``).
    """
    found = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required but not set"
        found.append(f"{PREFIX}{where.upper()} {message}" if where else message)
    return found


# -- which LANDER_* variables exist ------------------------------------------------------

SETTINGS_MODULES = (
    "consumer.config.shared",
    "consumer.config.landing",
    "consumer.config.worker",
    "consumer.config.produce",
    "sparkjobs.settings",
)
"""Where the settings classes live; every ``BaseSettings`` subclass defined there counts
(as for docs/configuration.md, see docs/configdoc.py)."""

ENVIRONMENT_ONLY: dict[str, str] = {
    "LANDER_SPARK_DRIVER_MEMORY": "sparkjobs/session.py: driver memory of a local Spark "
    "session (set by docker-compose.yml and the k8s kustomizations)",
    "LANDER_SPARK_LOG_LEVEL": "sparkjobs/session.py: Spark's own log level",
    "LANDER_SPARK_CDS": "sparkjobs/session.py: the AppCDS archive of lander compact and "
    "analyse (a file, or off; default under the user's cache)",
    "LANDER_SPARK_READER_JAR": "sparkjobs/compaction/objectreader.py: the jar of the "
    "compaction's "
    "object reader (a file, or off for Spark's text reader; default built under the user's "
    "cache when javac is there)",
    "LANDER_SPARK_PROPERTIES": "sparkjobs/session.py: a Spark properties file a local "
    "session starts with (the Spark image's defaults); the job's own settings win",
    "LANDER_S3A_JARS": "tests/support/s3a.py: the folder holding the S3A jars of the tests",
}
"""Variables read straight from the environment, not through a settings class: their
readers run where no settings object exists (``get_session`` is also called by the demo,
the tests and the benchmarks), so they are known without being fields."""


@functools.cache
def known_variables() -> frozenset[str]:
    """Every ``LANDER_*`` variable some command reads: the fields of every settings class
    of every command (an environment shared by ``lander run``, ``produce``, ``compact``
    and ``analyse`` is fine), and :data:`ENVIRONMENT_ONLY`."""
    names = set(ENVIRONMENT_ONLY)
    for kind in settings_classes():
        names.update(variables_of(kind))
    return frozenset(names)


def settings_classes() -> list[type[BaseSettings]]:
    """Every settings class of :data:`SETTINGS_MODULES`, in the order defined."""
    found: list[type[BaseSettings]] = []
    for name in SETTINGS_MODULES:
        module = importlib.import_module(name)
        found.extend(
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, BaseSettings)
            and value.__module__ == name
        )
    return found


def variables_of(kind: type[BaseSettings]) -> set[str]:
    """The environment variables that set the fields of ``kind`` (upper case)."""
    return {name for field_name in kind.model_fields for name in field_variables(kind, field_name)}


def field_variables(kind: type[BaseSettings], field_name: str) -> list[str]:
    """The environment variables that set one field of ``kind`` (upper case)."""
    info = kind.model_fields[field_name]
    alias = info.validation_alias or info.alias
    if isinstance(alias, str):
        return [alias.upper()]
    if isinstance(alias, AliasChoices):
        return [choice.upper() for choice in alias.choices if isinstance(choice, str)]
    prefix = str(kind.model_config.get("env_prefix", ""))
    return [f"{prefix}{field_name}".upper()]


RENAMED: dict[str, str] = {
    "LANDER_COMPACT_LOOKBACK_MINUTES": "LANDER_COMPACT_DEDUPE_HORIZON (a duration: 90m, 24h, 1d)",
}
"""Settings that were replaced, and what replaced them: named in the error."""

REMOVED: dict[str, str] = {
    "LANDER_COORDINATION": "board coordination is the only mode now; see docs/operations.md, "
    "Upgrading from a release with scan coordination",
    "LANDER_LEASE_SCAN_SECONDS": "no worker scans the lease table to take leases any more "
    "(the leader's sweep is LANDER_LEASE_SWEEP_SECONDS)",
}
"""Settings that were dropped with nothing in their place, and why: named in the error."""


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One problem per ``LANDER_*`` variable that nothing reads, with the closest name.

    Names only: a value is never quoted. Case is ignored as pydantic-settings ignores it.
    """
    environ = os.environ if environ is None else environ
    known = known_variables()
    suffixes = sorted(name.removeprefix(PREFIX) for name in known if name.startswith(PREFIX))
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper in known:
            continue
        if upper in RENAMED:
            found.append(f"{name} is no longer a setting (replaced by {RENAMED[upper]})")
            continue
        if upper in REMOVED:
            found.append(f"{name} is no longer a setting ({REMOVED[upper]})")
            continue
        # Compare without the prefix every name shares, or anything looks close.
        close = difflib.get_close_matches(upper.removeprefix(PREFIX), suffixes, n=1)
        hint = f"did you mean {PREFIX}{close[0]}?" if close else "see docs/configuration.md"
        found.append(f"{name} is not a setting ({hint})")
    return found
