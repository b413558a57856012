"""`batchgate serve --cache`: one response cache for the server, each tenant's keys apart (issue
43). Over real HTTP with the OpenAI SDK: tenant A's batch run twice is answered from the cache the
second time (no request reaches the emulator); tenant B's identical batch never gets A's answers
(every line goes to the provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from batchgate.emulator import EmulatorThread

from .harness import ALPHA, batch_line, client, create, gateway_config, lines_of, running, upload, wait_ended

pytestmark = [pytest.mark.integration, pytest.mark.slow]
N = 6


def _completed(emu: EmulatorThread) -> int:
    return int(emu.stats()["providers"]["alpha"]["completed"])


def _lines() -> list[dict[str, Any]]:
    lines = [batch_line(i, ALPHA) for i in range(N)]
    for line in lines:
        line["body"]["temperature"] = 0  # deterministic: its answer may be reused
    return lines


def _run_batch(server: Any, key: str) -> list[dict[str, Any]]:
    c = client(server, key)
    batch = wait_ended(c, create(c, upload(c, _lines())).id)
    assert batch.status == "completed", batch
    out = lines_of(c, batch.output_file_id)
    assert len(out) == N
    return out


def test_tenant_b_never_gets_tenant_a_s_cached_answer(tmp_path: Path, fresh_emu: EmulatorThread) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", fresh_emu)
    with running(tmp_path, config, "--cache", str(tmp_path / "cache.db")) as server:
        a, b = server.keys_create(), server.keys_create()
        start = _completed(fresh_emu)
        first = _run_batch(server, a)
        assert _completed(fresh_emu) - start == N  # A paid for its answers once
        again = _run_batch(server, a)
        assert _completed(fresh_emu) - start == N  # A's re-run: all from the cache
        assert [x["response"]["body"] for x in again] == [x["response"]["body"] for x in first]
        _run_batch(server, b)
        assert _completed(fresh_emu) - start == 2 * N  # B's same batch: every line sent, none of A's
