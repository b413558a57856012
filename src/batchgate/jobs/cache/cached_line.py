"""A cache hit's OUT line built straight from the entry's stored bytes: the hot path of a re-run
answered from the cache (a million hits, one line each). The bytes are those `format_success_line`
writes for the same hit (`tests/cache/test_cached_line.py` holds them equal); a hit whose task
carries metadata takes that general path instead."""

from __future__ import annotations

from typing import Any

import orjson

from batchgate.jobs.output.files import request_id_for

_OPEN = b'{"id":"'
_RESPONSE = b',"response":{"status_code":200,"request_id":null,"body":'
_PROVIDER = b'},"error":null,"provider":'
_USAGE = b',"attempts":0,"latency_ms":0.0,"usage":{"prompt_tokens":%d,"completion_tokens":%d,'
_TAIL = b'"total_tokens":%d,"cached_tokens":%d},"cached":true}'


def hit_head(data: bytes) -> tuple[list[Any], bytes]:
    """A stored entry's head `[prompt, completion, cached, cost, provider]` and its body's bytes
    (the layout `CacheEntry.dump` writes)."""
    head, _, body = data.partition(b"\n")
    return orjson.loads(head), body


def plain_hit_line(
    custom_id: str, body_json: bytes, prompt: object, completion: object, cached: object, provider: object
) -> bytes | None:
    """The OUT line of a hit without metadata (no newline), or None when a figure is not a plain
    int or the provider not a string or None (the general path then writes it)."""
    if not (type(prompt) is int and type(completion) is int and type(cached) is int):
        return None
    if provider is not None and type(provider) is not str:
        return None
    return b"".join((
        _OPEN, request_id_for(custom_id).encode(), b'","custom_id":', orjson.dumps(custom_id),
        _RESPONSE, body_json, _PROVIDER, orjson.dumps(provider),
        _USAGE % (prompt, completion), _TAIL % (prompt + completion, cached),
    ))  # fmt: skip
