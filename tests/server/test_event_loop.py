"""`batchgate serve --loop`: the server runs on uvloop when it is installed (`auto`, the default) or
asked for, on asyncio's own loop when asked for or when uvloop is absent, and says which in its
log (`serving loop=…`); asking for a uvloop that is not installed is one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import httpx
import pytest

from batchgate.cli.serve import _loop_factory
from batchgate.clock import LoopClock
from batchgate.emulator import EmulatorThread
from batchgate.errors import JobError
from batchgate.server.service import WholeMillisecondClock, loop_clock
from waiting import poll

from .harness import ALPHA, Server, gateway_config, running

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


def _serving_on(server: Server) -> str:
    """The loop the server's `serving` log line names."""
    lines = poll(
        lambda: [x for x in server.log.read_text().splitlines() if " serving " in x],
        bool,
        "the server's `serving` log line",
    )
    return lines[-1].rsplit("loop=", 1)[1].split()[0]


def _chat(server: Server) -> httpx.Response:
    body = {"model": ALPHA, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {server.keys_create()}"}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=30)


@pytest.mark.integration
def test_the_default_server_runs_on_uvloop_when_it_is_installed(server: Server) -> None:
    assert _serving_on(server) == ("uvloop" if HAS_UVLOOP else "asyncio")


@pytest.mark.integration
@pytest.mark.slow
def test_loop_asyncio_serves_the_live_proxy_on_its_own_loop(tmp_path: Path, emu: EmulatorThread) -> None:
    with running(tmp_path, gateway_config(tmp_path / "gateway.yaml", emu), "--loop", "asyncio") as server:
        answer = _chat(server)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"]
        assert _serving_on(server) == "asyncio"


def test_asyncio_asks_for_no_loop_of_its_own() -> None:
    assert _loop_factory("asyncio") is None


@pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop (the serve extra) is not installed")
def test_uvloop_and_auto_make_uvloop_s_loop_when_it_is_installed() -> None:
    for choice in ("uvloop", "auto"):
        factory = _loop_factory(choice)
        assert factory is not None
        loop = factory()
        try:
            assert type(loop).__module__.startswith("uvloop")
        finally:
            loop.close()


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an interpreter without it imports: nothing
    assert _loop_factory("auto") is None
    with pytest.raises(JobError, match=r"--loop uvloop: uvloop is not installed"):
        _loop_factory("uvloop")


@pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop (the serve extra) is not installed")
@pytest.mark.parametrize("delay", [0.0, 0.0001, 0.0004, 0.0006, 0.0013, 0.0021])
def test_on_uvloop_the_service_clock_wakes_a_timer_no_earlier_than_its_time(delay: float) -> None:
    """uvloop runs a timer due in under half a millisecond at once: a quota gate woken early looks,
    finds itself early and arms again — a spin. The service's clock on uvloop never wakes early."""
    factory = _loop_factory("uvloop")
    assert factory is not None

    async def woken_at() -> tuple[float, float]:
        clock = loop_clock(asyncio.get_running_loop())
        assert isinstance(clock, WholeMillisecondClock)
        when = clock.now() + delay
        fired: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        clock.call_at(when, lambda: fired.set_result(clock.now()))
        return when, await fired

    with asyncio.Runner(loop_factory=factory) as runner:
        when, seen = runner.run(woken_at())
    assert seen >= when


def test_on_asyncio_the_service_clock_is_the_loop_s_own() -> None:
    async def made() -> LoopClock:
        return loop_clock(asyncio.get_running_loop())

    assert type(asyncio.run(made())) is LoopClock
