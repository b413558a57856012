"""A request's cache key and whether its answer may be reused.

The key hashes (scope, provider kind, model, endpoint, canonical body): the body without
batchgate's own fields (`custom_id`, the task's metadata, the endpoint carried under its own key),
its keys sorted, no whitespace, so two lines that differ only there share one answer. `scope` keeps
tenants of one server apart (each tenant's keys hash differently).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal

import orjson

from batchgate.endpoints import ENDPOINT_KEY, endpoint_of
from batchgate.request_fields import OWN_FIELDS

CacheMode = Literal["deterministic", "always"]
_DROP = OWN_FIELDS | {ENDPOINT_KEY}


def canonical_body(body: Mapping[str, object]) -> bytes:
    """The body as the cache sees it: batchgate's own fields out, keys sorted, compact."""
    if _DROP.isdisjoint(body):
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return orjson.dumps({k: v for k, v in body.items() if k not in _DROP}, option=orjson.OPT_SORT_KEYS)


def cache_key(
    body: Mapping[str, object], provider_kind: str, scope: str = "", endpoint: str | None = None
) -> str:
    """The hex key of `body` sent to a provider of `provider_kind` (its model is in the body)."""
    endpoint = endpoint or endpoint_of(body)
    head = f"{scope}\x00{provider_kind}\x00{body.get('model')}\x00{endpoint}\x00".encode()
    return hashlib.blake2b(head + canonical_body(body), digest_size=20).hexdigest()


def reusable(body: Mapping[str, object], mode: CacheMode) -> bool:
    """Whether an answer to `body` may stand for another (issue 43): `temperature: 0`, or a
    `seed` given, or `n` of 1 (or absent) under `cache: always`; an embedding is always reusable."""
    if body.get("temperature") == 0 or body.get("seed") is not None:
        return True
    if endpoint_of(body) == "embeddings":
        return True
    return mode == "always" and body.get("n", 1) == 1
