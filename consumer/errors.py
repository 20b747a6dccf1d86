"""The daemon's errors: one tree, with the retry policy on each class.

Every error the daemon raises on purpose is a :class:`LanderError`; ``retriable`` says
whether trying again soon may help (the loops and the reader retry those with
:func:`consumer.aws.backoff`) or not (the error is passed up, and what it means is
decided once, where it is caught). botocore's exceptions never leave the stores and
clients that call AWS: each wraps them into its branch below::

    LanderError                        retriable=False unless marked
    ├── ConfigError                    consumer.config: a setting is bad (exit 2)
    │   ├── WindowError                (sparkjobs.window) LANDER_WINDOW is not days or
    │   │                              hours, or names one twice
    │   ├── CatalogError               (sparkjobs.catalog) the catalog cannot be
    │   │                              reached or is not configured, or the table
    │   │                              lacks the compacted columns
    │   ├── ReaderJarError             (sparkjobs.compaction.objectreader)
    │   │                              LANDER_SPARK_READER_JAR names no jar
    │   └── DeclaredSchemaError        (sparkjobs.table.declared) a declared payload
    │                                  schema uses what the reader does not take
    ├── UnreachableError               retriable: an endpoint did not answer (exit 1)
    ├── RefusedError                   the environment refuses the worker, or what a
    │                                  command works on is not there (exit 3)
    │   ├── MissingError               what a command works on does not exist: a
    │   │   │                          stream, a lease table (lander status,
    │   │   │                          produce, local-stack)
    │   │   └── TableNotFoundError     (sparkjobs.table.maintain) lander maintain: the
    │   │                              compacted table is not in its catalog
    │   ├── PreflightError             consumer.lifecycle.preflight: a start-up check failed
    │   ├── DuplicateWorkerError       consumer.leases.identity: the id is in use
    │   ├── ForeignWorkersError        consumer.leases.foreign: another application
    │   │                              renews leases in the table (KCL, an old release)
    │   ├── StreamGoneError            consumer.lifecycle.worker: the stream was deleted
    │   ├── StreamsMissingError        (consumer.lifecycle.fleet) LANDER_STREAMS names
    │   │                              streams that do not exist
    │   ├── ModeStartError             (consumer.stream.readers) a read mode cannot start
    │   │                              for a stream (its stream consumer not made ready)
    │   ├── KmsKeyError                (consumer.landing.protection) the archive's KMS
    │   │                              key is missing, disabled or cannot encrypt
    │   └── LandingDiffersError        (consumer.lifecycle.agreement) the worker would
    │                                  land a stream otherwise than the fleet
    ├── StreamError                    consumer.stream: a Kinesis call failed
    │   ├── IteratorExpiredError       retriable: a new iterator at the last position
    │   ├── ThrottledError             retriable: back off with jitter
    │   ├── TransientStreamError       retriable: 5xx, timeout, connection reset
    │   ├── StreamNotFoundError        the stream or shard does not exist
    │   ├── SubscriptionInUseError     (consumer.stream.fanout) retriable: another
    │   │                              live subscription to the shard (efo read mode)
    │   ├── ConsumerNotFoundError      (consumer.stream.fanout) the stream consumer is
    │   │                              not registered
    │   ├── FanOutUnsupportedError     the endpoint does not serve enhanced fan-out
    │   │                              (kinesalite): efo cannot start (exit 3)
    │   └── ConsumerNotActiveError     (consumer.stream.fanout) it did not become
    │                                  ACTIVE in time: the worker refuses to start
    ├── LeaseError                     consumer.leases.model: the lease table
    │   ├── LeaseLostError             a fenced write failed: stop the shard at once
    │   ├── TableMissingError          (consumer.leases.store) retriable: the table is
    │   │                              created again
    │   ├── SlotLostError              (consumer.leases.store) a beat was refused: the
    │   │                              worker's board slot was fenced; every lease lost
    │   └── LeaseStoreError            (consumer.leases.store) retriable per instance:
    │                                  5xx, throttling, connection failures (not:
    │                                  access denied)
    ├── ObjectStoreError               consumer.landing.objects: the archive; retriable
    │                                  per instance (5xx, SlowDown, resets; not: a
    │                                  missing bucket, access denied, a read-only folder)
    ├── EffectRaceError                (consumer.effects.store) retriable: an effect's
    │                                  record changed under its writer: read, decide again
    ├── EffectStoreError               (consumer.effects.store) retriable per instance:
    │                                  the effects table refused or failed a call
    ├── NoKeyError                     (consumer.effects.once) a record has no event id
    │                                  to key its effect by
    ├── SurveyError                    consumer.lifecycle.assembly: lander status cannot
    │                                  read the lease table or a stream (exit 1)
    ├── TransitionError                consumer.lifecycle.shard_consumer: a change of
    │                                  state the shard's diagram does not allow (a bug)
    ├── CompactionError                (sparkjobs.compaction.job) a window could not be
    │                                  compacted: bad input in strict mode, or a read
    │                                  or write failed (lander compact exits 1)
    └── CommitConflictError            (sparkjobs.table.table) retriable: every commit
                                       of a run conflicted with other writers

The Spark jobs' errors keep the built-in base they had before they joined the tree
(WindowError, CatalogError, ReaderJarError and DeclaredSchemaError are ValueErrors,
CompactionError a RuntimeError), so code that caught those still catches them.
"""

