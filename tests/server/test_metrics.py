"""`/metrics` on `batchgate serve`, over real sockets and parsed with `prometheus_client`'s text
parser: scraped while a job runs and after, its counters agree with the job's detail; two jobs at
once add up (the shared gateway's provider counters are counted once, not per job); nothing secret
or per client is in it; the job families (tenants' job ids) only for a scrape with an admin key;
and without the `metrics` extra the route says so while the server runs."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from batchgate.emulator import EmulatorThread
from waiting import poll

from .harness import ALPHA, GAMMA, LAG, PROVIDER_KEY, Server, gateway_config, running
from .hooks import make_key, receiving, wait_settled
from .jobs_client import JobsClient, requests_for

pytestmark = pytest.mark.integration
PROVIDERS = ("alpha", "gamma", "lag")


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    """A server of its own (the provider counters it shows are this module's jobs' only), with
    prices, so that answers cost something."""
    root = tmp_path_factory.mktemp("metrics")
    config = gateway_config(root / "gateway.yaml", emu)
    data = yaml.safe_load(config.read_text())
    data["prices"] = {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
                      "claude-3-5-haiku-latest": {"input": 0.80, "output": 4.0}}  # fmt: skip
    config.write_text(yaml.safe_dump(data))
    with running(root, config, "--callback-allow", "127.0.0.1", "--callback-retry-delays", "0.3") as s:
        ADMIN[s.url] = s.keys_create(admin=True)
        yield s


@pytest.fixture
def jobs(watched: Server) -> Iterator[JobsClient]:
    c = JobsClient(watched, watched.keys_create())
    try:
        yield c
    finally:
        c.close()


ADMIN: dict[str, str] = {}  # the module server's admin key, by `watched`


def scrape(server: Server, key: str | None = "admin") -> list[Sample]:
    """`GET /metrics` as Prometheus does, with the admin key (a bearer token) unless `key` is None
    (no key) or a client key; every sample."""
    headers = {"Authorization": f"Bearer {ADMIN[server.url] if key == 'admin' else key}"} if key else {}
    r = httpx.get(server.url + "/metrics", timeout=30, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return [s for family in text_string_to_metric_families(r.text) for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 if none)."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def delta(before: list[Sample], after: list[Sample], name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def job_task(samples: list[Sample], job_id: str, state: str) -> float:
    return value(samples, "batchgate_job_tasks", job_id=job_id, state=state)


def scrape_while_running(server: Server, *job_ids: str) -> list[Sample]:
    """Scrapes until one shows every job sending at once (bounded; never a timing assertion)."""
    return poll(
        lambda: scrape(server),
        lambda samples: all(value(samples, "batchgate_job_running", job_id=j) == 1 for j in job_ids),
        f"{job_ids} to show running together in /metrics",
        every=0.02,
    )


@pytest.mark.slow  # a job scraped while it runs
def test_scraped_during_and_after_a_job_the_counters_agree_with_its_detail(
    watched: Server, jobs: JobsClient
) -> None:
    before = scrape(watched)
    requests = [*requests_for(LAG, 12, "lag"), *requests_for(ALPHA, 8, "alpha")]
    job_id = jobs.create(requests=[*requests, *requests_for(GAMMA, 8, "gamma")], priority="high")["id"]

    during = scrape_while_running(watched, job_id)
    shown = {s.labels["state"]: s.value for s in during if s.name == "batchgate_job_tasks"
             and s.labels["job_id"] == job_id}  # fmt: skip
    assert sum(shown[k] for k in ("pending", "running", "succeeded", "failed")) == 28, shown
    assert value(during, "batchgate_job_running", job_id=job_id, priority="high") == 1
    done_then = shown["succeeded"] + shown["failed"]
    assert delta(before, during, "batchgate_requests_sent_total") >= done_then

    detail = jobs.wait_state(job_id)
    assert detail["state"] == "completed", detail
    after = scrape(watched)
    assert job_task(after, job_id, "succeeded") == detail["progress"]["succeeded"] == 28
    assert job_task(after, job_id, "failed") == job_task(after, job_id, "pending") == 0
    assert value(after, "batchgate_job_running", job_id=job_id) == 0  # kept, ended
    assert delta(before, after, "batchgate_requests_total", outcome="ok") >= 28
    assert delta(before, after, "batchgate_requests_sent_total") >= 28
    assert delta(before, after, "batchgate_request_duration_seconds_count") >= 28
    tokens = detail["tokens"]
    assert delta(before, after, "batchgate_tokens_total", direction="input") == tokens["prompt"]
    assert delta(before, after, "batchgate_tokens_total", direction="output") == tokens["completion"]
    for name, figures in detail["providers"].items():
        assert (
            delta(before, after, "batchgate_tokens_total", provider=name, direction="output")
            == (figures["completion_tokens"])
        )
    cost = delta(before, after, "batchgate_cost_usd_total")
    assert detail["cost_usd"] > 0
    assert math.isclose(cost, detail["cost_usd"], rel_tol=1e-6, abs_tol=1e-6)
    # the shared gateway's providers, once each: labelled by provider alone, never by job
    sent = [s for s in after if s.name == "batchgate_requests_sent_total"]
    assert {s.labels["provider"] for s in sent} >= set(PROVIDERS)
    assert all(set(s.labels) == {"provider"} for s in sent)
    assert len(sent) == len({s.labels["provider"] for s in sent})
    assert value(after, "batchgate_quota_limit_per_minute", provider="slow", dimension="requests") == 6
    assert value(after, "batchgate_circuit_state", provider="alpha", state="closed") == 1
    assert value(after, "batchgate_in_flight_requests") == 0
    open_ = [s for s in after if s.name == "batchgate_quota_open_reservations"]
    assert {s.labels["provider"] for s in open_} >= set(PROVIDERS)
    assert all(s.value == 0 for s in open_)  # every reservation settled once the jobs ended


@pytest.mark.slow
def test_two_jobs_at_once_add_up_on_the_shared_gateway_not_twice(watched: Server, jobs: JobsClient) -> None:
    before = scrape(watched)
    made = [
        jobs.create(requests=[*requests_for(LAG, 6, f"lag{j}"), *requests_for(ALPHA, 10, f"alpha{j}"),
                              *requests_for(GAMMA, 10, f"gamma{j}")], priority=p)["id"]
        for j, p in ((1, "low"), (2, "normal"))
    ]  # fmt: skip
    scrape_while_running(watched, *made)  # both at once on the one gateway
    details = [jobs.wait_state(job_id) for job_id in made]
    assert [d["state"] for d in details] == ["completed", "completed"], details
    after = scrape(watched)
    for job_id, d in zip(made, details, strict=True):
        assert job_task(after, job_id, "succeeded") == d["progress"]["succeeded"] == 26
    for direction, key in (("input", "prompt"), ("output", "completion")):
        both = sum(d["tokens"][key] for d in details)
        assert delta(before, after, "batchgate_tokens_total", direction=direction) == both
        for provider in PROVIDERS:
            mine = sum(d["providers"][provider][f"{key}_tokens"] for d in details)
            shown = delta(before, after, "batchgate_tokens_total", provider=provider, direction=direction)
            assert shown == mine, (provider, direction)
    ok = delta(before, after, "batchgate_requests_total", outcome="ok")
    assert 52 <= ok < 2 * 52, ok  # each answer counted once (a hedge's loser may add a few)
    cost = delta(before, after, "batchgate_cost_usd_total")
    assert math.isclose(cost, sum(d["cost_usd"] for d in details), rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.slow
def test_no_secret_or_client_detail_is_in_metrics(watched: Server) -> None:
    token, key_id, secret = make_key(watched.root)
    jobs = JobsClient(watched, token)
    try:
        before = scrape(watched)
        with receiving(200) as receiver:
            made = jobs.create(
                requests=requests_for(ALPHA, 3, "secret"), callback_url=receiver.url, name="nm-x"
            )
            assert jobs.wait_state(made["id"])["state"] == "completed"
            receiver.wait(1)
            assert wait_settled(watched.root, made["id"]).state == "delivered"
    finally:
        jobs.close()
    admin = {"Authorization": f"Bearer {ADMIN[watched.url]}"}
    for headers in ({}, admin):
        text = httpx.get(watched.url + "/metrics", timeout=30, headers=headers).text
        after = [s for f in text_string_to_metric_families(text) for s in f.samples]
        assert delta(before, after, "batchgate_callback_deliveries_total", outcome="delivered") == 1
        assert value(after, "batchgate_callbacks_pending") == 0
        for secret_text in (PROVIDER_KEY, token, secret, secret.removeprefix("whsec_"), ADMIN[watched.url]):
            for variant in {secret_text, secret_text[-12:]}:
                assert variant not in text
        for detail in (key_id, "secret-req-0", "Say hi", "receiver-own-token", "nm-x", "127.0.0.1"):
            assert detail not in text  # no key id, custom_id, prompt, callback URL or job name
    assert job_task(after, made["id"], "succeeded") == 3  # the admin's scrape shows the job


def test_without_the_admin_key_metrics_carry_no_tenant_ids(watched: Server, jobs: JobsClient) -> None:
    """A keyless scrape (and a client key's) has the providers' and callbacks' families but no job
    family, no `job_id` label and no job id in its text; a key that is none of the server's is a
    401; the admin key's scrape shows the job."""
    made = jobs.create(requests=requests_for(ALPHA, 2, "tenant"), name="tenant-job")["id"]
    assert jobs.wait_state(made)["state"] == "completed"
    client_key = jobs.http.headers["Authorization"].removeprefix("Bearer ")
    for key in (None, client_key):
        samples = scrape(watched, key)
        text = httpx.get(
            watched.url + "/metrics", timeout=30, headers={"Authorization": f"Bearer {key}"} if key else {}
        ).text
        assert made not in text
        assert "job_id" not in text
        assert not any(s.name.startswith("batchgate_job_") for s in samples)
        assert value(samples, "batchgate_requests_sent_total") >= 2  # the providers' figures stay
    assert job_task(scrape(watched), made, "succeeded") == 2
    wrong = httpx.get(watched.url + "/metrics", timeout=30, headers={"Authorization": "Bearer sk-not-a-key"})
    assert wrong.status_code == 401, wrong.text
    assert made not in wrong.text


def test_without_the_metrics_extra_the_route_says_so_and_the_server_runs(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    blocked = tmp_path / "blocked" / "prometheus_client"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('prometheus_client is not installed')\n")
    path = os.pathsep.join([str(blocked.parent), os.environ.get("PYTHONPATH", "")])
    root = tmp_path / "serve"
    root.mkdir()
    with running(root, gateway_config(root / "gateway.yaml", emu), env={"PYTHONPATH": path}) as server:
        r = httpx.get(server.url + "/metrics", timeout=30)
        assert r.status_code == 501, r.text
        error: dict[str, Any] = r.json()["error"]
        assert "batchgate[metrics]" in error["message"]
        assert error["code"] == "metrics_unavailable"
        jobs = JobsClient(server, server.keys_create())
        try:
            made = jobs.create(requests=requests_for(ALPHA, 2, "plain"))
            assert jobs.wait_state(made["id"])["state"] == "completed"
        finally:
            jobs.close()
        assert "Traceback" not in server.log.read_text()
