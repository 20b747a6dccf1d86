"""The wheel, installed without extras, run from a folder that is not the repository.

What a user gets from ``pip install kinesis-lander``: the wheel is built from a copy of
the sources (as pip builds it), installed into a folder of its own, and run by an
interpreter that sees that folder, the runtime dependencies pyproject.toml names (and
theirs), and nothing else: no moto, no PySpark, no test helpers, no repository on the
path. Each command either works or says in one line what to install.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from consumer.errors import EXIT_CONFIG

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "consumer", "sparkjobs")

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]


def runtime_closure() -> list[metadata.Distribution]:
    """The installed distributions the base package needs: pyproject.toml's
    ``dependencies`` and what they require in turn (no extras, markers evaluated)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    todo = [Requirement(text) for text in project["dependencies"]]
    found: dict[str, metadata.Distribution] = {}
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        dist = metadata.distribution(name)
        found[name] = dist
        here = {"extra": ""}  # the rest of the environment is this interpreter's
        for text in dist.requires or []:
            child = Requirement(text)
            if child.marker is None or child.marker.evaluate(here):
                todo.append(child)
    return list(found.values())


def link_site(dists: list[metadata.Distribution], into: Path) -> None:
    """A site folder holding only ``dists``: each one's top-level packages and modules
    and its metadata folder, linked from where they are installed."""
    into.mkdir()
    for dist in dists:
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in sorted(tops):
            if top in ("..", "__pycache__", "bin") or top.endswith(".pth"):
                continue
            source = site / top
            if source.exists() and not (into / top).exists():
                (into / top).symlink_to(source)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, str]]:
    """How to run the installed ``lander`` (its console-script entry point) and the
    environment that sees only the wheel and the runtime dependencies."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "*.pyc", "*.so")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    dist = root / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(dist), "."],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kinesis_lander-*.whl")
    target = root / "site"
    done = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    deps = root / "deps"
    link_site(runtime_closure(), deps)
    (info,) = target.glob("kinesis_lander-*.dist-info")
    points = configparser.ConfigParser()
    points.read(info / "entry_points.txt")
    module, _, function = points["console_scripts"]["lander"].partition(":")
    argv = [
        sys.executable,
        "-S",  # no site: not this venv's site-packages, only PYTHONPATH
        "-c",
        f"import sys; from {module} import {function} as main; sys.exit(main())",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_", "PYTHON"))}
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(deps)])
    return argv, env


def _run(
    installed: tuple[list[str], dict[str, str]], cwd: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    argv, base = installed
    return subprocess.run(
        [*argv, *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_wheel_holds_what_the_commands_read(
    installed: tuple[list[str], dict[str, str]], tmp_path: Path
) -> None:
    """Package data included (the emulator launchers, the Java line reader), the test
    helpers and the repository not reachable, the version known."""
    probe = (
        "import consumer, importlib.util as u, pathlib as p; "
        "root = p.Path(consumer.__file__).parent; "
        "print(root.parent.name, (root / 'cli/emulators/kinesalite_server.js').is_file(), "
        "any((root.parent / 'sparkjobs/compaction/jvm').glob('*.java')), "
        "u.find_spec('tests') is None, u.find_spec('moto') is None, "
        "u.find_spec('pyspark') is None)"
    )
    argv, env = installed
    done = subprocess.run(
        [argv[0], "-S", "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == ["site", "True", "True", "True", "True", "True"], done
    version = _run(installed, tmp_path, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("lander 0."), version.stdout


@pytest.mark.parametrize(
    ("args", "extra", "absent"),
    [
        (("local-stack",), "local", "moto"),
        (("demo",), "local,spark", "moto, pyspark, pyiceberg"),
        (("compact", "--stream", "s", "--window", "2026-11-01"), "spark", "pyspark, pyiceberg"),
        (("maintain", "--stream", "s"), "spark", "pyiceberg"),
    ],
)
def test_a_command_whose_extra_is_missing_says_what_to_install(
    installed: tuple[list[str], dict[str, str]],
    tmp_path: Path,
    args: tuple[str, ...],
    extra: str,
    absent: str,
) -> None:
    done = _run(installed, tmp_path, *args)
    assert done.returncode == EXIT_CONFIG, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"({absent} not installed): pip install 'kinesis-lander[{extra}]'" in lines[0]
    assert list(tmp_path.iterdir()) == [], "nothing was written to the user's folder"


def test_the_base_commands_run_without_extras(
    installed: tuple[list[str], dict[str, str]], tmp_path: Path
) -> None:
    """``run`` and ``status`` need no extra: a missing setting is their one line, and
    ``--help`` of every command works."""
    done = _run(installed, tmp_path, "run")
    assert done.returncode == EXIT_CONFIG
    assert done.stderr.strip().splitlines() == [
        "lander: invalid configuration: LANDER_STREAM is required but not set; "
        "LANDER_LEASE_TABLE is required but not set"
    ]
    for command in ("run", "status", "produce", "compact", "local-stack", "demo"):
        shown = _run(installed, tmp_path, command, "--help")
        assert shown.returncode == 0, (command, shown.stderr)
