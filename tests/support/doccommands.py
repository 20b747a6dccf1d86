"""The commands of a Markdown page's shell blocks, as bash would split them.

:func:`fenced_blocks` finds the fenced code blocks and their info strings;
:func:`commands` reads a shell block (```sh, ```bash, ```shell, ```console) into
simple commands: backslash continuations joined, a quoted string that spans lines kept
whole, comments dropped, a ``$ `` prompt dropped (in a console block, the lines without
one are output), then split at ``|``, ``&&``, ``||``, ``;`` and ``&``, with redirections,
the loop keywords and ``for``'s word lists left out, and each ``$(...)`` read as a
command of its own. Leading ``NAME=value`` words (and ``export``'s) are the command's
assignments. tests/test_doc_commands.py classifies what this returns.

Only what the docs use is understood: no here-documents, no ``case``, no arithmetic.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SHELL_FENCES = frozenset({"sh", "bash", "shell", "console"})
"""Info strings of blocks whose lines are commands (console: only the ``$ `` lines)."""
OTHER_FENCES = frozenset({"", "python", "mermaid", "yaml", "toml", "sql", "json", "text"})
"""Info strings of blocks that hold no shell command (an empty one: output, trees)."""

WALKTHROUGH = "<!-- walkthrough -->"
"""The marker above README.md's block that tests/cli/test_readme_walkthrough.py runs."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PUNCTUATION = frozenset("();<>|&")
_LEADING_KEYWORDS = frozenset({"while", "until", "if", "then", "do", "else", "elif", "!", "{"})
_CLOSING_KEYWORDS = frozenset({"done", "fi", "}", "esac"})
SUBSTITUTION = "$SUBSTITUTION"
"""What a ``$(...)`` becomes in the words of the command around it (no character that
splits words: the substitution's own commands are read on their own)."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it opens (1-based line), its info string, its lines."""

    path: str
    line: int
    info: str
    lines: tuple[tuple[int, str], ...]
    walkthrough: bool = False


@dataclass(frozen=True)
class Command:
    """One simple command: ``words`` is the program and its arguments (empty for a
    line of assignments only), ``assignments`` the ``NAME=value`` words before it or
    after ``export``; ``text`` is the whole logical line it came from, ``block`` the line
    its block opens on."""

    path: str
    block: int
    line: int
    text: str
    words: tuple[str, ...]
    assignments: tuple[str, ...]
    walkthrough: bool

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class UnclosedQuoteError(ValueError):
    """The text ends inside a quote or a ``$(``: the line continues on the next."""


def fenced_blocks(path: str, text: str) -> list[Block]:
    """Every fenced block of a Markdown text, an indented one (in a list) included."""
    blocks: list[Block] = []
    lines = text.splitlines()
    opened: tuple[int, str, str, str] | None = None  # line, indent, fence, info
    body: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        match = _FENCE.match(line)
        if opened is None:
            if match:
                opened = (number, match["indent"], match["fence"], match["info"].strip())
                body = []
            continue
        start, indent, fence, info = opened
        if match and match["fence"].startswith(fence) and not match["info"].strip():
            marker = start >= 2 and lines[start - 2].strip() == WALKTHROUGH
            blocks.append(Block(path, start, info, tuple(body), marker))
            opened = None
            continue
        body.append((number, line.removeprefix(indent)))
    if opened is not None:
        raise ValueError(f"{path}:{opened[0]}: a fenced block that never closes")
    return blocks


def scan(text: str) -> tuple[str, list[str]]:
    """``text`` without comments and backslash-newlines, each ``$(...)`` replaced by
    :data:`SUBSTITUTION`; and the substitutions' inner texts. Raises
    :class:`UnclosedQuoteError` when a quote or a substitution is still open at the end."""
    out: list[str] = []
    inner: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        char = text[i]
        if quote == "'":
            quote = "" if char == "'" else quote
            out.append(char)
            i += 1
        elif char == "\\":
            if text.startswith("\\\n", i):
                i += 2  # a continuation: bash drops both
            else:
                out.append(text[i : i + 2])
                i += 2
        elif text.startswith("$(", i) and not text.startswith("$((", i):
            end = _closing(text, i + 2)
            inner.append(text[i + 2 : end])
            out.append(SUBSTITUTION)
            i = end + 1
        elif char == "#" and not quote and (i == 0 or text[i - 1] in " \t\n;&|("):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
        else:
            if char == "'" and not quote:
                quote = "'"
            elif char == '"':
                quote = "" if quote == '"' else '"'
            out.append(char)
            i += 1
    if quote:
        raise UnclosedQuoteError(text)
    return "".join(out), inner


