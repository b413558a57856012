"""The floor under the live proxy's added latency: a bare aiohttp proxy (one server, one pooled
client session, the body's bytes forwarded, nothing checked, no gateway) in its own process, with
the same burst as `serve_responsive.py`'s (b), side by side with the emulator straight.

    python bench/bare_proxy.py [--live 200] [--rounds 3] [--latency-ms 50] [--loop asyncio|uvloop]

Prints p50/p99 (ms) of each side, the p50 the bare proxy adds and its CPU time per request
(/proc, Linux). What `batchgate serve`'s proxy adds beyond this is its own (auth, checks, the
gateway's quota, slots, attempt and hedge); asserts nothing. `--loop uvloop` runs the bare proxy
(only it) on uvloop, as `batchgate serve --loop uvloop` runs the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web
from serve_responsive import _cpu_s, _emulator_config, _one_chat, _q

from batchgate.emulator.runner import EmulatorProcess


async def _serve(emu_url: str) -> None:
    """The bare proxy: print its URL, forward every POST's bytes to the emulator's live route."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    upstream = f"{emu_url}/live/v1/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer anything"}

    async def forward(request: web.Request) -> web.Response:
        async with session.post(upstream, data=await request.read(), headers=headers) as r:
            return web.Response(body=await r.read(), status=r.status, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


async def _burst(emu_url: str, proxy_url: str, pid: int, args: argparse.Namespace) -> None:
    direct: list[float] = []
    proxy: list[float] = []
    cpu = 0.0
    targets = ((direct, f"{emu_url}/live/v1/chat/completions"), (proxy, f"{proxy_url}/v1/chat/completions"))
    headers = {"Authorization": "Bearer anything"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for _, url in targets:  # a warm-up round each
            await asyncio.gather(*(_one_chat(http, url, headers, i) for i in range(args.live)))
        for _ in range(args.rounds):
            for into, url in targets:
                before = _cpu_s(pid) or 0.0
                into.extend(
                    await asyncio.gather(*(_one_chat(http, url, headers, i) for i in range(args.live)))
                )
                cpu += (_cpu_s(pid) or 0.0) - before if into is proxy else 0.0
    adds = sorted(proxy)[len(proxy) // 2] - sorted(direct)[len(direct) // 2]
    print(f"{args.live} concurrent chat completions x {args.rounds} rounds, latency (ms):")
    print(f"    straight to the emulator:        {_q(direct)}")
    print(f"    through a bare aiohttp proxy:    {_q(proxy)}")
    print(f"    it adds (p50):                   {adds:+.1f} ms")
    print(f"    its CPU per request:             {cpu / (args.rounds * args.live) * 1000.0:.3f} ms")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        factory = None
        if sys.argv[3] == "uvloop":
            import uvloop  # noqa: PLC0415 — only when asked for

            factory = uvloop.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(_serve(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=200, help="concurrent live requests")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of live requests per side")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the provider's answer latency")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the proxy's loop")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        emu = EmulatorProcess(_emulator_config(Path(tmp) / "emu.yaml", 60000, args.latency_ms))
        emu.start()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", emu.url, args.loop], stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None
            asyncio.run(_burst(emu.url, server.stdout.readline().strip(), server.pid, args))
        finally:
            server.terminate()
            server.wait(timeout=30)
            emu.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
