"""The configuration reference (docs/configuration.md), generated from the code.

Everything in the page comes from two places, so it cannot drift from what the
commands accept:

- the pydantic-settings classes, found in :data:`consumer.config.loading.SETTINGS_MODULES` (every
  ``BaseSettings`` subclass defined there gets a table): variable names (as
  pydantic-settings itself derives them: prefix, aliases, case), types, defaults,
  bounds, choices and descriptions;
- the ``lander`` argument parser (``consumer.cli.build_parser``): which flag sets which
  variable. The commands make those flags from the fields
  (``consumer.config.add_setting_flags``), so each is a ``SettingFlag`` action that
  carries its settings class, and its ``dest`` is the field's name. Flags that set no
  variable are listed per command as options.

Which command reads which class is not visible in the classes, so :data:`READERS`
states it for the classes known today. A class it does not name is still documented,
as read by the commands that have flags for its fields (or a subclass's).

``python docs/configdoc.py`` prints the page; ``--check FILE`` exits 1 with one line
when FILE differs from it. The script lives beside the page it writes, outside the
installed packages.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, EnvSettingsSource

from consumer.cli import build_parser
from consumer.config import SettingFlag
from consumer.config.loading import settings_classes

GENERATE = "python docs/configdoc.py > docs/configuration.md"
CHECK = "python docs/configdoc.py --check docs/configuration.md"

READERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "consumer.config.shared.Logging": (
        "Logging",
        (
            "run",
            "status",
            "produce",
            "compact",
            "analyse",
            "maintain",
            "migrate-pointers",
            "raw-table",
        ),
    ),
    "consumer.config.shared.Archive": (
        "Archive",
        ("run", "status", "compact", "analyse", "raw-table"),
    ),
    "consumer.config.landing.LandingSettings": ("Landing", ("run", "status")),
    "consumer.config.worker.Settings": ("Worker", ("run", "status")),
    "consumer.config.produce.ProduceSettings": ("produce", ("produce",)),
    "sparkjobs.settings.StreamSettings": (
        "Batch commands",
        ("compact", "analyse", "maintain", "migrate-pointers", "raw-table"),
    ),
    "sparkjobs.settings.TableSettings": (
        "Compacted tables",
        ("compact", "analyse", "maintain", "migrate-pointers"),
    ),
    "sparkjobs.settings.JobSettings": ("Spark jobs", ("compact", "analyse")),
    "sparkjobs.settings.CompactSettings": ("compact", ("compact",)),
    "sparkjobs.settings.AnalyseSettings": ("analyse", ("analyse",)),
    "sparkjobs.settings.MaintainSettings": ("maintain", ("maintain",)),
    "sparkjobs.settings.RawTableSettings": ("raw-table", ("raw-table",)),
}
"""Class -> (section title, the commands that read it)."""


@dataclass(frozen=True, slots=True)
class Section:
    """One table of the page: the fields of a settings class and who reads them."""

    title: str
    intro: str
    settings: type[BaseSettings]
    commands: tuple[str, ...]
    bases: tuple[type[BaseSettings], ...] = ()
    """Fields this class shares with one of ``bases`` are documented in that section."""


def sections(available: dict[str, Command] | None = None) -> list[Section]:
    """One section per settings class, with the commands that read it."""
    available = commands() if available is None else available
    classes = settings_classes()
    result: list[Section] = []
    for cls in classes:
        qualified = f"{cls.__module__}.{cls.__qualname__}"
        bases = tuple(c for c in cls.__mro__[1:] if c in classes)
        if qualified in READERS:
            title, readers = READERS[qualified]
        else:
            title, readers = cls.__name__, _inferred_readers(cls, available)
        result.append(Section(title, f"From `{qualified}`.", cls, readers, bases))
    return result


def _inferred_readers(cls: type[BaseSettings], available: dict[str, Command]) -> tuple[str, ...]:
    """Commands with a flag for a field of ``cls`` or of a subclass: they load it."""
    return tuple(
        command.name
        for command in available.values()
        if any(_sets(option, cls) for option in command.options)
    )


def _sets(option: Option, cls: type[BaseSettings]) -> bool:
    """Whether ``option`` sets a field of ``cls`` (its class is ``cls`` or a subclass)."""
    return option.settings is not None and issubclass(option.settings, cls)


_DEFAULT_IN_TEXT = (
    re.compile(r"\(default:?\s+([^)]+)\)"),
    re.compile(r"\bdefault:?\s+([^;)]+?)\.?(?:;|\)|$)"),
)
_BOUNDS: tuple[tuple[type[Any], str, str], ...] = (
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.Le, "le", "<="),
)


@dataclass(frozen=True, slots=True)
class Option:
    """One command-line option of one subcommand; a flag made for a setting names it."""

    command: str
    flags: str
    dest: str
    help: str
    settings: type[BaseSettings] | None = None
    """The settings class whose field ``dest`` the flag sets (None: it sets no setting)."""


@dataclass(slots=True)
class Command:
    """A subcommand of ``lander`` as the parser defines it."""

    name: str
    help: str
    options: list[Option] = field(default_factory=list)


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, Command]:
    """Every subcommand of ``lander``, in the parser's order, with its options."""
    parser = parser or build_parser()
    found: dict[str, Command] = {}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            command = found.setdefault(name, Command(name, helps.get(name, "")))
            command.options.extend(_options(name, subparser))
    return found


