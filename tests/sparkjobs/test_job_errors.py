"""The Spark jobs' errors are branches of the one error tree (consumer/errors.py): each a
LanderError with its retry policy on the class, drawn in the tree, and a bad setting a
ConfigError, which the jobs' command line answers with exit 2 (the exit codes
themselves are tested where each error is met: test_batch_cli.py, test_glue_catalog.py,
test_object_reader.py, test_compact.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sparkjobs
from consumer import errors
from consumer.config import ConfigError
from consumer.errors import LanderError
from sparkjobs.catalog import CatalogError
from sparkjobs.compaction.job import CompactionError
from sparkjobs.compaction.objectreader import ReaderJarError
from sparkjobs.table.table import CommitConflictError
from sparkjobs.window import WindowError


def _job_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(sparkjobs.__path__, "sparkjobs."):
        if info.name.endswith("__main__"):
            continue  # runs the command line when imported
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_every_job_error_is_in_the_tree_with_its_policy() -> None:
    """Each exception class of sparkjobs derives from LanderError, sets ``retriable`` on
    itself (not by inheritance alone: the policy is decided where the class is), and is
    named in the tree drawn in consumer/errors.py."""
    classes = _job_exceptions()
    assert set(classes) >= {
        WindowError,
        CatalogError,
        ReaderJarError,
        CompactionError,
        CommitConflictError,
    }
    drawing = errors.__doc__ or ""
    for cls in classes:
        assert issubclass(cls, LanderError), cls
        assert isinstance(cls.__dict__.get("retriable"), bool), cls
        assert cls.__name__ in drawing, f"{cls.__name__} is missing from the tree"


def test_bad_settings_are_config_errors_and_keep_their_old_bases() -> None:
    """A bad LANDER_WINDOW, LANDER_CATALOG/LANDER_TABLE or LANDER_SPARK_READER_JAR is a
    ConfigError (exit 2), none retriable; a window that fails is not a setting's fault.
    Each keeps the built-in base it had, so a caller that caught it still does."""
    for cls in (WindowError, CatalogError, ReaderJarError):
        assert issubclass(cls, ConfigError), cls
        assert issubclass(cls, ValueError), cls
        assert not cls.retriable
    assert not issubclass(CompactionError, ConfigError)
    assert issubclass(CompactionError, RuntimeError)
    assert not CompactionError.retriable
    assert not issubclass(CommitConflictError, ConfigError)
    assert CommitConflictError.retriable
