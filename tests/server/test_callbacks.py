"""Callbacks when a batch ends, over real sockets: `batchgate serve` (callbacks to 127.0.0.1
allow-listed, retries 0.3 s apart) posts Standard Webhooks to a receiver in the test process; the
official `openai` SDK verifies them with the key's secret from `batchgate keys create`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import InvalidWebhookSignatureError, OpenAI
from openai.types.webhooks import (
    BatchCancelledWebhookEvent,
    BatchCompletedWebhookEvent,
    BatchExpiredWebhookEvent,
    BatchFailedWebhookEvent,
)

from batchgate.emulator import EmulatorThread

from .harness import ALPHA, LAG, Server, batch_line, client, gateway_config, running, upload, wait_ended
from .hooks import Delivery, events_of, key_with_secret, keys_cli, make_key, receiving, wait_settled
from .jobs_client import JobsClient, requests_for

pytestmark = pytest.mark.integration
BATCH_EVENTS = (
    BatchCompletedWebhookEvent,
    BatchFailedWebhookEvent,
    BatchCancelledWebhookEvent,
    BatchExpiredWebhookEvent,
)


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("hooked")
    config = gateway_config(root / "gateway.yaml", emu)
    allow = ("--callback-allow", "127.0.0.1", "--callback-retry-delays", "0.3")
    with running(root, config, *allow) as s:
        yield s


@pytest.fixture(scope="module")
def owner(hooked: Server) -> tuple[str, str]:
    return key_with_secret(hooked.root)


def _batch(server: Server, key: str, url: str, model: str = ALPHA, lines: int = 2) -> str:
    c = client(server, key)
    file_id = upload(c, [batch_line(i, model) for i in range(lines)])
    batch = c.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"callback_url": url, "team": "search"},
    )
    return batch.id


def _verified(d: Delivery, secret: str) -> tuple[str, str]:
    """The event's type and batch id, once the openai SDK verified the signature."""
    event = OpenAI(api_key="unused", webhook_secret=secret).webhooks.unwrap(d.body, d.headers)
    assert isinstance(event, BATCH_EVENTS)
    assert event.object == "event"
    assert event.id == d.headers["webhook-id"]
    return event.type, event.data.id


@pytest.mark.slow  # two `keys create` runs and a batch to its end
def test_a_completed_batch_calls_back_and_the_openai_sdk_verifies_the_signature(
    hooked: Server, owner: tuple[str, str]
) -> None:
    key, secret = owner
    with receiving(200) as receiver:
        batch_id = _batch(hooked, key, receiver.url)
        done = wait_ended(client(hooked, key), batch_id)
        [delivery] = receiver.wait(1)
        assert wait_settled(hooked.root, batch_id).state == "delivered"
    assert done.status == "completed"
    assert _verified(delivery, secret) == ("batch.completed", batch_id)
    other = key_with_secret(hooked.root)[1]
    with pytest.raises(InvalidWebhookSignatureError):
        _verified(delivery, other)
    assert secret not in hooked.log.read_text()
    assert "receiver-own-token" not in hooked.log.read_text()


@pytest.mark.slow
def test_a_receiver_answering_500_gets_the_same_event_again(hooked: Server, owner: tuple[str, str]) -> None:
    key, secret = owner
    with receiving(500, 500, 200) as receiver:
        batch_id = _batch(hooked, key, receiver.url)
        first, second, third = receiver.wait(3)
        event = wait_settled(hooked.root, batch_id)
    ids = {d.headers["webhook-id"] for d in (first, second, third)}
    assert ids == {event.id}
    assert first.body == second.body == third.body
    assert [_verified(d, secret) for d in (first, third)] == [("batch.completed", batch_id)] * 2
    assert (event.state, event.attempts, event.last_error) == ("delivered", 3, None)


@pytest.mark.slow
def test_a_failed_and_a_cancelled_batch_call_back_with_their_event_types(
    hooked: Server, owner: tuple[str, str]
) -> None:
    key, secret = owner
    with receiving(200) as receiver:
        failed = _batch(hooked, key, receiver.url, model="no-such-route")
        receiver.wait(1)
        cancelled = _batch(hooked, key, receiver.url, model=LAG, lines=4)  # 1 s an answer
        client(hooked, key).batches.cancel(cancelled)
        deliveries = receiver.wait(2)
    assert sorted(_verified(d, secret) for d in deliveries) == sorted(
        [("batch.failed", failed), ("batch.cancelled", cancelled)]
    )


