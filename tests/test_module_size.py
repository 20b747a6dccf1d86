"""Modules of one idea: none over 450 lines in the product (consumer/, sparkjobs/), and
none over 400 elsewhere (bench/, deploy/) without a reason in its docstring.

A big module usually holds several ideas that read and test better apart. In the
product there is no exemption (issue 45: eleven modules had one, and each split along
its ideas). A benchmark or a deploy script may be one long thing on purpose (a script
the bootstrap image copies alone): a line ``Long module: <why>`` in its docstring says
so, where the next reader sees it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("consumer", "sparkjobs", "bench", "deploy")
PRODUCT = ("consumer", "sparkjobs")
PRODUCT_LIMIT = 450
"""No module of the product is longer, and none says why it could be."""
LIMIT = 400
"""Longer modules of bench/ and deploy/ say why."""
MARK = "Long module:"

PENDING: set[str] = set()
"""Modules allowed over the limit without a reason yet (none)."""


def _modules() -> list[Path]:
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "node_modules" not in path.parts and "__pycache__" not in path.parts:
                found.append(path)
    return found


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def has_reason(source: str) -> bool:
    """Whether the module docstring has a line starting ``Long module:`` and a reason."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return any(
        line.startswith(MARK) and line.removeprefix(MARK).strip() for line in docstring.splitlines()
    )


def test_the_rule_reads_the_docstring_only() -> None:
    """The reason must be in the module docstring, on a line of its own, and say something."""
    assert has_reason('"""Title.\n\nLong module: one generator, one place.\n"""\n')
    assert not has_reason('"""Title.\n\nLong module:\n"""\n')
    assert not has_reason('"""Title: Long module: inline."""\n')
    assert not has_reason('"""Title."""\n# Long module: a comment is not the docstring\n')
    assert not has_reason('x = 1\n"""Long module: not a docstring."""\n')


def test_the_walk_sees_the_code() -> None:
    """The rule runs over the packages (a walk that found nothing would pass vacuously)."""
    names = {path.relative_to(REPO).as_posix() for path in _modules()}
    assert {"sparkjobs/cli.py", "consumer/config/worker.py", "bench/archives.py"} <= names
    assert "deploy/validate.py" in names
    assert not any("node_modules" in name for name in names)


def _in_product(name: str) -> bool:
    return name.split("/", 1)[0] in PRODUCT


def test_no_product_module_is_long_or_exempt() -> None:
    """No module of consumer/ or sparkjobs/ is over 450 lines or carries an exemption."""
    long = {}
    exempt = []
    for path in _modules():
        name = path.relative_to(REPO).as_posix()
        if not _in_product(name):
            continue
        if _lines(path) > PRODUCT_LIMIT:
            long[name] = _lines(path)
        if MARK in (ast.get_docstring(ast.parse(path.read_text())) or ""):
            exempt.append(name)
    assert long == {}, f"modules over {PRODUCT_LIMIT} lines: split each along its ideas"
    assert exempt == [], f"no '{MARK}' exemption in consumer/ or sparkjobs/"


def test_long_modules_say_why() -> None:
    """Every module of bench/ and deploy/ over 400 lines states its reason in its
    docstring (``Long module: …``), but those in :data:`PENDING`."""
    unexplained = {}
    for path in _modules():
        name = path.relative_to(REPO).as_posix()
        if _in_product(name):
            continue
        lines = _lines(path)
        if lines > LIMIT and name not in PENDING and not has_reason(path.read_text()):
            unexplained[name] = lines
    assert unexplained == {}, (
        f"modules over {LIMIT} lines: split each along its ideas, or add a line "
        f"'{MARK} <why it is one module>' to its docstring"
    )