def _options(name: str, parser: argparse.ArgumentParser) -> Iterator[Option]:
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
        text = formatter._expand_help(action) if action.help else ""
        settings = action.settings if isinstance(action, SettingFlag) else None
        yield Option(name, flags, action.dest, " ".join(text.split()), settings)


def env_names(settings: type[BaseSettings]) -> dict[str, list[str]]:
    """Field name -> the environment variables that set it, as pydantic-settings reads them.

    Asking the library keeps prefixes, validation aliases (``AliasChoices``,
    ``AliasPath``) and case sensitivity right without re-implementing its rules.
    """
    source = EnvSettingsSource(settings)
    upper = not settings.model_config.get("case_sensitive", False)
    names: dict[str, list[str]] = {}
    for name, info in settings.model_fields.items():
        found = [env for _, env, _ in source._extract_field_info(info, name)]
        names[name] = list(dict.fromkeys(env.upper() if upper else env for env in found))
    return names


def _own_fields(section: Section) -> list[str]:
    def inherited(name: str, info: FieldInfo) -> bool:
        return any(
            name in base.model_fields and repr(info) == repr(base.model_fields[name])
            for base in section.bases
        )

    return [
        name for name, info in section.settings.model_fields.items() if not inherited(name, info)
    ]


def _flags_by_field(
    section: Section, names: dict[str, list[str]], available: dict[str, Command]
) -> tuple[dict[str, dict[str, list[str]]], list[Option]]:
    """(field -> flag text -> commands having it) and the options that set a field.

    An option sets a field of the section when the parser says so: it is a
    :class:`SettingFlag` of the section's class (or a subclass), and its ``dest`` is
    the field.
    """
    flags: dict[str, dict[str, list[str]]] = {}
    matched: list[Option] = []
    for command in section.commands:
        if command not in available:
            continue
        for option in available[command].options:
            if _sets(option, section.settings) and option.dest in names:
                matched.append(option)
                flags.setdefault(option.dest, {}).setdefault(option.flags, []).append(command)
    return flags, matched


def _flag_cell(by_flag: dict[str, list[str]], present: Sequence[str]) -> str:
    cells = [
        flag
        if len(present) < 2 or sorted(where) == sorted(present)
        else f"{flag} ({', '.join(where)})"
        for flag, where in by_flag.items()
    ]
    return "<br>".join(cells) or "-"


