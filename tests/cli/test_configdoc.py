"""docs/configuration.md is generated from the settings and the parser, and kept current;
the flags that set settings are made from the settings' fields."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import AliasChoices, BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from consumer import cli
from consumer.config import (
    Archive,
    LandingSettings,
    Logging,
    ProduceSettings,
    SettingFlag,
    Settings,
    add_setting_flags,
    default_worker_id,
    flag_values,
)
from sparkjobs import cli as jobs_cli
from sparkjobs.settings import (
    AnalyseSettings,
    CompactSettings,
    JobSettings,
    StreamSettings,
    TableSettings,
    yesterday,
)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"
SCRIPT = REPO / "docs" / "configdoc.py"


def _script() -> ModuleType:
    """docs/configdoc.py, imported from its file (it is a script, not in a package)."""
    spec = importlib.util.spec_from_file_location("lander_docs_configdoc", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


configdoc = _script()


def _row(text: str, variable: str, section: str) -> str:
    """The table row of ``variable`` inside the section titled ``section``."""
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith(f"| `{variable}`")]
    assert len(rows) == 1, f"{variable} in {section}: {rows}"
    return rows[0]


def test_the_committed_page_is_current() -> None:
    """docs/configuration.md is exactly what the generator makes now."""
    assert DOC.read_text(encoding="utf-8") == configdoc.render(), (
        f"docs/configuration.md is out of date: {configdoc.GENERATE}"
    )


def test_every_setting_of_every_command_appears() -> None:
    """Each field of each settings class has a row under its variable name."""
    text = configdoc.render()

    def title(name: str, own: str, *layers: tuple[type[BaseSettings], str]) -> str:
        """The section of a field: the most shared class that declares it."""
        shared: tuple[tuple[type[BaseSettings], str], ...] = (
            (Archive, "Archive"),
            (Logging, "Logging"),
        )
        for kind, section in (*layers, *shared):
            if name in kind.model_fields:
                own = section
        return own

    for name in Settings.model_fields:
        _row(text, f"LANDER_{name.upper()}", title(name, "Worker", (LandingSettings, "Landing")))
    for job, own in ((CompactSettings, "compact"), (AnalyseSettings, "analyse")):
        for name in job.model_fields:
            section = title(
                name,
                own,
                (JobSettings, "Spark jobs"),
                (TableSettings, "Compacted tables"),
                (StreamSettings, "Batch commands"),
            )
            _row(text, f"LANDER_{name.upper()}", section)
    # Every shared field once, in its own section: declared once, documented once.
    for name in (*Archive.model_fields, *Logging.model_fields):
        assert text.count(f"| `LANDER_{name.upper()}` |") == 1, name
    # And every class the generator found, whatever is added later.
    for section in configdoc.sections():
        for name in section.settings.model_fields:
            inherited = any(name in base.model_fields for base in section.bases)
            if not inherited:
                _row(text, f"LANDER_{name.upper()}", section.title)


def test_every_command_of_the_parser_is_listed() -> None:
    """The commands table names each subcommand `lander` has."""
    text = configdoc.render()
    for name in configdoc.commands():
        assert f"| `lander {name}` |" in text


def test_flags_come_from_the_parser() -> None:
    """A flag is found by its action: a SettingFlag of the class, with the field as dest."""
    text = configdoc.render()
    assert "`--failover-seconds`" in _row(text, "LANDER_FAILOVER_SECONDS", "Worker")
    # dest spark_master: the flag's name differs from the setting's.
    assert "`--master`" in _row(text, "LANDER_SPARK_MASTER", "Spark jobs")
    assert "`--event-time-field`" in _row(text, "LANDER_EVENT_TIME_POINTER", "Spark jobs")
    # `--install` sets no variable: it is listed as an option of its command.
    options = text.split("## Options that are not settings", 1)[1]
    by_command = {part.split("`", 1)[0]: part for part in options.split("### `lander ")[1:]}
    assert "`--install`" in by_command["local-stack"]
    # local-stack's --stream names streams to create; everywhere else it is LANDER_STREAM's.
    assert "`--stream`" in by_command["local-stack"]
    others = [name for name, part in by_command.items() if "`--stream`" in part]
    assert others == ["local-stack"]


def test_a_flag_is_matched_by_its_action_not_by_its_text() -> None:
    """A flag made for the field sets it, whatever its name; a plain option whose dest or
    help happens to name a setting does not."""
    parser = argparse.ArgumentParser(prog="lander")
    run = parser.add_subparsers(dest="command").add_parser("run", help="run")
    add_setting_flags(run, Settings, [("stream", "--name-of-stream")])
    run.add_argument("--table", dest="lease_table", help="not a flag (LANDER_LEASE_TABLE)")
    run.add_argument("--dry-run", action="store_true", help="do nothing")
    available = configdoc.commands(parser)
    (section,) = [s for s in configdoc.sections(available) if s.settings is Settings]
    flags, matched = configdoc._flags_by_field(
        section, configdoc.env_names(section.settings), available
    )
    assert flags == {"stream": {"`--name-of-stream`": ["run"]}}
    assert [option.flags for option in matched] == ["`--name-of-stream`"]


def test_variable_names_follow_prefix_and_aliases() -> None:
    """Names come from pydantic-settings: prefix, case, and validation aliases."""

    class Aliased(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_")
        plain: int = 1
        aliased: str = Field(default="x", validation_alias=AliasChoices("FIRST", "second"))

    assert configdoc.env_names(Aliased) == {"plain": ["APP_PLAIN"], "aliased": ["FIRST", "SECOND"]}


def test_a_default_factory_is_described_not_called() -> None:
    """hostname-pid and yesterday, never this machine's name or today's date."""
    text = configdoc.render()
    worker_id = _row(text, "LANDER_WORKER_ID", "Worker")
    assert "hostname-pid-random (computed at start)" in worker_id
    assert default_worker_id() not in worker_id
    window = _row(text, "LANDER_WINDOW", "Spark jobs")
    assert "yesterday (computed at start)" in window
    assert yesterday() not in window

    def next_port() -> int:
        return 8000

    class Ports(BaseModel):
        port: int = Field(default_factory=next_port, description="A port.")

    info = Ports.model_fields["port"]
    assert configdoc.describe_default("port", info) == "`next_port()` (computed at start)"


def test_defaults_bounds_and_choices_are_readable() -> None:
    """Required, a derived None default, bytes, bounds and Literal choices."""
    text = configdoc.render()
    assert "| required |" in _row(text, "LANDER_STREAM", "Worker")
    assert "failover_seconds / 3" in _row(text, "LANDER_RENEW_SECONDS", "Worker")
    assert "(64 MiB)" in _row(text, "LANDER_MAX_BYTES_PER_FILE", "Landing")
    assert ">= 1, <= 9" in _row(text, "LANDER_GZIP_LEVEL", "Landing")
    assert "one of `json`, `raw`" in _row(text, "LANDER_PAYLOAD_FORMAT", "Archive")


def test_check_passes_on_the_page_and_fails_on_a_changed_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--check: 0 when equal; 1 with one line when changed or missing."""
    good = tmp_path / "configuration.md"
    good.write_text(configdoc.render(), encoding="utf-8")
    assert configdoc.main(["--check", str(good)]) == 0
    assert capsys.readouterr().err == ""

    changed = tmp_path / "changed.md"
    changed.write_text(configdoc.render().replace("`10000`", "`9999`", 1), encoding="utf-8")
    assert configdoc.main(["--check", str(changed)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "out of date" in err

    assert configdoc.main(["--check", str(tmp_path / "missing.md")]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.processes
def test_the_script_runs_as_a_command(tmp_path: Path) -> None:
    """`python docs/configdoc.py --check` exits 1 on a stale file."""
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration reference\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "docs/configdoc.py", "--check", str(stale)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_new_settings_class_is_read_by_the_commands_with_flags_for_it() -> None:
    """A class READERS does not know is tied to the commands that have flags for it."""

    class Extra(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="LANDER_")
        stream: str = "s"
        zeta_knob: int = 1

    parser = argparse.ArgumentParser(prog="lander")
    sub = parser.add_subparsers(dest="command")
    add_setting_flags(sub.add_parser("zeta", help="z"), Extra, [("zeta_knob", "--knob")])
    add_setting_flags(sub.add_parser("other", help="o"), Settings, ["stream"])
    sub.add_parser("plain", help="p").add_argument("--zeta-knob", help="(LANDER_ZETA_KNOB)")
    available = configdoc.commands(parser)
    assert configdoc._inferred_readers(Extra, available) == ("zeta",)


# -- flags made from the settings --------------------------------------------------------


def _setting_flags(parser: argparse.ArgumentParser) -> dict[str, SettingFlag]:
    return {
        action.option_strings[0]: action
        for action in parser._actions
        if isinstance(action, SettingFlag)
    }


def test_a_flag_takes_dest_type_and_help_from_its_field() -> None:
    """Name from the field (or as given), dest the field, type from the annotation, help
    the description with the variable; a bool field gets a flag without a value."""
    parser = argparse.ArgumentParser()
    add_setting_flags(
        parser,
        CompactSettings,
        ["window", ("compact_target_file_mb", "--target-file-mb"), "compact_strict"],
    )
    add_setting_flags(parser, Settings, ["failover_seconds", "metrics_port", "log_format"])
    flags = _setting_flags(parser)
    assert sorted(flags) == [
        "--compact-strict",
        "--failover-seconds",
        "--log-format",
        "--metrics-port",
        "--target-file-mb",
        "--window",
    ]
    target = flags["--target-file-mb"]
    assert (target.dest, target.type, target.settings) == (
        "compact_target_file_mb",
        int,
        CompactSettings,
    )
    assert target.help == (
        "Target size of a Parquet file; small hours get one file "
        "(LANDER_COMPACT_TARGET_FILE_MB, default 256)"
    )
    assert flags["--failover-seconds"].type is float
    assert flags["--metrics-port"].type is int  # int | None
    assert flags["--log-format"].type is str  # a Literal: pydantic checks the choice
    assert flags["--log-format"].metavar == "{auto,json,console}"
    assert "(LANDER_WINDOW)" in str(flags["--window"].help)

    given = parser.parse_args(["--target-file-mb", "64", "--compact-strict", "--log-format", "X"])
    assert (given.compact_target_file_mb, given.compact_strict, given.log_format) == (64, True, "X")
    absent = parser.parse_args([])
    assert absent.compact_strict is None
    assert absent.failover_seconds is None


def test_a_percent_in_a_description_does_not_break_help() -> None:
    """argparse formats help with %: the description is escaped."""
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, Settings, ["gzip_level"])
    assert "20% smaller" in parser.format_help()


def test_each_command_collects_exactly_its_setting_flags() -> None:
    """What run, status, produce, compact and analyse pass to their settings is the list
    their flags were made from: no flag is left out, none is collected twice."""
    parser = cli.build_parser()
    subcommands = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    collected = {
        "run": (Settings, cli.WORKER_FLAGS["run"]),
        "status": (Settings, cli.WORKER_FLAGS["status"]),
        "produce": (ProduceSettings, cli.PRODUCE_FLAGS),
        **jobs_cli.FLAGS,
    }
    for name, (kind, flags) in collected.items():
        made = _setting_flags(subcommands.choices[name])
        assert {flag.settings for flag in made.values()} == {kind}, name
        argv = [name] + [
            item
            for flag, action in made.items()
            for item in ([flag] if action.nargs == 0 else [flag, "1"])
        ]
        values = flag_values(parser.parse_args(argv), flags)
        assert sorted(values) == sorted(action.dest for action in made.values()), name
        assert None not in values.values(), name


def test_produce_keeps_its_flag_names_and_aggregate_switch() -> None:
    """--count sets LANDER_PRODUCE_COUNT; --aggregate stays a hand-made switch."""
    args = cli.build_parser().parse_args(["produce", "--count", "5", "--no-aggregate"])
    values = flag_values(args, cli.PRODUCE_FLAGS)
    assert values["produce_count"] == 5
    assert values["produce_aggregate_share"] is None
    assert args.aggregate is False
