"""Where a stream's compacted table is: the pyiceberg catalog and the table's name.

- **Catalog.** The pyiceberg catalog named by ``LANDER_CATALOG`` (default ``lander``),
  configured the way pyiceberg users already do (``~/.pyiceberg.yaml``, or
  ``PYICEBERG_CATALOG__LANDER__TYPE=glue`` and friends): Glue, REST (S3 Tables, Polaris,
  Nessie, Lakekeeper), SQL, Hive. When that name is not configured and the output is a
  local folder, an embedded SQLite catalog in ``{output}/catalog.db`` serves (a laptop,
  the demo, the tests). Bad settings fail before Spark starts, with one line
  (:func:`check_catalog`).
- **Table.** One per stream, ``lander.{stream}`` by default (``LANDER_TABLE``), located
  in the stream's folder of the output, recorded with ``s3://`` where the job writes
  through Hadoop's ``s3a://`` (:func:`registered`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from consumer.archive.layout import stream_folder
from consumer.config import ConfigError
from consumer.errors import EXIT_FAILED, EXIT_MISSING, EXIT_OK, RefusedError
from sparkjobs.io import is_local, join, local_path

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from sparkjobs.settings import TableSettings

T = TypeVar("T")

DEFAULT_CATALOG = "lander"
DEFAULT_TABLE = "lander.{stream}"


class CatalogError(ConfigError, ValueError):
    """The catalog cannot be reached or is not configured, or the table it names lacks
    the compacted columns; the message is one line. Before Spark starts it is
    ``LANDER_CATALOG``'s problem (exit 2, :func:`check_catalogs`). Still a ValueError, as
    it always was."""

    retriable = False


@dataclass(frozen=True, slots=True)
class TableRef:
    """Where one stream's compacted table is: catalog, identifier, and location."""

    catalog: str
    identifier: str
    output: str
    """The compacted output's root (``LANDER_COMPACTED``)."""
    stream: str

    @property
    def data_root(self) -> str:
        """Where Spark writes the table's data, as the job reaches it (``s3a://`` stays)."""
        return join(self.output, stream_folder(self.stream), "data")

    @property
    def dropped_root(self) -> str:
        """Where a run keeps the copies its dedupe dropped, outside the table's location
        (another engine's orphan-file removal would take them from there) and beside the
        run manifests: ``_dropped/stream=S/{run_id}/dt=…/hour=…/``, read back as part of
        each hour's index."""
        return join(self.output, "_dropped", stream_folder(self.stream))

    @property
    def location(self) -> str:
        """The table's location as registered: what every engine reads (``s3://``)."""
        return registered(join(self.output, stream_folder(self.stream)))


def table_ref(
    output: str, stream: str, catalog: str = DEFAULT_CATALOG, template: str = DEFAULT_TABLE
) -> TableRef:
    """The compacted table of ``stream`` under ``output``."""
    return TableRef(catalog, table_name(template, stream), output, stream)


def table_name(template: str, stream: str) -> str:
    """The table identifier for ``stream``: ``{stream}`` in the template becomes the
    stream's name in lower case with anything but letters, digits and ``_`` as ``_``
    (what Glue, Athena and most catalogs accept)."""
    return template.replace("{stream}", re.sub(r"[^a-z0-9_]", "_", stream.lower()))


def check_template(template: str) -> str:
    """``LANDER_TABLE``: ``namespace.table``, where ``{stream}`` may stand for the stream."""
    probe = table_name(template, "s")
    parts = probe.split(".")
    if len(parts) < 2 or not all(re.fullmatch(r"[A-Za-z0-9_]+", p) for p in parts):
        raise ValueError(
            f"{template!r} is not namespace.table (letters, digits, _; {{stream}} for the stream)"
        )
    return template


def registered(uri: str) -> str:
    """A URI as the table records it: ``s3a://`` and ``s3n://`` (Hadoop's names) become
    ``s3://``, which Athena, Trino, DuckDB and pyiceberg read."""
    for scheme in ("s3a://", "s3n://"):
        if uri.startswith(scheme):
            return "s3://" + uri[len(scheme) :]
    return uri


def embedded_missing(name: str, output: str) -> bool:
    """Whether ``name`` would be the embedded catalog of ``output`` and it was never made
    (a reader then finds no table, and makes nothing)."""
    from pyiceberg.utils.config import Config

    return (
        not Config().get_catalog_config(name)
        and is_local(output)
        and not (local_path(output) / "catalog.db").exists()
    )


