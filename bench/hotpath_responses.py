"""The hot path from GetRecords' responses: what the lander spends per record from the
bytes Kinesis sends to the gzip it lands, the response's parse included.

:mod:`bench.hotpath` measures from decoded records (``KinesisRecord``), as the issue's
targets are set; a reader pays the parse too, once per Kinesis record, so a KPL
aggregate of 100 pays it once per 100 user records. Here: the parse alone (plain
records, aiobotocore's parser against the lander's, ``consumer.stream.fastparse``), and
plain and KPL records landed from their responses, in turns, with the default codec.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import botocore.session
from aiobotocore.parsers import AioJSONParser

from bench.hotpath import _best_rates, kinesis_records, pages, project_path
from consumer.aws import epoch_timestamp
from consumer.landing.deflate import CodecName, resolve
from consumer.stream import KinesisRecord
from consumer.stream.eventstream import TolerantJSONParser
from consumer.stream.kinesis import to_record


def response_bodies(paged: list[list[KinesisRecord]]) -> list[bytes]:
    """Each page as the body of the GetRecords response that carries it (Kinesis' JSON:
    the sequence number as text, the arrival time in epoch seconds, the data base64)."""
    return [
        json.dumps(
            {
                "Records": [
                    {
                        "SequenceNumber": str(record.sequence),
                        "ApproximateArrivalTimestamp": record.arrival.timestamp(),
                        "Data": base64.b64encode(record.data).decode(),
                        "PartitionKey": record.partition_key,
                    }
                    for record in page
                ],
                "NextShardIterator": "AAAAAAAAAAH" + "x" * 200,
                "MillisBehindLatest": 0,
            }
        ).encode()
        for page in paged
    ]


_GET_RECORDS = (
    botocore.session.get_session()
    .get_service_model("kinesis")
    .operation_model("GetRecords")
    .output_shape
)
PARSERS: dict[str, Any] = {
    "botocore": lambda: AioJSONParser(timestamp_parser=epoch_timestamp),
    "lander": lambda: TolerantJSONParser(timestamp_parser=epoch_timestamp),
}
"""GetRecords' parsers: aiobotocore's own and the lander's (``consumer.aws``'s session),
both with the lander's arrival-time parser, so the difference is the walk."""


def read_pages(bodies: list[bytes], parser: Any) -> list[list[KinesisRecord]]:
    """The records of each response, as ``KinesisStream.get_records`` reads them: the
    client's parser, then :func:`consumer.stream.kinesis.to_record`."""

    async def read() -> list[list[KinesisRecord]]:
        found = []
        for body in bodies:
            response = {"body": body, "headers": {}, "status_code": 200, "context": {}}
            parsed = await parser.parse(response, _GET_RECORDS)
            found.append([to_record(raw) for raw in parsed.get("Records", [])])
        return found

    return asyncio.run(read())


def from_response(bodies: list[bytes], codec: CodecName) -> int:
    """:func:`bench.hotpath.project_path` from the GetRecords responses."""
    return project_path(read_pages(bodies, PARSERS["lander"]()), codec)


def responses(data: list[bytes], repeats: int) -> dict[str, Any]:
    """From the GetRecords response: the parse alone (botocore's walk against the
    lander's, plain records), and plain and KPL landed from their responses."""
    codec = resolve("auto")
    bodies = {
        name: response_bodies(pages(kinesis_records(data, n)))
        for name, n in (("plain", 1), ("kpl_100", 100))
    }
    parse = _best_rates(
        {
            name: lambda make=make: sum(map(len, read_pages(bodies["plain"], make())))  # type: ignore[misc]
            for name, make in PARSERS.items()
        },
        repeats,
    )
    landed = _best_rates(
        {
            f"{name} {codec}": lambda found=found: from_response(found, codec)  # type: ignore[misc]
            for name, found in bodies.items()
        },
        repeats,
    )
    return {
        "codec": codec,
        "parse_us_per_record": {name: round(1e6 / rate, 3) for name, rate in parse.items()},
        "variants": {
            name: {"records_per_cpu_second": round(rate)} for name, rate in landed.items()
        },
    }
