"""What `/metrics` costs `batchgate serve`: the overhead scenario (one zero-latency, unlimited
provider: the server's own CPU per request is all there is to see) as one batch on a fresh server,
two ways — nobody scraping, and a scraper getting `/metrics` every second — interleaved over
several rounds (the order alternating), so the machine's drift hits both alike.

    python bench/serve_observability.py [--items 20000] [--rounds 3] [--every 1.0]

Prints per way the median requests per second (batch created → seen completed, polled every
0.25 s by the client in both ways) and the server's CPU ms per request, then the ratios
(scraped ÷ not scraped), and the server's CPU for one scrape (20 scrapes once a run ended) as a
share of its CPU per second while running — the figure a noisy machine disturbs least.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import yaml  # noqa: E402
from observability import Scraper  # noqa: E402
from openai import OpenAI  # noqa: E402
from scenarios import MODELS, build  # noqa: E402
from systems.batchgate_lib import gateway_config  # noqa: E402
from workload import ProviderSpec, cli_lines, make_requests  # noqa: E402

from batchgate.emulator import EmulatorProcess  # noqa: E402
from batchgate.server.tenancy.keys import create_key  # noqa: E402
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry  # noqa: E402

WAYS = ("off", "metrics")
POLL_S = 0.25
ENDED = ("completed", "failed", "cancelled", "expired")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Run:
    rate: float  # requests per second
    cpu_ms: float  # the server's CPU per request
    scrapes: int
    scrape_cpu_ms: float  # the server's CPU per scrape, measured after the run (0: not scraped)


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def scrape_cpu_ms(pid: int, url: str, times: int = 20) -> float:
    """The server's CPU per scrape, `times` scrapes in a row once the run ended (its figures full)."""
    before = cpu_s(pid)
    for _ in range(times):
        with urllib.request.urlopen(url, timeout=10) as answer:
            answer.read()
    return 1000.0 * (cpu_s(pid) - before) / times


def one_run(root: Path, config: Path, source: bytes, n: int, way: str, every: float) -> Run:
    registry = Registry(root / REGISTRY_FILE)
    key = create_key(registry, admin=False, name="bench", now=int(time.time()))[1]
    registry.close()
    argv = [sys.executable, "-m", "batchgate", "serve", "--config", str(config), "--port", "0"]
    argv += ["--store", str(root / "jobs.db")]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("listening on ", 1)[1].strip()
        client = OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
        file_id = client.files.create(file=("input.jsonl", source), purpose="batch").id
        scraper = Scraper(url + "/metrics", every) if way == "metrics" else None
        with scraper if scraper is not None else contextlib.nullcontext():
            cpu0, t0 = cpu_s(server.pid), time.perf_counter()
            batch = client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            while (batch := client.batches.retrieve(batch.id)).status not in ENDED:
                time.sleep(POLL_S)
            wall, cpu = time.perf_counter() - t0, cpu_s(server.pid) - cpu0
        counts = batch.request_counts
        if batch.status != "completed" or counts is None or counts.completed != n:
            raise SystemExit(f"{way}: the batch ended {batch.status} with {counts}")
        if scraper is None:
            return Run(n / wall, 1000.0 * cpu / n, 0, 0.0)
        return Run(n / wall, 1000.0 * cpu / n, scraper.answered, scrape_cpu_ms(server.pid, url + "/metrics"))
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between scrapes")
    args = parser.parse_args(argv)
    sc = build("overhead", quick=True)
    requests = make_requests(args.items, ["alpha"], max_tokens=8)
    runs: dict[str, list[Run]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="bench-serve-observe-") as tmpdir:
        tmp = Path(tmpdir)
        emu_yaml = tmp / "emulator.yaml"
        emu_yaml.write_text(yaml.safe_dump(sc.emulator, sort_keys=False))
        source = b"".join(cli_lines(requests))
        with EmulatorProcess(emu_yaml) as emu:
            providers = {n: ProviderSpec(f, MODELS[n], {}, emu.base_url(n)) for n, f in sc.families().items()}
            config = tmp / "gateway.yaml"
            config.write_text(yaml.safe_dump(gateway_config(providers, None), sort_keys=False))
            for r in range(args.rounds):
                for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                    root = tmp / f"round{r}-{way}"
                    root.mkdir()
                    emu.reset()
                    runs[way].append(one_run(root, config, source, args.items, way, args.every))
                    run = runs[way][-1]
                    figures = f"{run.rate:,.0f} req/s  CPU {run.cpu_ms:.3f} ms/req"
                    print(f"  round {r + 1} {way:8s} {figures}", flush=True)
    report(runs, args)
    return 0


def report(runs: dict[str, list[Run]], args: argparse.Namespace) -> None:
    rate = {w: statistics.median(r.rate for r in runs[w]) for w in WAYS}
    cpu = {w: statistics.median(r.cpu_ms for r in runs[w]) for w in WAYS}
    print(
        f"overhead scenario, {args.items:,} requests as one batch on `batchgate serve`, "
        f"median of {args.rounds} rounds:"
    )
    for way in WAYS:
        scrapes = (
            f", {min(r.scrapes for r in runs[way])}+ scrapes answered per run" if way == "metrics" else ""
        )
        print(f"  {way:8s} {rate[way]:,.0f} req/s  server CPU {cpu[way]:.3f} ms/req{scrapes}")
    ratio = rate["metrics"] / rate["off"]
    print(f"  throughput scraped/not: {ratio:.3f} (cost {100 * (1 - ratio):+.1f}%)")
    print(f"  server CPU scraped/not: {cpu['metrics'] / cpu['off']:.3f}")
    per_scrape = statistics.median(r.scrape_cpu_ms for r in runs["metrics"])
    busy_ms = rate["off"] * cpu["off"]  # the server's CPU ms per second of the run
    print(
        f"  one scrape costs the server {per_scrape:.1f} ms CPU: every {args.every:g} s, "
        f"{100 * per_scrape / args.every / busy_ms:.1f}% of its CPU while it runs the batch"
    )


if __name__ == "__main__":
    sys.exit(main())
