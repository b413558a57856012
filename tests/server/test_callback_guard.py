"""The callbacks' SSRF guard: the addresses it refuses (resolved by the system or by a lookup the
test maps), the allow-list, delivery to the address it checked (never a second lookup), and the
service refusing a plainly refused `callback_url` at creation and recording a refused delivery."""

from __future__ import annotations

import ipaddress

import openai
import pytest

from batchgate.config.schema import Secret
from batchgate.webhooks import guard, signing
from batchgate.webhooks.sender import send

from .harness import ALPHA, Server, batch_line, client, upload, wait_ended
from .hooks import Receiver, key_with_secret, receiving, wait_settled

NOTHING = guard.AllowList()
REFUSED = {
    "127.0.0.1": "loopback",
    "10.0.0.1": "private",
    "172.16.5.4": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "cloud metadata",
    "169.254.10.10": "link-local",
    "100.64.0.1": "CGNAT",
    "0.0.0.0": "unspecified",
    "224.0.0.1": "multicast",
    "::1": "loopback",
    "fd00:ec2::254": "cloud metadata",
    "fc00::5": "private",
    "fe80::1": "link-local",
    "::ffff:10.0.0.1": "private",
    "192.0.2.10": "not a public address",
}


def _lookup(table: dict[str, list[str]]) -> guard.Lookup:
    async def lookup(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"{host} is not mapped")
        return table[host]

    return lookup


@pytest.mark.parametrize("address", sorted(REFUSED))
async def test_the_guard_refuses_addresses_that_are_not_public(address: str) -> None:
    with pytest.raises(guard.CallbackRefused, match=REFUSED[address]):
        await guard.resolve(address, 80, NOTHING)


async def test_a_public_address_passes() -> None:
    assert await guard.resolve("93.184.216.34", 443, NOTHING) == [ipaddress.ip_address("93.184.216.34")]


async def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    lookup = _lookup({"hooks.example.com": ["93.184.216.34", "10.1.2.3"]})
    with pytest.raises(
        guard.CallbackRefused, match=r"hooks.example.com resolves to 10.1.2.3, which is a private"
    ):
        await guard.resolve("hooks.example.com", 443, NOTHING, lookup)


async def test_localhost_resolved_by_the_system_is_refused() -> None:
    with pytest.raises(guard.CallbackRefused, match="loopback"):
        await guard.resolve("localhost", 80, NOTHING)


async def test_the_allow_list_admits_its_networks_and_hosts_only() -> None:
    allow = guard.parse_allow(["127.0.0.1", "10.20.0.0/16", "Hooks.Internal"])
    assert await guard.resolve("127.0.0.1", 80, allow) == [ipaddress.ip_address("127.0.0.1")]
    assert await guard.resolve("10.20.3.4", 80, allow) == [ipaddress.ip_address("10.20.3.4")]
    internal = _lookup({"hooks.internal": ["10.9.9.9"], "other.internal": ["10.9.9.9"]})
    assert await guard.resolve("hooks.internal", 80, allow, internal) == [ipaddress.ip_address("10.9.9.9")]
    for refused in ("10.0.0.1", "other.internal", "::1"):
        with pytest.raises(guard.CallbackRefused):
            await guard.resolve(refused, 80, allow, internal)


def test_malformed_allow_list_entries_and_urls_are_refused() -> None:
    with pytest.raises(guard.CallbackRefused, match="--callback-allow"):
        guard.parse_allow(["10.0.0.0/33"])
    for url in ("ftp://example.com/", "http:///nohost", "https://user:pw@example.com/", "not a url"):
        with pytest.raises(guard.CallbackRefused):
            guard.check_literal(url, NOTHING)


