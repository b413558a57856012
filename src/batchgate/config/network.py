"""`NetworkSettings`: how batchgate reaches a provider — proxy, CA bundle, client certificate —
built once where the config is read, from a provider entry's keys and the environment.

The environment is read here and nowhere deeper: `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` /
`NO_PROXY` (lower-case first, as curl and requests read them), and for the trust store
`REQUESTS_CA_BUNDLE`, then `SSL_CERT_FILE` / `SSL_CERT_DIR`. A provider entry may override:
`proxy: URL` (every target of that provider through it; `NO_PROXY` not applied) or `proxy: none`
(never a proxy), `ca_bundle: PATH` (the CAs trusted instead of the system's), `client_cert: PATH`
and `client_key: PATH` (mTLS), `trust_env: false` (the environment ignored), `transport: h1 | aiohttp`
(the HTTP client its chat calls go through; `settings.transport` is every entry's default, h1
unless it says otherwise; `providers.network.chat_transport` builds either from these settings).
Every path is
checked at load; a bad value is one `ConfigError` naming the key (or the variable). A proxy's
password is kept in the value object, never in its `repr` or in what `ProxyURL.shown` prints.

Pure: `proxy_for` decides per target, `NO_PROXY` matching host names, `.domain` suffixes, IP
addresses and CIDR blocks, `host:port` entries and `*`. What every client (the lean chat client,
aiohttp's sessions, callbacks) takes from it: `tls_context` (made once per distinct settings)
and `proxy_for_url` (the proxy of one URL).
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple
from urllib.parse import unquote, urlsplit

from batchgate.errors import ConfigError

_NONE = "none"
PROXY_VARS = {"https": ("https_proxy", "HTTPS_PROXY"), "http": ("http_proxy", "HTTP_PROXY")}
ALL_PROXY_VARS = ("all_proxy", "ALL_PROXY")
NO_PROXY_VARS = ("no_proxy", "NO_PROXY")
CA_FILE_VARS = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
CA_DIR_VAR = "SSL_CERT_DIR"
NETWORK_KEYS = ("proxy", "ca_bundle", "client_cert", "client_key", "trust_env", "transport")  # an entry's
TransportName = Literal["h1", "aiohttp"]
TRANSPORTS: tuple[TransportName, ...] = ("h1", "aiohttp")  # the chat transports a config may choose


class ProxyURL(NamedTuple):
    """A proxy taken apart: where it is, and its credentials (never shown)."""

    scheme: str
    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @property
    def shown(self) -> str:
        """The proxy as messages show it: no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def authorization(self) -> str | None:
        """`Proxy-Authorization: Basic …` from the URL's credentials (None: it has none)."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def __repr__(self) -> str:
        return f"ProxyURL({self.shown!r})"


@dataclass(frozen=True, slots=True)
class NetworkSettings:
    """See the module docstring; the default reaches everything directly with the system's CAs."""

    https_proxy: ProxyURL | None = None
    http_proxy: ProxyURL | None = None
    no_proxy: tuple[str, ...] = ()
    ca_bundle: str | None = None  # a PEM file of the CAs trusted (instead of the system's)
    ca_dir: str | None = None  # a directory of hashed CA files (SSL_CERT_DIR)
    ca_source: str | None = None  # where the CAs came from, for messages: "ca_bundle", "SSL_CERT_FILE"
    client_cert: str | None = None
    client_key: str | None = None
    trust_env: bool = True
    transport: TransportName = "h1"  # the chat calls' HTTP client: the lean HTTP/1.1 one, or aiohttp

    def proxy_for(self, scheme: str, host: str, port: int) -> ProxyURL | None:
        """The proxy a request to `scheme://host:port` goes through (None: directly)."""
        proxy = self.https_proxy if scheme == "https" else self.http_proxy
        if proxy is None or not self.no_proxy:
            return proxy
        return None if bypassed(self.no_proxy, host, port) else proxy

    @property
    def custom_tls(self) -> bool:
        """Whether TLS needs more than the system's defaults (a CA bundle, a client certificate)."""
        return bool(self.ca_bundle or self.ca_dir or self.client_cert)


@functools.lru_cache(maxsize=32)
def tls_context(net: NetworkSettings) -> ssl.SSLContext:
    """The verifying client context for `net`: a CA bundle or directory given replaces the
    system's CAs (as requests' `REQUESTS_CA_BUNDLE` and OpenSSL's `SSL_CERT_FILE` do); a client
    certificate is presented for mTLS."""
    context = ssl.create_default_context(cafile=net.ca_bundle, capath=net.ca_dir)
    if net.client_cert is not None:
        context.load_cert_chain(net.client_cert, net.client_key)
    return context


def proxy_for_url(net: NetworkSettings, url: str) -> ProxyURL | None:
    """The proxy a request to `url` goes through (None: directly); for aiohttp, pass its
    `shown` URL as `proxy=` and its credentials apart, so no URL with a password is ever made."""
    if net.https_proxy is None and net.http_proxy is None:
        return None
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return net.proxy_for(scheme, parts.hostname or "", port)


