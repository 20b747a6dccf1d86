"""Every command in the shell blocks of README.md and docs/*.md is one a fresh clone can
type (issue 46): each is read out of its block (tests/support/doccommands.py) and falls
in exactly one class, and a command in none fails the test, naming its file and line.

- ``walkthrough``: README.md's block under ``<!-- walkthrough -->``, which
  tests/cli/test_readme_walkthrough.py runs as written (deep tier).
- ``parsed``: ``lander …``, ``python -m bench|sparkjobs|consumer.cli|tests.chaos …``, and
  the application arguments of ``spark-submit … submit.py``: parsed by the command's
  own argument parser in this process, and every flag must be one of the (sub)command's
  own, spelled out (argparse would take an abbreviation). Where the subcommand reads a
  settings class, the settings are then loaded as the command would load them, from
  its flags and the variables its block exported before it (:data:`ELSEWHERE` fills
  what the page set in an earlier section): a value the setting refuses is a problem.
- ``run``: a parsed command that only prints (``--help``, ``--version``): also run, by
  bash from the repository's root with the venv's ``bin`` first on the PATH, and it
  must exit 0 (the test marked ``processes``).
- ``make``: the target is in the Makefile; a ``NAME=value`` passed to make is a variable
  the Makefile reads, and when a recipe hands it to a parsed command
  (``CHAOS_ARGS``, ``DEMO_ARGS``), its words are parsed there too.
- ``env``: a line of assignments (``export …``).
- ``not here``: needs an AWS account or a cluster, or is the whole CI run:
  :data:`NOT_HERE` says why, per command; an entry no doc uses any more fails.
- ``shell``: a POSIX tool or builtin in a pipeline or loop (:data:`SHELL`), likewise.

In every class but the walkthrough's, a ``LANDER_*`` name assigned on the line must be a
setting some command reads (``consumer.config.loading.known_variables``: the settings
classes docs/configuration.md is generated from).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support.doccommands import Command, commands

REPO = Path(__file__).resolve().parents[1]
PAGES = ("README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))
"""The pages whose shell blocks are checked."""

NOT_HERE: dict[str, str] = {
    "aws dynamodb scan": "reads a KCL application's lease table in an AWS account",
    "aws dynamodb delete-table": "deletes the workers table of a fleet in an AWS account",
    "aws dynamodb delete-item": "deletes lease items of a fleet in an AWS account",
    "aws dynamodb update-item": "rewrites lease items of a fleet in an AWS account",
    "spark-sql": "queries the table through the Glue catalog of an AWS account",
    "spark-submit": "submits to a cluster (Kubernetes, EMR); the arguments after "
    "submit.py are parsed here with the jobs' parser",
    ".ci/run": "the whole CI run (installs, both tiers, builds the images; 35 minutes): "
    "each of its steps is a make target this test finds in the Makefile",
}
"""Commands the docs print that cannot run here, by their first words, with why."""

SHELL: dict[str, str] = {
    "tr": "a POSIX filter in migrating-from-kcl.md's pipeline of lease keys",
    "read": "the shell builtin that loop reads the keys with",
}
"""Shell tools and builtins the docs use outside the walkthrough, by name, with why."""

ELSEWHERE = {
    "LANDER_STREAM": "orders",
    "LANDER_LEASE_TABLE": "orders-leases",
    "LANDER_ARCHIVE": "s3://my-bucket/kinesis",
    "LANDER_COMPACTED": "s3a://my-bucket/compacted",
}
"""The variables a command's block may leave to an earlier section of its page (the
blocks of README.md's "Operate it" run in the shell "Run a worker" set up): beneath the
block's own, when its settings are loaded."""

PRINTS_ONLY = frozenset({"--help", "-h", "--version"})
"""Arguments that make a parsed command print and exit: such a command is run."""

SPARK_ENTRY = "submit.py"
"""The file ``spark-submit`` runs (deploy/spark/submit.py): ``sparkjobs.cli.main``."""


def _lander() -> argparse.ArgumentParser:
    from consumer.cli import build_parser

    return build_parser()


def _sparkjobs() -> argparse.ArgumentParser:
    """What ``sparkjobs.cli.main`` parses with (``python -m sparkjobs``, submit.py)."""
    from sparkjobs.cli import add_commands

    parser = argparse.ArgumentParser(prog="sparkjobs")
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def _bench() -> argparse.ArgumentParser:
    from bench.__main__ import build_parser

    return build_parser()


def _chaos() -> argparse.ArgumentParser:
    from tests.chaos.__main__ import build_parser

    return build_parser()


def _benchmarks(args: argparse.Namespace) -> list[str]:
    from bench.report import BENCHMARKS

    unknown = sorted(set(args.benchmarks) - set(BENCHMARKS))
    return [f"python -m bench has no benchmark {', '.join(unknown)}"] if unknown else []


PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "lander": _lander,
    "python -m consumer.cli": _lander,
    "python -m sparkjobs": _sparkjobs,
    "python -m bench": _bench,
    "python -m tests.chaos": _chaos,
}
"""Commands checked against their own argument parser, by how the docs start them."""

AFTER_PARSING: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "python -m bench": _benchmarks,  # main() refuses an unknown name after parsing
}


@dataclass(frozen=True)
class Verdict:
    """A command's class, what is wrong with it, and the table entry it matched."""

    kind: str
    problems: tuple[str, ...] = ()
    entry: str = ""


def program(words: tuple[str, ...]) -> tuple[str, list[str]]:
    """The command's name as :data:`PARSERS` and :data:`NOT_HERE` know it, and the rest:
    ``.venv/bin/`` is dropped (a fresh clone has it after ``make install``), and
    ``python -m MODULE`` is one name."""
    first = words[0].removeprefix(".venv/bin/")
    if first in ("python", "python3") and len(words) > 2 and words[1] == "-m":
        return f"python -m {words[2]}", list(words[3:])
    return first, list(words[1:])


@cache
def _parser(name: str) -> argparse.ArgumentParser:
    return PARSERS[name]()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_arguments(name: str, args: list[str]) -> list[str]:
    """What the parser of ``name`` refuses in ``args``, and every flag that is not one of
    the (sub)command's own as spelled."""
    parser = _parser(name)
    problems = []
    target, subcommands = parser, _subcommands(parser)
    for word in args:
        if word == "--":
            break
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-[\d.]+", word):
            flag = word.split("=", 1)[0]
            if flag not in target._option_string_actions:
                problems.append(f"`{target.prog}` has no flag {flag}")
        elif target is parser and word in subcommands:
            target = subcommands[word]
    errors = io.StringIO()
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(errors):
            namespace = parser.parse_args(args)
    except SystemExit as exc:
        if exc.code:
            lines = errors.getvalue().strip().splitlines() or [f"exit {exc.code}"]
            problems.append(lines[-1])
        return problems
    after = AFTER_PARSING.get(name)
    return problems + (after(namespace) if after else [])


def value_problems(name: str, args: list[str], env: Mapping[str, str]) -> list[str]:
    """What the settings refuse when a ``lander`` or jobs command loads them as its
    ``main`` does, with ``env`` for the environment (none for a subcommand that reads
    no settings, and none here when the arguments do not parse)."""
    from consumer.cli import PRODUCE_FLAGS, WORKER_FLAGS
    from consumer.config import (
        ConfigError,
        flag_values,
        load_produce_settings,
        load_settings,
    )
    from sparkjobs.cli import FLAGS
    from sparkjobs.settings import load

    if name not in ("lander", "python -m consumer.cli", "python -m sparkjobs"):
        return []
    if PRINTS_ONLY & set(args):
        return []  # it prints and loads nothing
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            args_ = _parser(name).parse_args(args)
    except SystemExit:
        return []
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({k: v for k, v in saved.items() if not k.startswith("LANDER_")})
    os.environ.update({**ELSEWHERE, **env})
    try:
        if args_.command in WORKER_FLAGS:
            load_settings(**flag_values(args_, WORKER_FLAGS[args_.command]))
        elif args_.command == "produce":
            load_produce_settings(**flag_values(args_, PRODUCE_FLAGS))
        elif args_.command in FLAGS:
            kind, flags = FLAGS[args_.command]
            load(kind, **flag_values(args_, flags))
    except ConfigError as exc:
        return [f"`{name} {args_.command}` refuses its settings: {exc}"]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return []


def setting_problems(assignments: tuple[str, ...]) -> list[str]:
    """Each ``LANDER_*`` name assigned that is no setting (with the closest one)."""
    from consumer.config.loading import unknown_variables

    names = {word.split("=", 1)[0]: "" for word in assignments}
    return unknown_variables(names)


@dataclass(frozen=True)
class Makefile:
    """The Makefile's targets, the variables it reads, and its recipe lines."""

    targets: frozenset[str]
    variables: frozenset[str]
    recipes: tuple[str, ...]

    @classmethod
    def read(cls, text: str) -> Makefile:
        targets: set[str] = set()
        for line in text.splitlines():
            rule = re.match(r"([\w./%-]+(?:[ \t]+[\w./%-]+)*)[ \t]*::?(?!=)", line)
            if rule and not line.startswith("\t"):
                targets.update(name for name in rule[1].split() if not name.startswith("."))
        variables = frozenset(re.findall(r"\$[({]([A-Za-z_]\w*)[)}]", text))
        recipes = tuple(line.strip() for line in text.splitlines() if line.startswith("\t"))
        return cls(frozenset(targets), variables, recipes)


