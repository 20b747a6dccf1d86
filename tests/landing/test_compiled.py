"""The landing hot path compiled with mypyc, as the image's wheel builds it
(``KINESIS_LANDER_MYPYC=1``, setup.py), passes the same tests as the interpreted one.

A copy of the package and of the tests is compiled in a temporary folder (never the
working tree: an extension module would shadow its ``.py``) and the hot path's logic
tests, property tests included, run there in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compiled_copy import can_compile, compile_copy
from consumer.compiled import HOT_PATH, module_name

SUITES = (
    "tests/landing/test_landing_pure.py",
    "tests/landing/test_lander_unit.py",
    "tests/landing/test_bad_input_corpus.py",
    "tests/landing/test_codec_replays.py",
    "tests/landing/test_landing_replay.py",
    "tests/stream/test_kpl.py",
    "tests/stream/test_reader.py",
    "tests/archive/test_archive_format.py",
)


@pytest.mark.deep  # ~65 s: compiles eight modules with mypyc, then runs their tests again
@pytest.mark.processes  # compiles and tests in child processes
@pytest.mark.skipif(not can_compile(), reason="no C compiler on this machine")
def test_the_compiled_hot_path_passes_the_hot_path_tests(tmp_path: Path) -> None:
    root = compile_copy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from consumer.compiled import compiled_modules, hot_path_mode; "
            "print(hot_path_mode(), *compiled_modules())",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == ["compiled", *(module_name(path) for path in HOT_PATH)]
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:cov", *SUITES],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout
