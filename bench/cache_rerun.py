"""A re-run answered from the response cache (issue 43): the wall time of a `batchgate run` of
`--lines` lines of which `--hits` are in the cache, and the CPU one hit costs.

    python bench/cache_rerun.py [--lines 1000000] [--hits 1000000] [--profile]

The cache is filled directly through the store API, in bulk (`SqliteCacheStore.put_many`, keys
made by the same `JobCache.key_of` a run uses), not by a live first run: a live 1M-line run takes
several minutes, and what is measured here is the re-run. Lines past `--hits` are misses and are
sent to an emulator process (no quota, no latency). Prints, one a line: the input, the fill, the
re-run's wall time and CPU (the `batchgate run` process, from its rusage), its exit code, the
emulator's requests (the misses), and the CPU per hit of the bulk lookup alone (`JobCache.split`
over the hits a chunk at a time, in this process). `--profile` profiles that lookup (cProfile).
A figures script, not a test; the temporary directory is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from batchgate.cache.entry import CacheEntry
from batchgate.cache.sqlite_store import SqliteCacheStore
from batchgate.config import load_config
from batchgate.emulator import EmulatorProcess
from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.ingest import InputPass
from batchgate.jobs.store.protocol import TaskSpec

EMULATOR = """seed: 1
providers:
  - name: alpha
    family: openai
    limits: {rpm: 100000000, tpm: 100000000000}
    latency: {ttft_p50_ms: 0, per_token_ms: 0}
"""
CHUNK = 4096


def write_input(path: Path, lines: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(
                f'{{"custom_id":"t{i}","model":"m","temperature":0,"max_tokens":4,'
                f'"messages":[{{"role":"user","content":"echo item {i}"}}]}}\n'
            )


def answer(i: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": f"echo: item {i}"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }


def read_specs(path: Path, limit: int) -> list[TaskSpec]:
    reading = InputPass(path, None, None, skip_invalid=False)
    specs: list[TaskSpec] = []
    while not reading.done and len(specs) < limit:
        specs += reading.take(min(CHUNK, limit - len(specs)))
    return specs


async def fill(cache_path: Path, config_path: Path, specs: list[TaskSpec]) -> None:
    """Put one answer per spec into the cache, a chunk at a time, through the store API."""
    store = await SqliteCacheStore.open(cache_path, max_bytes=8 << 30)
    keys = JobCache(None, load_config(config_path))
    try:
        for start in range(0, len(specs), CHUNK):
            part = specs[start : start + CHUNK]
            entries = {}
            for spec in part:
                key = keys.key_of(spec.body)
                assert key is not None
                entries[key] = CacheEntry.of(answer(spec.seq), 12, 4, 0.0000042, "alpha").dump()
            await store.put_many(entries)
    finally:
        await store.close()


async def lookup_cpu(cache_path: Path, config_path: Path, specs: list[TaskSpec], profile: bool) -> float:
    """CPU seconds per hit of `JobCache.split` (bulk lookup, the hits' outcomes built)."""
    store = await SqliteCacheStore.open(cache_path, max_bytes=8 << 30)
    cache = JobCache(store, load_config(config_path))
    profiler = cProfile.Profile() if profile else None
    try:
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        hits = 0
        for at in range(0, len(specs), CHUNK):
            found, _ = await cache.split(specs[at : at + CHUNK])
            hits += len(found)
        if profiler is not None:
            profiler.disable()
        cpu = time.process_time() - start
    finally:
        await store.close()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return cpu / max(1, hits)


def emulator_requests(url: str) -> int:
    with urllib.request.urlopen(f"{url}/_emulator/stats", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
    return int(data["providers"]["alpha"]["admitted"])


def rerun(tmp: Path) -> tuple[float, float, int, str]:
    cmd = [sys.executable, "-m", "batchgate", "run", "in.jsonl", "--config", "gw.yaml", "--output",
           "out.jsonl", "--store", "jobs.db", "--cache", "cache.db", "--progress", "quiet"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = [line for line in done.stderr.splitlines() if "from cache" in line]
    return wall, cpu, done.returncode, (summary[0].strip() if summary else done.stderr[-400:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--hits", type=int, default=None, help="lines answered by the cache (default: all)")
    ap.add_argument("--profile", action="store_true", help="cProfile the bulk lookup")
    args = ap.parse_args()
    hits = args.lines if args.hits is None else min(args.hits, args.lines)
    with tempfile.TemporaryDirectory(prefix="bg-cache-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "emu.yaml").write_text(EMULATOR, encoding="utf-8")
        write_input(tmp / "in.jsonl", args.lines)
        size_mb = (tmp / "in.jsonl").stat().st_size / 1e6
        print(f"input: {args.lines:,} lines ({size_mb:.0f} MB), {hits:,} of them in the cache")
        with EmulatorProcess(tmp / "emu.yaml") as emu:
            (tmp / "gw.yaml").write_text(
                "providers:\n  - {name: alpha, kind: openai, base_url: "
                f"'{emu.base_url('alpha')}', limits: {{}}}}\n"
                "routes:\n  - {model: m, targets: ['alpha:gpt-4o-mini']}\nsettings: {concurrency: 64}\n",
                encoding="utf-8",
            )
            specs = read_specs(tmp / "in.jsonl", hits)
            t = time.perf_counter()
            asyncio.run(fill(tmp / "cache.db", tmp / "gw.yaml", specs))
            print(f"cache filled through the store API: {hits:,} answers in {time.perf_counter() - t:.1f} s")
            wall, cpu, code, line = rerun(tmp)
            print(f"re-run: {wall:.1f} s wall, {cpu:.1f} s CPU, exit {code}: {line}")
            print(f"requests sent (the misses): {emulator_requests(emu.url):,}")
            per_hit = asyncio.run(lookup_cpu(tmp / "cache.db", tmp / "gw.yaml", specs, args.profile))
            print(f"CPU per hit (bulk lookup + outcome, this process): {per_hit * 1000:.4f} ms")
            load = os.getloadavg()[0]
            print(f"whole re-run CPU per line: {cpu / args.lines * 1000:.4f} ms (load average {load:.1f})")


if __name__ == "__main__":
    main()
