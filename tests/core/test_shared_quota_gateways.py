"""Two gateways (standing in for two processes) on one provider key, sharing its quota through
the machine's SQLite ledger or Redis, over real HTTP against the emulator: both pass through
the shared store and wait for each other; keys and passwords never reach a quota's name or an
error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from batchgate.config import config_from_dict
from batchgate.errors import ConfigError, QuotaStoreUnavailable
from batchgate.gateway import Gateway
from batchgate.quota.store.location import StoreSpec, resolve
from batchgate.quota.store.protocol import Settle, Take, quota_id
from batchgate.quota.store.redis_store import RedisQuotaStore
from redisutil import BASE_URL, drop_namespace, free_port, fresh_namespace, require_redis

from .conftest import chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration

Start = Callable[..., Any]
RPM = 1200  # 20 requests/s, declared as the key's limit by both gateways


async def _two_gateways(emulator: Start, spec: StoreSpec) -> list[Gateway]:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(
        emu, providers, [{"model": "m", "targets": ["alpha"]}], limits={"alpha": {"rpm": RPM}}
    )
    return [Gateway(cfg, quota_store=spec), Gateway(cfg, quota_store=spec)]


async def _run_both(gateways: list[Gateway]) -> None:
    waits: list[int] = []

    async def one(gw: Gateway, tag: str) -> None:
        async with gw:
            results = await gw.abatch([chat(f"echo {tag} {i}") for i in range(15)])
            assert all(r.ok for r in results)
            shared = gw.runtimes["alpha"].pool.shared
            assert shared is not None
            assert shared.takes >= 15  # every request passed the shared store
            waits.append(shared.waits)

    await asyncio.gather(*(one(gw, str(n)) for n, gw in enumerate(gateways)))
    assert sum(waits) > 0  # they waited for each other's sends


@pytest.mark.slow
async def test_two_gateways_share_a_key_through_the_machine_ledger(emulator: Start, tmp_path: Path) -> None:
    await _run_both(await _two_gateways(emulator, StoreSpec("sqlite", str(tmp_path / "ledger.sqlite3"))))


@pytest.mark.slow
@pytest.mark.redis
async def test_two_gateways_share_a_key_through_redis(emulator: Start) -> None:
    require_redis()
    namespace = fresh_namespace()
    try:
        await _run_both(await _two_gateways(emulator, StoreSpec("redis", BASE_URL, namespace)))
    finally:
        drop_namespace(namespace)


def test_a_quota_is_named_by_url_and_a_keyed_hash_never_the_key() -> None:
    one = quota_id("https://api.openai.com/v1/", "sk-secret-one")
    assert "sk-secret-one" not in one
    assert one.startswith("https://api.openai.com/v1#")
    assert one == quota_id("https://api.openai.com/v1", "sk-secret-one")
    assert one != quota_id("https://api.openai.com/v1", "sk-secret-two")
    assert one != quota_id("https://other.example/v1", "sk-secret-one")


def test_store_names_resolve_at_the_edge() -> None:
    env = {"XDG_CACHE_HOME": "/cache", "HOME": "/home/u"}
    assert resolve("memory", env) == StoreSpec("memory")
    assert resolve("local", env) == StoreSpec("sqlite", "/cache/batchgate/quota-ledger.sqlite3")
    assert resolve("local", {"HOME": "/home/u"}).target == "/home/u/.cache/batchgate/quota-ledger.sqlite3"
    assert resolve("sqlite:/tmp/l.db", env) == StoreSpec("sqlite", "/tmp/l.db")
    assert resolve("redis://:pw@h:6379/0", env, "ns:") == StoreSpec("redis", "redis://:pw@h:6379/0", "ns:")
    assert resolve("redis://:pw@h:6379/0", env).describe() == "redis://h:6379/0"
    with pytest.raises(ValueError, match="unknown quota store 'redis-ish'"):
        resolve("redis-ish", env)


def test_the_config_names_a_bad_quota_store_by_its_key() -> None:
    base = {
        "providers": [{"name": "a", "kind": "openai", "base_url": "http://x"}],
        "routes": [{"model": "m", "targets": ["a"]}],
    }
    good = config_from_dict({**base, "quota": {"store": "redis://h/0", "namespace": "n:"}}, environ={})
    assert good.quota.store == StoreSpec("redis", "redis://h/0", "n:")
    assert config_from_dict(base, environ={}).quota.store is None
    with pytest.raises(ConfigError, match=r"quota\.store: unknown quota store"):
        config_from_dict({**base, "quota": {"store": "rdis://h"}}, environ={})
    with pytest.raises(ConfigError, match=r"quota\.namespace: needs a redis:// store"):
        config_from_dict({**base, "quota": {"namespace": "n:"}}, environ={})


async def test_an_unreachable_redis_is_a_clear_error_without_its_password() -> None:
    store = RedisQuotaStore(f"redis://:hunter2@127.0.0.1:{free_port()}/0", namespace=fresh_namespace())
    try:
        with pytest.raises(QuotaStoreUnavailable) as caught:
            await store.apply("q", {}, Take("k", {}), Settle())
    finally:
        await store.close()
    assert "unreachable" in caught.value.message
    assert "never falls back to a per-process limit" in caught.value.message
    assert "hunter2" not in caught.value.message
    assert "redis://127.0.0.1:" in caught.value.message


async def test_the_machine_ledger_never_holds_the_api_key(emulator: Start, tmp_path: Path) -> None:
    key = "sk-live-never-in-the-ledger-0123456789"
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = config_from_dict(
        {
            "providers": [
                {
                    "name": "alpha",
                    "kind": "openai",
                    "base_url": emu.base_url("alpha"),
                    "api_key": key,
                    "limits": {"rpm": RPM},
                }
            ],
            "routes": [{"model": "m", "targets": ["alpha"]}],
        },
        environ={},
    )
    ledger = tmp_path / "ledger" / "quota.sqlite3"
    async with Gateway(cfg, quota_store=StoreSpec("sqlite", str(ledger))) as gw:
        results = await gw.abatch([chat(f"echo {i}") for i in range(3)])
    assert all(r.ok for r in results)
    written = b"".join(path.read_bytes() for path in ledger.parent.iterdir())
    assert quota_id(emu.base_url("alpha"), key, ["m"]).encode() in written  # the quota is there ...
    assert key.encode() not in written  # ... named without its key


async def test_a_gateway_whose_quotas_nobody_can_share_opens_no_ledger(
    emulator: Start, tmp_path: Path
) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    unlimited = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}], limits={"alpha": {}})
    ledger = tmp_path / "ledger.sqlite3"
    async with Gateway(unlimited, quota_store=StoreSpec("sqlite", str(ledger))) as gw:
        assert (await gw.arun(chat("echo"))).ok
        assert gw.runtimes["alpha"].pool.shared is None
    assert not ledger.exists()


async def test_two_models_on_one_key_are_two_quotas_in_the_machine_ledger(
    emulator: Start, tmp_path: Path
) -> None:
    """Two provider entries with the same URL and key but different models: OpenAI limits each
    model apart, so the ledger keeps a quota for each (named by the model scope), never one."""
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    entry = {"kind": "openai", "base_url": emu.base_url("alpha"), "api_key": "sk-one-key"}
    cfg = config_from_dict(
        {
            "providers": [
                {**entry, "name": "fast", "limits": {"rpm": RPM}},
                {**entry, "name": "slow", "limits": {"rpm": RPM // 4}},
            ],
            "routes": [
                {"model": "small", "targets": ["fast"]},
                {"model": "large", "targets": ["slow:large-2"]},
            ],
        },
        environ={},
    )
    ledger = tmp_path / "quota.sqlite3"
    async with Gateway(cfg, quota_store=StoreSpec("sqlite", str(ledger))) as gw:
        results = await gw.abatch([chat("echo", model=m) for m in ("small", "large")])
        quotas = {name: gw.runtimes[name].pool.shared for name in ("fast", "slow")}
    assert all(r.ok for r in results)
    assert quotas["fast"] is not None
    assert quotas["slow"] is not None
    assert quotas["fast"].quota == quota_id(emu.base_url("alpha"), "sk-one-key", ["small"])
    assert quotas["slow"].quota == quota_id(emu.base_url("alpha"), "sk-one-key", ["large-2"])
    assert quotas["fast"].quota != quotas["slow"].quota


async def test_a_models_map_is_a_quota_per_model_on_one_entry(emulator: Start, tmp_path: Path) -> None:
    """One provider entry with `models:` (OpenAI limits each model apart; "a,b" is a pool two
    models share): each route reaches its model's quota, each quota its own row in the ledger
    (named by the models it holds), and the entry's URL — given by the entry's name — serves all."""
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    entry = {"name": "key", "kind": "openai", "base_url": "http://127.0.0.1:9", "api_key": "sk-one-key"}
    models = {"small": {"rpm": RPM}, "large,large-2": {"rpm": RPM // 4}}
    cfg = config_from_dict(
        {
            "providers": [{**entry, "models": models}],
            "routes": [
                {"model": "small", "targets": ["key"]},
                {"model": "large", "targets": ["key:large-2"]},
            ],
        },
        environ={},
    )
    ledger = tmp_path / "quota.sqlite3"
    url = emu.base_url("alpha")
    async with Gateway(cfg, base_urls={"key": url}, quota_store=StoreSpec("sqlite", str(ledger))) as gw:
        results = await gw.abatch([chat("echo", model=m) for m in ("small", "large", "small")])
        assert set(gw.runtimes) == {"key/small", "key/large,large-2"}
        asked = {name: rt.recorder.requests for name, rt in gw.runtimes.items()}
        quotas = {name: rt.pool.shared for name, rt in gw.runtimes.items()}
    assert all(r.ok for r in results)
    assert asked == {"key/small": 2, "key/large,large-2": 1}
    small, large = quotas["key/small"], quotas["key/large,large-2"]
    assert small is not None
    assert large is not None
    assert small.quota == quota_id(url, "sk-one-key", ["small"])
    assert large.quota == quota_id(url, "sk-one-key", ["large", "large-2"])