def bypassed(no_proxy: tuple[str, ...], host: str, port: int) -> bool:
    """Whether `NO_PROXY`'s entries send `host:port` directly (curl's and requests' reading)."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in no_proxy:
        if entry == "*":
            return True
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = name.lstrip("*").lstrip(".") if name.startswith(("*.", ".")) else name
        if host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [::1]:8080
        end = entry.find("]")
        rest = entry[end + 1 :]
        return entry[1:end], int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    name, sep, port = entry.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None


def parse_proxy(text: str, where: str, source: str) -> ProxyURL:
    """A proxy URL, or a `ConfigError` naming `where` (the key or variable; never the password)."""
    value = text.strip()
    if "://" not in value:
        value = "http://" + value  # as curl reads `HTTPS_PROXY=proxy:3128`
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ConfigError(source, where, "is not a valid proxy URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"{parts.scheme}://{parts.hostname or ''}"
        raise ConfigError(source, where, f"must be an http:// or https:// proxy URL (or none), got {shown!r}")
    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    default = 443 if parts.scheme == "https" else 80
    return ProxyURL(parts.scheme, parts.hostname, port or default, username, password)


def environment_network(environ: Mapping[str, str], source: str) -> NetworkSettings:
    """What the environment asks for (the default of every provider entry, and of callbacks)."""
    proxies: dict[str, ProxyURL | None] = {}
    for scheme, names in PROXY_VARS.items():
        found = _first(environ, (*names, *ALL_PROXY_VARS))
        proxies[scheme] = parse_proxy(found[1], f"environment {found[0]}", source) if found else None
    no_proxy = _first(environ, NO_PROXY_VARS)
    entries = tuple(e.strip().lower() for e in no_proxy[1].split(",") if e.strip()) if no_proxy else ()
    ca_file = _first(environ, CA_FILE_VARS)
    ca_dir = environ.get(CA_DIR_VAR) or None
    if ca_file is not None:
        _check_file(ca_file[1], f"environment {ca_file[0]}", source)
    if ca_dir is not None and not os.path.isdir(ca_dir):
        raise ConfigError(source, f"environment {CA_DIR_VAR}", f"{ca_dir!r} is not a directory")
    return NetworkSettings(
        https_proxy=proxies["https"],
        http_proxy=proxies["http"],
        no_proxy=entries,
        ca_bundle=ca_file[1] if ca_file else None,
        ca_dir=ca_dir,
        ca_source=ca_file[0] if ca_file else CA_DIR_VAR if ca_dir else None,
    )


def provider_network(
    raw: Mapping[str, object], path: str, source: str, env: NetworkSettings
) -> NetworkSettings:
    """A provider entry's `proxy`, `ca_bundle`, `client_cert`, `client_key`, `trust_env` and
    `transport` over `env` (whose `transport` is `settings.transport`)."""
    trust = raw.get("trust_env", True)
    if not isinstance(trust, bool):
        raise ConfigError(source, f"{path}.trust_env", "must be true or false")
    transport = env.transport
    if raw.get("transport") is not None:
        transport = read_transport(raw["transport"], f"{path}.transport", source)
    base = replace(env if trust else NetworkSettings(trust_env=False), transport=transport)
    strings: dict[str, str | None] = {}
    for name in ("proxy", "ca_bundle", "client_cert", "client_key"):
        value = raw.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(source, f"{path}.{name}", "must be a non-empty string")
        strings[name] = value
    net = base
    proxy = strings["proxy"]
    if proxy is not None:
        chosen = None if proxy.strip().lower() == _NONE else parse_proxy(proxy, f"{path}.proxy", source)
        net = replace(net, https_proxy=chosen, http_proxy=chosen, no_proxy=())
    ca = strings["ca_bundle"]
    if ca is not None:
        ca_file = _check_file(ca, f"{path}.ca_bundle", source)
        net = replace(net, ca_bundle=ca_file, ca_dir=None, ca_source="ca_bundle")
    cert, key = strings["client_cert"], strings["client_key"]
    if key is not None and cert is None:
        raise ConfigError(source, f"{path}.client_key", "needs client_cert")
    if cert is not None:
        cert_file = _check_file(cert, f"{path}.client_cert", source)
        key_file = _check_file(key, f"{path}.client_key", source) if key is not None else None
        _check_pair(cert_file, key_file, f"{path}.client_cert", source)
        net = replace(net, client_cert=cert_file, client_key=key_file)
    return net


def read_transport(value: object, where: str, source: str) -> TransportName:
    """`h1` or `aiohttp`, or a `ConfigError` naming `where`."""
    if value not in TRANSPORTS:
        raise ConfigError(source, where, f"must be one of {', '.join(TRANSPORTS)}, got {value!r}")
    return value


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _check_file(path: str, where: str, source: str) -> str:
    expanded = os.path.expanduser(path)
    if not os.path.isfile(expanded):
        raise ConfigError(source, where, f"file {path!r} does not exist")
    return expanded


def _check_pair(cert: str, key: str | None, where: str, source: str) -> None:
    """The certificate (and key) load: a wrong file or a key that does not match is told now."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise ConfigError(source, where, f"cannot load the certificate and key ({reason})") from None
