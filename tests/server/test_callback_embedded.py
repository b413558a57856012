"""The callback guard classifies an IPv6 address that embeds an IPv4 address by what it reaches
(shared/PROTOCOLS.md, Webhooks): IPv4-mapped, SIIT, IPv4-compatible, NAT64 (well-known and
local-use), 6to4, Teredo, and the deprecated site-local range; the default refuses every one that
reaches a refused address, and the transition forms whatever they embed. Through the API, a job
asking for such a callback is a 400 naming `callback_url`, and nothing is stored."""

from __future__ import annotations

import ipaddress
import re

import httpx
import pytest

from batchgate.webhooks import guard

from .harness import ALPHA, Server
from .hooks import key_with_secret
from .jobs_client import requests_for

NOTHING = guard.AllowList()
# address -> what the refusal says (the embedded IPv4 address and its class, or the form)
REFUSED = {
    "::ffff:127.0.0.1": "IPv4-mapped form reaching 127.0.0.1: a loopback",
    "::ffff:0:10.1.2.3": "SIIT \\(IPv4-translated\\) form reaching 10.1.2.3: a private",
    "::ffff:0:8.8.8.8": "SIIT .* transition form",
    "::127.0.0.1": "IPv4-compatible form reaching 127.0.0.1: a loopback",
    "::169.254.169.254": "IPv4-compatible form reaching 169.254.169.254: a cloud metadata",
    "::8.8.8.8": "IPv4-compatible form .* transition form",
    "64:ff9b::127.0.0.1": "NAT64 form reaching 127.0.0.1: a loopback",
    "64:ff9b::a9fe:a9fe": "NAT64 form reaching 169.254.169.254: a cloud metadata",
    "64:ff9b::192.168.0.1": "NAT64 form reaching 192.168.0.1: a private",
    "64:ff9b:1:7f00:0:100::": "local-use NAT64 form reaching 127.0.0.1: a loopback",  # RFC 6052 /48
    "64:ff9b:1::10.0.0.1": "local-use NAT64 form reaching",  # a /96 inside it: refused either way
    "64:ff9b:1:808:8:800:808:808": "local-use NAT64 form .* transition form",  # 8.8.8.8 both ways
    "2002:7f00:1::": "6to4 form reaching 127.0.0.1: a loopback",
    "2002:a00:1::1": "6to4 form reaching 10.0.0.1: a private",
    "2002:6440:1::": "6to4 form reaching 100.64.0.1: a CGNAT",
    "2002:808:808::1": "6to4 form .* transition form",
    "2001:0:7f00:1::": "Teredo form reaching 127.0.0.1: a loopback",  # the server
    "2001:0:808:808::f5ff:fffe": "Teredo form reaching 10.0.0.1: a private",  # the client, inverted
    "2001:0:808:808::f7f7:f7f7": "Teredo form .* transition form",
    "fec0::1": "site-local",
    "fed0:1::5": "site-local",
}
PASSED = ["::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2606:4700::1111", "8.8.8.8"]


@pytest.mark.parametrize("address", sorted(REFUSED))
def test_an_address_embedding_ipv4_is_refused_by_what_it_reaches(address: str) -> None:
    why = guard.refusal(ipaddress.ip_address(address), NOTHING)
    assert why is not None, address
    assert re.search(REFUSED[address], why), (address, why)


@pytest.mark.parametrize("address", PASSED)
def test_a_form_reaching_a_public_address_passes(address: str) -> None:
    assert guard.refusal(ipaddress.ip_address(address), NOTHING) is None


@pytest.mark.parametrize("address", ["64:ff9b::7f00:1", "2002:7f00:1::"])
async def test_the_guard_refuses_them_when_resolving_too(address: str) -> None:
    with pytest.raises(guard.CallbackRefused, match=r"reaching 127\.0\.0\.1: a loopback address"):
        await guard.resolve(address, 80, NOTHING)

    async def lookup(host: str, port: int) -> list[str]:
        return [address]

    with pytest.raises(guard.CallbackRefused, match=f"hooks.example.com resolves to {address}"):
        await guard.resolve("hooks.example.com", 80, NOTHING, lookup)


def test_the_allow_list_admits_an_embedded_address_it_allows() -> None:
    allow = guard.parse_allow(["127.0.0.1", "2002::/16"])
    assert guard.refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allow) is None
    assert guard.refusal(ipaddress.ip_address("64:ff9b::127.0.0.1"), allow) is None
    assert guard.refusal(ipaddress.ip_address("2002:808:808::1"), allow) is None
    assert guard.refusal(ipaddress.ip_address("2002:a00:1::1"), allow) is None  # the 6to4 range is
    assert guard.refusal(ipaddress.ip_address("64:ff9b::10.0.0.1"), allow) is not None


@pytest.fixture(scope="module")
def hooked_key(server: Server) -> str:
    """One key with a webhook secret for the cases below (`keys create` is a CLI run): none of
    them may store a job, so its job list stays empty throughout."""
    key, _ = key_with_secret(server.root)
    return key


@pytest.mark.integration
@pytest.mark.parametrize("host", ["64:ff9b::7f00:1", "2002:a00:1::1", "fec0::1", "::7f00:1"])
def test_a_job_asking_for_such_a_callback_is_a_400_naming_the_field(
    hooked_key: str, server: Server, host: str
) -> None:
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {hooked_key}"}, timeout=30
    ) as http:
        body = {"requests": requests_for(ALPHA, 1, "hook"), "callback_url": f"http://[{host}]:8080/hook"}
        r = http.post("/jobs", json=body)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == "callback_url"
        assert "callback_url host" in error["message"]
        assert http.get("/jobs").json()["data"] == []  # nothing stored
