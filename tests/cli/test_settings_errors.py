"""Settings fail loudly: a misspelt variable, a bad value, a cross-field rule.

Every command's settings come from one environment of ``LANDER_*`` variables. These tests
pin what a user sees when that environment is wrong: one line, naming variables (never
Python field names), with the closest real name for a typo, and no value echoed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings

from consumer import cli
from consumer.config import (
    ENVIRONMENT_ONLY,
    ConfigError,
    ProduceSettings,
    Settings,
    known_variables,
    load_class,
    load_produce_settings,
    load_settings,
    unknown_variables,
)
from consumer.config.loading import settings_classes
from consumer.metrics import version
from sparkjobs.settings import (
    AnalyseSettings,
    CompactSettings,
    JobSettings,
    MaintainSettings,
    RawTableSettings,
    load,
)

REPO = Path(__file__).resolve().parents[2]
CLASSES: tuple[type[BaseSettings], ...] = (
    Settings,
    ProduceSettings,
    JobSettings,
    CompactSettings,
    AnalyseSettings,
    MaintainSettings,
    RawTableSettings,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("LANDER_"):
            monkeypatch.delenv(key)


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two settings a worker cannot do without."""
    monkeypatch.setenv("LANDER_STREAM", "orders")
    monkeypatch.setenv("LANDER_LEASE_TABLE", "orders-leases")


def _message(kind: type[BaseSettings], **overrides: Any) -> str:
    """The ConfigError line of loading ``kind`` (as every command loads its settings)."""
    with pytest.raises(ConfigError) as info:
        load_class(kind, **overrides)
    return str(info.value)


def _python_names_in(message: str) -> list[str]:
    """Field names (those with an underscore, unmistakably Python) found in a message."""
    names = {name for kind in CLASSES for name in kind.model_fields if "_" in name}
    return sorted(name for name in names if re.search(rf"\b{name}\b", message))


# -- unknown variables -------------------------------------------------------------------


