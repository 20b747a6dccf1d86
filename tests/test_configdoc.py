"""docs/configuration.md is generated from the settings and the parser, and kept current."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import AliasChoices, BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from consumer.cli import configdoc
from consumer.config import Settings, default_worker_id
from sparkjobs.settings import AnalyseSettings, CompactSettings, JobSettings, yesterday

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "configuration.md"


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
    for name in Settings.model_fields:
        _row(text, f"LANDER_{name.upper()}", "Worker")
    for job, own in ((CompactSettings, "compact"), (AnalyseSettings, "analyse")):
        for name in job.model_fields:
            title = "Spark jobs" if name in JobSettings.model_fields else own
            _row(text, f"LANDER_{name.upper()}", title)
    # And every class the generator found, whatever is added later.
    for section in configdoc.sections():
        for name in section.settings.model_fields:
            inherited = section.base is not None and name in section.base.model_fields
            if not inherited:
                _row(text, f"LANDER_{name.upper()}", section.title)


def test_every_command_of_the_parser_is_listed() -> None:
    """The commands table names each subcommand `lander` has."""
    text = configdoc.render()
    for name in configdoc.commands():
        assert f"| `lander {name}` |" in text


def test_flags_come_from_the_parser() -> None:
    """A flag is found by its dest, or by the variable its help names."""
    text = configdoc.render()
    assert "`--failover-seconds`" in _row(text, "LANDER_FAILOVER_SECONDS", "Worker")
    # dest spark_master: the flag's name differs from the setting's.
    assert "`--master`" in _row(text, "LANDER_SPARK_MASTER", "Spark jobs")
    assert "`--event-time-field`" in _row(text, "LANDER_EVENT_TIME_POINTER", "analyse")
    # `--install` sets no variable: it is listed as an option of its command.
    options = text.split("## Options that are not settings", 1)[1]
    assert "`--install`" in options
    assert "`--stream`" not in options


def test_a_flag_is_matched_by_the_variable_in_its_help() -> None:
    """With a dest that is no field, the "(LANDER_X)" in the help decides."""
    parser = argparse.ArgumentParser(prog="lander")
    run = parser.add_subparsers(dest="command").add_parser("run", help="run")
    run.add_argument("--name-of-stream", dest="what", help="the stream (LANDER_STREAM)")
    run.add_argument("--dry-run", action="store_true", help="do nothing")
    available = configdoc.commands(parser)
    section = configdoc.sections(available)[0]
    assert section.settings is Settings
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
    assert "(64 MiB)" in _row(text, "LANDER_MAX_BYTES_PER_FILE", "Worker")
    assert ">= 1, <= 9" in _row(text, "LANDER_GZIP_LEVEL", "Worker")
    assert "one of `json`, `raw`" in _row(text, "LANDER_PAYLOAD_FORMAT", "Worker")


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
def test_the_module_runs_as_a_command(tmp_path: Path) -> None:
    """`python -m consumer.cli.configdoc --check` exits 1 on a stale file."""
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration reference\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "consumer.cli.configdoc", "--check", str(stale)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_new_settings_class_is_read_by_the_commands_naming_its_variables() -> None:
    """A class READERS does not know is tied to commands by its own variables."""

    class Extra(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="LANDER_")
        stream: str = "s"
        zeta_knob: int = 1

    parser = argparse.ArgumentParser(prog="lander")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("zeta", help="z").add_argument("--knob", help="a knob (LANDER_ZETA_KNOB)")
    sub.add_parser("other", help="o").add_argument("--stream", help="(LANDER_STREAM)")
    available = configdoc.commands(parser)
    readers = configdoc._inferred_readers(Extra, [Settings, Extra], available)
    assert readers == ("zeta",)
