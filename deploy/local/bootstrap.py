"""Create the local stack's resources, and check that the workers land: for docker-compose.

Two subcommands, configured like the workers (``LANDER_STREAM``, ``LANDER_LEASE_TABLE``,
``LANDER_ARCHIVE``) plus where the services are, for each of Kinesis, DynamoDB and S3
the first of (:func:`endpoints`):

- ``AWS_ENDPOINT_URL_KINESIS``, ``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL_S3``
  (the SDKs' per-service variables: one emulator per service);
- ``AWS_ENDPOINT_URL`` (one endpoint for all three, as LocalStack's edge port or one
  moto server);
- ``LOCALSTACK_HOST`` (``host:port`` of LocalStack's edge port, as docker-compose sets it).

A service with none of them is a configuration error: this script only ever talks to a
local stack, never to AWS.

``bootstrap [--shards N]``
    Create the stream with N shards and wait until it is ACTIVE; create the lease table
    (as CloudFormation does in production; the same definition the workers create when
    it is missing: ``leaseKey``, KCL 3.x's owner index, on-demand) and the archive's
    bucket. Idempotent: resources that already exist are fine (a stream with another
    shard count is kept as it is, and said so).

``smoke [--timeout S]``
    Wait until at least one object has landed under the archive prefix and every open
    shard has an owner in the lease table. Exit 0 with one line saying so, or 1 after the
    timeout with one line naming what is missing.

Exit status 2: bad configuration (one line naming the variable). Not for production:
without ``AWS_ACCESS_KEY_ID`` the credentials are the dummies local stacks accept.

Long module: one self-contained script on purpose; the bootstrap image copies this file
alone and a checkout runs it with nothing but boto3, so it cannot import helpers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

DEFAULT_REGION = "us-east-1"
SERVICES = {"kinesis": "KINESIS", "dynamodb": "DYNAMODB", "s3": "S3"}
"""Each service's name in boto3 and in its ``AWS_ENDPOINT_URL_*`` variable."""
DUMMY_CREDENTIALS = "test"
POLL_SECONDS = 0.5
# Short timeouts and no SDK retries: the loops below retry, and a wrong endpoint should
# fail within seconds, not minutes.
CLIENT_CONFIG = Config(
    connect_timeout=3,
    read_timeout=10,
    retries={"max_attempts": 1},
    s3={"addressing_style": "path"},  # a local endpoint has no bucket subdomains
)


class ConfigurationError(Exception):
    """A missing or malformed LANDER_* variable."""


@dataclass(frozen=True)
class Target:
    """What the workers are configured to use."""

    stream: str
    lease_table: str
    bucket: str
    prefix: str

    @property
    def landed_prefix(self) -> str:
        """Where the landed objects of this stream start (``{prefix}/stream={stream}/``)."""
        head = f"{self.prefix}/" if self.prefix else ""
        return f"{head}stream={self.stream}/"


def target_from_env(env: Mapping[str, str]) -> Target:
    """Read the three settings the workers also read; raise ConfigurationError."""
    missing = [
        name
        for name in ("LANDER_STREAM", "LANDER_LEASE_TABLE", "LANDER_ARCHIVE")
        if not env.get(name)
    ]
    if missing:
        raise ConfigurationError(", ".join(missing) + " must be set")
    archive = urlparse(env["LANDER_ARCHIVE"])
    if archive.scheme != "s3" or not archive.netloc:
        raise ConfigurationError(
            f"LANDER_ARCHIVE must be s3://bucket[/prefix], got {env['LANDER_ARCHIVE']!r}"
        )
    return Target(
        stream=env["LANDER_STREAM"],
        lease_table=env["LANDER_LEASE_TABLE"],
        bucket=archive.netloc,
        prefix=archive.path.strip("/"),
    )


def region(env: Mapping[str, str]) -> str:
    """AWS_REGION, AWS_DEFAULT_REGION or us-east-1, as the workers choose it."""
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def endpoints(env: Mapping[str, str]) -> dict[str, str]:
    """Each service's endpoint: its own variable, else ``AWS_ENDPOINT_URL``, else
    ``LOCALSTACK_HOST``; raise ConfigurationError naming what is missing or malformed."""
    shared = env.get("AWS_ENDPOINT_URL", "").strip()
    host = env.get("LOCALSTACK_HOST", "").strip()
    if not shared and host:
        shared = host if "://" in host else f"http://{host}"
    found: dict[str, str] = {}
    missing: list[str] = []
    for service, suffix in SERVICES.items():
        url = env.get(f"AWS_ENDPOINT_URL_{suffix}", "").strip() or shared
        if not url:
            missing.append(f"AWS_ENDPOINT_URL_{suffix}")
            continue
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigurationError(f"the endpoint for {service} is not an http(s) URL: {url!r}")
        found[service] = url
    if missing:
        raise ConfigurationError(
            f"no endpoint for {', '.join(m.rsplit('_', 1)[1].lower() for m in missing)}: set "
            f"{', '.join(missing)}, or AWS_ENDPOINT_URL or LOCALSTACK_HOST for all of them "
            "(this script only talks to a local stack)"
        )
    return found


