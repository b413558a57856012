"""Is `batchgate serve` responsive under load? Two figures, each side by side in one run.

    python bench/serve_responsive.py [--lines 20000] [--rpm 60000] [--latency-ms 50]
                                     [--calls 300] [--live 200] [--rounds 3]
                                     [--loop auto|uvloop|asyncio]

One emulated provider (`batchgate emulate`, its own process) and one `batchgate serve` (a
subprocess) in front of it, the bench's client in a third process:

(a) `GET /v1/batches` latency (a page of 20: `--finished` small batches that have ended, and the
    big one), `--calls` calls one after another: first on an idle server, then while a batch of
    `--lines` requests (uploaded with the Files API, created with the Batches API) runs on the
    provider at up to `--rpm`;
(b) `--live` concurrent chat completions, sent straight to the emulator and through the server's
    proxy (`/v1/chat/completions`), alternating for `--rounds` rounds on an idle server: the
    proxy's added latency is the difference of the two. The server's CPU time per proxied request
    (from /proc, Linux) is printed beside it: on a loaded machine it is the steadier figure.

`--loop` is passed to `batchgate serve` (its event loop; without it, the server's default): run
once with each, alternated, to compare them. Prints p50/p99 (ms) of each. Asserts nothing.
`--profile DIR` records the server with py-spy (`pip install py-spy`) during each phase into
DIR/<phase>.txt (collapsed stacks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from serve_bench import MODEL, Served, served

from batchgate.emulator.runner import EmulatorProcess

LIVE = "m-live"
ENDED = ("completed", "failed", "cancelled", "expired")


def _emulator_config(path: Path, rpm: int, latency_ms: float) -> Path:
    """`alpha` for the batch (at `rpm`), `live` for the live requests (a quota that never binds)."""
    latency = {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [
        {"name": name, "family": "openai", "limits": {"rpm": limit, "tpm": 10**10}, "latency": latency}
        for name, limit in (("alpha", rpm), ("live", 10**7))
    ]
    path.write_text(yaml.safe_dump({"seed": 7, "providers": providers}), encoding="utf-8")
    return path


def _gateway_config(path: Path, emu_url: str, rpm: int) -> Path:
    providers = [
        {"name": "alpha", "kind": "openai", "base_url": f"{emu_url}/alpha/v1", "limits": {"rpm": rpm}},
        {"name": "live", "kind": "openai", "base_url": f"{emu_url}/live/v1"},
    ]
    routes = [
        {"model": MODEL, "targets": ["alpha:gpt-4o-mini"]},
        {"model": LIVE, "targets": ["live:gpt-4o-mini"]},
    ]
    data = {"providers": providers, "routes": routes, "settings": {"concurrency": 512, "seed": 1}}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _input(n: int) -> bytes:
    lines = []
    for i in range(n):
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": f"batch {i}"}]}
        lines.append({"custom_id": f"b-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def _q(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return f"p50 {at(0.5):7.1f}  p99 {at(0.99):7.1f}  max {ordered[-1]:7.1f}  (n={len(ordered)})"


async def _listing(
    http: aiohttp.ClientSession, url: str, calls: int, stop: asyncio.Event | None
) -> list[float]:
    """`calls` sequential `GET /v1/batches` (fewer if `stop` is set first), each latency in ms."""
    times: list[float] = []
    for _ in range(calls):
        if stop is not None and stop.is_set():
            break
        started = time.perf_counter()
        async with http.get(f"{url}/v1/batches", params={"limit": "20"}) as r:
            await r.read()
            assert r.status == 200, r.status
        times.append((time.perf_counter() - started) * 1000.0)
        await asyncio.sleep(0.01)
    return times


async def _create_batch(http: aiohttp.ClientSession, url: str, lines: int) -> str:
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", _input(lines), filename="in.jsonl", content_type="application/jsonl")
    async with http.post(f"{url}/v1/files", data=form) as r:
        file_id = (await r.json())["id"]
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    async with http.post(f"{url}/v1/batches", json=body) as r:
        return str((await r.json())["id"])


async def _status(http: aiohttp.ClientSession, url: str, batch_id: str) -> dict[str, Any]:
    async with http.get(f"{url}/v1/batches/{batch_id}") as r:
        data: dict[str, Any] = await r.json()
        return data


async def _during_batch(http: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> dict[str, Any]:
    batch_id = await _create_batch(http, url, args.lines)
    started = time.monotonic()
    while (b := await _status(http, url, batch_id))["request_counts"]["completed"] < 50:  # noqa: ASYNC110 — polling the server under test
        await asyncio.sleep(0.1)
    stop = asyncio.Event()
    busy = await _listing(http, url, args.calls, stop)
    done_during = b["request_counts"]["completed"]
    while (b := await _status(http, url, batch_id))["status"] not in ENDED:  # noqa: ASYNC110 — as above
        await asyncio.sleep(0.5)
    return {"busy": busy, "status": b["status"], "counts": b["request_counts"],
            "makespan": time.monotonic() - started, "seen": done_during}  # fmt: skip


async def _one_chat(http: aiohttp.ClientSession, url: str, headers: dict[str, str], i: int) -> float:
    body = {"model": LIVE, "max_tokens": 5, "messages": [{"role": "user", "content": f"live {i}"}]}
    started = time.perf_counter()
    async with http.post(url, json=body, headers=headers) as r:
        await r.read()
        assert r.status == 200, (r.status, await r.text())
    return (time.perf_counter() - started) * 1000.0


def _cpu_s(pid: int) -> float | None:
    """The process's CPU seconds so far (user + system), where /proc says it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _live(
    server_url: str, emu_url: str, key: str, pid: int, args: argparse.Namespace
) -> dict[str, list[float]]:
    direct: list[float] = []
    proxy: list[float] = []
    cpu: list[float] = []  # the server's CPU seconds per proxied burst
    targets = (
        (direct, f"{emu_url}/live/v1/chat/completions", {"Authorization": "Bearer anything"}),
        (proxy, f"{server_url}/v1/chat/completions", {"Authorization": f"Bearer {key}"}),
    )
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        for _, url, headers in targets:  # a warm-up round each: connections made, code loaded
            await asyncio.gather(*(_one_chat(http, url, headers, i) for i in range(args.live)))
        for _ in range(args.rounds):
            for into, url, headers in targets:
                before = _cpu_s(pid)
                into.extend(
                    await asyncio.gather(*(_one_chat(http, url, headers, i) for i in range(args.live)))
                )
                after = _cpu_s(pid)
                if into is proxy and before is not None and after is not None:
                    cpu.append(after - before)
    return {"direct": direct, "proxy": proxy, "cpu": cpu}


