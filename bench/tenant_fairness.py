"""What one tenant's load costs another on one `batchgate serve` (issue 40): tenant A runs
`--long` long batches (native jobs of `--lines` lines each), ends `--hooks` one-line jobs whose
callbacks go to a receiver that never answers, and uploads a `--upload`-request message batch
again and again (checked, then refused for its last line, so it costs the check every time);
meanwhile tenant B runs `--tries` one-line jobs one after another, and a third client lists B's
batches (`GET /v1/batches`) every 100 ms.

    python bench/tenant_fairness.py [--long 64] [--lines 200] [--hooks 64] [--upload 100000] [--tries 20]

Prints B's job times (create → completed, p50 / p99 / max) and the listing's latency (p50 / p99 /
max) under that load; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
from serve_bench import CLI, MODEL, emulator, write_config

from batchgate.server.callbacks.delivery import create_secret
from batchgate.server.tenancy.keys import create_key
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry

ENDED = ("completed", "failed", "cancelled")


def _requests(n: int, tag: str) -> list[dict[str, object]]:
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    return [{"custom_id": f"{tag}-{i}", **body} for i in range(n)]


def _keys(root: Path) -> tuple[str, str]:
    registry = Registry(root / REGISTRY_FILE)
    try:
        made = [create_key(registry, admin=False, name=n, now=int(time.time())) for n in ("a", "b")]
        for key, _ in made:
            create_secret(registry, key.id)
        return made[0][1], made[1][1]
    finally:
        registry.close()


@contextlib.contextmanager
def _server(root: Path, config: Path) -> Iterator[str]:
    argv = [*CLI, "serve", "--config", str(config), "--port", "0", "--store", str(root / "jobs.db")]
    argv += ["--callback-allow", "127.0.0.1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split("listening on ", 1)[1].strip() + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=120)


@contextlib.contextmanager
def _hole() -> Iterator[str]:
    """A receiver that accepts and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        listener.close()
        for s in held:
            s.close()


def _upload_loop(url: str, key: str, n: int, stop: threading.Event) -> None:
    params = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hello there"}]}
    requests = [{"custom_id": f"r{i}", "params": params} for i in range(n - 1)]
    requests.append({"custom_id": "last", "params": {**params, "model": "no-such-route"}})
    body = orjson.dumps({"requests": requests})
    with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=300) as c:
        while not stop.is_set():
            c.post("/messages/batches", content=body, headers={"Content-Type": "application/json"})


def _listing_loop(url: str, key: str, stop: threading.Event, seconds: list[float]) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        while not stop.is_set():
            t = time.perf_counter()
            c.get("/batches")
            seconds.append(time.perf_counter() - t)
            stop.wait(0.1)


def _wait(c: httpx.Client, job_id: str) -> str:
    while (state := c.get(f"/jobs/{job_id}").json()["state"]) not in ENDED:
        time.sleep(0.05)
    return str(state)


def _pcts(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"p50 {statistics.median(xs) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {xs[-1] * 1000:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--long", type=int, default=64)
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--hooks", type=int, default=64)
    ap.add_argument("--upload", type=int, default=100_000)
    ap.add_argument("--tries", type=int, default=20)
    args = ap.parse_args()
    emu = emulator(rpm=3000, latency_ms=300)
    with tempfile.TemporaryDirectory() as tmp, _hole() as hole:
        root = Path(tmp)
        a_key, b_key = _keys(root)
        with _server(root, write_config(root / "gw.yaml", emu, 3000, concurrency=64)) as url:
            a = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {a_key}"}, timeout=120)
            b = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {b_key}"}, timeout=120)
            stop, listed, done = threading.Event(), list[float](), list[float]()
            for i in range(args.long):
                a.post("/jobs", json={"requests": _requests(args.lines, f"long{i}")})
            for i in range(args.hooks):
                a.post("/jobs", json={"requests": _requests(1, f"hook{i}"), "callback_url": hole})
            loops = [
                threading.Thread(target=_upload_loop, args=(url, a_key, args.upload, stop)),
                threading.Thread(target=_listing_loop, args=(url, b_key, stop, listed)),
            ]
            for t in loops:
                t.start()
            for i in range(args.tries):
                t0 = time.perf_counter()
                made = b.post("/jobs", json={"requests": _requests(1, f"b{i}")}).json()
                state = _wait(b, made["id"])
                done.append(time.perf_counter() - t0)
                print(f"B try {i + 1}: {state} in {done[-1]:.2f} s", flush=True)
            stop.set()
            for t in loops:
                t.join()
            for made in a.get("/jobs", params={"limit": 100}).json()["data"]:
                a.post(f"/jobs/{made['id']}/cancel")
            a.close()
            b.close()
    emu.stop()
    print(f"A: {args.long} long jobs × {args.lines} lines, {args.hooks} callbacks to a silent receiver,"
          f" a {args.upload:,}-request message batch posted over and over")  # fmt: skip
    print(f"B's one-line job, create → completed ({args.tries} tries): {_pcts(done)}")
    print(f"GET /v1/batches every 100 ms ({len(listed)} calls): {_pcts(listed)}")


if __name__ == "__main__":
    main()
