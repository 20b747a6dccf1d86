"""The Dockerfile's wheel stage compiles the hot path with pinned build requirements."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from consumer.compiled import HOT_PATH

REPO = Path(__file__).resolve().parents[2]


def _pins(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)", line.strip())
        if match:
            found[match[1].lower().replace("_", "-")] = match[2]
    return found


def test_the_wheel_stage_compiles_with_pinned_requirements_at_the_projects_pins() -> None:
    requirements = (REPO / "deploy" / "docker" / "requirements-build.txt").read_text()
    wanted = [
        line for line in requirements.splitlines() if line.strip() and not line.startswith("#")
    ]
    build = _pins(wanted)
    assert len(build) == len(wanted), "every build requirement is pinned with =="
    lock = _pins((REPO / "constraints.txt").read_text().splitlines())
    # mypyc type-checks what it compiles against the packages the modules import: the
    # same versions the project runs and checks with (constraints.txt, the lock).
    assert build["orjson"] == lock["orjson"]
    assert build["isal"] == lock["isal"]
    assert build["mypy"] == lock["mypy"]
    dockerfile = (REPO / "Dockerfile").read_text()
    wheel_stage = dockerfile.split(" AS wheel", 1)[1].split("\nFROM ", 1)[0]
    assert "requirements-build.txt" in wheel_stage
    assert "COPY pyproject.toml setup.py" in wheel_stage
    assert (
        "KINESIS_LANDER_MYPYC=1 python -m pip wheel --no-deps --no-build-isolation" in wheel_stage
    )


def test_the_hot_path_names_modules_that_exist() -> None:
    """A renamed or moved module would silently fall out of the compiled build."""
    for path in HOT_PATH:
        assert path.startswith("consumer/"), path
        assert (REPO / path).is_file(), path


def test_the_dockerfile_pulls_no_unpinned_frontend() -> None:
    """A ``# syntax=`` line makes BuildKit pull that frontend image from a registry
    before building: unpinned, a build changes (or fails offline) when it moves. The
    Dockerfile uses nothing the built-in frontend lacks, so it names none; one that is
    added must be pinned by digest."""
    head = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if not line.startswith("#"):
            break
        head.append(line)
    directives = [line for line in head if re.match(r"#\s*syntax\s*=", line, re.IGNORECASE)]
    assert all("@sha256:" in line for line in directives), directives
    compose = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lock = _pins((REPO / "constraints.txt").read_text().splitlines())
    for requirement in compose["optional-dependencies"]["compose"]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower()
        assert name in lock, f"the compose extra's {name} is pinned by the lock"


def _admitted(path: str, rules: list[str]) -> bool:
    """Whether .dockerignore lets ``path`` into the build context: the last rule that
    matches wins ('*' excludes all, '!x' admits x and what is under it)."""
    admitted = True
    for rule in rules:
        negated = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if pattern in ("*", path) or path.startswith(pattern + "/"):
            admitted = negated
    return admitted


def test_every_file_the_dockerfile_copies_is_in_the_build_context() -> None:
    """A COPY of a file .dockerignore leaves out fails the build (setup.py did, once the
    wheel stage needed it: found by the first real build)."""
    rules = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#") and "**" not in line
    ]
    copied: list[str] = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY" or any(p.startswith("--from") for p in parts):
            continue
        sources = [p for p in parts[1:-1] if not p.startswith("--")]
        copied.extend(source.rstrip("/").removeprefix("./") for source in sources)
    assert "setup.py" in copied
    missing = [path for path in copied if not _admitted(path, rules)]
    assert not missing, f"COPY of files .dockerignore leaves out: {missing}"
    for path in copied:
        assert (REPO / path).exists(), path


def test_the_spark_image_puts_no_config_folder_on_the_class_path() -> None:
    """Spark adds SPARK_CONF_DIR to the JVM's class path; a non-empty folder there makes
    the build's AppCDS dump fail ("Cannot have non-empty directory in paths") and every
    run ignore the archive. The defaults come through LANDER_SPARK_PROPERTIES instead."""
    text = (REPO / "Dockerfile").read_text()
    assert "SPARK_CONF_DIR=" not in text
    assert "LANDER_SPARK_PROPERTIES=/opt/lander/spark-defaults.conf" in text
    assert "COPY deploy/docker/spark-defaults.conf /opt/lander/spark-defaults.conf" in text
