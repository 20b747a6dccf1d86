"""The chaos run's side-effect server counts what the effects run's checks rest on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.chaos.sideeffects import SideEffectServer


def _post(url: str, key: str | None) -> tuple[int, dict[str, object]]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(f"{url}/effect", b"{}", headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_keyed_server_applies_a_key_once_and_answers_repeats_with_its_first_answer() -> None:
    with SideEffectServer("keyed") as server:
        first = _post(server.url, "e1")
        assert _post(server.url, "e1") == first
        _post(server.url, "e2")
        assert _post(server.url, None)[0] == 400
    ledger = server.ledger
    assert first[0] == 200
    assert ledger.deliveries == {"e1": 2, "e2": 1}
    assert ledger.applied == {"e1": 1, "e2": 1}
    assert ledger.unkeyed == 1


def test_a_plain_server_applies_every_call() -> None:
    with SideEffectServer("plain") as server:
        receipts = {str(_post(server.url, "e1")[1]["receipt"]) for _ in range(3)}
    assert server.ledger.applied == {"e1": 3}
    assert len(receipts) == 3


def test_servers_on_one_ledger_are_one_downstream_and_a_stopped_one_refuses() -> None:
    with SideEffectServer("keyed") as main:
        door = SideEffectServer(ledger=main.ledger).start()
        _post(door.url, "e1")
        door.stop()
        with pytest.raises(urllib.error.URLError):
            _post(door.url, "e2")
        _post(main.url, "e1")
    assert main.ledger.applied == {"e1": 1}
    assert main.ledger.deliveries == {"e1": 2}
