"""Keep the floor: what the live proxy adds, streaming and not, beside a bare aiohttp proxy; and
how soon a streamed answer's first event reaches the client.

    python bench/live_overhead.py [--sequential 40] [--burst 200] [--rounds 12] [--first 100]

Three processes besides this client: the emulator (`batchgate emulate`), a bare aiohttp proxy
(this file with `--bare`: one pooled client session, the bytes forwarded, a stream chunk by chunk
as it arrives, nothing checked, no gateway) and `batchgate serve`. Each figure is measured
side by side in one run, the sides interleaved round by round:

(1) sequential requests (`--sequential` a round, `--rounds` rounds) straight to the emulator,
    through the bare proxy and through `serve`: a chat completion not streamed, and one streamed
    (20 tokens, the client asking `include_usage`) timed to its last byte. A side's overhead is
    the median over rounds of (its round's median - the direct round's median), in ms; the
    sides' order turns each round, and the bursts come after every sequential round.
(2) a burst of `--burst` concurrent requests, each kind: the p50 of each side, and its overhead.
(3) first-event delay: `--first` streamed requests per endpoint (`/v1/chat/completions`,
    `/v1/responses`, `/v1/messages`) of a 2 s, 200-token answer (10 ms a token), 10 at a time,
    through `serve` (and straight, for reference): the time from the emulator writing the first
    event (its `/_emulator/streams`, by the answer's id, on the machine's monotonic clock) to
    this client reading it; p50 and p90 in ms. Then the same through `serve` for chat routed to
    a `kind: gemini` target (`:streamGenerateContent?alt=sse`) and a `kind: bedrock` one
    (ConverseStream, signed with throwaway keys the emulator does not check), their events
    translated into chat chunks.

Prints the tables; asserts nothing (the targets: `serve` within 1.2x the bare proxy's overhead,
the first event within 20 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from aiohttp import web
from serve_bench import served

from batchgate.emulator.runner import EmulatorProcess

FAST = {"ttft_p50_ms": 0.0, "ttft_sigma": 0.1, "per_token_ms": 0.0}  # a mock upstream
PACED = {"ttft_p50_ms": 20.0, "ttft_sigma": 0.1, "per_token_ms": 10.0}  # 200 tokens: 2 s
CHAT, RESPONSES, MESSAGES = "/v1/chat/completions", "/v1/responses", "/v1/messages"
Sender = Callable[[aiohttp.ClientSession, int], "asyncio.Future[float] | Any"]


def _emulator_config(path: Path) -> Path:
    openai = {"rpm": 10**7, "tpm": 10**10}
    anthropic = {"rpm": 10**7, "itpm": 10**10, "otpm": 10**10}
    providers = [
        {"name": "fast", "family": "openai", "limits": openai, "latency": FAST},
        {"name": "paced", "family": "openai", "limits": openai, "latency": PACED},
        {"name": "pacedan", "family": "anthropic", "limits": anthropic, "latency": PACED},
        {"name": "pacedgem", "family": "gemini", "limits": openai, "latency": PACED},
        {"name": "pacedbr", "family": "bedrock", "limits": openai, "latency": PACED},
    ]
    path.write_text(yaml.safe_dump({"seed": 1, "providers": providers}), encoding="utf-8")
    return path


def _gateway_config(path: Path, emu_url: str) -> Path:
    data = {
        "providers": [
            {"name": "fast", "kind": "openai", "base_url": f"{emu_url}/fast/v1"},
            {"name": "paced", "kind": "openai", "base_url": f"{emu_url}/paced/v1"},
            {"name": "pacedan", "kind": "anthropic", "base_url": f"{emu_url}/pacedan"},
            {"name": "pacedgem", "kind": "gemini", "base_url": f"{emu_url}/pacedgem", "api_key": "k"},
            {"name": "pacedbr", "kind": "bedrock", "base_url": f"{emu_url}/pacedbr", "region": "us-east-1"},
        ],
        "routes": [
            {"model": "fast", "targets": ["fast:gpt-4o-mini"]},
            {"model": "paced", "targets": ["paced:gpt-4o-mini"]},
            {"model": "pacedan", "targets": ["pacedan:claude-3-5-haiku-latest"]},
            {"model": "pacedgem", "targets": ["pacedgem:gemini-2.5-flash"]},
            {"model": "pacedbr", "targets": ["pacedbr:anthropic.claude-3-haiku-20240307-v1:0"]},
        ],
        "settings": {"concurrency": 2048, "seed": 1},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# -- the bare proxy (its own process) ---------------------------------------------------------------
async def _bare(emu_url: str) -> None:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    headers = {"Content-Type": "application/json", **_direct_headers()}

    async def forward(request: web.Request) -> web.StreamResponse:
        async with session.post(emu_url + request.path, data=await request.read(), headers=headers) as r:
            if not r.headers.get("Content-Type", "").startswith("text/event-stream"):
                return web.Response(body=await r.read(), status=r.status, content_type="application/json")
            out = web.StreamResponse(status=r.status, headers={"Content-Type": "text/event-stream"})
            await out.prepare(request)
            async for chunk in r.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    app = web.Application()
    app.router.add_post("/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


# -- one request ------------------------------------------------------------------------------------
def _body(path: str, model: str, words: int, stream: bool) -> dict[str, Any]:
    ask = f"write {words} words"
    if path == RESPONSES:
        body: dict[str, Any] = {"model": model, "input": ask, "max_output_tokens": words * 2}
    else:
        body = {"model": model, "max_tokens": words * 2, "messages": [{"role": "user", "content": ask}]}
    if stream:
        body["stream"] = True
        if path == CHAT:
            body["stream_options"] = {"include_usage": True}
    return body


async def _timed(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> float:
    """The request's latency to its last byte, ms."""
    started = time.perf_counter()
    async with http.post(url, json=body, headers=headers) as r:
        async for _ in r.content.iter_any():
            pass
        if r.status != 200:
            raise RuntimeError(f"{url}: HTTP {r.status}")
    return (time.perf_counter() - started) * 1000.0


