"""What a callback address reaches, and why the guard refuses it (`refusal`).

IPv4 addresses are refused by the networks of `_REFUSED` (loopback, private, link-local, CGNAT,
...) and anything else not globally routable. An IPv6 address that embeds an IPv4 address reaches
that IPv4 address, so it is classified by it (shared/PROTOCOLS.md, Webhooks: "classify by the
embedded IPv4 address"): IPv4-mapped `::ffff:0:0/96`, SIIT `::ffff:0:0:0/96`, IPv4-compatible
`::/96`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16` and Teredo `2001::/32` (its
server and its de-obfuscated client). An embedded address the guard refuses refuses the IPv6 one.
Beyond that, only the forms a host really uses to reach a public IPv4 address pass by default
(IPv4-mapped, which is an IPv4 connection, and well-known NAT64, which DNS64 answers on IPv6-only
networks); the transition forms (SIIT, IPv4-compatible, local-use NAT64, 6to4, Teredo) and the
deprecated site-local `fec0::/10` are refused whatever they embed, unless allow-listed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address

_REFUSED: tuple[tuple[str, str], ...] = (
    ("169.254.169.254/32", "a cloud metadata address"),
    ("fd00:ec2::254/128", "a cloud metadata address"),
    ("0.0.0.0/8", "an unspecified address"),
    ("::/128", "an unspecified address"),
    ("127.0.0.0/8", "a loopback address"),
    ("::1/128", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("fc00::/7", "a private address"),
    ("fec0::/10", "a site-local address (deprecated)"),
    ("169.254.0.0/16", "a link-local address"),
    ("fe80::/10", "a link-local address"),
    ("100.64.0.0/10", "a CGNAT address"),
    ("224.0.0.0/4", "a multicast address"),
    ("255.255.255.255/32", "a broadcast address"),
    ("ff00::/8", "a multicast address"),
)
_NETWORKS = tuple((ipaddress.ip_network(net), why) for net, why in _REFUSED)


def _low32(a: V6) -> list[V4]:
    return [V4(int(a) & 0xFFFFFFFF)]


def _nat64_48(a: V6) -> list[V4]:
    """RFC 6052 with a /48 prefix: bits 48-63 and 72-87 (skipping the `u` octet); an operator may
    also use a /96 inside it, so the low 32 bits are checked too."""
    n = int(a)
    high, low = (n >> 64) & 0xFFFF, (n >> 40) & 0xFFFF
    return [V4((high << 16) | low), *_low32(a)]


def _sixtofour(a: V6) -> list[V4]:
    return [V4((int(a) >> 80) & 0xFFFFFFFF)]


def _teredo(a: V6) -> list[V4]:
    """The Teredo server (bits 32-63) and the client (the low 32 bits, inverted)."""
    n = int(a)
    return [V4((n >> 64) & 0xFFFFFFFF), V4(~n & 0xFFFFFFFF)]


@dataclass(frozen=True, slots=True)
class Form:
    network: ipaddress.IPv6Network
    name: str
    embedded: Callable[[V6], list[V4]]
    passes: bool  # reaches a public embedded address without the allow-list


def _form(net: str, name: str, embedded: Callable[[V6], list[V4]], passes: bool = False) -> Form:
    return Form(ipaddress.IPv6Network(net), name, embedded, passes)


FORMS = (
    _form("::ffff:0:0/96", "IPv4-mapped", _low32, passes=True),
    _form("::ffff:0:0:0/96", "SIIT (IPv4-translated)", _low32),
    _form("64:ff9b::/96", "NAT64", _low32, passes=True),
    _form("64:ff9b:1::/48", "local-use NAT64", _nat64_48),
    _form("2002::/16", "6to4", _sixtofour),
    _form("2001::/32", "Teredo", _teredo),
    _form("::/96", "IPv4-compatible", _low32),  # after ::/128 and ::1 (see `refusal`)
)


def _allowed(address: Address, networks: Iterable[Network]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def _plain_refusal(address: Address) -> str | None:
    for net, why in _NETWORKS:
        if address.version == net.version and address in net:
            return why
    return None


def _form_of(address: V6) -> Form | None:
    return next((f for f in FORMS if address in f.network), None)


def refusal(address: Address, networks: tuple[Network, ...] = ()) -> str | None:
    """Why a callback may not connect to `address` (None: it may), `networks` being allowed."""
    if _allowed(address, networks):
        return None
    if (why := _plain_refusal(address)) is not None:
        return why
    form = _form_of(address) if isinstance(address, V6) else None
    if form is None or not isinstance(address, V6):
        return None if address.is_global else "not a public address"
    inner = form.embedded(address)
    for embedded in inner:
        if (why := refusal(embedded, networks)) is not None:
            return f"an address of the {form.name} form reaching {embedded}: {why}"
    if form.passes or all(_allowed(embedded, networks) for embedded in inner):
        return None
    return f"an address of the {form.name} form (an IPv6 transition form, refused unless allow-listed)"
