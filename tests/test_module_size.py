"""No module over 400 lines without a reason: a line ``Long module: <why>`` in its docstring.

A big module usually holds several ideas that read and test better apart; when one
does not (a generator whose determinism must stay in one place, one page's sections),
its docstring says so, where the next reader sees it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("consumer", "sparkjobs", "bench", "deploy")
LIMIT = 400
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
    assert {"sparkjobs/compact.py", "bench/archives.py", "deploy/validate.py"} <= names
    assert not any("node_modules" in name for name in names)


def test_long_modules_say_why() -> None:
    """Every module over 400 lines states its reason in its docstring (``Long module: …``),
    but those in :data:`PENDING`."""
    unexplained = {}
    for path in _modules():
        name = path.relative_to(REPO).as_posix()
        lines = _lines(path)
        if lines > LIMIT and name not in PENDING and not has_reason(path.read_text()):
            unexplained[name] = lines
    assert unexplained == {}, (
        f"modules over {LIMIT} lines: split each along its ideas, or add a line "
        f"'{MARK} <why it is one module>' to its docstring"
    )
