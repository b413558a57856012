"""The native job API over real sockets: a job from inline requests or an uploaded file runs with
its options shown back, its detail has progress, cost and per-provider figures, its results
stream as JSONL; listing filters and pages; a key sees only its own jobs; bad input is a 4xx
naming the field; pause/resume, retry of the failed items and cancel."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import pytest

from batchgate.emulator import EmulatorThread
from batchgate.jobs.store.options import JobOptions
from waiting import poll, wait_for

from .harness import ALPHA, DENIED, GAMMA, LAG, SLOW, Server, client, jsonl
from .jobs_client import JobsClient, requests_for

pytestmark = pytest.mark.integration


@pytest.fixture
def a(server: Server, keys: dict[str, str]) -> Iterator[JobsClient]:
    c = JobsClient(server, keys["a"])
    try:
        yield c
    finally:
        c.close()


def sent_to(emu: EmulatorThread, provider: str) -> int:
    return int(emu.stats()["providers"][provider]["completed"])


def in_flight_to(emu: EmulatorThread, provider: str) -> int:
    return int(emu.stats()["providers"][provider]["in_flight"])


def test_a_job_of_inline_requests_runs_with_its_options(a: JobsClient, emu: EmulatorThread) -> None:
    made = a.create(
        requests=[*requests_for(ALPHA, 4, "inline-a"), *requests_for(GAMMA, 4, "inline-g")],
        name="nightly",
        priority="high",
        metadata={"feature": "f-12", "object": "o-9"},
        budget=5.0,
        mode="online",
        deadline={"hours": 2},
        callback_url="https://example.com/hook",
        validate={"regex": ".+"},
    )
    assert made["id"].startswith("job_")
    assert (made["name"], made["priority"], made["mode"], made["budget"]) == (
        "nightly",
        "high",
        "online",
        5.0,
    )
    assert made["metadata"] == {"feature": "f-12", "object": "o-9"}
    assert made["callback_url"] == "https://example.com/hook"
    assert made["deadline"] is not None
    assert made["validate"] == {"regex": ".+", "schema": None}
    assert made["request_counts"]["total"] == 8
    done = a.wait_state(made["id"])
    assert done["state"] == "completed", done
    assert done["progress"]["succeeded"] == 8
    assert (done["progress"]["failed"], done["progress"]["pending"]) == (0, 0)
    assert done["tokens"]["completion"] > 0
    assert set(done["providers"]) == {"alpha", "gamma"}
    assert [done["providers"][p]["succeeded"] for p in ("alpha", "gamma")] == [4, 4]
    assert sum(p["succeeded"] for p in done["providers"].values()) == 8  # this job's items only
    assert sum(p["completion_tokens"] for p in done["providers"].values()) == done["tokens"]["completion"]
    results = a.results(made["id"])
    assert sorted(r["custom_id"] for r in results) == sorted(
        f"inline-{p}-req-{i}" for p in "ag" for i in range(4)
    )
    assert all(r["response"]["status_code"] == 200 for r in results)


def test_the_output_check_of_a_job_applies_to_its_answers(a: JobsClient) -> None:
    made = a.create(requests=requests_for(ALPHA, 2, "checked"), validate={"regex": "^NEVER THIS$"})
    done = a.wait_state(made["id"])
    assert (done["progress"]["succeeded"], done["progress"]["failed"]) == (0, 2), done
    errors = [r["error"]["code"] for r in a.results(made["id"])]
    assert errors == ["invalid_output", "invalid_output"]


def test_mode_and_deadline_reach_the_stored_job(server: Server, a: JobsClient) -> None:
    """The job remembers them, as `batchgate run --mode --deadline` does: they pick online or
    Batch API for its routes."""
    made = a.create(requests=requests_for(ALPHA, 1, "timed"), mode="online", deadline={"hours": 2})
    a.wait_state(made["id"])
    db = sqlite3.connect(f"file:{server.root / 'jobs.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT input_path, options, created_at FROM jobs").fetchall()
    finally:
        db.close()
    specs = [(JobOptions.of_json(o).spec, at) for path, o, at in rows if f"/{made['id']}/" in path]
    assert len(specs) == 1
    spec, created_at = specs[0]
    assert spec.mode == "online"
    assert spec.hours_after(created_at) == pytest.approx(2.0, abs=0.01)


def test_a_job_from_an_uploaded_file(server: Server, keys: dict[str, str], a: JobsClient) -> None:
    upload = client(server, keys["a"]).files.create(
        file=("in.jsonl", jsonl(requests_for(ALPHA, 3))), purpose="batch"
    )
    made = a.create(input_file_id=upload.id)
    assert made["input_file_id"] == upload.id
    done = a.wait_state(made["id"])
    assert (done["state"], done["progress"]["succeeded"]) == ("completed", 3)
    assert len(a.results(made["id"])) == 3


def test_list_filters_and_pages(a: JobsClient) -> None:
    tag = f"t{time.monotonic_ns()}"
    made = [
        a.create(requests=requests_for(ALPHA, 1), name=tag, priority=p, metadata={"run": tag, "n": str(i)})
        for i, p in enumerate(("high", "low", "low"))
    ]
    ids = [m["id"] for m in made]
    assert [j["id"] for j in a.find(name=tag)["data"]] == ids[::-1]  # newest first
    assert [j["id"] for j in a.find(name=tag, priority="low")["data"]] == ids[:0:-1]
    assert [j["id"] for j in a.find(metadata=[f"run={tag}", "n=1"])["data"]] == [ids[1]]
    first = a.find(name=tag, limit=2)
    assert (len(first["data"]), first["has_more"]) == (2, True)
    rest = a.find(name=tag, limit=2, after=first["last_id"])
    assert ([j["id"] for j in rest["data"]], rest["has_more"]) == ([ids[0]], False)
    for job_id in ids:
        a.wait_state(job_id)
    assert {j["id"] for j in a.find(name=tag, state="completed")["data"]} == set(ids)
    assert a.find(name=tag, state=["running", "queued"])["data"] == []


def test_a_key_sees_only_its_own_jobs(server: Server, keys: dict[str, str], a: JobsClient) -> None:
    made = a.create(requests=requests_for(ALPHA, 1), name="private")
    b = JobsClient(server, keys["b"])
    admin = JobsClient(server, keys["admin"])
    try:
        assert b.http.get(f"/jobs/{made['id']}").status_code == 404
        for action in ("cancel", "pause", "resume", "retry"):
            assert b.act(made["id"], action).status_code == 404
        assert b.http.get(f"/jobs/{made['id']}/results").status_code == 404
        assert made["id"] not in [j["id"] for j in b.find(name="private")["data"]]
        assert made["id"] in [j["id"] for j in admin.find(name="private")["data"]]
        assert admin.get(made["id"])["id"] == made["id"]
    finally:
        b.close()
        admin.close()
    a.wait_state(made["id"])


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({}, 400, "input_file_id"),
        ({"requests": []}, 400, "requests"),
        ({"requests": [1]}, 400, "requests[0]"),
        ({"requests": [{"custom_id": "x"}]}, 422, "requests[0]"),
        ({"input_file_id": "file-nope"}, 404, None),
        ({"requests": requests_for(ALPHA, 1), "priority": "urgent"}, 400, "priority"),
        ({"requests": requests_for(ALPHA, 1), "not_before": "tomorrow"}, 400, "not_before"),
        ({"requests": requests_for(ALPHA, 1), "not_before": "2030-01-01T00:00:00"}, 400, "not_before"),
        ({"requests": requests_for(ALPHA, 1), "deadline": "2001-01-01T00:00:00Z"}, 422, "deadline"),
        ({"requests": requests_for(ALPHA, 1), "deadline": {"days": 1}}, 400, "deadline"),
        ({"requests": requests_for(ALPHA, 1), "budget": -1}, 400, "budget"),
        ({"requests": requests_for(ALPHA, 1), "mode": "fast"}, 400, "mode"),
        ({"requests": requests_for(ALPHA, 1), "metadata": {"k": 1}}, 400, "metadata"),
        ({"requests": requests_for(ALPHA, 1), "callback_url": "ftp://x"}, 400, "callback_url"),
        ({"requests": requests_for(ALPHA, 1), "validate": {"regex": "("}}, 400, "validate.regex"),
        ({"requests": requests_for(ALPHA, 1), "validate": {"schema": {"type": 5}}}, 400, "validate.schema"),
        ({"requests": requests_for(ALPHA, 1), "colour": "red"}, 400, "colour"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    a: JobsClient, body: dict[str, object], status: int, param: str | None
) -> None:
    r = a.http.post("/jobs", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param
    assert error["message"]


def test_bad_queries_and_unknown_jobs(a: JobsClient) -> None:
    for query, param in (("state=lost", "state"), ("limit=0", "limit"), ("metadata=novalue", "metadata")):
        r = a.http.get(f"/jobs?{query}")
        assert (r.status_code, r.json()["error"]["param"]) == (400, param)
    assert a.http.post("/jobs", content=b"{nope").status_code == 400
    missing = a.http.get("/jobs/job_nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "No job found with id 'job_nope'."
    assert a.act("job_nope", "pause").status_code == 404


@pytest.mark.slow  # 40 answers of 1 s, paused
def test_pause_holds_the_job_and_resume_finishes_it(a: JobsClient, emu: EmulatorThread) -> None:
    made = a.create(requests=requests_for(LAG, 40, "pause"))  # 1 s an answer, 16 at a time
    running = poll(lambda: a.get(made["id"]), lambda job: job["progress"]["succeeded"] > 0, "a first answer")
    assert running["state"] == "running", running
    assert running["progress"]["eta_s"] is not None, running
    assert running["progress"]["rate_per_s"] > 0
    paused = a.act(made["id"], "pause")
    assert (paused.status_code, paused.json()["state"]) == (200, "paused")
    assert a.act(made["id"], "pause").json()["state"] == "paused"  # idempotent
    # the engine's grace period lets the calls in flight end (1 s each, well inside it)
    wait_for(lambda: in_flight_to(emu, "lag") == 0, "the paused job's calls in flight to end")
    sent = sent_to(emu, "lag")
    probe = a.create(requests=requests_for(LAG, 4, "probe"))  # a second of sending to lag meanwhile
    assert a.wait_state(probe["id"])["state"] == "completed"
    held = a.get(made["id"])
    assert held["state"] == "paused"
    assert held["progress"]["pending"] > 0
    assert sent_to(emu, "lag") == sent + 4  # the probe's four: the paused job sent nothing
    resumed = a.act(made["id"], "resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] in ("queued", "running")
    assert a.act(made["id"], "resume").status_code == 409  # not paused any more
    done = a.wait_state(made["id"])
    assert (done["state"], done["progress"]["succeeded"]) == ("completed", 40)
    assert sorted(r["custom_id"] for r in a.results(made["id"])) == sorted(
        f"pause-req-{i}" for i in range(40)
    )
    assert a.act(made["id"], "pause").status_code == 409


def test_retry_sends_only_the_failed_items_again(a: JobsClient, emu: EmulatorThread) -> None:
    requests = [*requests_for(ALPHA, 3, "ok"), *requests_for(DENIED, 1, "denied")]
    made = a.create(requests=requests)
    first = a.wait_state(made["id"])
    assert (first["progress"]["succeeded"], first["progress"]["failed"]) == (3, 1), first
    alpha_before = sent_to(emu, "alpha")
    retried = a.act(made["id"], "retry")
    assert retried.status_code == 200, retried.text
    assert retried.json()["requeued"] == 1
    again = a.wait_state(made["id"])
    assert (again["progress"]["succeeded"], again["progress"]["failed"]) == (3, 1)
    assert sent_to(emu, "alpha") == alpha_before  # the succeeded items were not sent again
    failed = [r for r in a.results(made["id"]) if r["custom_id"].startswith("denied")]
    assert len(failed) == 1
    assert failed[0]["error"]


def test_cancel_keeps_what_finished(a: JobsClient) -> None:
    made = a.create(requests=requests_for(SLOW, 8, "cancel"))  # quota-paced: 6 a minute
    r = a.act(made["id"], "cancel")
    assert r.status_code == 200, r.text
    assert r.json()["state"] in ("cancelling", "cancelled")
    done = a.wait_state(made["id"])
    assert done["state"] == "cancelled"
    assert done["progress"]["pending"] > 0
    assert len(a.results(made["id"])) == done["progress"]["succeeded"] + done["progress"]["failed"]
    assert a.act(made["id"], "cancel").status_code == 409
    assert a.act(made["id"], "retry").status_code == 409
