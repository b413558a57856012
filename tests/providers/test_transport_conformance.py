"""One conformance suite for `ChatTransport`: every transport a config can choose (`TRANSPORTS`,
built by `providers.network.chat_transport` from one `NetworkSettings`) passes the same tests,
through `providers.transport.call` as a provider client sends: a request and its answer, headers
read case-insensitively, a refused connection, a timeout and a redirect each the same error or
outcome, and the network settings honoured (a real proxy, `NO_PROXY`, a private CA, mTLS).

Servers are real sockets on loopback: a few lines of HTTP/1.1 (`_serve`) for what the emulator
does not say (odd headers, silence, redirects), and `tests/netutil.py`'s TLS front and proxy.py for
the network settings.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from batchgate.config import NetworkSettings, ProxyURL, TimeoutConfig
from batchgate.config.network import TRANSPORTS, TransportName
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.errors import BadRequestError, ConnectError, RequestTimeout, TLSError, UnreachableError
from batchgate.providers.network import chat_transport
from batchgate.providers.transport import Answer, ChatTransport, call
from netutil import TLSFront, make_ca, real_proxy

TIMEOUTS = TimeoutConfig(connect=3, total=10)
CHAT = b'{"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": "user", "content": "a fox"}]}'
JSON = {"Content-Type": "application/json", "Authorization": "Bearer sk-x"}
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

pytestmark = pytest.mark.parametrize("name", TRANSPORTS)


@contextlib.asynccontextmanager
async def _transport(name: TransportName, **settings: Any) -> AsyncIterator[ChatTransport]:
    transport = chat_transport(NetworkSettings(trust_env=False, transport=name, **settings))
    try:
        yield transport
    finally:
        await transport.close()


async def _send(transport: ChatTransport, url: str, *, timeouts: TimeoutConfig = TIMEOUTS) -> Answer:
    return await call(transport, "POST", url, CHAT, JSON, timeouts, provider="p", api_key=None)


@contextlib.asynccontextmanager
async def _serve(handler: Handler) -> AsyncIterator[str]:
    """A loopback HTTP server answering with `handler`; yields its base URL."""

    async def each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(each, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, bytes]:
    """The request line and body of one request (its body by Content-Length)."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return head.split("\r\n")[0], await reader.readexactly(length)


def _answer(status: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items()), f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    providers = [{"name": "alpha", "family": "openai", "limits": {"rpm": 100_000, "tpm": 10**8}}]
    with EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers})) as running:
        yield running


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, trustme.LeafCert, Path]:
    authority, leaf = make_ca()
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    return authority, leaf, pem


@pytest.fixture(scope="module")
def proxy_port() -> Iterator[int]:
    with real_proxy(basic_auth="user:s3cret-pw") as port:
        yield port


def _upstream(emu: EmulatorThread) -> int:
    return int(emu.base_url("alpha").split(":")[2].split("/")[0])


async def test_a_request_and_its_answer(name: TransportName, emu: EmulatorThread) -> None:
    async with _transport(name) as transport:
        status, headers, body = await _send(transport, f"{emu.base_url('alpha')}/chat/completions")
        again = await _send(transport, f"{emu.base_url('alpha')}/chat/completions")  # a kept connection
    assert status == 200, body
    assert b'"choices"' in body
    assert headers["content-type"].startswith("application/json")
    assert again[0] == 200


async def test_headers_are_read_case_insensitively_and_sent_as_given(name: TransportName) -> None:
    seen: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        fields = dict(line.lower().split(": ", 1) for line in head.decode().split("\r\n")[1:] if line)
        body = await reader.readexactly(int(fields["content-length"]))
        seen.extend(
            [head.decode().split("\r\n")[0], body.decode(), fields["user-agent"], fields["authorization"]]
        )
        writer.write(_answer("200 OK", {"X-RateLimit-Remaining-Requests": "7", "content-TYPE": "text/plain"}))
        await writer.drain()

    async with _serve(handler) as url, _transport(name) as transport:
        status, headers, body = await _send(transport, f"{url}/v1/chat?x=1")
    assert (status, body) == (200, b"")
    assert headers["x-ratelimit-remaining-requests"] == headers["X-RATELIMIT-REMAINING-REQUESTS"] == "7"
    assert headers["Content-Type"] == "text/plain"
    assert seen == [
        "POST /v1/chat?x=1 HTTP/1.1",
        CHAT.decode(),
        "batchgate",
        "bearer sk-x",
    ]  # lower-cased here


async def test_a_refused_connection_is_unreachable(name: TransportName) -> None:
    async with _serve(_never_called) as url:
        pass  # closed: its port refuses
    async with _transport(name) as transport:
        with pytest.raises(UnreachableError):
            await _send(transport, f"{url}/v1")


