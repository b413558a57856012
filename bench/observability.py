"""What watching a run costs: the overhead scenario (one zero-latency, unlimited provider: the
client's own CPU per request is all there is to see) run by `batchgate run` three ways — logs off,
JSON log events at info level to a file, and `/metrics` served and scraped every second.

    python bench/observability.py [--items 20000] [--repeats 3] [--ways off logs metrics]

Prints per way the median CPU ms per request and requests per second (process start-up included,
as `compare.py` counts the CLI) and, for metrics, how many scrapes were answered.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import yaml  # noqa: E402
from compare import run_cli  # noqa: E402
from scenarios import MODELS, build  # noqa: E402
from workload import ProviderSpec, Spec, make_requests  # noqa: E402

from batchgate.emulator import EmulatorProcess  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Scraper:
    """Scrapes `url` every `every` seconds on a thread until stopped; counts the answers."""

    def __init__(self, url: str, every: float = 1.0) -> None:
        self.url, self.every, self.answered = url, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as answer:
                    if b"batchgate_requests_sent_total" in answer.read():
                        self.answered += 1
            except OSError:
                pass  # not listening yet, or already gone

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ways", nargs="+", choices=("off", "logs", "metrics"), default=None)
    args = parser.parse_args(argv)
    sc = build("overhead", quick=True)
    sc.requests = make_requests(args.items, ["alpha"], max_tokens=8)
    figures: dict[str, list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-observe-") as tmpdir:
        tmp = Path(tmpdir)
        emu_yaml = tmp / "emulator.yaml"
        emu_yaml.write_text(yaml.safe_dump(sc.emulator, sort_keys=False))
        with EmulatorProcess(emu_yaml) as emu:
            providers = {n: ProviderSpec(f, MODELS[n], {}, emu.base_url(n)) for n, f in sc.families().items()}
            spec = Spec(sc.name, providers, sc.requests)
            for _ in range(args.repeats):  # the ways interleaved, so drift hits them alike
                for way, extra in ways(tmp).items():
                    if args.ways and way not in args.ways:
                        continue
                    emu.reset()
                    figures.setdefault(way, []).append(one_run(sc, spec, tmp, extra, way))
    print(f"overhead scenario, {args.items:,} requests, `batchgate run`, median of {args.repeats}:")
    for way, runs in figures.items():
        cpu = statistics.median(r[0] for r in runs)
        rate = statistics.median(r[1] for r in runs)
        scrapes = f", {min(r[2] for r in runs)}+ scrapes answered per run" if way == "metrics" else ""
        print(f"  {way:8s} CPU {cpu:.3f} ms/req  {rate:,.0f} req/s{scrapes}")
    return 0


def ways(tmp: Path) -> dict[str, list[str]]:
    return {
        "off": [],
        "logs": ["--log-format", "json", "--log-level", "info", "--log-file", str(tmp / "run.log")],
        "metrics": ["--metrics-port", str(free_port())],
    }


def one_run(sc: Any, spec: Spec, tmp: Path, extra: list[str], way: str) -> tuple[float, float, int]:
    n = len(spec.requests)
    if way == "metrics":
        port = extra[extra.index("--metrics-port") + 1]
        with Scraper(f"http://127.0.0.1:{port}/metrics") as scraper:
            child, out = run_cli(sc, spec, tmp, 600.0, extra)
        answered = scraper.answered
    else:
        child, out = run_cli(sc, spec, tmp, 600.0, extra)
        answered = 0
    if out is None or len(out["ok_ids"]) != n:
        raise SystemExit(f"{way}: the run failed: {child.stderr_tail}")
    return 1000.0 * child.cpu_s / n, n / child.wall_s, answered


if __name__ == "__main__":
    sys.exit(main())
