"""moto (DynamoDB and S3) on 127.0.0.1, one request at a time.

Run as ``python -m consumer.cli.emulators.moto_server [--port N]``. Prints one JSON line
``{"port": N, "host": "127.0.0.1"}`` on stdout once it listens, and exits when its
stdin closes (the parent died or let go of it) or on SIGTERM/SIGINT.

moto's threaded server does not serialise its backends, so two conditional writes
racing on the same DynamoDB item can both win (EMULATORS.md, "moto races"). The lease
protocol relies on exactly one winner, so every request here runs under one lock.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from consumer.cli.emulators import moto_transactions

HOST = "127.0.0.1"


class SerialisedApp:
    """WSGI middleware that runs each whole request under one lock.

    The lock covers the call into moto *and* the materialisation of the response
    body, because a WSGI app may do its work lazily while the body is iterated.
    The request body is read before taking the lock, so a slow uploader does not
    stall everyone else.
    """

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        _buffer_request_body(environ)
        with self._lock:
            result = self._app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return [body]


def _buffer_request_body(environ: WSGIEnvironment) -> None:
    """Replace ``wsgi.input`` with an in-memory copy of the whole request body."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH") or ""
    if length.isdigit():
        data = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        # Chunked transfer: the server's stream ends where the body ends.
        data = stream.read()
    else:
        return
    environ["wsgi.input"] = io.BytesIO(data)


def build_app() -> WSGIApplication:
    """moto's multi-service WSGI app (as in moto.server), wrapped in the lock, with
    transactions that need no rollback run without copying their tables
    (:mod:`.moto_transactions`)."""
    moto_transactions.install()
    app: WSGIApplication = DomainDispatcherApplication(create_backend_app)
    return SerialisedApp(app)


def _exit_now(*_: object) -> None:
    # os._exit, not SystemExit: the state is in memory with nothing to flush, and a
    # normal interpreter shutdown would abort on the stdin thread blocked in read().
    os._exit(0)


def _exit_when_stdin_closes() -> None:
    # The parent keeps the write end of our stdin; EOF means it is gone.
    while os.read(sys.stdin.fileno(), 4096):
        pass
    _exit_now()


def main(argv: list[str] | None = None) -> int:
    """Serve moto on 127.0.0.1 until stdin closes or a signal arrives."""
    parser = argparse.ArgumentParser(description="moto (DynamoDB, S3) on 127.0.0.1, serialised")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)

    if not args.verbose:
        # werkzeug logs a line per request to stderr; the parent only wants errors.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)

    server = make_server(
        HOST, args.port, build_app(), threaded=True, request_handler=MotoRequestHandler
    )
    port = server.server_port
    # moto builds some self-referencing URLs from MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)
    threading.Thread(target=_exit_when_stdin_closes, name="stdin-watch", daemon=True).start()

    print(json.dumps({"port": port, "host": HOST}), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