def open_catalog(name: str, output: str) -> Catalog:
    """The pyiceberg catalog ``name``: as configured, else the embedded SQLite catalog
    of a local output. :class:`CatalogError` (one line) when neither applies or the
    configuration is refused."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    configured = Config().get_catalog_config(name)
    # The configuration read now, not the one pyiceberg read when first imported.
    properties: dict[str, Any] = {k: _typed(k, v) for k, v in (configured or {}).items()}
    try:
        if configured:
            return load_catalog(name, **properties)
        if is_local(output):
            return _embedded(name, output)
    # Deliberately any: loading a catalog raises what its backend raises (pyiceberg's
    # ValueErrors, botocore's, requests', SQLAlchemy's), and each means the catalog
    # cannot be used as configured: one line naming it, which the job prints.
    except Exception as exc:
        raise CatalogError(f"catalog {name!r}: {one_line(exc)}") from None
    raise CatalogError(
        f"catalog {name!r} is not configured and the output {output} is not a local folder: "
        f"configure it as pyiceberg does (PYICEBERG_CATALOG__{name.upper()}__TYPE=glue, or "
        "~/.pyiceberg.yaml), or name a configured one with LANDER_CATALOG"
    )


INTEGER_PROPERTIES = frozenset({"glue.max-retries"})
"""Catalog properties pyiceberg hands to botocore as they are, which botocore needs as
integers: from the environment they are text, and ``glue.max-retries=3`` failed every
call with "'<' not supported between instances of 'str' and 'int'"."""


def _typed(key: str, value: object) -> object:
    """A configured property as the catalog needs it: text, or an integer for
    :data:`INTEGER_PROPERTIES` (left as text when it is not a number, for pyiceberg's
    own error)."""
    text = str(value)
    return int(text) if key in INTEGER_PROPERTIES and text.strip().isdigit() else text


def _embedded(name: str, output: str) -> Catalog:
    """The SQLite catalog in ``{output}/catalog.db``. Two processes opening it for the
    first time both create its tables; the one that loses that race opens it again."""
    from pyiceberg.catalog.sql import SqlCatalog

    folder = local_path(output)
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'catalog.db'}"
    for attempt in range(3):
        try:
            return SqlCatalog(name, uri=uri, warehouse=output)
        except Exception as exc:  # SQLAlchemy's: only the creation race is tried again
            if "already exists" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def check_catalog(ref: TableRef) -> None:
    """The preflight of a run, so bad catalog settings fail before Spark starts, with one
    line: a configured catalog is asked for its namespaces (read-only); the embedded one
    is only checked for being possible (it is made on first commit)."""
    from pyiceberg.utils.config import Config

    if not Config().get_catalog_config(ref.catalog):
        if not is_local(ref.output):
            open_catalog(ref.catalog, ref.output)  # raises the one-line explanation
        return
    catalog = open_catalog(ref.catalog, ref.output)
    try:
        catalog.list_namespaces()
    except Exception as exc:  # deliberately any: the read-only probe failed, whatever its cause
        raise CatalogError(f"catalog {ref.catalog!r}: {one_line(exc)}") from None


def for_each_table(
    settings: TableSettings, command: str, work: Callable[[TableRef], str]
) -> list[int]:
    """Run ``work`` on each stream's compacted table in turn (:func:`for_each`)."""
    refs = [
        table_ref(settings.compacted, stream, settings.catalog, settings.table)
        for stream in settings.streams
    ]
    return for_each([(ref.identifier, ref) for ref in refs], command, work)


def for_each(items: list[tuple[str, T]], command: str, work: Callable[[T], str]) -> list[int]:
    """Run ``work`` on each named item in turn: the line it returns goes to stdout after
    the name, a failure is one line on stderr and does not stop the next. The exit code
    of each: 0 done, 3 for a :class:`~consumer.errors.RefusedError` (what it works on is
    not there), 1 for any other failure."""
    results = []
    for name, item in items:
        try:
            line = work(item)
        except Exception as exc:  # deliberately any: one table's failure does not stop the next
            print(f"lander {command}: {name}: {exc}", file=sys.stderr)
            results.append(EXIT_MISSING if isinstance(exc, RefusedError) else EXIT_FAILED)
            continue
        print(f"{name}: {line}", flush=True)
        results.append(EXIT_OK)
    return results


def check_catalogs(output: str, streams: list[str], catalog: str, template: str) -> str | None:
    """:func:`check_catalog` for each stream's table: the first problem, as the one line
    the job prints (``LANDER_CATALOG: …``), or None."""
    for stream in streams:
        try:
            check_catalog(table_ref(output, stream, catalog, template))
        except CatalogError as exc:
            return f"LANDER_CATALOG: {exc}"
    return None


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