@pytest.mark.usefixtures("worker_env")
def test_a_misspelt_variable_is_an_error_naming_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LANDER_FAILOVER_SECOND (no S) is refused at load, suggesting LANDER_FAILOVER_SECONDS."""
    monkeypatch.setenv("LANDER_FAILOVER_SECOND", "5")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == (
        "invalid configuration: LANDER_FAILOVER_SECOND is not a setting "
        "(did you mean LANDER_FAILOVER_SECONDS?)"
    )


@pytest.mark.usefixtures("worker_env")
def test_lander_run_exits_2_with_one_line_for_a_misspelt_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lander run` stops before touching AWS: exit 2, one line on stderr, nothing on stdout."""
    monkeypatch.setenv("LANDER_FAILOVER_SECOND", "5")
    assert cli.main(["run"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "lander: invalid configuration: LANDER_FAILOVER_SECOND is not a setting "
        "(did you mean LANDER_FAILOVER_SECONDS?)"
    ]


def test_the_spark_jobs_refuse_a_misspelt_variable_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lander compact` applies the same check (before PySpark is even imported): exit 2."""
    monkeypatch.setenv("LANDER_COMPACT_STRIKT", "true")
    argv = ["compact", "--stream", "s", "--archive", "file:///a", "--compacted", "file:///c"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "lander: invalid configuration: LANDER_COMPACT_STRIKT is not a setting "
        "(did you mean LANDER_COMPACT_STRICT?)"
    ]


def test_a_replaced_variable_names_its_replacement(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lookback minutes became the dedupe horizon: the old name is refused, pointing
    at the new one, rather than silently ignored."""
    monkeypatch.setenv("LANDER_COMPACT_LOOKBACK_MINUTES", "10")
    argv = ["compact", "--stream", "s", "--archive", "file:///a", "--compacted", "file:///c"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "lander: invalid configuration: LANDER_COMPACT_LOOKBACK_MINUTES is no longer a "
        "setting (replaced by LANDER_COMPACT_DEDUPE_HORIZON (a duration: 90m, 24h, 1d))"
    ]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("LANDER_COORDINATION", "board coordination is the only mode now"),
        ("LANDER_LEASE_SCAN_SECONDS", "no worker scans the lease table"),
    ],
)
def test_a_removed_variable_says_why_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, why: str
) -> None:
    """Scan coordination was removed: its settings are refused at start with the reason,
    whatever their value, so no fleet runs believing it still scans."""
    monkeypatch.setenv(name, "scan" if name == "LANDER_COORDINATION" else "1")
    assert cli.main(["run", "--check", "--stream", "s"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"lander: invalid configuration: {name} is no longer a setting (")
    assert why in line


@pytest.mark.parametrize(
    ("text", "minutes"), [("1d", 1440), ("24h", 1440), ("90m", 90), (" 2H ", 120), ("0", 0)]
)
def test_the_dedupe_horizon_is_a_duration(
    monkeypatch: pytest.MonkeyPatch, text: str, minutes: int
) -> None:
    monkeypatch.setenv("LANDER_COMPACT_DEDUPE_HORIZON", text)
    settings = load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c")
    assert settings.horizon_minutes == minutes


@pytest.mark.parametrize("text", ["10", "1w", "8d", "-1h", "1.5h", ""])
def test_a_bad_dedupe_horizon_fails_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("LANDER_COMPACT_DEDUPE_HORIZON", text)
    with pytest.raises(ConfigError, match="LANDER_COMPACT_DEDUPE_HORIZON"):
        load(CompactSettings, stream="s", archive="file:///a", compacted="file:///c")


def test_unknown_variables_and_bad_values_share_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo often leaves its setting unset: both problems are in the line, typo first."""
    monkeypatch.setenv("LANDER_STREM", "orders")
    monkeypatch.setenv("LANDER_LEASE_TABLE", "orders-leases")
    message = _message(Settings)
    assert "\n" not in message
    assert message == (
        "invalid configuration: LANDER_STREM is not a setting (did you mean LANDER_STREAM?); "
        "LANDER_STREAM is required but not set"
    )


@pytest.mark.usefixtures("worker_env")
def test_an_unknown_variable_without_a_close_name_points_at_the_docs_not_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No far-fetched guess for a name unlike any setting, and the value is never quoted."""
    monkeypatch.setenv("LANDER_QQQ", "hunter2-secret")
    message = _message(Settings)
    assert message == (
        "invalid configuration: LANDER_QQQ is not a setting (see docs/configuration.md)"
    )
    assert "hunter2" not in message


@pytest.mark.usefixtures("worker_env")
def test_variables_of_other_commands_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """One environment serves every command: produce, compact and analyse variables, and
    the environment-only Spark knobs, do not stop `lander run` (nor the reverse)."""
    for name, value in {
        "LANDER_PRODUCE_COUNT": "5",
        "LANDER_COMPACTED": "file:///compacted",
        "LANDER_COMPACT_STRICT": "true",
        "LANDER_TOP_KEYS": "3",
        "LANDER_SPARK_DRIVER_MEMORY": "4g",
        "LANDER_SPARK_LOG_LEVEL": "INFO",
        "LANDER_ARCHIVE": "file:///archive",
    }.items():
        monkeypatch.setenv(name, value)
    assert load_settings().stream == "orders"
    assert load_produce_settings().produce_count == 5
    assert load(CompactSettings).compact_strict is True
    assert load(AnalyseSettings).top_keys == 3


def test_every_field_of_every_settings_class_is_known() -> None:
    """The registry is the union of all classes' variables, plus the environment-only ones."""
    expected = {f"LANDER_{name.upper()}" for kind in CLASSES for name in kind.model_fields}
    assert known_variables() == expected | set(ENVIRONMENT_ONLY)
    assert unknown_variables(dict.fromkeys(expected, "x")) == []


def test_environment_only_variables_are_the_ones_read_from_os_environ() -> None:
    """Every LANDER_* name code reads with os.environ is known, and every name in
    ENVIRONMENT_ONLY is still used by the file its reason names (no dead entries)."""
    read = re.compile(r"""environ(?:\.get\(|\[)\s*["'](LANDER_[A-Z0-9_]+)["']""")
    found: set[str] = set()
    for folder in ("consumer", "sparkjobs", "bench", "deploy", "tests/support"):
        for path in (REPO / folder).rglob("*.py"):
            found.update(read.findall(path.read_text(encoding="utf-8")))
    assert found - known_variables() == set()
    for name, reason in ENVIRONMENT_ONLY.items():
        reader = REPO / reason.split(":", 1)[0]
        assert name in reader.read_text(encoding="utf-8"), (name, reader)


# -- case-insensitive choices ------------------------------------------------------------


@pytest.mark.usefixtures("worker_env")
def test_choices_ignore_case_and_are_stored_lower_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """INFO, JSON, Console, ZSTD are accepted and normalised to the lower-case choice."""
    monkeypatch.setenv("LANDER_LOG_LEVEL", "INFO")
    monkeypatch.setenv("LANDER_LOG_FORMAT", "JSON")
    monkeypatch.setenv("LANDER_PAYLOAD_FORMAT", "JSON")
    settings = load_settings()
    assert (settings.log_level, settings.log_format, settings.payload_format) == (
        "info",
        "json",
        "json",
    )
    monkeypatch.setenv("LANDER_LOG_FORMAT", "Console")
    monkeypatch.setenv("LANDER_LOG_LEVEL", "WARNING")
    produce = load_produce_settings()
    assert (produce.log_format, produce.log_level) == ("console", "warning")
    monkeypatch.setenv("LANDER_COMPACT_COMPRESSION", "ZSTD")
    job = load(CompactSettings, archive="file:///a", compacted="file:///c")
    assert (job.compact_compression, job.log_level, job.log_format) == (
        "zstd",
        "warning",
        "console",
    )


@pytest.mark.usefixtures("worker_env")
def test_a_bad_choice_names_the_variable_and_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value outside the choices (in any case) is refused, listing what is allowed; the
    Spark jobs' log level is a choice too (it used to reach logging unchecked)."""
    monkeypatch.setenv("LANDER_LOG_LEVEL", "VERBOSE")
    assert _message(Settings) == (
        "invalid configuration: LANDER_LOG_LEVEL Input should be "
        "'debug', 'info', 'warning' or 'error'"
    )
    message = _message(CompactSettings, archive="file:///a", compacted="file:///c")
    assert message.startswith("invalid configuration: LANDER_LOG_LEVEL Input should be")


# -- messages name variables -------------------------------------------------------------


@pytest.mark.usefixtures("worker_env")
def test_field_errors_name_the_variable_never_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounds, parsing and custom validators of every class report LANDER_* names."""
    monkeypatch.setenv("LANDER_GZIP_LEVEL", "12")
    monkeypatch.setenv("LANDER_EVENT_ID_POINTER", "event_id")
    monkeypatch.setenv("LANDER_POLL_IDLE_SECONDS", "soon")
    worker = _message(Settings)
    assert "LANDER_GZIP_LEVEL Input should be less than or equal to 9" in worker
    assert "LANDER_EVENT_ID_POINTER must be a JSON pointer" in worker
    assert "LANDER_POLL_IDLE_SECONDS Input should be a valid number" in worker
    monkeypatch.delenv("LANDER_GZIP_LEVEL")
    monkeypatch.delenv("LANDER_EVENT_ID_POINTER")
    monkeypatch.delenv("LANDER_POLL_IDLE_SECONDS")

    monkeypatch.setenv("LANDER_PRODUCE_RETRY_SHARE", "2")
    produce = _message(ProduceSettings)
    assert produce.startswith("invalid configuration: LANDER_PRODUCE_RETRY_SHARE Input should")

    monkeypatch.setenv("LANDER_WINDOW", "2026-13-01")
    monkeypatch.setenv("LANDER_COMPACT_TARGET_FILE_MB", "0")
    monkeypatch.setenv("LANDER_SEQUENCE_POINTER", "seq")
    compact = _message(CompactSettings, archive="archive", compacted="file:///c")
    assert "LANDER_WINDOW '2026-13-01': month must be in 1..12" in compact
    assert "LANDER_ARCHIVE must be s3://bucket[/prefix] or file:///absolute/path" in compact
    assert "LANDER_COMPACT_TARGET_FILE_MB Input should be greater than or equal to 1" in compact
    analyse = _message(AnalyseSettings, compacted="file:///c")
    assert "LANDER_SEQUENCE_POINTER must be a JSON pointer" in analyse
    for message in (worker, produce, compact, analyse):
        assert "\n" not in message
        assert _python_names_in(message) == [], message


@pytest.mark.usefixtures("worker_env")
def test_a_rule_across_settings_names_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model-level error (renew must be below failover) names LANDER_RENEW_SECONDS and
    LANDER_FAILOVER_SECONDS, with no "settings" stand-in and no field names."""
    monkeypatch.setenv("LANDER_FAILOVER_SECONDS", "5")
    monkeypatch.setenv("LANDER_RENEW_SECONDS", "6")
    message = _message(Settings)
    assert message == (
        "invalid configuration: LANDER_RENEW_SECONDS (6) must be below "
        "LANDER_FAILOVER_SECONDS (5), or leases expire between heartbeats"
    )
    assert _python_names_in(message) == []


def test_no_error_quotes_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither credentials nor other variables' values reach the error line."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SECRET-VALUE-123")
    monkeypatch.setenv("LANDER_STREAM", "bad stream!")
    monkeypatch.setenv("LANDER_LEASE_TABL", "SECRET-VALUE-456")
    assert cli.main(["run"]) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1
    assert "LANDER_STREAM must be 1-128 characters" in err
    assert "LANDER_LEASE_TABL is not a setting (did you mean LANDER_LEASE_TABLE?)" in err
    assert "SECRET-VALUE" not in out + err


# -- --version ---------------------------------------------------------------------------


def test_version_needs_no_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lander --version` prints `lander <version>` and exits 0 with no settings at all,
    even beside a misspelt variable: it loads none."""
    monkeypatch.setenv("LANDER_FAILOVER_SECOND", "5")
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert out == f"lander {version()}\n"
    assert err == ""


def test_no_settings_validator_hides_one_of_a_base() -> None:
    """Pydantic keeps one validator per name, so a subclass's ``_pointer`` silently
    replaced the shared settings' check of LANDER_SEQUENCE_POINTER (found while
    declaring the shared settings once): no two classes of a settings class's bases
    define a validator of the same name."""
    classes = settings_classes()
    assert len(classes) >= 10
    for kind in classes:
        owners: dict[str, list[str]] = {}
        for klass in kind.__mro__:
            decorators = getattr(klass, "__pydantic_decorators__", None)
            if decorators is None:
                continue
            validators = {*decorators.field_validators, *decorators.model_validators}
            for name in validators & set(vars(klass)):
                owners.setdefault(name, []).append(klass.__name__)
        assert {n: o for n, o in owners.items() if len(o) > 1} == {}, kind.__name__


def test_the_worker_checks_both_pointers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANDER_EVENT_ID_POINTER", "id")
    monkeypatch.setenv("LANDER_SEQUENCE_POINTER", "seq")
    message = _message(Settings)
    assert "LANDER_EVENT_ID_POINTER must be a JSON pointer" in message
    assert "LANDER_SEQUENCE_POINTER must be a JSON pointer" in message
