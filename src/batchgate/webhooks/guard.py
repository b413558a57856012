"""The SSRF guard of callbacks: a callback URL's host is resolved once, every address it resolves
to is checked, and the connection goes to those very addresses (`PinnedResolver`), so a DNS answer
that changes between the check and the connect (rebinding) cannot reach anything new.

Refused unless the allow-list permits them: loopback, private (RFC 1918, fc00::/7), link-local
(169.254/16, fe80::/10), CGNAT (100.64/10), unspecified, multicast, the cloud metadata addresses
(169.254.169.254, fd00:ec2::254) and any other address that is not globally routable; an IPv6
address embedding an IPv4 one (NAT64, 6to4, Teredo, ...) by what it reaches (`addresses`). A name
resolving to several addresses is refused if any one is. The allow-list (`--callback-allow`) holds
networks (`127.0.0.1`, `10.0.0.0/8`, `::1`) an address may be in, and host names whose every
address is accepted. A redirect is followed only as a 307/308 to a URL this guard passes again
(`sender`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from batchgate.errors import BatchgateError
from batchgate.webhooks import addresses
from batchgate.webhooks.addresses import Address, Network

Lookup = Callable[[str, int], Awaitable[list[str]]]


class CallbackRefused(BatchgateError):
    """The callback URL may not be reached."""


class CallbackUnresolved(CallbackRefused):
    """The callback host did not resolve now (a DNS failure may pass): retried like a connection
    that failed, never given up at once (issue 40)."""


@dataclass(frozen=True, slots=True)
class AllowList:
    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()


def parse_allow(entries: Iterable[str]) -> AllowList:
    """`--callback-allow` entries: a network or address (`127.0.0.1`, `10.0.0.0/8`), or a host name."""
    networks: list[Network] = []
    hosts: set[str] = set()
    for entry in entries:
        text = entry.strip().strip("[]")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            if not text or "/" in text:
                raise CallbackRefused(
                    f"--callback-allow {entry!r}: not a network, address or host name"
                ) from None
            hosts.add(text.lower().rstrip("."))
    return AllowList(tuple(networks), frozenset(hosts))


def refusal(address: Address, allow: AllowList) -> str | None:
    """Why a callback may not connect to `address`, or None when it may (`addresses.refusal`)."""
    return addresses.refusal(address, allow.networks)


def parse_url(url: str) -> URL:
    """The callback URL, checked for its form: http(s), a host, no credentials."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        raise CallbackRefused(f"callback_url {url!r} is not a URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise CallbackRefused("callback_url must be an http:// or https:// URL with a host")
    if parsed.user is not None or parsed.password is not None:
        raise CallbackRefused("callback_url must not carry credentials")
    return parsed


def check_literal(url: str, allow: AllowList) -> None:
    """At creation: refuse a malformed URL, or one naming a refused address (names resolve later)."""
    parsed = parse_url(url)
    address = _literal(parsed.host or "")
    if address is not None and (why := refusal(address, allow)) is not None:
        raise CallbackRefused(f"callback_url host {parsed.host} is {why}")


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def system_lookup(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def resolve(host: str, port: int, allow: AllowList, lookup: Lookup = system_lookup) -> list[Address]:
    """The addresses the callback will connect to: resolved once, every one checked."""
    literal = _literal(host)
    if literal is not None:
        found = [literal]
    else:
        try:
            found = [ipaddress.ip_address(a.split("%", 1)[0]) for a in await lookup(host, port)]
        except OSError as exc:
            raise CallbackUnresolved(f"cannot resolve {host}: {exc.strerror or exc}") from None
        if not found:
            raise CallbackUnresolved(f"cannot resolve {host}")
        if host.lower().rstrip(".") in allow.hosts:
            return found
    for address in found:
        if (why := refusal(address, allow)) is not None:
            shown = host if literal is not None else f"{host} resolves to {address}, which"
            raise CallbackRefused(f"{shown} is {why}; not allow-listed")
    return found


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver for one delivery: the host resolves to the addresses already checked."""

    def __init__(self, host: str, addresses: list[Address]) -> None:
        self.host, self.addresses = host, addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != self.host:
            raise OSError(f"{host} was not checked by the callback guard")
        return [
            ResolveResult(
                hostname=host,
                host=str(a),
                port=port,
                family=socket.AF_INET6 if a.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for a in self.addresses
        ]

    async def close(self) -> None:
        return None
