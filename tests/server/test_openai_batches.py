"""The official `openai` SDK's batch workflow against `batchgate serve`, unchanged but for
`base_url`: upload, create, poll, download the output and error files; lines spread over the
providers their `body.model` routes name; keys see only their own objects."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from batchgate.emulator import EmulatorThread

from .harness import (
    ALPHA,
    GAMMA,
    LAG,
    PROVIDER_KEY,
    SLOW,
    SPREAD,
    Server,
    batch_line,
    client,
    create,
    gateway_config,
    jsonl,
    lines_of,
    running,
    upload,
    wait_ended,
)

pytestmark = pytest.mark.integration


def emulator_completed(emu: EmulatorThread) -> dict[str, int]:
    return {name: int(p["completed"]) for name, p in emu.stats()["providers"].items()}


def test_the_openai_sdk_runs_a_batch_over_two_providers(
    server: Server, keys: dict[str, str], emu: EmulatorThread
) -> None:
    c = client(server, keys["a"])
    before = emulator_completed(emu)
    lines = [batch_line(i, (ALPHA, GAMMA, SPREAD)[i % 3]) for i in range(12)]
    refused = batch_line(99, ALPHA)
    refused["body"]["user"] = "u-1"  # alpha refuses this field with a 400: the error file's line
    file_id = upload(c, [*lines, refused])
    created = create(c, file_id)
    assert created.status in ("validating", "in_progress")
    assert created.input_file_id == file_id
    batch = wait_ended(c, created.id)
    assert batch.status == "completed", batch
    assert batch.request_counts is not None
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (13, 12, 1)
    assert batch.usage is not None
    assert batch.usage.output_tokens > 0
    assert batch.usage.total_tokens == batch.usage.input_tokens + batch.usage.output_tokens
    assert batch.completed_at is not None
    assert batch.in_progress_at is not None
    out = lines_of(c, batch.output_file_id)
    assert sorted(x["custom_id"] for x in out) == sorted(x["custom_id"] for x in lines)
    assert all(x["response"]["status_code"] == 200 and x["error"] is None for x in out)
    assert all(set(x) == {"id", "custom_id", "response", "error"} for x in out)
    assert all(x["response"]["body"]["choices"][0]["message"]["content"] for x in out)
    errors = lines_of(c, batch.error_file_id)
    assert [x["custom_id"] for x in errors] == ["req-99"]
    assert errors[0]["error"]["message"]
    after = emulator_completed(emu)
    served = {name for name in after if after[name] > before.get(name, 0)}
    assert {"alpha", "gamma"} <= served


def test_files_round_trip_and_delete(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    data = jsonl([batch_line(0, ALPHA)])
    f = c.files.create(file=("mine.jsonl", data), purpose="batch")
    assert (f.object, f.purpose, f.bytes, f.filename) == ("file", "batch", len(data), "mine.jsonl")
    assert c.files.retrieve(f.id).id == f.id
    assert c.files.content(f.id).read() == data
    assert f.id in [x.id for x in c.files.list()]
    assert c.files.delete(f.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        c.files.retrieve(f.id)


def test_a_key_cannot_see_cancel_or_download_another_key_s_objects(
    server: Server, keys: dict[str, str]
) -> None:
    a, b, admin = (client(server, keys[k]) for k in ("a", "b", "admin"))
    file_id = upload(a, [batch_line(i, GAMMA) for i in range(2)])
    batch = create(a, file_id)
    for call in (
        lambda: b.files.retrieve(file_id),
        lambda: b.files.content(file_id),
        lambda: b.files.delete(file_id),
        lambda: b.batches.retrieve(batch.id),
        lambda: b.batches.cancel(batch.id),
        lambda: create(b, file_id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert batch.id not in [x.id for x in b.batches.list()]
    assert file_id not in [x.id for x in b.files.list()]
    done = wait_ended(a, batch.id)
    assert done.status == "completed"
    with pytest.raises(openai.NotFoundError):
        b.files.content(done.output_file_id or "")
    assert admin.batches.retrieve(batch.id).id == batch.id  # an admin key sees every key's
    output = done.output_file_id or ""
    assert admin.files.content(output).read() == a.files.content(output).read()


def test_requests_without_a_valid_key_get_401(server: Server) -> None:
    for headers in ({}, {"Authorization": "Bearer bgk-not-a-key"}, {"Authorization": "Basic x"}):
        r = httpx.get(server.base_url + "/batches", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client(server, "bgk-wrong").batches.list()


def test_cancel_keeps_what_finished_and_ends_cancelled(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    file_id = upload(c, [batch_line(i, SLOW) for i in range(8)])  # 6 rpm: most wait for quota
    batch = create(c, file_id)
    cancelling = c.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    done = wait_ended(c, batch.id)
    assert done.status == "cancelled"
    assert done.cancelled_at is not None
    counts = done.request_counts
    assert counts is not None
    assert counts.completed < 8
    assert counts.failed == 8 - counts.completed  # what the cancel left out counts as failed
    left_out = [x for x in lines_of(c, done.error_file_id) if x["error"]["code"] == "batch_cancelled"]
    assert len(left_out) == 8 - counts.completed
    with pytest.raises(openai.BadRequestError):
        c.batches.cancel(batch.id)


def test_list_pages_with_after_and_limit(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["b"])
    file_id = upload(c, [batch_line(0, GAMMA)])
    made = [create(c, file_id).id for _ in range(3)]
    first = c.batches.list(limit=2)
    assert [x.id for x in first.data] == made[::-1][:2]
    assert first.has_more
    rest = c.batches.list(limit=2, after=first.data[-1].id)
    assert [x.id for x in rest.data][:1] == [made[0]]
    assert [x.id for x in c.batches.list(limit=1)][:3] == made[::-1]  # the SDK's auto-pagination
    for batch_id in made:
        wait_ended(c, batch_id)


def test_bad_requests_get_openai_shaped_errors(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    with pytest.raises(openai.BadRequestError):
        c.batches.create(input_file_id="file-nope", endpoint="/v1/moderations", completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        c.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        c.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    auth = {"Authorization": f"Bearer {keys['a']}"}
    for method, path, body in (
        ("POST", "/batches", b"not json"),
        ("GET", "/batches?limit=0", None),
        ("GET", "/nowhere", None),
        ("POST", "/files", b"plain"),
    ):
        r = httpx.request(method, server.base_url + path, headers=auth, content=body)
        assert r.status_code in (400, 404), (path, r.text)
        assert set(r.json()["error"]) >= {"message", "type", "code"}


def test_an_invalid_input_file_fails_the_batch_naming_its_lines(server: Server, keys: dict[str, str]) -> None:
    c = client(server, keys["a"])
    bad = batch_line(1, "no-such-route")
    file_id = upload(c, [batch_line(0, ALPHA), bad])
    batch = wait_ended(c, create(c, file_id).id)
    assert batch.status == "failed"
    assert batch.errors is not None
    assert batch.errors.data
    assert batch.errors.data[0].line == 2


def test_a_line_whose_url_is_not_the_batch_s_endpoint_fails_the_batch(
    server: Server, keys: dict[str, str]
) -> None:
    c = client(server, keys["a"])
    other = {**batch_line(1, ALPHA), "url": "/v1/embeddings", "body": {"model": ALPHA, "input": "x"}}
    file_id = upload(c, [batch_line(0, ALPHA), other])
    batch = wait_ended(c, create(c, file_id).id)
    assert batch.status == "failed"
    assert batch.errors is not None
    assert batch.errors.data
    assert batch.errors.data[0].line == 2
    assert batch.errors.data[0].message == (
        "url /v1/embeddings does not match the batch's endpoint /v1/chat/completions"
    )


def test_no_provider_key_in_responses_or_logs(server: Server, keys: dict[str, str], tmp_path: Path) -> None:
    c = client(server, keys["admin"])
    seen = b"".join(c.files.content(f.id).read() for f in c.files.list())
    seen += b"".join(x.model_dump_json().encode() for x in c.batches.list(limit=100))
    assert seen
    assert PROVIDER_KEY.encode() not in seen
    assert PROVIDER_KEY not in server.log.read_text()
    for path in server.root.rglob("*"):
        if path.is_file():
            assert PROVIDER_KEY.encode() not in path.read_bytes(), path
    assert keys["a"].encode() not in (server.root / "server.db").read_bytes()  # only its hash is kept


@pytest.mark.slow  # waits out a completion window
def test_a_batch_past_its_window_expires_keeping_what_finished(tmp_path: Path, emu: EmulatorThread) -> None:
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", emu), "--expire-after", "1") as s:
        c = client(s, s.keys_create())
        batch = create(c, upload(c, [batch_line(i, SLOW) for i in range(4)]))  # 6 rpm: 10 s apart
        done = wait_ended(c, batch.id)
        errors = lines_of(c, done.error_file_id)
    assert done.status == "expired"
    assert done.expired_at is not None
    counts = done.request_counts
    assert counts is not None
    assert counts.completed < 4
    assert counts.failed == 4 - counts.completed
    assert sorted(x["error"]["code"] for x in errors) == ["batch_expired"] * (4 - counts.completed)


@pytest.mark.slow
def test_past_max_jobs_a_batch_waits_its_turn(tmp_path: Path, emu: EmulatorThread) -> None:
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", emu), "--max-jobs", "1") as s:
        c = client(s, s.keys_create())
        first = create(c, upload(c, [batch_line(i, LAG) for i in range(2)]))  # 1 s an answer
        second = create(c, upload(c, [batch_line(0, GAMMA)]))
        assert c.batches.retrieve(second.id).status == "validating"  # the one place is taken
        third = create(c, upload(c, [batch_line(1, GAMMA)]))
        c.batches.cancel(third.id)  # a cancel ends a waiting batch without running it
        ended = wait_ended(c, third.id)
        a, b = wait_ended(c, first.id), wait_ended(c, second.id)
    assert ended.status == "cancelled"
    assert ended.request_counts is not None
    assert ended.request_counts.completed == 0
    assert (a.status, b.status) == ("completed", "completed")
    assert a.completed_at is not None
    assert b.in_progress_at is not None
    assert b.in_progress_at >= a.completed_at  # it started once the first had ended


def test_an_ended_batch_leaves_no_copy_behind(server: Server, keys: dict[str, str]) -> None:
    """Issue 40: each batch's input copy and job output stayed in the data folder for good (a
    tenant's 1,500 batches, 1,500 copies); once it has ended, its results come from the store and
    its files, so the copies go — and the results are still there."""
    c = client(server, keys["a"])
    batch = wait_ended(c, create(c, upload(c, [batch_line(i, ALPHA) for i in range(3)])).id)
    assert batch.status == "completed", batch
    folder = server.root / "batches" / batch.id
    assert not folder.exists(), sorted(p.name for p in folder.iterdir())
    assert len(lines_of(c, batch.output_file_id)) == 3