class Clients:
    """boto3 clients aimed at the local stack's endpoints.

    ``Any``: boto3 clients are generated at run time and this script has no stubs for them.
    """

    def __init__(self, region_name: str, urls: Mapping[str, str], env: Mapping[str, str]) -> None:
        session = boto3.Session(
            region_name=region_name,
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID") or DUMMY_CREDENTIALS,
            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or DUMMY_CREDENTIALS,
            aws_session_token=env.get("AWS_SESSION_TOKEN") or None,
        )

        def client(service: str) -> Any:
            return session.client(service, endpoint_url=urls[service], config=CLIENT_CONFIG)

        self.kinesis: Any = client("kinesis")
        self.dynamodb: Any = client("dynamodb")
        self.s3: Any = client("s3")
        self.region = region_name


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, or ''."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


# -- bootstrap -----------------------------------------------------------------------------


def ensure_stream(clients: Clients, stream: str, shards: int, timeout: float) -> str:
    """Create the stream unless it exists; wait until ACTIVE. Returns a description."""
    created = True
    try:
        clients.kinesis.create_stream(StreamName=stream, ShardCount=shards)
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
        created = False
    deadline = time.monotonic() + timeout
    while True:
        summary = clients.kinesis.describe_stream_summary(StreamName=stream)
        description = summary["StreamDescriptionSummary"]
        if description["StreamStatus"] == "ACTIVE":
            break
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"stream {stream} still {description['StreamStatus']} after {timeout:.0f}s"
            )
        time.sleep(POLL_SECONDS)
    have = int(description["OpenShardCount"])
    if created:
        return f"stream {stream} created with {have} shards"
    note = "" if have == shards else f" (not {shards}: an existing stream is kept as it is)"
    return f"stream {stream} exists with {have} open shards{note}"


def ensure_bucket(clients: Clients, bucket: str) -> str:
    """Create the bucket unless this account already has it.

    HeadBucket first: in us-east-1 CreateBucket answers 200 for a bucket one already
    owns, so its answer alone cannot say whether anything was created.
    """
    try:
        clients.s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        if error_code(exc) not in ("404", "NoSuchBucket", "NotFound"):
            raise
    else:
        return f"bucket {bucket} exists"
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if clients.region != DEFAULT_REGION:
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": clients.region}
    try:
        clients.s3.create_bucket(**kwargs)
    except ClientError as exc:
        if error_code(exc) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            return f"bucket {bucket} exists"
        raise
    return f"bucket {bucket} created"


# The workers' definitions (consumer/leases/dynamo.py, ensure_table); the tests compare
# the tables made here with theirs.
WORKERS_SUFFIX = "-workers"
OWNER_INDEX = {
    "IndexName": "LeaseOwnerToLeaseKeyIndex",
    "KeySchema": [
        {"AttributeName": "leaseOwner", "KeyType": "HASH"},
        {"AttributeName": "leaseKey", "KeyType": "RANGE"},
    ],
    "Projection": {"ProjectionType": "KEYS_ONLY"},
}