async def _send(receiver: Receiver, host: str, lookup: guard.Lookup) -> str:
    body = signing.event_body("evt_1", "batch.completed", 1, "batch_1")
    url = f"http://{host}:{receiver.port}/hook"
    allow = guard.parse_allow(["127.0.0.1"])
    secret = Secret(signing.new_secret())
    attempt = await send(url, "evt_1", body, secret, 1, allow=allow, timeout_s=5, lookup=lookup)
    return attempt.outcome if attempt.reason is None else f"{attempt.outcome}: {attempt.reason}"


async def test_delivery_connects_to_the_address_the_guard_checked() -> None:
    """The name resolves once, through the guard's lookup: the connection goes to that address (a
    name no DNS knows), and a rebinding lookup that answers a refused address on its second call
    never gets that call."""
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.0.0.1"]

    with receiving(200) as receiver:
        assert await _send(receiver, "hooks.invalid", rebinding) == "delivered"
        [delivery] = receiver.wait(1)
    assert calls == ["hooks.invalid"]
    assert delivery.headers["host"] == f"hooks.invalid:{receiver.port}"
    with receiving(200) as receiver:
        refused = await _send(receiver, "hooks.invalid", _lookup({"hooks.invalid": ["10.0.0.1"]}))
        assert receiver.deliveries == []
    assert (
        refused == "refused: hooks.invalid resolves to 10.0.0.1, which is a private address; not allow-listed"
    )


@pytest.mark.slow  # a `batchgate keys create` run each
@pytest.mark.integration
@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "[::1]"])
def test_the_service_refuses_a_refused_callback_url_at_creation(server: Server, host: str) -> None:
    key, _ = key_with_secret(server.root)
    c = client(server, key)
    file_id = upload(c, [batch_line(0, ALPHA)])
    with pytest.raises(openai.BadRequestError, match="callback_url host") as refused:
        c.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"callback_url": f"http://{host}:8080/hook"},
        )
    assert refused.value.code == "invalid_callback_url"


@pytest.mark.integration
def test_a_key_without_a_webhook_secret_cannot_ask_for_callbacks(server: Server) -> None:
    c = client(server, server.keys_create(secret=False))  # a key made before keys had secrets
    file_id = upload(c, [batch_line(0, ALPHA)])
    with pytest.raises(openai.BadRequestError, match="no webhook secret"):
        c.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"callback_url": "https://hooks.example.com/batch"},
        )


@pytest.mark.integration
def test_a_name_resolving_to_loopback_is_refused_when_delivering(server: Server) -> None:
    """The service without an allow-list: `localhost` passes creation (names resolve when
    delivering), then the delivery is refused and recorded with its reason; nothing is sent."""
    key, _ = key_with_secret(server.root)
    c = client(server, key)
    with receiving(200) as receiver:
        batch = c.batches.create(
            input_file_id=upload(c, [batch_line(0, ALPHA)]),
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"callback_url": f"http://localhost:{receiver.port}/hook"},
        )
        assert wait_ended(c, batch.id).status == "completed"
        event = wait_settled(server.root, batch.id)
        assert receiver.deliveries == []
    assert (event.state, event.attempts) == ("failed", 1)
    assert event.last_error is not None
    assert "localhost resolves to" in event.last_error
    assert "loopback address; not allow-listed" in event.last_error


async def test_a_name_that_does_not_resolve_now_is_retried_not_given_up() -> None:
    """A temporary DNS failure at delivery (issue 40): `unreachable`, retried on the schedule as a
    connection that failed — the README promises retries for 72 h — not `refused` for good."""

    async def failing(host: str, port: int) -> list[str]:
        raise OSError(-3, "Temporary failure in name resolution")

    body, secret = signing.event_body("evt_1", "batch.completed", 1, "batch_1"), Secret("whsec_dGVzdA==")
    attempt = await send("https://hooks.example.com/h", "evt_1", body, secret, 1, allow=NOTHING, timeout_s=5,
                         lookup=failing)  # fmt: skip
    assert (attempt.outcome, attempt.final) == ("unreachable", False)
    assert "cannot resolve hooks.example.com" in (attempt.reason or "")
