"""Which quota store a run uses, from its name, and opening it.

    memory          this process alone (the pools' own buckets; the library's default)
    local           this machine: a SQLite ledger in the user's cache directory (`batchgate run`'s default)
    sqlite:PATH     this machine: the SQLite ledger at PATH
    redis://…       every process using the Redis server (rediss:// and unix:// too; needs the `redis` extra)

`resolve` turns a name into a `StoreSpec` at the edge (the config, the command line: where the
environment is read); `open_store` opens it, importing redis only for a Redis store. Nothing shown
to users carries a password.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from batchgate.clock import Clock
from batchgate.errors import QuotaStoreUnavailable
from batchgate.quota.store.protocol import QuotaStore
from batchgate.urls import without_password

StoreKind = Literal["memory", "sqlite", "redis"]
LEDGER_NAME = "quota-ledger.sqlite3"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
FORMS = "memory, local, sqlite:PATH or a redis:// URL"


@dataclass(frozen=True, slots=True)
class StoreSpec:
    kind: StoreKind
    target: str = ""  # the ledger's path or the Redis URL
    namespace: str | None = None  # Redis key prefix (None: the default)

    def describe(self) -> str:
        return without_password(self.target) if self.kind == "redis" else self.target or self.kind


def resolve(name: str, environ: Mapping[str, str], namespace: str | None = None) -> StoreSpec:
    """The store `name` means (ValueError naming the accepted forms if none)."""
    if name == "memory":
        return StoreSpec("memory")
    if name == "local":
        return StoreSpec("sqlite", str(default_ledger(environ)))
    if name.startswith("sqlite:") and len(name) > len("sqlite:"):
        return StoreSpec("sqlite", name[len("sqlite:") :])
    if name.startswith(_REDIS_SCHEMES):
        return StoreSpec("redis", name, namespace)
    raise ValueError(f"unknown quota store {without_password(name)!r}: use {FORMS}")


def default_ledger(environ: Mapping[str, str]) -> Path:
    """The machine's ledger: $XDG_CACHE_HOME/batchgate (else ~/.cache/batchgate; on Windows
    %LOCALAPPDATA%\\batchgate)."""
    base = environ.get("XDG_CACHE_HOME") or (environ.get("LOCALAPPDATA") if os.name == "nt" else None)
    root = Path(base) if base else Path(environ.get("HOME") or Path.home()) / ".cache"
    return root / "batchgate" / LEDGER_NAME


def open_store(spec: StoreSpec, clock: Clock) -> QuotaStore | None:
    """Open the store `spec` names; None for `memory` (each pool keeps its own buckets)."""
    if spec.kind == "memory":
        return None
    if spec.kind == "sqlite":
        from batchgate.quota.store.sqlite_store import SqliteQuotaStore  # noqa: PLC0415 — sqlite3 only when used

        return SqliteQuotaStore(Path(spec.target), clock)
    try:
        from batchgate.quota.store.redis_store import (  # noqa: PLC0415 — redis only for a Redis store
            DEFAULT_NAMESPACE,
            RedisQuotaStore,
        )
    except ImportError as exc:
        raise QuotaStoreUnavailable(
            f"the quota store {spec.describe()} needs the redis client: pip install 'batchgate[redis]'"
        ) from exc
    return RedisQuotaStore(spec.target, namespace=spec.namespace or DEFAULT_NAMESPACE)