def _closing(text: str, start: int) -> int:
    """The index of the ``)`` that closes a ``$(`` whose inside begins at ``start``."""
    depth, quote, i = 1, "", start
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                i += 1
        elif char in "'\"":
            quote = char
        elif char == "\\":
            i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise UnclosedQuoteError(text)


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """The block's commands as (first line, text): continuations and quoted newlines
    joined, prompts dropped; in a console block only the ``$ `` lines and their
    continuations, the rest being output."""
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in block.lines:
        line = raw
        if not pending:
            if line.startswith("$ "):
                line = line[2:]
            elif block.info == "console":
                continue
            start = number
        pending.append(line)
        text = "\n".join(pending)
        try:
            code, _ = scan(text)
        except UnclosedQuoteError:
            continue
        if code.endswith("\\"):
            continue
        if code.strip():
            found.append((start, text))
        pending = []
    if pending:
        raise ValueError(f"{block.path}:{start}: a command that never ends (quote or '\\')")
    return found


def split(block: Block, line: int, text: str) -> list[Command]:
    """The simple commands of one logical line (substitutions' commands after it)."""
    code, inner = scan(text)
    lexer = shlex.shlex(code, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    found: list[Command] = []
    words: list[str] = []
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token and set(token) <= _PUNCTUATION:
            if "<" in token or ">" in token:
                i += 2  # a redirection and its target
                continue
            found.extend(_command(block, line, text, words))
            words = []
        else:
            words.append(token)
        i += 1
    found.extend(_command(block, line, text, words))
    for nested in inner:
        found.extend(split(block, line, nested))
    return found


def _command(block: Block, line: int, text: str, words: list[str]) -> list[Command]:
    while words and words[0] in _LEADING_KEYWORDS:
        words = words[1:]
    if not words or words[0] in _CLOSING_KEYWORDS or words[0] == "for":
        return []  # a loop's end, or `for NAME in WORDS`: data, not a command
    assignments: list[str] = []
    while words and _is_assignment(words[0]):
        assignments.append(words[0])
        words = words[1:]
    if words and words[0] == "export":
        assignments.extend(word for word in words[1:] if _is_assignment(word))
        words = []
    return [
        Command(
            block.path,
            block.line,
            line,
            text,
            tuple(words),
            tuple(assignments),
            block.walkthrough,
        )
    ]


def _is_assignment(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and _NAME.fullmatch(name) is not None


def commands(path: str, text: str) -> tuple[list[Command], list[str]]:
    """Every command of the page's shell blocks, and the problems found reading it: a
    block whose info string is in neither :data:`SHELL_FENCES` nor :data:`OTHER_FENCES`,
    a ``$ `` prompt in a block not marked as shell."""
    found: list[Command] = []
    problems: list[str] = []
    for block in fenced_blocks(path, text):
        language = block.info.split()[0] if block.info else ""
        if language in SHELL_FENCES:
            for line, logical in logical_lines(block):
                found.extend(split(block, line, logical))
        elif language not in OTHER_FENCES:
            problems.append(
                f"{path}:{block.line}: a ```{language} block: name it in SHELL_FENCES (its "
                "lines are commands) or OTHER_FENCES in tests/support/doccommands.py"
            )
        else:
            problems.extend(
                f"{path}:{number}: a `$ ` prompt in a ```{language} block: mark the block "
                "```console so that its commands are checked"
                for number, line in block.lines
                if line.startswith("$ ")
            )
    return found, problems
