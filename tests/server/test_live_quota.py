"""Live requests count in the provider's one quota: with a batch saturating a small emulated quota
(4 requests a second, enforced over 1 s), live requests sent through the proxy meanwhile are all
answered and the provider sees no more 429s than the pacing's usual tolerance — as it would if
the live requests bypassed the shared pool (they would add to the batch's full pace)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from waiting import wait_for

from .harness import batch_line, client, create, running, upload, wait_ended

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a batch paced at 4 requests a second

RPM = 240
MODEL = "m-tight"
BATCH_LINES = 60
LIVE_REQUESTS = 10
EVERY = 4  # batch answers between two live requests: the last goes out with 20 batch lines left


@pytest.fixture(scope="module")
def tight() -> Iterator[EmulatorThread]:
    latency = {"ttft_p50_ms": 50.0, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {"name": "tight", "family": "openai", "limits": {"rpm": RPM, "tpm": 10**9}, "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 3, "providers": [provider]}))
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


def config(path: Path, emu: EmulatorThread) -> Path:
    data = {
        "providers": [
            {"name": "tight", "kind": "openai", "base_url": emu.base_url("tight"), "limits": {"rpm": RPM}}
        ],
        "routes": [{"model": MODEL, "targets": ["tight:gpt-4o-mini"]}],
        "settings": {"concurrency": 64, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def completed(emu: EmulatorThread) -> int:
    return int(emu.stats()["providers"]["tight"]["completed"])


def reached(emu: EmulatorThread, answers: int) -> bool:
    return completed(emu) >= answers


def test_live_and_batch_together_hold_the_providers_quota(tmp_path: Path, tight: EmulatorThread) -> None:
    gateway = config(tmp_path / "gw.yaml", tight)
    with running(tmp_path, gateway) as server, client(server, server.keys_create()) as c:
        batch = create(c, upload(c, [batch_line(i, MODEL) for i in range(BATCH_LINES)]))
        answers, base = [], completed(tight)
        for i in range(LIVE_REQUESTS):  # one each EVERY batch answers, while the batch runs at the full quota
            wait_for(
                functools.partial(reached, tight, base + i + (i + 1) * EVERY), f"{(i + 1) * EVERY} answers"
            )
            messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": f"live {i}"}]
            answers.append(c.chat.completions.create(model=MODEL, messages=messages, max_tokens=5))
        assert completed(tight) - base - LIVE_REQUESTS < BATCH_LINES  # the batch was still running
        ended = wait_ended(c, batch.id)
    assert all(a.choices[0].message.content for a in answers)
    assert ended.status == "completed"
    assert ended.request_counts is not None
    assert ended.request_counts.completed == BATCH_LINES
    p = tight.stats()["providers"]["tight"]
    assert int(p["completed"]) == BATCH_LINES + LIVE_REQUESTS
    rejected = int(p["rejected"].get("rate_limit", 0)) + int(p["rejected"].get("concurrency", 0))
    assert rejected <= 1, p["rejected"]
