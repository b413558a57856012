"""One `NetworkSettings` (`batchgate.config.network`) made into what a client needs: the TLS
context (`tls_context`: the CA bundle or directory given, else the system's trust store; the
client certificate for mTLS), the lean client's proxy route (`proxy_route`) and aiohttp's
per-request `proxy` (`proxy_url`). The chat client, the Batch API's session and callbacks all
take their settings from here, so a proxy or a CA given once is honoured everywhere.

A context is made once per distinct settings value (loading a CA file costs milliseconds).
"""

from __future__ import annotations

import base64
import functools
import ssl
from urllib.parse import urlsplit

from batchgate.config import NetworkSettings, ProxyURL
from batchgate.providers.h1.proxy import Proxy
from batchgate.providers.h1.transport import H1Transport, ProxyRoute

DIRECT = NetworkSettings(trust_env=False)


@functools.lru_cache(maxsize=32)
def tls_context(net: NetworkSettings) -> ssl.SSLContext:
    """The verifying client context for `net` (a CA bundle given replaces the system's CAs, as
    requests' `REQUESTS_CA_BUNDLE` and OpenSSL's `SSL_CERT_FILE` do)."""
    context = ssl.create_default_context(cafile=net.ca_bundle, capath=net.ca_dir)
    if net.client_cert is not None:
        context.load_cert_chain(net.client_cert, net.client_key)
    return context


def h1_proxy(proxy: ProxyURL) -> Proxy:
    """The lean client's view of a proxy: its address, its name without credentials, Basic auth."""
    authorization = None
    if proxy.username is not None:
        pair = f"{proxy.username}:{proxy.password or ''}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode("ascii")
    return Proxy(proxy.host, proxy.port, proxy.shown, authorization)


def proxy_route(net: NetworkSettings) -> ProxyRoute | None:
    """The function the lean client asks, per origin, for its proxy (None: never a proxy)."""
    if net.https_proxy is None and net.http_proxy is None:
        return None
    proxies = {p: h1_proxy(p) for p in (net.https_proxy, net.http_proxy) if p is not None}

    def route(scheme: str, host: str, port: int) -> Proxy | None:
        chosen = net.proxy_for(scheme, host, port)
        return None if chosen is None else proxies[chosen]

    return route


def h1_transport(net: NetworkSettings) -> H1Transport:
    """A lean HTTP/1.1 transport that reaches targets as `net` says."""
    return H1Transport(tls=tls_context(net) if net.custom_tls else None, proxy=proxy_route(net))


def proxy_url(net: NetworkSettings, url: str) -> str | None:
    """aiohttp's `proxy=` for a request to `url` (credentials in it; never logged), or None."""
    if net.https_proxy is None and net.http_proxy is None:
        return None
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    chosen = net.proxy_for(scheme, parts.hostname or "", port)
    return None if chosen is None else chosen.url
