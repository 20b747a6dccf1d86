"""Settings: from ``LANDER_*`` environment variables and flags, by concern.

    fields.py        the prefix, value types (case-insensitive choices) and checks
    shared.py        what the workers and the batch jobs share, declared once: logging,
                     the archive (where it is, its payload format, its sequence pointer)
    landing.py       the lander's side of a worker: protection, files, deflate, dedupe
    worker.py        the worker (``lander run``, ``status``): streams, leases, timings,
                     read mode, metrics server; mixes in the two above
    produce.py       ``lander produce``
    streams_file.py  ``LANDER_STREAMS_FILE``: what differs between a fleet's streams
    loading.py       one line for everything wrong, unknown variables included
    flags.py         command-line flags made from the fields

The batch jobs' settings (sparkjobs/settings.py) build on :mod:`.shared`. Everything a
caller needs is importable from here.
"""

from consumer.config.fields import (
    PREFIX,
    ArchiveSse,
    CaseInsensitive,
    GzipCodec,
    LogFormat,
    LogLevel,
    PayloadFormat,
    ReadMode,
)
from consumer.config.flags import (
    FlagSpec,
    SettingFlag,
    add_setting_flags,
    flag_fields,
    flag_values,
)
from consumer.config.landing import LandingSettings
from consumer.config.loading import (
    ENVIRONMENT_ONLY,
    REMOVED,
    RENAMED,
    SETTINGS_MODULES,
    ConfigError,
    field_variables,
    known_variables,
    load_class,
    one_line,
    problems,
    unknown_variables,
    variables_of,
)
from consumer.config.produce import ProduceSettings, load_produce_settings
from consumer.config.shared import Archive, Logging
from consumer.config.worker import (
    Settings,
    default_worker_id,
    load_settings,
    parse_initial_position,
)

__all__ = [
    "ENVIRONMENT_ONLY",
    "PREFIX",
    "REMOVED",
    "RENAMED",
    "SETTINGS_MODULES",
    "Archive",
    "ArchiveSse",
    "CaseInsensitive",
    "ConfigError",
    "FlagSpec",
    "GzipCodec",
    "LandingSettings",
    "LogFormat",
    "LogLevel",
    "Logging",
    "PayloadFormat",
    "ProduceSettings",
    "ReadMode",
    "SettingFlag",
    "Settings",
    "add_setting_flags",
    "default_worker_id",
    "field_variables",
    "flag_fields",
    "flag_values",
    "known_variables",
    "load_class",
    "load_produce_settings",
    "load_settings",
    "one_line",
    "parse_initial_position",
    "problems",
    "unknown_variables",
    "variables_of",
]