def check_make(args: list[str], makefile: Makefile) -> list[str]:
    """Targets the Makefile has; variables it reads, and their words where a recipe
    hands them to a parsed command."""
    problems = []
    for word in args:
        name, equals, value = word.partition("=")
        if word.startswith("-"):
            continue
        if not equals:
            if word not in makefile.targets:
                problems.append(f"the Makefile has no target {word}")
            continue
        if name not in makefile.variables:
            problems.append(f"the Makefile reads no variable {name}")
        problems += setting_problems((word,))
        for recipe in makefile.recipes:
            before, found, _ = recipe.partition(f"$({name})")
            if not found:
                continue
            words = tuple(shlex.split(before.replace("$(BIN)/", "")))
            if words and program(words)[0] in PARSERS:
                command, fixed = program(words)
                problems += check_arguments(command, fixed + shlex.split(value))
    return problems


def _entry(table: Mapping[str, str], name: str, args: list[str]) -> str:
    """The longest key of ``table`` whose words begin the command's, or ''."""
    words = [*name.split(), *args]
    keys = [key for key in table if words[: len(key.split())] == key.split()]
    return max(keys, key=len, default="")


def _spark_submit(args: list[str], env: Mapping[str, str]) -> list[str]:
    """The application's arguments, parsed as ``sparkjobs.cli.main`` parses them."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 1 if args[i] in ("--verbose", "--supervise") else 2
    if i >= len(args) or not args[i].endswith(SPARK_ENTRY):
        return [f"spark-submit runs {args[i : i + 1]}, not the jobs' {SPARK_ENTRY}"]
    application = args[i + 1 :]
    problems = check_arguments("python -m sparkjobs", application)
    return problems + value_problems("python -m sparkjobs", application, env)


def classify(command: Command, makefile: Makefile, env: Mapping[str, str]) -> Verdict:
    """The command's class and its problems (an unclassified command is one); ``env``
    is what its block exported before it."""
    if command.walkthrough:
        return Verdict("walkthrough")
    problems = setting_problems(command.assignments)
    if not command.words:
        return Verdict("env", tuple(problems))
    name, args = program(command.words)
    if name in PARSERS:
        problems += check_arguments(name, args)
        problems += value_problems(name, args, {**env, **_assigned(command)})
        kind = "run" if PRINTS_ONLY & set(args) else "parsed"
        return Verdict(kind, tuple(problems))
    if name == "make":
        return Verdict("make", tuple(problems + check_make(args, makefile)))
    if entry := _entry(NOT_HERE, name, args):
        if name == "spark-submit":
            problems += _spark_submit(args, {**env, **_assigned(command)})
        if "/" in name and not os.access(REPO / name, os.X_OK):
            problems.append(f"{name} is no executable file of the repository")
        return Verdict("not here", tuple(problems), entry)
    if name in SHELL:
        return Verdict("shell", tuple(problems), name)
    return Verdict(
        "unclassified",
        (
            f"`{shlex.join(command.words)}` is in no class of tests/test_doc_commands.py: "
            "a command of this project goes in PARSERS (checked by its parser), one that "
            "needs the cloud or a cluster in NOT_HERE with the reason, a shell tool in SHELL",
        ),
    )


def _assigned(command: Command) -> dict[str, str]:
    return dict(word.split("=", 1) for word in command.assignments)


def check_page(path: str, text: str, makefile: Makefile) -> list[tuple[Command, Verdict]]:
    """Every command of a page with its verdict; a problem reading the page is a
    verdict of its own."""
    found, problems = commands(path, text)
    verdicts = []
    exported: dict[int, dict[str, str]] = {}  # by block
    for command in found:
        env = exported.setdefault(command.block, {})
        verdicts.append((command, classify(command, makefile, env)))
        if not command.words:
            env.update(_assigned(command))
    for problem in problems:
        where, _, what = problem.partition(": ")
        line = int(where.rsplit(":", 1)[1])
        empty = Command(path, line, line, "", (), (), False)
        verdicts.append((empty, Verdict("page", (what,))))
    return verdicts


@cache
def _all() -> list[tuple[Command, Verdict]]:
    makefile = Makefile.read((REPO / "Makefile").read_text())
    return [
        verdict
        for page in PAGES
        for verdict in check_page(page, (REPO / page).read_text(), makefile)
    ]


def test_every_doc_command_is_classified_and_holds() -> None:
    """No command is in no class, and none has a problem (file:line, what)."""
    problems = [
        f"{command.where}: {problem}" for command, verdict in _all() for problem in verdict.problems
    ]
    assert not problems, "\n".join(problems)


def test_the_pages_have_commands_in_every_class() -> None:
    """The extraction sees the docs (a reader that found nothing would pass vacuously)."""
    kinds = Counter(verdict.kind for _, verdict in _all())
    for kind in ("walkthrough", "parsed", "run", "make", "env", "not here", "shell"):
        assert kinds[kind] > 0, (kind, kinds)
    pages = {command.path for command, _ in _all()}
    assert {"README.md", "docs/sparkjobs.md", "docs/development.md"} <= pages


def test_the_walkthrough_commands_are_the_block_its_test_runs() -> None:
    """What is left to tests/cli/test_readme_walkthrough.py is exactly what it runs."""
    from tests.cli.test_readme_walkthrough import walkthrough

    block = walkthrough()
    covered = [command for command, verdict in _all() if verdict.kind == "walkthrough"]
    assert covered
    assert all(command.path == "README.md" and command.text in block for command in covered)


def test_the_tables_name_only_commands_the_docs_still_print() -> None:
    """An entry of NOT_HERE or SHELL that no doc command matches is stale: remove it."""
    used = {verdict.entry for _, verdict in _all()}
    stale = sorted((set(NOT_HERE) | set(SHELL)) - used)
    assert not stale, f"no doc prints these any more; remove them from the tables: {stale}"


@pytest.mark.processes  # bash runs each command
def test_the_commands_that_only_print_run_and_exit_0() -> None:
    """``--help`` and ``--version`` commands, run as written from the repository's root."""
    runs = [command for command, verdict in _all() if verdict.kind == "run"]
    assert runs
    for command in runs:
        done = _bash(command.text)
        assert done.returncode == 0, f"{command.where}: {command.text}\n{done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{command.where}: {command.text} printed nothing"


