"""Webhook secrets stay out of the server's log, even at DEBUG: a server logging at `--log-level
debug` delivers callbacks (a retried one, one after the secret was rotated, one refused) and its
log holds neither the key's secret nor any part of it that would let one sign."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from batchgate.emulator import EmulatorThread

from .harness import ALPHA, Server, gateway_config, running
from .hooks import keys_cli, make_key, receiving, wait_settled
from .jobs_client import JobsClient, requests_for

pytestmark = pytest.mark.integration


@pytest.fixture
def debug_server(tmp_path_factory: pytest.TempPathFactory, emu: EmulatorThread) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("debuglog")
    config = gateway_config(root / "gateway.yaml", emu)
    extra = ["--log-level", "debug", "--callback-allow", "127.0.0.1", "--callback-retry-delays", "0.3"]
    extra += ["--loop", "asyncio"]  # its loop logs at DEBUG at start (uvloop's does not): the level took
    with running(root, config, *extra) as s:
        yield s


def _job(jobs: JobsClient, url: str, tag: str) -> str:
    made = jobs.create(requests=requests_for(ALPHA, 2, tag), callback_url=url)
    assert jobs.wait_state(made["id"])["state"] == "completed"
    return str(made["id"])


@pytest.mark.slow
def test_no_webhook_secret_in_the_debug_log(debug_server: Server) -> None:
    token, key_id, secret = make_key(debug_server.root)
    jobs = JobsClient(debug_server, token)
    try:
        with receiving(500, 200, 200) as receiver:
            first = _job(jobs, receiver.url, "one")
            receiver.wait(2)  # a 500, then delivered on the retry
            assert wait_settled(debug_server.root, first).state == "delivered"
            rotated = keys_cli(debug_server.root, "webhook-secret", key_id)
            assert rotated.returncode == 0, rotated.stderr
            second = _job(jobs, receiver.url, "two")
            receiver.wait(3)
            assert wait_settled(debug_server.root, second).state == "delivered"
        refused = jobs.http.post("/jobs", json={"requests": requests_for(ALPHA, 1, "x"),
                                                "callback_url": "http://10.0.0.1/hook"})  # fmt: skip
        assert refused.status_code == 400
    finally:
        jobs.close()
    log = debug_server.log.read_text()
    assert re.search(r" DEBUG ", log), "the server did not log at DEBUG"
    for whole in (secret, rotated.stdout.strip()):
        encoded = whole.removeprefix("whsec_")
        for part in (whole, encoded, encoded[:16], encoded[-16:]):
            assert part not in log
