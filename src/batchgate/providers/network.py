"""One `NetworkSettings` (`batchgate.config.network`) made into the chat transport its `transport`
names (`chat_transport`): the lean HTTP/1.1 client by default, its proxy route (`proxy_route`,
`Proxy-Authorization: Basic` from the URL's credentials) and TLS context
(`config.network.tls_context`, the same one aiohttp's sessions and callbacks use) in one
`H1Transport` (`h1_transport`); or, for `transport: aiohttp`, an aiohttp session of its own
(`providers.http.session_transport`: the same proxy choice per URL, `NO_PROXY` and TLS context).
aiohttp is imported only then: a gateway on h1 never loads it.
"""

from __future__ import annotations

import ssl

from batchgate.config import NetworkSettings, ProxyURL
from batchgate.config.network import tls_context
from batchgate.providers.h1.proxy import Proxy
from batchgate.providers.h1.transport import H1Transport, ProxyRoute
from batchgate.providers.transport import ChatTransport

DIRECT = NetworkSettings(trust_env=False)


def h1_proxy(proxy: ProxyURL, tls: ssl.SSLContext | None = None) -> Proxy:
    """The lean client's view of a proxy: its address, its name without credentials, Basic auth,
    and (an https:// proxy) the context its own certificate is verified with."""
    return Proxy(proxy.host, proxy.port, proxy.shown, proxy.authorization, tls)


def proxy_route(net: NetworkSettings) -> ProxyRoute | None:
    """The function the lean client asks, per origin, for its proxy (None: never a proxy)."""
    if net.https_proxy is None and net.http_proxy is None:
        return None
    proxies = {
        p: h1_proxy(p, tls_context(net) if p.scheme == "https" else None)
        for p in (net.https_proxy, net.http_proxy)
        if p is not None
    }

    def route(scheme: str, host: str, port: int) -> Proxy | None:
        chosen = net.proxy_for(scheme, host, port)
        return None if chosen is None else proxies[chosen]

    return route


def h1_transport(net: NetworkSettings) -> H1Transport:
    """A lean HTTP/1.1 transport that reaches targets as `net` says."""
    return H1Transport(tls=tls_context(net) if net.custom_tls else None, proxy=proxy_route(net))


def chat_transport(net: NetworkSettings) -> ChatTransport:
    """The transport `net.transport` names, reaching targets as `net` says; call it from a running
    event loop (an aiohttp session binds to it)."""
    if net.transport == "aiohttp":
        from batchgate.providers.http import session_transport  # noqa: PLC0415 — optional: ~0.2 s

        return session_transport(net)
    return h1_transport(net)
