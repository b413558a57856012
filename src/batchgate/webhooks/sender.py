"""One delivery attempt: check and pin the callback host's addresses (`guard`), sign the event for
this attempt's timestamp (`signing`), POST it, and say what came of it.

Through the network settings given (`config.network`: the environment's `HTTPS_PROXY` and CAs):
with a proxy, the request names the pinned address itself (`CONNECT 203.0.113.7:443`, TLS still
verified for the host name), so the guard holds for the final target, never the proxy's lookup.
A 307/308 is followed (the same POST, at most `MAX_HOPS` times) only to a URL the guard passes
again; any other 3xx is final — the event would be re-sent as a GET elsewhere.

Outcomes: `delivered` (a 2xx), `refused` (the SSRF guard, final), `redirected` (a 3xx not
followed, final), `http_error` (another status; retried), `unreachable` (no answer: the name did not
resolve, connection, TLS or timeout; retried).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from batchgate.config.network import NetworkSettings, proxy_for_url, tls_context
from batchgate.config.schema import Secret
from batchgate.webhooks import guard, signing
from batchgate.webhooks.addresses import Address

ANSWER_BYTES = 1 << 16  # what is read of a receiver's answer
FINAL = frozenset({"delivered", "refused", "redirected"})
MAX_HOPS = 5


@dataclass(frozen=True, slots=True)
class Delivery:
    outcome: str
    reason: str | None = None

    @property
    def final(self) -> bool:
        return self.outcome in FINAL


async def send(
    url: str,
    event_id: str,
    body: bytes,
    secret: Secret | None,
    timestamp: int,
    *,
    allow: guard.AllowList,
    timeout_s: float,
    lookup: guard.Lookup = guard.system_lookup,
    network: NetworkSettings | None = None,
) -> Delivery:
    """One POST of the event to `url`, signed for `timestamp`; `lookup` resolves the host (once)."""
    headers = signing.headers(secret, event_id, timestamp, body)
    for _ in range(MAX_HOPS + 1):
        try:
            parsed = guard.parse_url(url)
            host = parsed.host or ""
            addresses = await guard.resolve(host, parsed.port or 0, allow, lookup)
        except guard.CallbackUnresolved as exc:  # a DNS failure may pass: retried, as no answer is
            return Delivery("unreachable", exc.message)
        except guard.CallbackRefused as exc:
            return Delivery("refused", exc.message)
        try:
            status, location = await _post(parsed, addresses, body, headers, timeout_s, network)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return Delivery("unreachable", f"no answer from {host}: {type(exc).__name__}")
        if status not in (307, 308) or not location:
            break
        url = str(parsed.join(URL(location)))
    else:
        return Delivery("redirected", f"{MAX_HOPS} redirects followed; the last to {_host_of(location)}")
    if 200 <= status < 300:
        return Delivery("delivered")
    if 300 <= status < 400:
        where = _host_of(location)
        return Delivery("redirected", f"answered {status}, a redirect to {where}; only 307/308 are followed")
    return Delivery("http_error", f"answered HTTP {status}")


async def _post(
    parsed: URL,
    addresses: list[Address],
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
    network: NetworkSettings | None,
) -> tuple[int, str]:
    """One POST to the checked addresses (directly, or through the proxy to the first of them)."""
    host = parsed.host or ""
    chosen = proxy_for_url(network, str(parsed)) if network is not None else None
    proxy = chosen.shown if chosen is not None else None  # its credentials apart, never in a URL
    auth = chosen.authorization if chosen is not None else None
    tls: ssl.SSLContext | bool = tls_context(network) if network is not None and network.custom_tls else True
    target, server_hostname = parsed, None
    if proxy is None:
        resolver: AbstractResolver = guard.PinnedResolver(host, addresses)
    else:  # the proxy is told the checked address, never the name (it would resolve it anew)
        resolver = aiohttp.ThreadedResolver()
        target = parsed.with_host(str(addresses[0]))
        server_hostname = host if parsed.scheme == "https" else None
        headers = {**headers, "Host": parsed.raw_authority}
        if auth is not None and parsed.scheme == "http":  # absolute form: no CONNECT to carry it
            headers["Proxy-Authorization"] = auth
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=1, force_close=True)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session,
        session.post(
            target,
            data=body,
            headers=headers,
            allow_redirects=False,
            proxy=proxy,
            proxy_headers={"Proxy-Authorization": auth} if auth is not None else None,
            ssl=tls,
            server_hostname=server_hostname,
        ) as answer,
    ):
        await answer.content.read(ANSWER_BYTES)
        return answer.status, answer.headers.get("Location", "")


def _host_of(location: str) -> str:
    try:
        return URL(location).host or "a relative URL"
    except ValueError:
        return "an invalid URL"
