"""The cache store conformance suite: memory, SQLite and Redis answer alike — bulk reads and
writes, replacement, another handle seeing the same entries, prune by age, clear, and (for the
stores that bound themselves) LRU eviction that keeps the bytes under the bound."""

from __future__ import annotations

from batchgate.cache.protocol import LOOKUP_CHUNK

from .conftest import BOUND, Backend


async def test_get_many_answers_present_keys_only(backend: Backend) -> None:
    store = backend.store
    await store.put_many({"a": b"1", "b": b"22"})
    assert await store.get_many(["a", "x", "b"]) == {"a": b"1", "b": b"22"}
    assert await store.get_many([]) == {}
    assert await store.get_many(["nope"]) == {}


async def test_put_replaces_and_counts_bytes(backend: Backend) -> None:
    store = backend.store
    await store.put_many({"a": b"12345", "b": b"1"})
    await store.put_many({"a": b"12"})
    assert await store.get_many(["a"]) == {"a": b"12"}
    stats = await store.stats()
    assert (stats.entries, stats.bytes) == (2, 3)


async def test_lookups_larger_than_a_chunk(backend: Backend) -> None:
    store = backend.store
    keys = [f"k{i}" for i in range(LOOKUP_CHUNK + 10)]
    await store.put_many(dict.fromkeys(keys[::2], b""))  # no bytes: under any bound
    found = await store.get_many(keys)
    assert sorted(found) == sorted(keys[::2])


async def test_another_handle_sees_the_same_entries(backend: Backend) -> None:
    await backend.store.put_many({"shared": b"yes"})
    other = await backend.reopen()
    assert await other.get_many(["shared"]) == {"shared": b"yes"}


async def test_prune_drops_only_older_entries(backend: Backend) -> None:
    store = backend.store
    await store.put_many({"old": b"o"})
    backend.wall.now += 31 * 86400
    await store.put_many({"new": b"n"})
    assert await store.prune(30 * 86400) == 1
    assert await store.get_many(["old", "new"]) == {"new": b"n"}
    assert (await store.stats()).entries == 1


async def test_clear_drops_everything(backend: Backend) -> None:
    store = backend.store
    await store.put_many({"a": b"1", "b": b"2"})
    assert await store.clear() == 2
    assert await store.get_many(["a", "b"]) == {}
    stats = await store.stats()
    assert (stats.entries, stats.bytes) == (0, 0)


async def test_eviction_keeps_bytes_under_the_bound_least_recently_used_first(backend: Backend) -> None:
    store = backend.store
    if not backend.bounded:
        assert (await store.stats()).max_bytes is None  # the server's maxmemory policy bounds it
        return
    await store.put_many({"first": b"x" * 400, "second": b"y" * 400})
    backend.wall.now += 3600  # later than the touch granularity: the read marks `first` used
    assert await store.get_many(["first"]) == {"first": b"x" * 400}
    backend.wall.now += 1
    await store.put_many({"third": b"z" * 400})  # 1,200 bytes > 1,000: the least recently used goes
    found = await store.get_many(["first", "second", "third"])
    assert sorted(found) == ["first", "third"]
    stats = await store.stats()
    assert stats.bytes <= BOUND
    assert stats.max_bytes == BOUND
    for i in range(50):  # many writes: never above the bound
        await store.put_many({f"n{i}": b"q" * 90})
        assert (await store.stats()).bytes <= BOUND


async def test_an_entry_bigger_than_the_bound_is_not_kept(backend: Backend) -> None:
    if not backend.bounded:
        return
    await backend.store.put_many({"huge": b"h" * (BOUND + 1)})
    assert await backend.store.get_many(["huge"]) == {}
    assert (await backend.store.stats()).bytes == 0
