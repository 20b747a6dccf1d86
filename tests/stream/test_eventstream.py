"""The tolerant event-stream parser against AWS's framing, served on loopback.

kinesis-local starts a SubscribeToShard response with the first event (the contract
tests read it); AWS starts with an ``initial-response`` frame. A small aiohttp server
sends AWS's framing, so the parser is shown to read both, and to raise an exception
frame as the stream's error.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from consumer.aws import aws_session, client_config
from consumer.sequence import Sentinel
from consumer.stream import StartAt
from consumer.stream.fanout import ShardEvent, SubscriptionInUseError
from consumer.stream.kinesis_fanout import KinesisFanOut


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, CRC, string headers, payload, CRC."""
    encoded = b"".join(
        bytes([len(name)])
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(value))
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(kind: str, payload: dict[str, object]) -> bytes:
    return frame(
        {":message-type": "event", ":event-type": kind, ":content-type": "application/json"},
        json.dumps(payload).encode(),
    )


RECORD = {
    "SequenceNumber": "49590338271490256608559692538361571095921575989136588898",
    "ApproximateArrivalTimestamp": 1795575538.024,
    "Data": "eDA=",
    "PartitionKey": "k",
}
AWS_STYLE = [
    event("initial-response", {}),
    event(
        "SubscribeToShardEvent",
        {
            "Records": [RECORD],
            "ContinuationSequenceNumber": RECORD["SequenceNumber"],
            "MillisBehindLatest": 0,
        },
    ),
]
IN_USE = [
    frame(
        {
            ":message-type": "exception",
            ":exception-type": "ResourceInUseException",
            ":content-type": "application/json",
        },
        json.dumps({"message": "Another active subscription exists"}).encode(),
    )
]


class Server:
    """A loopback server answering each request with the next queued frames."""

    def __init__(self) -> None:
        self.responses: list[list[bytes]] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(
            headers={"Content-Type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        for chunk in self.responses.pop(0):
            await response.write(chunk)
        await response.write_eof()
        return response

    async def events(self, frames: list[bytes]) -> list[ShardEvent]:
        """Subscribe through aiobotocore and read the stream to its end."""
        self.responses.append(frames)
        async with aws_session().create_client(
            "kinesis",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=client_config(),
        ) as client:
            sub = await KinesisFanOut(client, "s").subscribe(
                "arn:aws:kinesis:us-east-1:1:stream/s/consumer/a:1",
                "shardId-000000000000",
                StartAt(Sentinel.TRIM_HORIZON),
            )
            try:
                return [e async for e in sub.events()]
            finally:
                await sub.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    served = Server()
    app = web.Application()
    app.router.add_post("/", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.port = runner.addresses[0][1]
    try:
        yield served
    finally:
        await runner.cleanup()


async def test_an_initial_response_is_read_as_aws_sends_it(server: Server) -> None:
    events = await server.events(AWS_STYLE)
    assert [r.data for e in events for r in e.records] == [b"x0"]
    assert events[0].continuation == int(str(RECORD["SequenceNumber"]))


async def test_a_first_data_frame_is_the_first_event(server: Server) -> None:
    events = await server.events(AWS_STYLE[1:])
    assert [r.sequence for e in events for r in e.records] == [int(str(RECORD["SequenceNumber"]))]


async def test_an_exception_frame_raises_in_the_stream(server: Server) -> None:
    with pytest.raises(SubscriptionInUseError):
        await server.events(IN_USE)
