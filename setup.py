"""Build hook (the project's metadata is in pyproject.toml).

``KINESIS_LANDER_MYPYC=1`` compiles the landing hot path (:data:`consumer.compiled.HOT_PATH`)
with mypyc into C extensions, for the wheel an image installs: build it with mypy (the
dev pin) installed and ``pip wheel --no-build-isolation``. Without it the wheel is pure
Python and works the same, with more CPU per record. Never compile in a working tree
(``build_ext --inplace``): an extension module shadows its ``.py``, so later edits of the
source would silently not run.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from setuptools import setup


def _hot_path() -> tuple[str, ...]:
    # Loaded by path: importing the package would import its dependencies.
    spec = importlib.util.spec_from_file_location(
        "_lander_compiled", Path(__file__).parent / "consumer" / "compiled.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths: tuple[str, ...] = module.HOT_PATH
    return paths


def _ext_modules() -> list[Any]:
    if os.environ.get("KINESIS_LANDER_MYPYC", "") != "1":
        return []
    from mypyc.build import mypycify  # noqa: PLC0415 (only a compiled build needs mypy)

    return list(mypycify(list(_hot_path()), opt_level="3"))


setup(ext_modules=_ext_modules())
