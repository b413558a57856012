"""The official `anthropic` SDK's Message Batches workflow against `batchgate serve`: create with
inline requests, poll, read the results; requests spread over the providers their
`params.model` routes name; a key sees only its own batches; cancel ends with `canceled` results."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest
from anthropic import Anthropic
from anthropic.types.messages import MessageBatch

from batchgate.emulator import EmulatorThread
from waiting import poll

from .harness import (
    ALPHA,
    DENIED,
    GAMMA,
    SLOW,
    SPREAD,
    Server,
)

pytestmark = pytest.mark.integration


def client(server: Server, key: str) -> Anthropic:
    return Anthropic(base_url=server.url, api_key=key, max_retries=0)


def request(i: int, model: str) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"Say hello ({i}, {model})"}]
    return {"custom_id": f"r-{i}", "params": {"model": model, "max_tokens": 5, "messages": messages}}


def wait_ended(c: Anthropic, batch_id: str) -> MessageBatch:
    return poll(
        lambda: c.messages.batches.retrieve(batch_id),
        lambda b: b.processing_status == "ended",
        lambda b: f"batch {batch_id}: {b.processing_status}",
    )


def completed_by_provider(emu: EmulatorThread) -> dict[str, int]:
    return {name: int(p["completed"]) for name, p in emu.stats()["providers"].items()}


def test_the_anthropic_sdk_runs_message_batches_over_two_providers(
    server: Server, keys: dict[str, str], emu: EmulatorThread
) -> None:
    c = client(server, keys["a"])
    before = completed_by_provider(emu)
    requests = [request(i, (ALPHA, GAMMA, SPREAD)[i % 3]) for i in range(9)]
    refused = request(99, DENIED)  # its provider answers 401: an errored result
    created = c.messages.batches.create(requests=[*requests, refused])  # type: ignore[list-item]
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 10
    batch = wait_ended(c, created.id)
    counts = batch.request_counts
    assert (counts.succeeded, counts.errored, counts.canceled, counts.processing) == (9, 1, 0, 0)
    assert batch.ended_at is not None
    assert batch.results_url is not None
    results = {r.custom_id: r.result for r in c.messages.batches.results(batch.id)}
    assert sorted(results) == sorted([*(r["custom_id"] for r in requests), "r-99"])
    for cid, result in results.items():
        if cid == "r-99":
            assert result.type == "errored"
            assert result.error.error.message
        else:
            assert result.type == "succeeded"
            assert result.message.content[0].type == "text"
            assert result.message.content[0].text
            assert result.message.usage.output_tokens > 0
    after = completed_by_provider(emu)
    assert {"alpha", "gamma"} <= {name for name in after if after[name] > before.get(name, 0)}


def test_a_key_sees_only_its_own_message_batches(server: Server, keys: dict[str, str]) -> None:
    a, b = client(server, keys["a"]), client(server, keys["b"])
    batch = a.messages.batches.create(requests=[request(0, GAMMA)])  # type: ignore[list-item]
    with pytest.raises(anthropic.NotFoundError):
        b.messages.batches.retrieve(batch.id)
    with pytest.raises(anthropic.NotFoundError):
        b.messages.batches.cancel(batch.id)
    assert batch.id not in [x.id for x in b.messages.batches.list()]
    assert batch.id in [x.id for x in a.messages.batches.list()]
    wait_ended(a, batch.id)
    with pytest.raises(anthropic.NotFoundError):
        b.messages.batches.results(batch.id)
    with pytest.raises(anthropic.AuthenticationError):
        client(server, "bgk-wrong").messages.batches.list()


def test_cancel_ends_with_canceled_results(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    batch = c.messages.batches.create(requests=[request(i, SLOW) for i in range(6)])  # type: ignore[misc]
    assert c.messages.batches.cancel(batch.id).processing_status in ("canceling", "ended")
    done = wait_ended(c, batch.id)
    assert done.request_counts.canceled > 0
    assert done.cancel_initiated_at is not None
    kinds = [r.result.type for r in c.messages.batches.results(batch.id)]
    assert len(kinds) == 6
    assert "canceled" in kinds


def test_bad_requests_are_refused_at_once(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    for requests in ([], [request(0, "no-such-route")], [request(0, ALPHA), request(0, ALPHA)]):
        with pytest.raises(anthropic.BadRequestError):
            c.messages.batches.create(requests=requests)  # type: ignore[arg-type]
    with pytest.raises(anthropic.NotFoundError):
        c.messages.batches.retrieve("msgbatch_nope")


def test_each_api_sees_only_its_own_kind_of_batch(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    batch = c.messages.batches.create(requests=[request(0, GAMMA)])  # type: ignore[list-item]
    r = httpx.get(f"{server.base_url}/batches/{batch.id}", headers={"Authorization": f"Bearer {keys['a']}"})
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert wait_ended(c, batch.id).request_counts.succeeded == 1
