"""Event-stream responses (SubscribeToShard) that may lack the ``initial-response`` frame.

AWS starts a SubscribeToShard response with an ``initial-response`` frame; kinesis-local
(kinesis-mock, which LocalStack runs) starts with the first ``SubscribeToShardEvent``.
aiobotocore reads the first frame as the initial response and, when it is anything
else, raises ``ResponseParserError('First event was not of type initial-response')``
and the event is gone. The parser here accepts both: an ``initial-response`` is read
as before; any other first frame is kept and handed out as the stream's first event
(an error frame raises there, as any error in the stream does). Nothing else changes,
and responses without an event stream never reach this code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiobotocore.eventstream import AioEventStream
from aiobotocore.parsers import (
    PROTOCOL_PARSERS,
    AioEventStreamJSONParser,
    AioJSONParser,
    AioResponseParserFactory,
)
from botocore.eventstream import NoInitialResponseError

from consumer.stream.fastparse import FastJSONParsing

# The stubs type only aiobotocore's public surface; these classes extend its internals.
_EventStream: Any = AioEventStream
_JSONParser: Any = AioJSONParser
_EventJSONParser: Any = AioEventStreamJSONParser
_ParserFactory: Any = AioResponseParserFactory
_PARSERS: dict[str, Any] = dict(PROTOCOL_PARSERS)


class _NoInitialResponse:
    """Stands in for the missing frame: an empty initial response."""

    payload = b"{}"


class TolerantEventStream(_EventStream):  # type: ignore[misc]
    """An event stream whose first frame need not be ``initial-response``."""

    _first: Any = None

    async def get_initial_response(self) -> Any:
        async for event in self._event_generator:
            if event.headers.get(":event-type") == "initial-response":
                return event
            self._first = event
            return _NoInitialResponse()
        raise NoInitialResponseError()

    async def __anext__(self) -> AsyncIterator[Any]:
        # aiobotocore's __aiter__ returns this async generator.
        first, self._first = self._first, None
        if first is not None:
            parsed = await self._parse_event(first)
            if parsed:
                yield parsed
        async for event in self._event_generator:
            parsed = await self._parse_event(event)
            if parsed:
                yield parsed


class FastEventJSONParser(FastJSONParsing, _EventJSONParser):  # type: ignore[misc]
    """The parser of SubscribeToShard's events, reading their records as
    :mod:`consumer.stream.fastparse` does."""


class TolerantJSONParser(FastJSONParsing, _JSONParser):  # type: ignore[misc]
    """The JSON protocol's parser (Kinesis, DynamoDB), with :class:`TolerantEventStream`,
    reading lists of records as :mod:`consumer.stream.fastparse` does."""

    EVENT_STREAM_PARSER_CLS = FastEventJSONParser

    def _create_event_stream(self, response: Any, shape: Any) -> TolerantEventStream:
        name = response["context"].get("operation_name")
        return TolerantEventStream(response["body"], shape, self._event_stream_parser, name)


class TolerantParserFactory(_ParserFactory):  # type: ignore[misc]
    """aiobotocore's parser factory, with the tolerant parser for the JSON protocol."""

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "json":
            return TolerantJSONParser(**self._defaults)
        return _PARSERS[protocol_name](**self._defaults)
