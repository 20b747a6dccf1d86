"""Which modules of the landing hot path may be compiled with mypyc, and whether they are.

The modules are plain, type-checked Python and run as they are; a wheel built with
``KINESIS_LANDER_MYPYC=1`` (setup.py, the Dockerfile's wheel stage) compiles them with mypyc
into C extensions that do the same work with less interpreter overhead per record
(docs/benchmarks.md, hotpath). Nothing imports this module on the hot path: it only
names the modules, for the build, the tests that run the suite against a compiled copy,
the benchmark, and the worker's start-up log.
"""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

HOT_PATH = (
    "consumer/sequence.py",
    "consumer/stream/kpl.py",
    "consumer/stream/records.py",
    "consumer/landing/envelope.py",
    "consumer/landing/batcher.py",
)
"""Source paths, relative to the project root, that ``KINESIS_LANDER_MYPYC=1`` compiles."""


def module_name(path: str) -> str:
    """``consumer/stream/kpl.py`` -> ``consumer.stream.kpl``."""
    return path.removesuffix(".py").replace("/", ".")


def compiled_modules() -> list[str]:
    """The hot-path modules this process runs compiled (imported from an extension)."""
    found = []
    for path in HOT_PATH:
        module = importlib.import_module(module_name(path))
        origin = getattr(module, "__file__", None) or ""
        if origin.endswith(tuple(EXTENSION_SUFFIXES)):
            found.append(module.__name__)
    return found


def hot_path_mode() -> str:
    """``compiled``, ``interpreted``, or ``partly compiled`` (a broken build)."""
    count = len(compiled_modules())
    if count == len(HOT_PATH):
        return "compiled"
    return "interpreted" if count == 0 else "partly compiled"