def ensure_lease_table(clients: Clients, table: str, timeout: float) -> str:
    """Create the lease table and its workers table unless they exist; wait until
    ACTIVE."""
    created = _ensure_table(
        clients,
        timeout,
        TableName=table,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "leaseKey", "AttributeType": "S"},
            {"AttributeName": "leaseOwner", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[OWNER_INDEX],
    )
    _ensure_table(
        clients,
        timeout,
        TableName=table + WORKERS_SUFFIX,
        KeySchema=[{"AttributeName": "itemKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "itemKey", "AttributeType": "S"}],
    )
    return f"lease table {table} {'created' if created else 'exists'}"


def _ensure_table(clients: Clients, timeout: float, **definition: Any) -> bool:
    """Create an on-demand table unless it exists (True if created); wait until ACTIVE."""
    table = definition["TableName"]
    created = True
    try:
        clients.dynamodb.create_table(BillingMode="PAY_PER_REQUEST", **definition)
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
        created = False
    deadline = time.monotonic() + timeout
    while (status := clients.dynamodb.describe_table(TableName=table)["Table"]["TableStatus"]) != (
        "ACTIVE"
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"table {table} still {status} after {timeout:.0f}s")
        time.sleep(POLL_SECONDS)
    return created


def bootstrap(clients: Clients, target: Target, shards: int, timeout: float) -> str:
    """The three resources; one line saying what was done."""
    return "; ".join(
        (
            ensure_stream(clients, target.stream, shards, timeout),
            ensure_lease_table(clients, target.lease_table, timeout),
            ensure_bucket(clients, target.bucket),
        )
    )


# -- smoke ---------------------------------------------------------------------------------


def open_shards(clients: Clients, stream: str) -> list[str]:
    """Shard ids of the stream without an ending sequence number (every page)."""
    shards: list[str] = []
    kwargs: dict[str, Any] = {"StreamName": stream}
    while True:
        page = clients.kinesis.list_shards(**kwargs)
        shards.extend(
            shard["ShardId"]
            for shard in page.get("Shards", [])
            if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {})
        )
        token = page.get("NextToken")
        if not token:
            return shards
        kwargs = {"NextToken": token}


def lease_owners(clients: Clients, table: str) -> dict[str, str]:
    """leaseKey -> leaseOwner of every owned lease (the literal "NULL" is no owner)."""
    owners: dict[str, str] = {}
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = clients.dynamodb.scan(**kwargs)
        for item in page.get("Items", []):
            owner = item.get("leaseOwner", {}).get("S")
            if owner and owner != "NULL":
                owners[item["leaseKey"]["S"]] = owner
        start = page.get("LastEvaluatedKey")
        if not start:
            return owners
        kwargs["ExclusiveStartKey"] = start


def landed_count(clients: Clients, target: Target) -> int:
    """How many objects the first listing page shows under the stream's prefix (0 or more)."""
    page = clients.s3.list_objects_v2(Bucket=target.bucket, Prefix=target.landed_prefix, MaxKeys=10)
    return int(page.get("KeyCount", 0))


def smoke_problems(clients: Clients, target: Target) -> list[str]:
    """What is still missing; empty when the pipeline is landing."""
    problems: list[str] = []
    where = f"s3://{target.bucket}/{target.landed_prefix}"
    try:
        if landed_count(clients, target) == 0:
            problems.append(f"nothing landed under {where}")
    except ClientError as exc:
        problems.append(f"cannot list {where}: {error_code(exc) or exc}")
    try:
        shards = open_shards(clients, target.stream)
    except ClientError as exc:
        problems.append(f"cannot list shards of stream {target.stream}: {error_code(exc) or exc}")
        return problems
    try:
        owners = lease_owners(clients, target.lease_table)
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            problems.append(
                f"lease table {target.lease_table} does not exist (bootstrap creates it)"
            )
        else:
            problems.append(f"cannot scan lease table {target.lease_table}: {error_code(exc)}")
        return problems
    unowned = sorted(shard for shard in shards if shard not in owners)
    if not shards:
        problems.append(f"stream {target.stream} has no open shard")
    elif unowned:
        problems.append(
            f"{len(unowned)} of {len(shards)} open shards have no owner in "
            f"{target.lease_table}: {', '.join(unowned)}"
        )
    return problems


def smoke(
    clients: Clients,
    target: Target,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[bool, str]:
    """Poll until nothing is missing or the timeout passes; (ok, one line)."""
    started = clock()
    while True:
        try:
            problems = smoke_problems(clients, target)
        except BotoCoreError as exc:  # endpoint unreachable, timeouts
            problems = [f"cannot reach the stack: {exc}"]
        elapsed = clock() - started
        if not problems:
            return True, (
                f"smoke ok after {elapsed:.0f}s: objects landed under "
                f"s3://{target.bucket}/{target.landed_prefix} and every open shard of "
                f"{target.stream} has an owner"
            )
        if elapsed >= timeout:
            return False, f"smoke failed after {timeout:.0f}s: " + "; ".join(problems)
        time.sleep(POLL_SECONDS)


# -- command line --------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """``bootstrap`` and ``smoke``."""
    parser = argparse.ArgumentParser(
        prog="bootstrap.py",
        description="Create (bootstrap) and check (smoke) the lander's resources on LocalStack.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    boot = commands.add_parser(
        "bootstrap", help="create the stream, the lease table and the bucket"
    )
    boot.add_argument("--shards", type=positive_int, default=4, help="shards of a new stream (4)")
    boot.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ACTIVE (60)")
    check = commands.add_parser("smoke", help="wait until objects land and shards are owned")
    check.add_argument("--timeout", type=float, default=120.0, help="seconds (120)")
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one subcommand; 0 ok, 1 failed, 2 bad configuration."""
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    try:
        target = target_from_env(env)
        urls = endpoints(env)
    except ConfigurationError as exc:
        print(f"bootstrap.py: {exc}", file=sys.stderr)
        return 2
    clients = Clients(region(env), urls, env)
    if args.command == "bootstrap":
        try:
            print(bootstrap(clients, target, args.shards, args.timeout))
        except (ClientError, BotoCoreError, TimeoutError) as exc:
            print(f"bootstrap failed: {exc}", file=sys.stderr)
            return 1
        return 0
    ok, line = smoke(clients, target, args.timeout)
    print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
