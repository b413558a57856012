"""Priority is an order for the jobs waiting for a place: with `--max-jobs 1`, a HIGH job
submitted after a NORMAL one (while a LOW one runs) starts next (the order of the server's
`batch_started` events, never times). `Places` alone on one loop; and the server's log carries a
failover's job, provider and task, as `batchgate run`'s does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.server.batch_api.priorities import Places

from .harness import ALPHA, LAG, client, create, running, upload, wait_ended
from .jobs_client import JobsClient, requests_for


async def _order(places: Places, arrivals: list[str]) -> list[str]:
    started: list[str] = []

    async def job(name: str) -> None:
        await places.acquire(name.split("-", maxsplit=1)[0])
        started.append(name)
        await asyncio.sleep(0)
        places.release()

    await places.acquire("low")  # the running job
    tasks = [asyncio.ensure_future(job(n)) for n in arrivals]
    await asyncio.sleep(0)
    places.release()
    await asyncio.gather(*tasks)
    return started


def test_a_freed_place_goes_to_the_highest_priority_waiting() -> None:
    arrivals = ["normal-1", "low-1", "high-1", "normal-2", "high-2"]
    started = asyncio.run(_order(Places(1), arrivals))
    assert started == ["high-1", "high-2", "normal-1", "normal-2", "low-1"]


def test_a_cancelled_waiter_passes_its_place_on() -> None:
    async def go() -> list[str]:
        places, started = Places(1), []
        await places.acquire("low")

        async def job(name: str) -> None:
            await places.acquire(name)
            started.append(name)

        high, normal = asyncio.ensure_future(job("high")), asyncio.ensure_future(job("normal"))
        await asyncio.sleep(0)
        places.release()  # handed to high ...
        high.cancel()  # ... which is cancelled before it runs: normal gets the place
        await asyncio.gather(high, normal, return_exceptions=True)
        return started

    assert asyncio.run(go()) == ["normal"]


def _config(path: Path, emu: EmulatorThread, providers: dict[str, list[str]], concurrency: int) -> Path:
    data: dict[str, Any] = {
        "providers": [
            {"name": name, "kind": "openai", "base_url": emu.base_url(name), "api_key_env": "EMU_KEY"}
            for name in dict.fromkeys(t.split(":")[0] for ts in providers.values() for t in ts)
        ],
        "routes": [{"model": m, "targets": ts} for m, ts in providers.items()],
        "settings": {"concurrency": concurrency, "seed": 1, "retry": {"max_attempts": 4, "base_delay": 0.01}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _started(log: Path) -> list[str]:
    lines = [line.split() for line in log.read_text().splitlines() if " batch_started " in line]
    return [part.removeprefix("id=") for parts in lines for part in parts if part.startswith("id=")]


@pytest.mark.slow
@pytest.mark.integration
def test_with_one_place_high_starts_before_an_earlier_normal(
    tmp_path: Path, fresh_emu: EmulatorThread
) -> None:
    emu = fresh_emu
    routes = {LAG: ["lag:gpt-4o-mini"], ALPHA: ["alpha:gpt-4o-mini"]}
    config = _config(tmp_path / "gateway.yaml", emu, routes, concurrency=1)
    with running(tmp_path, config, "--max-jobs", "1") as server:
        c = JobsClient(server, server.keys_create())
        try:
            low = c.create(requests=requests_for(LAG, 5, "low"), priority="low")[
                "id"
            ]  # 1 s an answer, 1 at once
            c.wait_state(low, ("running",))
            normal = c.create(requests=requests_for(ALPHA, 1, "normal"), priority="normal")["id"]
            high = c.create(requests=requests_for(ALPHA, 1, "high"), priority="high")["id"]
            waiting = (c.get(low)["state"], c.get(normal)["state"], c.get(high)["state"])
            for job_id in (low, normal, high):
                assert c.wait_state(job_id)["state"] == "completed"
        finally:
            c.close()
    assert waiting == ("running", "queued", "queued")  # both arrived while low held the place
    assert _started(server.log) == [low, high, normal]


def test_the_server_log_names_a_failover_s_job_provider_and_task(tmp_path: Path) -> None:
    fast = {"ttft_p50_ms": 5.0, "ttft_sigma": 0.1, "per_token_ms": 0}
    limits = {"rpm": 10**6, "tpm": 10**8}
    emu = EmulatorThread(
        emulator_config_from_dict(
            {
                "seed": 2,
                "providers": [
                    {
                        "name": "down",
                        "family": "openai",
                        "limits": limits,
                        "latency": fast,
                        "faults": {"server_error": 1.0},
                    },
                    {"name": "beta", "family": "openai", "limits": limits, "latency": fast},
                ],
            }
        )
    )
    emu.start()
    try:
        config = _config(tmp_path / "gateway.yaml", emu, {ALPHA: ["down:gpt-4o-mini", "beta:gpt-4o-mini"]}, 2)
        with running(tmp_path, config) as server:
            c = client(server, server.keys_create())
            batch = create(c, upload(c, _lines(4)))
            assert wait_ended(c, batch.id).status == "completed"
    finally:
        emu.stop()
    failovers = [line for line in server.log.read_text().splitlines() if " failover " in line]
    assert failovers
    for line in failovers:
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        assert (fields["provider"], fields["previous"]) == ("beta", "down"), line
        assert fields["job"].startswith("job-"), line
        assert fields["task"].startswith("req-"), line


def _lines(n: int) -> list[dict[str, Any]]:
    return [
        {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": f"hi {i}"}]}}
        for i in range(n)
    ]  # fmt: skip
