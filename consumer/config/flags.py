"""Command-line flags made from settings fields: a flag overrides its variable.

A command names the fields that get a flag (:data:`FlagSpec`); the flag's type, choices
and help come from the field, and docs/configdoc.py reads which flag sets which variable
off the :class:`SettingFlag` actions.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Union, get_args, get_origin

from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from consumer.config.loading import field_variables

FlagSpec = str | tuple[str, str]
"""A field that has a flag: its name (the flag is ``--field-name``), or ``(name, flag)``
where the flag is named otherwise, e.g. ``("produce_count", "--count")``."""


class SettingFlag(argparse.Action):
    """A flag that sets the field ``dest`` of the settings class ``settings``.

    Made by :func:`add_setting_flags`. The flag stores its value as ``store`` does (as
    ``store_const`` with True for a bool field); not given, it stays None, so the
    environment decides. docs/configdoc.py reads which flag sets which variable off
    these actions.
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        settings: type[BaseSettings],
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.settings = settings

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_setting_flags(
    parser: argparse.ArgumentParser, kind: type[BaseSettings], flags: Iterable[FlagSpec]
) -> None:
    """Add one flag per field named in ``flags`` (see :data:`FlagSpec`) to ``parser``.

    Everything else comes from the field: ``dest`` is its name, the value's type its
    annotation (``int``, ``float``, ``str``, a ``Literal`` of strings, or ``None`` with one
    of them; a ``bool`` field gets a flag without value that sets it true), the help its
    description with the variable's name and the default. Collect the values with
    :func:`flag_values` and the same ``flags``.
    """
    for spec in flags:
        name, flag = spec if isinstance(spec, tuple) else (spec, "--" + spec.replace("_", "-"))
        info = kind.model_fields[name]
        value_type = _flag_type(info.annotation)
        options: dict[str, Any]
        if value_type is bool:
            if info.default is not False:
                raise ValueError(f"{kind.__name__}.{name}: a flag can only turn on a setting")
            options = {"nargs": 0, "const": True}
        else:
            options = {"type": value_type, "metavar": _metavar(flag, info.annotation)}
        parser.add_argument(
            flag,
            action=SettingFlag,
            dest=name,
            settings=kind,
            default=None,
            help=_flag_help(kind, name),
            **options,
        )


def flag_fields(flags: Iterable[FlagSpec]) -> tuple[str, ...]:
    """The field names of ``flags``."""
    return tuple(spec[0] if isinstance(spec, tuple) else spec for spec in flags)


def flag_values(args: argparse.Namespace, flags: Iterable[FlagSpec]) -> dict[str, Any]:
    """The flags' values by field name (None: not given), as :func:`load_class` takes them."""
    return {name: getattr(args, name) for name in flag_fields(flags)}


def _flag_type(annotation: Any) -> type[Any]:
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return _flag_type(args[0])
    if get_origin(annotation) is Literal and all(isinstance(arg, str) for arg in args):
        return str
    if annotation in (bool, int, float, str):
        return annotation  # type: ignore[no-any-return]
    raise TypeError(f"no flag for a setting of type {annotation}")


def _choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    return [choice for arg in get_args(annotation) for choice in _choices(arg)]


def _metavar(flag: str, annotation: Any) -> str:
    choices = _choices(annotation)
    if choices:
        return "{" + ",".join(choices) + "}"
    return flag.lstrip("-").replace("-", "_").upper()


def _flag_help(kind: type[BaseSettings], name: str) -> str:
    """The description and, in brackets, the variable and the default (argparse-escaped)."""
    info = kind.model_fields[name]
    description = (info.description or name.replace("_", " ")).strip().rstrip(".")
    note = ", ".join(field_variables(kind, name))
    default = info.default
    if (
        default not in (None, PydanticUndefined)
        and not isinstance(default, bool)
        and "default" not in description.lower()
    ):
        note += f", default {default:g}" if isinstance(default, float) else f", default {default}"
    return f"{description} ({note})".replace("%", "%%")