def describe_type(annotation: Any) -> str:
    """A field's type in a word: ``str``, ``int``, ``float``, ``bool`` or ``choice``."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return describe_type(args[0])
    if get_origin(annotation) is Literal:
        return "choice"
    name = getattr(annotation, "__name__", None)
    return name if isinstance(name, str) else str(annotation).replace("typing.", "")


def _choices(annotation: Any) -> list[Any]:
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    if get_origin(annotation) in (Union, types.UnionType):
        return [choice for arg in get_args(annotation) for choice in _choices(arg)]
    return []


def describe_constraints(info: FieldInfo) -> str:
    """Bounds and choices, e.g. ``>= 1, <= 9`` or ``json, raw``."""
    parts: list[str] = []
    for meta in info.metadata:
        for kind, attribute, symbol in _BOUNDS:
            if isinstance(meta, kind):
                parts.append(f"{symbol} {_number(getattr(meta, attribute))}")
        if isinstance(meta, annotated_types.MinLen):
            parts.append(f"at least {meta.min_length} characters")
        if isinstance(meta, annotated_types.MaxLen):
            parts.append(f"at most {meta.max_length} characters")
        if isinstance(meta, annotated_types.MultipleOf):
            parts.append(f"a multiple of {_number(meta.multiple_of)}")
    choices = _choices(info.annotation)
    if choices:
        parts.append("one of " + ", ".join(f"`{choice}`" for choice in choices))
    return ", ".join(parts)


def describe_default(name: str, info: FieldInfo) -> str:
    """The default as a reader needs it.

    Required fields say so. A ``default_factory`` is never called (its value depends on
    the machine and the day): the description's "default: ..." names it, else the
    factory's name. A ``None`` default whose description names the value that applies
    instead (``renew_seconds``: failover_seconds / 3) shows that value.
    """
    factory: Callable[..., Any] | None = info.default_factory
    if factory is not None:
        said = _default_in(info.description)
        what = said or f"`{getattr(factory, '__name__', 'factory')}()`"
        return f"{what} (computed at start)"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return _default_in(info.description) or "none"
    return _value(name, info.default)


def _default_in(text: str | None) -> str | None:
    for pattern in _DEFAULT_IN_TEXT:
        match = pattern.search(text or "")
        if match:
            return match.group(1).strip()
    return None


def _value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and "bytes" in name and value >= 1024:
        return f"`{value}` ({_bytes(value)})"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    return f"`{value}`"


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _bytes(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} bytes"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "-"


def render() -> str:
    """The whole configuration reference, as Markdown."""
    available = commands()
    all_sections = sections(available)
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated from the settings classes and the `lander` argument parser by",
        f"     `{GENERATE}`. Do not edit by hand:",
        f"     `{CHECK}` fails when this page is out",
        "     of date, and so does tests/cli/test_configdoc.py. -->",
        "",
        "Every setting is an environment variable. Where a command has a flag for it, the",
        "flag overrides the variable. A bad or missing value stops the command before it",
        "does anything, with one line that names the variable.",
        "",
        "AWS endpoints, region and credentials are not settings: botocore reads the",
        "standard variables (`AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_KINESIS`,",
        "`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_S3`, the credential chain).",
        "",
        "## Commands",
        "",
        "| command | settings | what it does |",
        "|---|---|---|",
    ]
    for command in available.values():
        readers = [s.title for s in all_sections if command.name in s.commands]
        lines.append(
            f"| `lander {command.name}` | {_cell(', '.join(readers) or 'none')} "
            f"| {_cell(command.help)} |"
        )
    for section in all_sections:
        lines.extend(_section(section, available))
    lines.extend(["", "## Options that are not settings", ""])
    lines.append("Flags that set no variable, by command.")
    for command in available.values():
        options = [option for option in command.options if option.settings is None]
        if not options:
            continue
        lines.extend(["", f"### `lander {command.name}`", "", "| option | meaning |", "|---|---|"])
        lines.extend(f"| {o.flags} | {_cell(o.help)} |" for o in options)
    return "\n".join(lines) + "\n"


def _section(section: Section, available: dict[str, Command]) -> list[str]:
    """The section's table."""
    present = [name for name in section.commands if name in available]
    readers = ", ".join(f"`lander {name}`" for name in present) or "no command yet"
    names = env_names(section.settings)
    flags, _ = _flags_by_field(section, names, available)
    lines = [
        "",
        f"## {section.title}",
        "",
        f"{section.intro} Read by {readers}.",
        "",
        "| variable | flag | type | default | constraints | description |",
        "|---|---|---|---|---|---|",
    ]
    for name in _own_fields(section):
        info = section.settings.model_fields[name]
        description = info.description or ""
        lines.append(
            "| "
            + " | ".join(
                (
                    "<br>".join(f"`{env}`" for env in names[name]),
                    _flag_cell(flags.get(name, {}), present),
                    describe_type(info.annotation),
                    _cell(describe_default(name, info)),
                    _cell(describe_constraints(info)),
                    _cell(description),
                )
            )
            + " |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or with ``--check FILE`` compare FILE with it."""
    parser = argparse.ArgumentParser(
        prog="python docs/configdoc.py",
        description="Print the configuration reference generated from the settings.",
    )
    parser.add_argument(
        "--check", metavar="FILE", help="exit 1 if FILE is not what would be generated"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check is None:
        sys.stdout.write(text)
        return 0
    path = Path(args.check)
    try:
        current = path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{path}: cannot read ({exc.strerror}); generate it: {GENERATE}", file=sys.stderr)
        return 1
    if current != text:
        print(f"{path} is out of date; regenerate it: {GENERATE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
