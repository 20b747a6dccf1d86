"""The test tiers hold: the fast tier refuses a slow test, the deep tier runs only its
own, and every test that starts the Spark session is scheduled with the others that do.

The runs here are pytest in a child process, on a small project of their own that
loads this suite's conftest as a plugin (tests/conftest.py, docs/development.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.groups import SPARK_GROUP, scope, spark_files, unscheduled

REPO = Path(__file__).resolve().parents[1]

PROJECT = {
    "conftest.py": 'pytest_plugins = ["tests.conftest"]\n',
    "pyproject.toml": (
        "[tool.pytest.ini_options]\n"
        'markers = ["deep: d", "fast_tier_budget(seconds, why): b", "emulator: e", '
        '"processes: p", "spark: s", "soak: s"]\n'
    ),
    "checks/test_quick.py": "def test_quick():\n    pass\n",
    "checks/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(0.6)\n",
    "checks/test_budget.py": (
        "import time\nimport pytest\n\n"
        "@pytest.mark.fast_tier_budget(5, 'an end-to-end run')\n"
        "def test_long_but_budgeted():\n    time.sleep(0.6)\n"
    ),
    "checks/test_deep.py": (
        "import time\nimport pytest\n\n"
        "@pytest.mark.deep\ndef test_deep_and_slow():\n    time.sleep(0.6)\n"
    ),
}


def _project(root: Path) -> Path:
    for name, text in PROJECT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LANDER_TEST_FAST_TIER_SECONDS": "0.05",  # times the load per core: under 0.6 s here
        "PYTEST_ADDOPTS": "",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, "checks"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.processes  # pytest in a child process
def test_the_fast_tier_fails_a_test_over_its_limit_and_runs_no_deep_one(tmp_path: Path) -> None:
    done = _pytest(_project(tmp_path), "--tier", "fast")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "3 passed, 1 deselected" in out
    assert "too slow for the fast tier" in out
    assert "checks/test_slow.py::test_slow: its call took" in out
    assert "over the fast tier's 0 s (its limit times the load per core): mark it deep" in out
    assert "test_long_but_budgeted" not in out.split("too slow for the fast tier", 1)[1]


@pytest.mark.processes
def test_the_deep_tier_runs_only_the_deep_tests_and_holds_them_to_no_limit(tmp_path: Path) -> None:
    done = _pytest(_project(tmp_path), "--tier", "deep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 3 deselected" in done.stdout
    assert "too slow" not in done.stdout


@pytest.mark.processes
def test_without_a_tier_everything_runs_and_nothing_is_timed(tmp_path: Path) -> None:
    done = _pytest(_project(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


@pytest.mark.processes
def test_the_fast_tier_under_xdist_fails_on_the_controller(tmp_path: Path) -> None:
    """Workers' reports reach the controller, which judges them (two workers here)."""
    done = _pytest(_project(tmp_path), "--tier", "fast", "-n", "2", "--dist", "loadgroup")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "checks/test_slow.py::test_slow: its call took" in done.stdout


def test_spark_files_are_the_files_whose_functions_take_spark(tmp_path: Path) -> None:
    files = {
        "tests/test_a.py": "def test_x(spark):\n    pass\n",
        "tests/sub/test_b.py": "import pytest\n\n@pytest.fixture\ndef table(spark): ...\n",
        "tests/test_c.py": "async def test_y(*, spark):\n    pass\n",
        "tests/test_d.py": "def test_z(sparkle, tmp_path):\n    spark = 1\n",
        "tests/helper.py": "def test_w(spark):\n    pass\n",  # not a test file
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = spark_files.__wrapped__(tmp_path)
    assert found == {"tests/test_a.py", "tests/sub/test_b.py", "tests/test_c.py"}


def test_a_spark_file_is_one_scope_and_every_other_test_is_its_own() -> None:
    files = frozenset({"tests/sparkjobs/test_compact.py"})
    assert scope("tests/sparkjobs/test_compact.py::test_one[a]", files) == SPARK_GROUP
    assert scope("tests/sparkjobs/test_compact.py::test_two", files) == SPARK_GROUP
    assert scope("tests/test_errors.py::test_x", files) == "tests/test_errors.py::test_x"


class _Item:
    def __init__(self, nodeid: str, *fixtures: str) -> None:
        self.nodeid = nodeid
        self.fixturenames = fixtures


def test_a_spark_user_outside_the_files_is_named() -> None:
    files = frozenset({"tests/a.py"})
    items = [
        _Item("tests/a.py::t", "spark"),
        _Item("tests/b.py::t", "tmp_path", "spark"),
        _Item("tests/c.py::t", "tmp_path"),
        _Item("tests/chaos/test_chaos.py::t[x]", "spark"),  # a session per worker
    ]
    assert unscheduled(items, files) == ["tests/b.py::t"]


def test_the_chaos_runs_are_a_group_of_their_own() -> None:
    files = spark_files(REPO)
    assert "tests/chaos/test_chaos.py" not in files
    assert "tests/sparkjobs/test_compact.py" in files
    node = "tests/chaos/test_chaos.py::test_short[board-efo-1]"
    assert scope(node, files) == "tests/chaos/test_chaos.py"


@pytest.mark.processes
def test_every_test_of_this_suite_that_starts_spark_is_in_the_spark_group() -> None:
    """Collected as a worker of ``make test`` collects (the check is in conftest)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(spark_files(REPO)) >= 10


def test_the_profile_summary_ranks_tests_and_totals_files_and_markers() -> None:
    from tests.support.profile import summary

    rows = [
        {
            "test": "a.py::t1",
            "file": "a.py",
            "markers": ["spark"],
            "wall": 5.0,
            "cpu": 1.0,
            "children_cpu": 2.0,
        },
        {
            "test": "a.py::t2",
            "file": "a.py",
            "markers": [],
            "wall": 1.0,
            "cpu": 1.0,
            "children_cpu": 0.0,
        },
        {
            "test": "b.py::t3",
            "file": "b.py",
            "markers": ["deep", "spark"],
            "wall": 9.0,
            "cpu": 0.5,
            "children_cpu": 0.0,
        },
    ]
    text = summary(rows, top=2)
    lines = text.splitlines()
    assert lines[0] == "3 tests, 15.0 s of wall time in all"
    ranked = [line.split()[-2] for line in lines[3:5]]
    assert ranked == ["b.py::t3", "a.py::t1"]
    assert "    6.0     4.0     2  a.py" in text
    assert "   14.0     3.5     2  spark" in text
    assert "    1.0     1.0     1  (none)" in text
