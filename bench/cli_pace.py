"""The pace of `batchgate run` (the CLI, as a user runs it) on the token-bound scenario, per quota
store (issue 39: "tpm-bound run, 200 long prompts, one provider"; "the local ledger costs no pace").

    python bench/cli_pace.py [--items 200] [--quota local memory] [--seeds 7 8 9] [--scale 1.0]
                             [--src PATH ...]

One OpenAI-style provider (bench/scenarios.py `token_bound`: ~1,200-token prompts, max_tokens 100,
tpm binding long before rpm, 0.4 s latency; `--scale` multiplies its limits: 0.2 is ~6 requests a
second, where a ledger that held each request in its window longer showed), enforced in one-second
windows (a token bucket of one second). Each run starts a fresh
emulator (this checkout's) and `python -m batchgate run` with the given `--quota`; `--src` runs the
CLI of another checkout's `src` (a worktree of an older commit) against the same emulator, for a
side-by-side figure. Pace, from the provider's side as in the quota matrix: the tokens it charged
÷ (the enforced per-second limit × the seconds from its first request to the admission of the last
request that succeeded). Prints one line per run and the median per (src, quota).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import yaml  # noqa: E402
from measure import run_child  # noqa: E402
from scenarios import MODELS, token_bound  # noqa: E402
from systems.batchgate_lib import gateway_config  # noqa: E402
from workload import ProviderSpec, cli_lines, make_requests  # noqa: E402

from batchgate.emulator import EmulatorProcess  # noqa: E402


def pace(stats: dict[str, Any], tpm: float) -> tuple[float | None, int]:
    """(pace, quota 429s) of the one provider `alpha` in the emulator's `stats`."""
    p = stats["providers"]["alpha"]
    first, last = p["first_request_s"], p["last_success_admitted_s"]
    r429 = int(p["rejected"]["rate_limit"])
    if first is None or last is None or last <= first:
        return None, r429
    return p["tokens_charged"]["total"] / (tpm / 60.0) / (last - first), r429


def run_once(
    src: Path, quota: str, items: int, seed: int, scale: float, tmp: Path
) -> tuple[float | None, int, float]:
    sc = token_bound(False)
    for p in sc.emulator["providers"]:
        p["limits"] = {k: int(v * scale) for k, v in p["limits"].items()}
    emulator = dict(sc.emulator, seed=seed)
    emu_yaml = tmp / "emulator.yaml"
    emu_yaml.write_text(yaml.safe_dump(emulator, sort_keys=False))
    requests = make_requests(items, ["alpha"], max_tokens=100, filler_words=900)
    limits = sc.declared()["alpha"]
    inp, out, store = tmp / "in.jsonl", tmp / "out.jsonl", tmp / "store.db"
    inp.write_bytes(b"".join(cli_lines(requests)))
    with EmulatorProcess(emu_yaml) as emu:
        spec = {"alpha": ProviderSpec("openai", MODELS["alpha"], limits, emu.base_url("alpha"))}
        config = tmp / "batchgate.yaml"
        config.write_text(yaml.safe_dump(gateway_config(spec, 60.0), sort_keys=False))
        for stale in (out, store, tmp / "out.jsonl.errors.jsonl"):
            stale.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "batchgate", "run", str(inp), "--config", str(config)]
        cmd += ["--output", str(out), "--progress", "quiet", "--store", str(store), "--quota", quota]
        env = dict(os.environ, PYTHONPATH=str(src))
        child = run_child(cmd, 300.0, env=env)
        stats = emu.stats()
    if child.returncode != 0:
        print(f"    exit {child.returncode}: {child.stderr_tail}", flush=True)
    p, r429 = pace(stats, float(limits["tpm"]))
    return p, r429, child.wall_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--quota", nargs="+", default=["local"], help="--quota values to compare")
    parser.add_argument("--seeds", nargs="+", type=int, default=[7, 8, 9])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the provider's limits")
    parser.add_argument("--src", nargs="+", type=Path, default=[BENCH.parent / "src"])
    args = parser.parse_args(argv)
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="cli-pace-") as tmpdir:
        for seed in args.seeds:
            for src in args.src:
                for quota in args.quota:
                    p, r429, wall = run_once(src.resolve(), quota, args.items, seed, args.scale, Path(tmpdir))
                    shown = "—" if p is None else f"{p:.3f}"
                    line = f"  {src} --quota {quota} seed {seed}: pace {shown}, {r429} 429s, {wall:.1f} s"
                    print(line, flush=True)
                    if p is not None:
                        results.setdefault((str(src), quota), []).append(p)
    for (src, quota), paces in results.items():
        print(f"{src} --quota {quota}: median pace {statistics.median(paces):.3f} (lowest {min(paces):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
