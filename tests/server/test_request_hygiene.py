"""What a client with no key can do to the server's log and its key checks (issue 40): a header
with a NUL, CR or \\x01 byte never puts the token in the log, malformed requests are logged once
per client a minute without a traceback, and failed key checks are throttled per address."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from batchgate.emulator import EmulatorThread

from .harness import Server, gateway_config, running

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TOKEN = "bgk-HYGIENE-SECRET-5d1e"


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("hygiene")
    with running(
        root, gateway_config(root / "gateway.yaml", emu), "--max-auth-failures-per-minute", "5"
    ) as s:
        yield s


def _raw(server: Server, request: bytes) -> bytes:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        return s.recv(4096)


@pytest.mark.parametrize("bad", [b"\x00", b"\r", b"\x01"], ids=["nul", "cr", "x01"])
def test_a_token_with_a_control_byte_never_reaches_the_log(own: Server, bad: bytes) -> None:
    header = b"Authorization: Bearer " + TOKEN.encode() + bad + b"zz"
    answer = _raw(own, b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.")
    log = own.log.read_text(encoding="utf-8", errors="replace")
    assert "HYGIENE-SECRET" not in log
    assert "Traceback" not in log


def test_malformed_requests_are_logged_once_per_client_a_minute(own: Server) -> None:
    for _ in range(5):
        _raw(own, b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    lines = [line for line in own.log.read_text(encoding="utf-8").splitlines() if "malformed_request" in line]
    assert len(lines) == 1, lines  # the control bytes above and these five: one line this minute
    assert "client=127.0.0.1" in lines[0]
    assert "Traceback" not in own.log.read_text(encoding="utf-8")


def test_failed_key_checks_are_throttled_per_address(own: Server) -> None:
    good = own.keys_create()
    statuses = [
        httpx.get(f"{own.base_url}/jobs", headers={"Authorization": f"Bearer bgk-wrong-{i}"}).status_code
        for i in range(8)
    ]
    assert statuses[:5] == [401] * 5
    assert statuses[5:] == [429] * 3  # past 5 a minute: the keys are no longer checked
    throttled = httpx.get(f"{own.base_url}/jobs", headers={"Authorization": f"Bearer {good}"})
    assert throttled.status_code == 429  # the address is throttled, whatever key it sends
    assert int(throttled.headers["Retry-After"]) >= 1