def _first_id(path: str, data: bytes) -> str:
    event = orjson.loads(data)
    if path == RESPONSES:
        return str(event["response"]["id"])
    if path == MESSAGES:
        return str(event["message"]["id"])
    return str(event["id"])


async def _first_event(
    http: aiohttp.ClientSession, url: str, path: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[str, float]:
    """(the answer's id, when its first event was read: monotonic s); the rest read to the end."""
    async with http.post(url, json=body, headers=headers) as r:
        buffer = b""
        while b"\n\n" not in buffer:
            chunk = await r.content.readany()
            if not chunk:
                raise RuntimeError(f"{url}: the stream ended before its first event")
            buffer += chunk
        at = time.monotonic()
        event = buffer.split(b"\n\n", 1)[0]
        data = next(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
        async for _ in r.content.iter_any():
            pass
    return _first_id(path, data), at


# -- the figures ------------------------------------------------------------------------------------
def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


Side = tuple[str, str, dict[str, str], int | None]  # chat URL, model, headers, the proxy's pid


async def _overheads(sides: dict[str, Side], args: argparse.Namespace) -> None:
    """(1) and (2), with each proxy's CPU time per request (from /proc: steadier than latency on
    a loaded machine). The sequential rounds come first, then the bursts (a burst's aftermath —
    its garbage, a busy neighbour — never falls on another side's sequential round), and the
    sides' order turns round by round (no side always follows the same one)."""
    names = list(sides)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for stream in (False, True):
            kind = "streamed" if stream else "not streamed"
            rounds: dict[str, list[float]] = {name: [] for name in sides}
            bursts: dict[str, list[float]] = {name: [] for name in sides}
            cpu = dict.fromkeys(sides, 0.0)
            for url, model, headers, _ in sides.values():  # warm-up
                await asyncio.gather(
                    *(_timed(http, url, _body(CHAT, model, 20, stream), headers) for _ in range(20))
                )
            for turn in range(2 * args.rounds):
                burst = turn >= args.rounds
                for name in names[turn % len(names) :] + names[: turn % len(names)]:
                    url, model, headers, pid = sides[name]
                    body = _body(CHAT, model, 20, stream)
                    before = _cpu_s(pid)
                    if burst:
                        many = (_timed(http, url, body, headers) for _ in range(args.burst))
                        bursts[name].extend(await asyncio.gather(*many))
                    else:
                        times = [await _timed(http, url, body, headers) for _ in range(args.sequential)]
                        rounds[name].append(_median(times))
                    cpu[name] += _cpu_s(pid) - before
            per_request = {
                name: spent / (args.rounds * (args.sequential + args.burst)) for name, spent in cpu.items()
            }
            _table(f"chat completions, {kind}", rounds, bursts, per_request, args)


def _cpu_s(pid: int | None) -> float:
    """The process's CPU seconds so far (user + system; 0 without a pid or /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _table(
    title: str,
    rounds: dict[str, list[float]],
    bursts: dict[str, list[float]],
    cpu: dict[str, float],
    args: argparse.Namespace,
) -> None:
    direct_rounds, direct_burst = rounds["direct"], _median(bursts["direct"])
    print(f"\n{title}: {args.sequential} sequential x {args.rounds} rounds; bursts of {args.burst}")
    print(
        f"    {'side':<12} {'seq p50':>9} {'seq adds':>9} {'burst p50':>10} {'burst adds':>11} {'CPU/req':>8}"
    )
    seq: dict[str, float] = {}
    burst: dict[str, float] = {}
    for name, medians in rounds.items():
        seq[name] = _median([a - d for a, d in zip(medians, direct_rounds, strict=True)])
        burst[name] = _median(bursts[name]) - direct_burst
        p50s = f"{_median(medians):9.2f} {seq[name]:+9.2f} {_median(bursts[name]):10.1f}"
        print(f"    {name:<12} {p50s} {burst[name]:+11.1f} {cpu[name] * 1000.0:8.3f}")
    both = (("sequential", seq), ("burst", burst))
    ratios = [f"{kind} {adds['serve'] / adds['bare']:.2f}x" for kind, adds in both if adds["bare"] > 0]
    if cpu["bare"] > 0:
        ratios.append(f"CPU per request {cpu['serve'] / cpu['bare']:.2f}x")
    print(f"    serve / the bare proxy: {', '.join(ratios) or '-'}")


async def _first_events(
    emu_url: str, serve_url: str, headers: dict[str, str], args: argparse.Namespace
) -> None:
    """(3): the first event's delay per endpoint, through serve and straight."""
    routes = {CHAT: ("paced", "/paced"), RESPONSES: ("paced", "/paced"), MESSAGES: ("pacedan", "/pacedan")}
    print(
        f"\nfirst event, emulator send -> client read (ms): {args.first} streams of 200 tokens over 2 s each"
    )
    print(f"    {'endpoint':<30} {'side':<8} {'p50':>7} {'p90':>7}")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for path, (model, prefix) in routes.items():
            for side, url, hdrs in (("direct", f"{emu_url}{prefix}{path}", _direct_headers()),
                                    ("serve", f"{serve_url}{path}", headers)):  # fmt: skip
                body = _body(path, model if side == "serve" else "gpt-4o-mini", 200, True)
                if path == MESSAGES and side == "direct":
                    body["model"] = "claude-3-5-haiku-latest"
                await _first_row(http, emu_url, (url, path, body, hdrs), path, side, args.first)
        for kind in ("gemini", "bedrock"):  # chat translated from the kind's own stream
            body = _body(CHAT, "pacedgem" if kind == "gemini" else "pacedbr", 200, True)
            await _first_row(
                http,
                emu_url,
                (f"{serve_url}{CHAT}", CHAT, body, headers),
                f"{CHAT} ({kind})",
                "serve",
                args.first,
            )


async def _first_row(
    http: aiohttp.ClientSession,
    emu_url: str,
    call: tuple[str, str, dict[str, Any], dict[str, str]],
    label: str,
    side: str,
    count: int,
) -> None:
    """One row of (3): `count` streams of `call` (url, path, body, headers), 10 at a time."""
    got: list[tuple[str, float]] = []
    for _ in range(0, count, 10):
        got += await asyncio.gather(*(_first_event(http, *call) for _ in range(10)))
    async with http.get(f"{emu_url}/_emulator/streams") as r:
        sent: dict[str, float] = (await r.json())["first_event_at"]
    delays = sorted((at - sent[i]) * 1000.0 for i, at in got if i in sent)
    p90 = delays[int(len(delays) * 0.9)] if delays else float("nan")
    print(f"    {label:<30} {side:<8} {_median(delays):7.2f} {p90:7.2f}  ({len(delays)} matched)")


def _direct_headers() -> dict[str, str]:
    return {"Authorization": "Bearer anything", "x-api-key": "anything", "anthropic-version": "2023-06-01"}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--bare":
        asyncio.run(_bare(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=40, help="sequential requests a round and side")
    parser.add_argument("--burst", type=int, default=200, help="concurrent requests in a burst")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds")
    parser.add_argument("--first", type=int, default=100, help="streams per endpoint for the first event")
    args = parser.parse_args()
    # `serve` signs its Bedrock calls from the credential chain: throwaway keys (the emulator's
    # Bedrock provider has no key: it checks no signature)
    os.environ.update(
        AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench", AWS_EC2_METADATA_DISABLED="true"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        emu = EmulatorProcess(_emulator_config(root / "emu.yaml"))
        emu.start()
        bare = subprocess.Popen(
            [sys.executable, __file__, "--bare", emu.url], stdout=subprocess.PIPE, text=True
        )
        try:
            assert bare.stdout is not None
            bare_url = bare.stdout.readline().strip()
            extra = ["--max-connections-per-client", "4096"]  # a burst comes from one address
            with served(root, _gateway_config(root / "gw.yaml", emu.url), extra) as server:
                auth = {"Authorization": f"Bearer {server.key}"}
                sides = {
                    "direct": (f"{emu.url}/fast{CHAT}", "gpt-4o-mini", _direct_headers(), None),
                    "bare": (f"{bare_url}/fast{CHAT}", "gpt-4o-mini", _direct_headers(), bare.pid),
                    "serve": (f"{server.url}{CHAT}", "fast", auth, server.process.pid),
                }
                asyncio.run(_overheads(sides, args))
                asyncio.run(_first_events(emu.url, server.url, auth, args))
        finally:
            bare.terminate()
            bare.wait(timeout=30)
            emu.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