from __future__ import annotations

# -- exit codes ---------------------------------------------------------------------------
# One table for every ``lander`` command (docs/operations.md#exit-codes); a script or a
# scheduler can tell the kinds apart without reading the line on stderr.

EXIT_OK = 0
"""Done (or already up to date)."""
EXIT_FAILED = 1
"""A call failed or an endpoint could not be reached: trying again later may help."""
EXIT_CONFIG = 2
"""A setting is missing or invalid, or an extra the command needs is not installed."""
EXIT_MISSING = 3
"""What the command works on is not there, or the environment refuses it: a stream, the
lease table, a compacted table, a window with no input (``--allow-empty`` makes that 0),
a failed start-up check, a worker id already in use."""
EXIT_BAD_INPUT = 4
"""Done, but some input could not be read: it is reported, counted and left out
(``--allow-bad-input`` makes that 0)."""


class LanderError(Exception):
    """Base of the daemon's errors."""

    retriable: bool = False
    exit_code: int = EXIT_FAILED
    """What a ``lander`` command exits with when this error ends it (one line, the
    message)."""


class RefusedError(LanderError):
    """The environment refuses this worker: ``lander run`` exits 3 with the message."""

    exit_code = EXIT_MISSING


class MissingError(RefusedError):
    """What a command works on does not exist (a stream, a lease table, a bucket, a
    table): exit 3, the message naming it and where it was looked for."""


class UnreachableError(LanderError):
    """An endpoint did not answer (refused, timed out, no route): exit 1 after a bounded
    wait, with the service and the endpoint in the message."""

    retriable = True


def missing_extra(extra: str, *modules: str) -> str | None:
    """The one line for a command whose optional dependencies are not installed (exit
    2), or None when every module of ``modules`` can be imported. ``extra`` is one
    extra's name, or several joined by commas (``local,spark``)."""
    from importlib.util import find_spec  # noqa: PLC0415 (only the commands that need one)

    absent = [name for name in modules if find_spec(name) is None]
    if not absent:
        return None
    names = extra.split(",")
    what = f"the {names[0]} extra" if len(names) == 1 else f"the {' and '.join(names)} extras"
    return (
        f"this command needs {what} ({', '.join(absent)} not installed): "
        f"pip install 'kinesis-lander[{extra}]'"
    )


def exit_code(exc: BaseException) -> int:
    """The exit code of a command that ``exc`` ended: its class's, else 1."""
    return exc.exit_code if isinstance(exc, LanderError) else EXIT_FAILED


def is_retriable(exc: BaseException) -> bool:
    """Whether a loop should try again: a retriable LanderError, or an OS-level
    failure (a timeout, a reset connection) that reached it unwrapped."""
    if isinstance(exc, LanderError):
        return exc.retriable
    return isinstance(exc, OSError | TimeoutError)


def summary(exc: BaseException) -> str:
    """A failure in one line for people and the lease item: its type and message, cut
    to 500 characters."""
    return f"{type(exc).__name__}: {exc}"[:500]