async def test_no_answer_within_total_is_a_request_timeout(name: TransportName) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; the client gives up first

    async with _serve(silent) as url, _transport(name) as transport:
        with pytest.raises(RequestTimeout):
            await _send(transport, f"{url}/v1", timeouts=TimeoutConfig(connect=3, total=0.2))


async def test_redirects_are_followed_or_refused_by_call_alike(name: TransportName) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            try:
                line, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            path = line.split()[1]
            if path == "/old":  # same method and body to the new place
                writer.write(_answer("307 Temporary Redirect", {"Location": "/new"}))
            elif path == "/moved":  # a POST may not become a GET: refused, naming the place
                writer.write(_answer("302 Found", {"Location": "/elsewhere"}))
            else:
                writer.write(_answer("200 OK", {}, line.encode() + b" " + body))
            await writer.drain()

    async with _serve(handler) as url, _transport(name) as transport:
        status, _, body = await _send(transport, f"{url}/old")
        with pytest.raises(BadRequestError) as refused:
            await _send(transport, f"{url}/moved")
    assert (status, body) == (200, b"POST /new HTTP/1.1 " + CHAT)
    assert "/elsewhere" in refused.value.message


async def test_a_proxy_with_credentials_carries_the_call(
    name: TransportName, emu: EmulatorThread, ca: Any, proxy_port: int
) -> None:
    _, leaf, pem = ca
    good = ProxyURL("http", "127.0.0.1", proxy_port, "user", "s3cret-pw")
    bad = good._replace(password="wrong-pw")
    with TLSFront(leaf, _upstream(emu)) as front:  # refuses every connection not from the proxy
        async with _transport(name, https_proxy=good, ca_bundle=str(pem)) as transport:
            answer = await _send(transport, f"{front.url}/alpha/v1/chat/completions")
        async with _transport(name, https_proxy=bad, ca_bundle=str(pem)) as transport:
            with pytest.raises(UnreachableError) as refused:
                await _send(transport, f"{front.url}/alpha/v1/chat/completions")
        async with _transport(name, ca_bundle=str(pem)) as transport:  # no proxy: dropped
            with pytest.raises(ConnectError):
                await _send(transport, f"{front.url}/alpha/v1/chat/completions")
    assert answer[0] == 200
    assert "407" in refused.value.message
    assert "wrong-pw" not in refused.value.message
    assert front.served >= 1
    assert front.refused >= 1


async def test_no_proxy_and_plain_http_through_the_proxy(
    name: TransportName, emu: EmulatorThread, ca: Any, proxy_port: int
) -> None:
    _, leaf, _ = ca
    proxy = ProxyURL("http", "127.0.0.1", proxy_port, "user", "s3cret-pw")
    with TLSFront(leaf, _upstream(emu), tls=False) as front:
        async with _transport(name, http_proxy=proxy) as transport:  # absolute form, with credentials
            answer = await _send(transport, f"{front.url}/alpha/v1/chat/completions")
        refused = front.refused
        async with _transport(name, http_proxy=proxy, no_proxy=("localhost",)) as transport:
            with pytest.raises(ConnectError):  # sent directly: this network drops it
                await _send(transport, f"{front.url}/alpha/v1/chat/completions")
    assert answer[0] == 200
    assert front.refused > refused


async def test_a_private_ca_is_trusted_only_when_given_and_mtls(
    name: TransportName, emu: EmulatorThread, ca: Any, tmp_path: Path
) -> None:
    authority, leaf, pem = ca
    client = authority.issue_cert("batchgate-client@example.com")
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))
    with TLSFront(leaf, _upstream(emu), only_from=None, client_ca=authority) as front:
        url = f"{front.url}/alpha/v1/chat/completions"
        async with _transport(name, ca_bundle=str(pem), client_cert=str(cert), client_key=str(key)) as t:
            answer = await _send(t, url)
        async with _transport(name) as transport:  # the system's CAs: not this one
            with pytest.raises(TLSError) as untrusted:
                await _send(transport, url)
    assert answer[0] == 200
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.value.message


async def test_an_https_proxy_is_spoken_to_over_tls(
    name: TransportName, emu: EmulatorThread, ca: Any, tmp_path: Path
) -> None:
    authority, leaf, pem = ca
    proxy_cert = authority.issue_cert("127.0.0.1")
    cert, key = tmp_path / "proxy.pem", tmp_path / "proxy.key"
    proxy_cert.cert_chain_pems[0].write_to_path(str(cert))
    proxy_cert.private_key_pem.write_to_path(str(key))
    with real_proxy(tls=(str(cert), str(key))) as port, TLSFront(leaf, _upstream(emu)) as front:
        proxy = ProxyURL("https", "127.0.0.1", port)
        async with _transport(name, https_proxy=proxy, ca_bundle=str(pem)) as transport:
            answer = await _send(transport, f"{front.url}/alpha/v1/chat/completions")
    assert answer[0] == 200
    assert front.served >= 1


async def _never_called(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    return None
