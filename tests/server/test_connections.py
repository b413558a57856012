"""One client's connections cannot take the server (issue 40): sockets that never finish their
headers, or stall in a body, are closed after the read timeout while a real client is answered;
one address holds at most `--max-connections-per-client` connections, the next gets a 429."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from batchgate.emulator import EmulatorThread

from .harness import Server, gateway_config, running

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HUNG = 20


def _serve(root: Path, emu: EmulatorThread, *extra: str) -> contextlib.AbstractContextManager[Server]:
    return running(root, gateway_config(root / "gateway.yaml", emu), *extra)


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    with _serve(tmp_path_factory.mktemp("quick"), emu, "--header-timeout", "1", "--body-timeout", "1") as s:
        yield s


def _connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=60)


def _closed_by_server(s: socket.socket) -> bytes:
    """Whatever the server sent before closing (b"" for a plain close); waits at most 60 s."""
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := s.recv(4096):
            got += chunk
    return got


def test_connections_that_never_finish_their_headers_are_closed_and_a_client_is_answered(
    quick: Server,
) -> None:
    hung = [_connect(quick) for _ in range(HUNG)]
    try:
        for s in hung:
            s.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never ends its head
        key = quick.keys_create()
        r = httpx.get(f"{quick.base_url}/batches", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert r.status_code == 200, r.text
        assert [_closed_by_server(s) for s in hung] == [b""] * HUNG  # closed, nothing answered
    finally:
        for s in hung:
            s.close()


def test_a_body_that_stalls_closes_its_connection(quick: Server) -> None:
    key = quick.keys_create()
    with _connect(quick) as s:
        head = f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        s.sendall(head.encode() + b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"req')
        assert _closed_by_server(s) == b""
    with httpx.Client(base_url=quick.base_url, headers={"Authorization": f"Bearer {key}"}) as c:
        assert c.get("/jobs").json()["data"] == []  # the stalled request created nothing


def test_one_address_holds_at_most_its_cap_and_the_next_connection_gets_a_429(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    with _serve(tmp_path, emu, "--max-connections-per-client", "8") as server:
        held = [_connect(server) for _ in range(8)]
        try:
            with _connect(server) as extra:
                answer = _closed_by_server(extra)
            assert answer.startswith(b"HTTP/1.1 429 ")
            assert b"max-connections-per-client" in answer
        finally:
            for s in held:
                s.close()
        key = server.keys_create()
        r = httpx.get(f"{server.base_url}/batches", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert r.status_code == 200  # the address's connections closed: its count went down