def test_a_redirect_is_not_followed_and_fails_the_delivery(hooked: Server, owner: tuple[str, str]) -> None:
    key, _ = owner
    with receiving(302, location="http://10.0.0.1/internal") as receiver:
        batch_id = _batch(hooked, key, receiver.url)
        receiver.wait(1)
        event = wait_settled(hooked.root, batch_id)
        assert len(receiver.deliveries) == 1  # a redirect is final: not retried, not followed
    assert event.state == "failed"
    assert event.last_error is not None
    assert "redirect to 10.0.0.1" in event.last_error


def test_a_batch_without_callback_url_records_no_event(hooked: Server, owner: tuple[str, str]) -> None:
    key, _ = owner
    c = client(hooked, key)
    file_id = upload(c, [batch_line(0, ALPHA)])
    batch = c.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert wait_ended(c, batch.id).status == "completed"
    assert events_of(hooked.root, batch.id) == []


@pytest.mark.slow  # a server killed and started again
def test_a_pending_callback_survives_a_kill_9_and_is_delivered_after_restart(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    key, secret = key_with_secret(tmp_path)
    options = ("--callback-allow", "127.0.0.1", "--callback-retry-delays", "2")
    with receiving(500) as receiver:
        with running(tmp_path, config, *options) as first:
            batch_id = _batch(first, key, receiver.url)
            [before] = receiver.wait(1)
            first.proc.kill()  # kill -9: the event is pending, its next attempt 2 s ahead
            first.proc.wait(timeout=60)
        assert events_of(tmp_path, batch_id)[0].state == "pending"
        receiver.statuses, receiver.phase = [200], 1
        count = len(receiver.deliveries)
        with running(tmp_path, config, *options):
            deliveries = receiver.wait(count + 1)
            event = wait_settled(tmp_path, batch_id)
    after = [d for d in deliveries if d.phase == 1]
    assert after
    assert {d.headers["webhook-id"] for d in after} == {before.headers["webhook-id"]} == {event.id}
    assert _verified(after[0], secret) == ("batch.completed", batch_id)
    assert event.state == "delivered"


@pytest.mark.slow  # two `keys` CLI runs
def test_a_new_webhook_secret_signs_the_callbacks_from_then_on(hooked: Server) -> None:
    key, key_id, old = make_key(hooked.root)
    done = keys_cli(hooked.root, "webhook-secret", key_id)
    assert done.returncode == 0, done.stderr
    new = done.stdout.strip()
    assert new.startswith("whsec_")
    assert new != old
    with receiving(200) as receiver:
        batch_id = _batch(hooked, key, receiver.url)
        [delivery] = receiver.wait(1)
    assert _verified(delivery, new) == ("batch.completed", batch_id)
    with pytest.raises(InvalidWebhookSignatureError):
        _verified(delivery, old)


def test_a_new_webhook_secret_for_an_unknown_key_is_a_one_line_error(hooked: Server) -> None:
    done = keys_cli(hooked.root, "webhook-secret", "key-00000000")
    assert done.returncode != 0
    assert done.stdout == ""
    assert "no client key 'key-00000000'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_native_job_calls_back_to_its_callback_url(hooked: Server, owner: tuple[str, str]) -> None:
    key, secret = owner
    jobs = JobsClient(hooked, key)
    try:
        refused = jobs.http.post(
            "/jobs", json={"requests": requests_for(ALPHA, 1), "callback_url": "http://10.0.0.1/hook"}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == "callback_url"
        with receiving(200) as receiver:
            job = jobs.create(requests=requests_for(ALPHA, 2, "cb"), callback_url=receiver.url, name="hooked")
            assert jobs.wait_state(job["id"])["state"] == "completed"
            [delivery] = receiver.wait(1)
            assert wait_settled(hooked.root, job["id"]).state == "delivered"
    finally:
        jobs.close()
    assert _verified(delivery, secret) == ("batch.completed", job["id"])