@contextlib.asynccontextmanager
async def _profiled(args: argparse.Namespace, pid: int, phase: str) -> AsyncIterator[None]:
    """py-spy records process `pid` while the block runs (with `--profile`)."""
    if args.profile is None:
        yield
        return
    out = Path(args.profile) / f"{phase}.txt"
    argv = ["py-spy", "record", "-p", str(pid), "-o", str(out), "-f", "raw", "-r", "200", "--nonblocking"]
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: ASYNC220 — starts at once
    try:
        yield
    finally:
        spy.send_signal(2)
        await asyncio.to_thread(spy.wait, 30)


async def _finished(http: aiohttp.ClientSession, url: str, n: int) -> None:
    """`n` small batches, each run to its end: the rest of a tenant's page."""
    made = [await _create_batch(http, url, 10) for _ in range(n)]
    for batch_id in made:
        while (await _status(http, url, batch_id))["status"] not in ENDED:  # noqa: ASYNC110 — polling the server
            await asyncio.sleep(0.1)


async def bench(server: Served, emu_url: str, args: argparse.Namespace) -> None:
    server_url, key, pid = server.url, server.key, server.process.pid
    auth = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        await _finished(http, server_url, args.finished)
        await _listing(http, server_url, 20, None)  # warm-up
        idle = await _listing(http, server_url, args.calls, None)
        print(f"(a) GET /v1/batches, idle:           {_q(idle)}")
        async with _profiled(args, pid, "live"):
            live = await _live(server_url, emu_url, key, pid, args)
        p50 = (
            sorted(live["proxy"])[len(live["proxy"]) // 2] - sorted(live["direct"])[len(live["direct"]) // 2]
        )
        print(f"(b) {args.live} concurrent chat completions x {args.rounds} rounds, latency (ms):")
        print(f"    straight to the emulator:        {_q(live['direct'])}")
        print(f"    through the proxy:               {_q(live['proxy'])}")
        print(f"    proxy adds (p50):                {p50:+.1f} ms")
        if live["cpu"]:
            per_request = sum(live["cpu"]) / (len(live["cpu"]) * args.live) * 1000.0
            print(f"    server CPU per proxied request:  {per_request:.3f} ms")
        async with _profiled(args, pid, "batch"):
            run = await _during_batch(http, server_url, args)
        print(f"(a) GET /v1/batches, during a batch: {_q(run['busy'])}")
        print(f"    batch of {args.lines}: {run['status']} in {run['makespan']:.1f} s, {run['counts']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000, help="requests in the batch")
    parser.add_argument("--rpm", type=int, default=60000, help="the provider's limit (requests/minute)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the provider's answer latency")
    parser.add_argument("--finished", type=int, default=19, help="ended batches on the listed page")
    parser.add_argument("--calls", type=int, default=300, help="GET /v1/batches calls per phase")
    parser.add_argument("--live", type=int, default=200, help="concurrent live requests")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of live requests per side")
    parser.add_argument("--profile", type=Path, help="record the server with py-spy into this folder")
    parser.add_argument("--loop", help="the server's event loop (`batchgate serve --loop`)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        emu = EmulatorProcess(_emulator_config(root / "emu.yaml", args.rpm, args.latency_ms))
        emu.start()
        try:
            config = _gateway_config(root / "gw.yaml", emu.url, args.rpm)
            with served(root, config, ["--loop", args.loop] if args.loop else []) as server:
                asyncio.run(bench(server, emu.url, args))
        finally:
            emu.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
