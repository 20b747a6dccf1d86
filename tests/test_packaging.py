"""The package is fit for a library: ranges in pyproject.toml, the exact set in
constraints.txt, and every install of this repository made from that set."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LOCK = REPO / "constraints.txt"


def _requirements() -> list[Requirement]:
    texts = list(PROJECT["dependencies"])
    for extra in PROJECT["optional-dependencies"].values():
        texts.extend(extra)
    return [Requirement(text) for text in texts]


def lock_pins() -> dict[str, str]:
    """constraints.txt as {canonical name: version}; every line a comment or ``==``."""
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line.strip())
        assert match, f"constraints.txt: not an exact pin: {line!r}"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_every_dependency_is_a_range_with_a_floor_and_none_is_exact() -> None:
    """An application that imports the lander keeps its own pins: no ``==`` and no
    open-ended floorless requirement (each has a lower bound)."""
    for requirement in _requirements():
        operators = {spec.operator for spec in requirement.specifier}
        assert not operators & {"==", "==="}, str(requirement)
        if str(requirement) in PROJECT["optional-dependencies"]["dev"] and not operators:
            continue  # a test-only helper (boto3, six): whatever the lock holds
        assert ">=" in operators, f"{requirement}: no lower bound"


def test_the_lock_pins_every_requirement_inside_its_range() -> None:
    pins = lock_pins()
    for requirement in _requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in constraints.txt"
        assert Version(pins[name]) in requirement.specifier, (
            f"constraints.txt pins {name}=={pins[name]}, outside {requirement}"
        )


def test_this_environment_was_installed_from_the_lock() -> None:
    """What `make install` (and so `make test` and CI) installed is the lock's versions:
    a package installed at another version means an install that ignored it."""
    differ = {}
    for name, pinned in lock_pins().items():
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(found) != Version(pinned):
            differ[name] = (pinned, found)
    assert not differ, f"installed versions differ from constraints.txt: {differ}"


def test_every_install_of_the_repository_uses_the_lock() -> None:
    makefile = (REPO / "Makefile").read_text()
    install = makefile.split("$(PY_STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert "constraints.txt" in install.splitlines()[0], "the venv is rebuilt when it changes"
    assert "pip install" in install
    assert "-c constraints.txt" in install
    dockerfile = (REPO / "Dockerfile").read_text()
    installs = [line for line in dockerfile.splitlines() if "/opt/lander/bin/pip install" in line]
    assert len(installs) == 3, installs  # worker, spark, bootstrap
    assert all("-c /dist/constraints.txt" in line for line in installs), installs
    assert "COPY constraints.txt /dist/" in dockerfile


def test_the_metadata_says_what_the_package_is() -> None:
    classifiers = PROJECT["classifiers"]
    floor = SpecifierSet(PROJECT["requires-python"])
    versions = [c.rsplit(" :: ", 1)[1] for c in classifiers if re.search(r"Python :: 3\.\d+$", c)]
    assert versions, "no Python version classifier"
    assert all(Version(v) in floor for v in versions), (versions, floor)
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    assert "Typing :: Typed" in classifiers
    assert (REPO / "consumer" / "py.typed").is_file()