def _bash(text: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{text}\n"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# The checker can fail: a page of broken commands, each reported where it is.

BROKEN_PAGE = """\
# A page

```sh
lander run --no-such-flag
lander compact --stream orders --windw 2026-11-21   # a misspelt flag
export LANDER_READ_MODE=efo
lander run --stream orders --initial-position NEWEST
lander statsu
export LANDER_STREM=orders
make no-such-target
make chaos CHAOS_ARGS="--sede 1"
python -m bench drian
frobnicate --all
aws dynamodb scan --table-name t | sort
spark-submit --deploy-mode cluster s3://b/other.py compact
```

```zsh
lander run
```

```
$ lander run
```
"""


def test_a_broken_page_is_reported_line_by_line() -> None:
    makefile = Makefile.read("chaos:\n\tpython -m tests.chaos $(CHAOS_ARGS)\n")
    verdicts = check_page("docs/broken.md", BROKEN_PAGE, makefile)
    found = [f"{c.line} {v.kind}: {p}" for c, v in verdicts for p in v.problems]
    expected = [
        "4 parsed: `lander run` has no flag --no-such-flag",
        "5 parsed: `lander compact` has no flag --windw",
        "7 parsed: `lander run` refuses its settings: invalid configuration: "
        "LANDER_INITIAL_POSITION must be",
        "8 parsed: lander: error: argument COMMAND: invalid choice: 'statsu'",
        "9 env: LANDER_STREM is not a setting (did you mean LANDER_STREAM?)",
        "10 make: the Makefile has no target no-such-target",
        "11 make: `python -m tests.chaos` has no flag --sede",
        "12 parsed: python -m bench has no benchmark drian",
        "13 unclassified: `frobnicate --all` is in no class",
        "14 unclassified: `sort` is in no class",
        "15 not here: spark-submit runs ['s3://b/other.py'], not the jobs' submit.py",
        "18 page: a ```zsh block",
        "23 page: a `$ ` prompt in a ``` block",
    ]
    for line in expected:
        assert any(problem.startswith(line) for problem in found), (line, found)
    assert len(found) == len(expected) + 3, found  # + argparse's own lines for 4, 5, 9
    aws = next(verdict for command, verdict in verdicts if command.words[:1] == ("aws",))
    assert aws == Verdict("not here", (), "aws dynamodb scan")


def test_the_reader_reads_continuations_comments_prompts_and_substitutions_as_bash() -> None:
    page = (
        "```console\n"
        "$ lander compact --stream orders \\\n"
        '    --window "$(date -u +%F)"   # today, # not a flag\n'
        "compacted 3 rows\n"
        "$ LANDER_LOG_LEVEL=debug lander status --json > out.json && echo '# kept'\n"
        "```\n"
    )
    found, problems = commands("p.md", page)
    assert not problems
    assert [(c.line, c.words, c.assignments) for c in found] == [
        (2, ("lander", "compact", "--stream", "orders", "--window", "$SUBSTITUTION"), ()),
        (2, ("date", "-u", "+%F"), ()),
        (5, ("lander", "status", "--json"), ("LANDER_LOG_LEVEL=debug",)),
        (5, ("echo", "# kept"), ()),
    ]
