"""batchgate's own CPU per request against the raw aiohttp floor, side by side in one run.

    python bench/overhead.py [--requests 4000] [--rounds 2]
                             [--systems floor default memory library memory-aiohttp]
                             [--concurrency N]

An overhead-bound load: short requests to one emulated provider (its own process,
`EmulatorProcess`) that answers at once and enforces no quota. The clients declare a limit far
above what the run reaches (`DECLARED`), so batchgate's quota machinery runs as it does against
a real key, shared or not. The systems, each in its own child process (`measure.run_child`),
alternated round by round so a noisy machine weighs on all of them alike:

    floor     raw aiohttp: one session, a semaphore, no retries, no quota (bench/systems/aiohttp_floor.py)
    default   `batchgate run` as a user runs it (`--quota local`: the machine's shared ledger)
    memory    `batchgate run --quota memory` (this process's quota alone)
    library   `Gateway.abatch` (bench/systems/batchgate_lib.py)
    memory-aiohttp  `batchgate run --quota memory` with `settings.transport: aiohttp` (its chat
              calls over an aiohttp session instead of the lean h1 client: what that choice costs)

By default the floor keeps 64 requests in flight and batchgate its own default (512);
`--concurrency N` puts every system at one width (more connections open to a server that
answers at once cost every client CPU, so the like-for-like ratio is at one width).

The figure is the CPU of the whole child process per request, start-up and imports included,
and requests per second over its whole wall time. Prints one Markdown table with each system's
ratio to the floor (means over the rounds). Bytecode as a user's install has it (see
bench/startup.py): the children run without PYTHONDONTWRITEBYTECODE after a warm-up run of each
system (not counted) has written the `.pyc` caches; `--bytecode none` keeps the environment's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import yaml  # noqa: E402
from compare import run_cli, run_library_system  # noqa: E402
from measure import ChildRun  # noqa: E402
from scenarios import MODELS, overhead  # noqa: E402
from workload import ProviderSpec, Spec, make_requests  # noqa: E402

from batchgate.emulator import EmulatorProcess  # noqa: E402

DECLARED = {"rpm": 1_000_000, "tpm": 1_000_000_000}  # far above what one process reaches
TIMEOUT = 300.0
LABELS = {
    "floor": "raw aiohttp loop (the floor)",
    "default": "`batchgate run` (default: `--quota local`)",
    "memory": "`batchgate run --quota memory`",
    "library": "`Gateway.abatch` (the library)",
    "memory-aiohttp": "`batchgate run --quota memory`, `transport: aiohttp`",
}
DEFAULT_SYSTEMS = ["floor", "default", "memory", "library"]


@dataclass(slots=True)
class Figures:
    cpu_ms: list[float] = field(default_factory=list)  # per request, one per round
    per_s: list[float] = field(default_factory=list)
    failed: int = 0


Runner = Callable[[Spec, Path], tuple[ChildRun, Any]]


def _runners() -> dict[str, Runner]:
    scenario = overhead(False)

    def library(name: str) -> Runner:
        return lambda spec, tmp: run_library_system(name, tmp / "spec.json", tmp / f"{name}.json", TIMEOUT)

    def cli(*extra: str, transport: str | None = None) -> Runner:
        def run(spec: Spec, tmp: Path) -> tuple[ChildRun, Any]:
            if transport is not None:
                spec = replace(spec, extra={**spec.extra, "batchgate_transport": transport})
            return run_cli(scenario, spec, tmp, TIMEOUT, extra)

        return run

    return {
        "floor": library("aiohttp-floor"),
        "default": cli(),
        "memory": cli("--quota", "memory"),
        "library": library("batchgate"),
        "memory-aiohttp": cli("--quota", "memory", transport="aiohttp"),
    }


def _completed(out: Any) -> tuple[int, int]:
    if out is None:
        return 0, 0
    return len(out["ok_ids"]), int(out["failed"])


def run(
    requests: int, rounds: int, systems: list[str], *, warm_up: bool, concurrency: int | None = None
) -> dict[str, Figures]:
    runners = _runners()
    figures = {name: Figures() for name in systems}
    scenario = overhead(False)
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmpdir:
        tmp = Path(tmpdir)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # the default run's ledger: a fresh one
        emu_yaml = tmp / "emulator.yaml"
        emu_yaml.write_text(yaml.safe_dump(scenario.emulator, sort_keys=False))
        with EmulatorProcess(emu_yaml) as emu:
            providers = {"alpha": ProviderSpec("openai", MODELS["alpha"], DECLARED, emu.base_url("alpha"))}
            spec = Spec("overhead", providers, make_requests(requests, ["alpha"], max_tokens=8))
            if concurrency is not None:  # every system at one width: the floor's semaphore, batchgate's
                spec.concurrency = concurrency
                spec.extra["batchgate_concurrency"] = concurrency
            spec.dump(tmp / "spec.json")
            if warm_up:
                warm = Spec("overhead", providers, spec.requests[:100], concurrency=spec.concurrency)
                warm.extra = spec.extra
                warm.dump(tmp / "spec.json")
                for name in systems:
                    runners[name](warm, tmp)
                spec.dump(tmp / "spec.json")
            for round_no in range(1, rounds + 1):
                for name in systems:
                    emu.reset()
                    child, out = runners[name](spec, tmp)
                    ok, failed = _completed(out)
                    fig = figures[name]
                    fig.failed += failed + (requests - ok - failed)
                    fig.cpu_ms.append(1000.0 * child.cpu_s / requests)
                    fig.per_s.append(ok / child.wall_s if child.wall_s else 0.0)
                    problem = f" ({child.stderr_tail})" if child.returncode or ok < requests else ""
                    print(
                        f"round {round_no} {name:8s} cpu={fig.cpu_ms[-1]:.3f} ms/req "
                        f"{fig.per_s[-1]:,.0f} req/s completed={ok}{problem}",
                        flush=True,
                    )
    return figures


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{low:{fmt}}–{high:{fmt}}"


def table(figures: dict[str, Figures]) -> str:
    floor = figures.get("floor")
    base = statistics.fmean(floor.cpu_ms) if floor is not None and floor.cpu_ms else None
    memory = figures.get("memory")
    lines = [
        "| system | CPU ms / request | × the floor | requests / s |",
        "|---|---|---|---|",
    ]
    for name, fig in figures.items():
        if not fig.cpu_ms:
            continue
        mean = statistics.fmean(fig.cpu_ms)
        ratio = f"{mean / base:.2f}×" if base else "–"
        if name == "default" and memory is not None and memory.cpu_ms:
            ratio += f" ({mean / statistics.fmean(memory.cpu_ms) - 1:+.0%} over `--quota memory`)"
        if name == "memory-aiohttp" and memory is not None and memory.cpu_ms:
            ratio += f" ({mean / statistics.fmean(memory.cpu_ms) - 1:+.0%} over the same on h1)"
        failed = f" ({fig.failed} failed)" if fig.failed else ""
        lines.append(
            f"| {LABELS[name]}{failed} | {_span(fig.cpu_ms, '.2f')} | {ratio} | {_span(fig.per_s, ',.0f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs of each system")
    parser.add_argument("--systems", nargs="+", choices=list(LABELS), default=DEFAULT_SYSTEMS)
    parser.add_argument(
        "--bytecode",
        choices=("cached", "none"),
        default="cached",
        help=".pyc caches written, as a user's install has them (default), or the environment's setting",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="every system at this width: the floor's semaphore and batchgate's settings.concurrency "
        "(default: the floor at 64, batchgate at its own default, 512)",
    )
    args = parser.parse_args(argv)
    if args.bytecode == "cached":
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    warm_up = args.bytecode == "cached"
    figures = run(args.requests, args.rounds, args.systems, warm_up=warm_up, concurrency=args.concurrency)
    width = (
        f"every system at concurrency {args.concurrency}"
        if args.concurrency
        else "the floor at concurrency 64, batchgate at its default"
    )
    print()
    print(f"{args.requests:,} requests, zero latency, no quota enforced; {args.rounds} alternated rounds;")
    print(width)
    print(
        f"(CPU of the whole process per request, start-up included; bytecode {args.bytecode}; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    print()
    print(table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
