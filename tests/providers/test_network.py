"""Networks as users have them, against real third-party software: a real HTTP proxy
(`proxy.py`) on a network that drops direct connections, a private CA (`trustme`) given as
`ca_bundle:`, `REQUESTS_CA_BUNDLE` or `SSL_CERT_FILE` (or not at all), and mTLS.

What they prove: the emulator is served only through `tests/netutil.py`'s TLS front, which
closes at once every connection not dialled from the proxy's source address — so a request that
succeeds went through the proxy (the front also counts what it served and refused), and one made
without the proxy is refused as a corporate network drops it (here at once, not after a timeout).
The gateway's proxy and mTLS tests run over each transport a config can choose (`transport:`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from batchgate import Gateway
from batchgate.config import NetworkSettings, ProxyURL, TimeoutConfig, config_from_dict
from batchgate.config.network import TRANSPORTS
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.errors import ConfigError, ConnectError, TLSError, UnreachableError
from batchgate.providers.h1 import H1Transport
from batchgate.providers.http import create_session, request_timeout, send
from batchgate.providers.transport import call
from netutil import TLSFront, make_ca, real_proxy

CHAT = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "Summarize: a fox"}]}


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
    with real_proxy() as port:
        yield port


@pytest.fixture(scope="module")
def auth_proxy_port() -> Iterator[int]:
    with real_proxy(basic_auth="user:s3cret-pw") as port:
        yield port


def _upstream(emu: EmulatorThread) -> int:
    return int(emu.base_url("alpha").split(":")[2].split("/")[0])


def _config(url: str, environ: dict[str, str], **entry: Any) -> Any:
    provider = {"name": "alpha", "kind": "openai", "base_url": f"{url}/alpha/v1", "api_key": "sk-x", **entry}
    data = {
        "providers": [provider],
        "routes": [{"model": "m", "targets": ["alpha:gpt-4o-mini"]}],
        "settings": {
            "retry": {"max_attempts": 3, "base_delay": 0.01, "max_delay": 0.02},
            "timeouts": {"connect": 3, "total": 10},
        },
    }
    return config_from_dict(data, environ=environ)


async def _one(url: str, environ: dict[str, str], **entry: Any) -> Any:
    async with Gateway(_config(url, environ, **entry)) as gw:
        return await gw.arun(CHAT)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_https_proxy_from_the_environment_carries_every_call(
    emu: EmulatorThread, ca: Any, proxy_port: int, transport: str
) -> None:
    _, leaf, pem = ca
    port = proxy_port
    with TLSFront(leaf, _upstream(emu)) as front:
        direct = await _one(front.url, {"REQUESTS_CA_BUNDLE": str(pem)}, transport=transport)
        assert not direct.ok
        assert front.refused >= 1
        assert front.served == 0
        refused = front.refused
        env = {"HTTPS_PROXY": f"http://127.0.0.1:{port}", "REQUESTS_CA_BUNDLE": str(pem)}
        async with Gateway(_config(front.url, env, transport=transport)) as gw:
            results = await gw.abatch([CHAT] * 5)
    assert [r.ok for r in results] == [True] * 5, [r.error for r in results]
    assert front.served >= 1
    assert front.refused == refused


async def test_no_proxy_and_proxy_none_go_direct(emu: EmulatorThread, ca: Any, proxy_port: int) -> None:
    _, leaf, pem = ca
    port = proxy_port
    with TLSFront(leaf, _upstream(emu)) as front:
        proxy = {"HTTPS_PROXY": f"http://127.0.0.1:{port}", "REQUESTS_CA_BUNDLE": str(pem)}
        assert (await _one(front.url, {**proxy, "no_proxy": ".example.com,localhost:1,10.0.0.0/8"})).ok
        assert front.refused == 0
        assert not (await _one(front.url, {**proxy, "NO_PROXY": "localhost"})).ok  # direct: dropped
        refused = front.refused
        assert refused >= 1
        assert not (await _one(front.url, proxy, proxy="none")).ok
        assert front.refused > refused


async def test_proxy_credentials_are_sent_and_never_shown(
    emu: EmulatorThread, ca: Any, auth_proxy_port: int
) -> None:
    _, leaf, pem = ca
    port = auth_proxy_port
    with TLSFront(leaf, _upstream(emu)) as front:
        good = await _one(front.url, {}, proxy=f"http://user:s3cret-pw@127.0.0.1:{port}", ca_bundle=str(pem))
        bad = await _one(front.url, {}, proxy=f"http://user:wrong-pw@127.0.0.1:{port}", ca_bundle=str(pem))
    assert good.ok, good.error
    assert bad.error is not None
    text = bad.error.message
    assert f"proxy http://127.0.0.1:{port} refused CONNECT localhost:" in text, text
    assert "HTTP 407" in text
    assert "wrong-pw" not in text
    assert "user" not in text.replace("user:", "")


async def test_plain_http_targets_go_through_the_proxy_in_absolute_form(
    emu: EmulatorThread, ca: Any, proxy_port: int
) -> None:
    _, leaf, _ = ca
    port = proxy_port
    with TLSFront(leaf, _upstream(emu), tls=False) as front:
        assert not (await _one(front.url, {})).ok
        result = await _one(front.url, {"HTTP_PROXY": f"http://127.0.0.1:{port}"})
    assert result.ok, result.error
    assert front.served >= 1


@pytest.mark.parametrize("how", ["ca_bundle", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
async def test_a_private_ca_given_each_way_is_trusted(emu: EmulatorThread, ca: Any, how: str) -> None:
    _, leaf, pem = ca
    entry = {"ca_bundle": str(pem)} if how == "ca_bundle" else {}
    env = {} if how == "ca_bundle" else {how: str(pem)}
    with TLSFront(leaf, _upstream(emu), only_from=None) as front:
        result = await _one(front.url, env, **entry)
    assert result.ok, result.error


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_private_ca_not_given_is_a_tls_error_naming_the_certificate_problem(
    emu: EmulatorThread, ca: Any, transport: str
) -> None:
    _, leaf, _ = ca
    with TLSFront(leaf, _upstream(emu), only_from=None) as front:
        async with Gateway(_config(front.url, {}, transport=transport)) as gw:
            result = await gw.arun(CHAT)
            figures = gw.statistics().providers["alpha"]
    assert result.error is not None
    text = result.error.message
    assert "CERTIFICATE_VERIFY_FAILED" in text, text
    assert f"localhost:{front.port}" in text
    assert "ca_bundle" in text
    assert "unreachable" not in text
    assert figures.errors_by_kind == {"tls": figures.failed_attempts}  # never "unreachable"
    assert not figures.unreachable
    assert figures.unreachable_attempts == 0
    assert figures.failed_attempts <= 3  # taken out after 3 handshakes, never retried 8 times
    assert figures.wasted_tokens == 0  # nothing was sent: nothing charged


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_mtls_client_certificate(emu: EmulatorThread, ca: Any, tmp_path: Path, transport: str) -> None:
    authority, leaf, pem = ca
    client = authority.issue_cert("batchgate-client@example.com")
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))
    with TLSFront(leaf, _upstream(emu), only_from=None, client_ca=authority) as front:
        mtls = {"ca_bundle": str(pem), "client_cert": str(cert), "client_key": str(key)}
        with_cert = await _one(front.url, {}, transport=transport, **mtls)
        without = await _one(front.url, {}, ca_bundle=str(pem), transport=transport)
    assert with_cert.ok, with_cert.error
    assert not without.ok


def test_environment_proxies_lower_case_first_and_no_proxy_matching() -> None:
    env = {
        "https_proxy": "http://low:1",
        "HTTPS_PROXY": "http://up:2",
        "ALL_PROXY": "http://all:3",
        "NO_PROXY": "internal.corp, .svc, 10.0.0.0/8, api.local:8443",
    }
    net = _config("https://x", env).providers[0].network
    assert net.https_proxy is not None
    assert net.https_proxy.host == "low"
    assert net.http_proxy is not None
    assert net.http_proxy.host == "all"
    assert net.proxy_for("https", "api.openai.com", 443) == net.https_proxy
    for host, port in [
        ("internal.corp", 443),
        ("a.svc", 443),
        ("svc", 443),
        ("10.2.3.4", 443),
        ("api.local", 8443),
    ]:
        assert net.proxy_for("https", host, port) is None, host
    assert net.proxy_for("https", "api.local", 443) is not None  # the entry names another port
    assert net.proxy_for("https", "notinternal.corp", 443) is not None
    star = _config("https://x", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}).providers[0].network
    assert star.proxy_for("https", "anything", 443) is None
    off = _config("https://x", env, trust_env=False).providers[0].network
    assert off.https_proxy is None
    assert off.http_proxy is None


def test_a_proxy_password_is_never_in_repr() -> None:
    net = _config("https://x", {}, proxy="http://me:hunter2@p:8080").providers[0].network
    assert "hunter2" not in repr(net)
    assert "hunter2" not in str(net)
    assert net.https_proxy is not None
    assert net.https_proxy.password == "hunter2"


@pytest.mark.parametrize(
    ("entry", "env", "where"),
    [
        ({"proxy": "socks5://p:1080"}, {}, "providers[0].proxy"),
        ({"ca_bundle": "/nonexistent/ca.pem"}, {}, "providers[0].ca_bundle"),
        ({"client_key": "/etc/hostname"}, {}, "providers[0].client_key"),
        ({"client_cert": "/etc/hostname"}, {}, "providers[0].client_cert"),
        ({"trust_env": "no"}, {}, "providers[0].trust_env"),
        ({}, {"REQUESTS_CA_BUNDLE": "/nonexistent/ca.pem"}, "environment REQUESTS_CA_BUNDLE"),
        ({}, {"HTTPS_PROXY": "ftp://p:1"}, "environment HTTPS_PROXY"),
    ],
)
def test_a_bad_network_setting_is_one_line_naming_the_key(
    entry: dict[str, Any], env: dict[str, str], where: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _config("https://x", env, **entry)
    assert caught.value.key == where
    assert "\n" not in str(caught.value)


async def test_the_batch_api_session_goes_through_the_proxy_too(
    emu: EmulatorThread, ca: Any, auth_proxy_port: int
) -> None:
    _, leaf, pem = ca
    port = auth_proxy_port
    timeout = request_timeout(TimeoutConfig(connect=3, total=10))
    session = create_session(connect_timeout=3)
    try:
        with TLSFront(leaf, _upstream(emu)) as front:
            url = f"{front.url}/alpha/v1/models"
            answers: list[object] = []
            for password in ("s3cret-pw", "wrong-pw"):
                proxy = ProxyURL("http", "127.0.0.1", port, "user", password)
                net = NetworkSettings(https_proxy=proxy, ca_bundle=str(pem))
                try:
                    answers.append(
                        await send(
                            session, "GET", url, None, {}, timeout, provider="p", api_key=None, network=net
                        )
                    )
                except UnreachableError as exc:
                    answers.append(exc)
    finally:
        await session.close()
    assert isinstance(answers[0], tuple)
    assert answers[0][0] == 404  # the emulator's answer (it has no /models): through the proxy
    assert isinstance(answers[1], UnreachableError)
    assert f"the proxy http://127.0.0.1:{port} refused CONNECT: HTTP 407" in answers[1].message
    assert "wrong-pw" not in answers[1].message
    assert front.refused == 0
    assert front.served >= 1


async def test_a_handshake_cut_off_is_a_connection_failure_and_plain_http_a_tls_error() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)  # the whole client hello: then the server closes (EOF mid-handshake)
        writer.close()

    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    h1 = H1Transport()
    timeouts = TimeoutConfig(connect=3, total=5)
    try:
        for handler, expected in ((cut, ConnectError), (plain, TLSError)):
            server = await asyncio.start_server(handler, "127.0.0.1", 0)
            url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
            with pytest.raises((ConnectError, TLSError)) as caught:
                await call(h1, "POST", url, b"{}", {}, timeouts, provider="p", api_key=None)
            server.close()
            await server.wait_closed()
            assert type(caught.value) is expected, caught.value
    finally:
        await h1.close()


async def test_an_https_proxy_is_spoken_to_over_tls(emu: EmulatorThread, ca: Any, tmp_path: Path) -> None:
    authority, leaf, pem = ca
    proxy_cert = authority.issue_cert("127.0.0.1")
    cert, key = tmp_path / "proxy.pem", tmp_path / "proxy.key"
    proxy_cert.cert_chain_pems[0].write_to_path(str(cert))
    proxy_cert.private_key_pem.write_to_path(str(key))
    with real_proxy(tls=(str(cert), str(key))) as port, TLSFront(leaf, _upstream(emu)) as front:
        env = {"HTTPS_PROXY": f"https://127.0.0.1:{port}", "SSL_CERT_FILE": str(pem)}
        result = await _one(front.url, env)
    assert result.ok, result.error
    assert front.served >= 1
    assert front.refused == 0
