"""Ray Data against one emulated provider key: batchgate's UDF with its quota in Redis, the same
UDF with a quota per actor, and `ray.data.llm`'s HTTP request processor — one table. Prints
figures; asserts nothing (it runs on the real clock).

    python bench/ray_data.py [--rows 400] [--actors 4] [--rpm 1200] [--tpm 400000]
                             [--systems redis,memory,ray-http]

Each system is a round on a fresh emulated provider enforcing `--rpm`/`--tpm` (every system
is told those limits). Printed per round: rows that came back failed or not at all, the
provider's 429s, the makespan (from submitting the dataset to holding every row, actor start-up
included) ÷ the quota bound (rows ÷ the rpm: the least time the limit allows), and the pace
(successes ÷ what the limit allows between the provider's first request and its last admitted
success; 1.0 is the whole limit) and the most requests the provider had in flight at once.
`ray-http` divides the rpm evenly over its actors as `qps`
(its limit is per actor) and retries 429s 3 times (its default is none); a batch whose retries
run out fails, and `max_errored_blocks` lets the dataset finish without its rows.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchgate.emulator import EmulatorThread, emulator_config_from_dict

SRC = str(Path(__file__).resolve().parents[1] / "src")
REDIS = os.environ.get("BATCHGATE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
API_KEY = "sk-bench-ray"


def _emulator(rpm: int, tpm: int) -> EmulatorThread:
    latency = {"ttft_p50_ms": 300, "ttft_sigma": 0.3, "per_token_ms": 2}
    provider = {"name": "p", "family": "openai", "limits": {"rpm": rpm, "tpm": tpm}, "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def _prompt(i: int) -> str:
    return f"Say something short about row {i} of the dataset."


def _batchgate(ray: Any, emu: EmulatorThread, args: argparse.Namespace, quota: str) -> list[dict[str, Any]]:
    from batchgate.integrations.ray import BatchgateUDF  # noqa: PLC0415 — needs Ray Data

    limits = {"rpm": args.rpm, "tpm": args.tpm}
    config = {
        "providers": [
            {
                "name": "p",
                "kind": "openai",
                "base_url": emu.base_url("p"),
                "api_key": API_KEY,
                "limits": limits,
            }
        ],
        "routes": [{"model": "m", "targets": ["p:gpt-4o-mini"]}],
    }
    kwargs: dict[str, Any] = {"config": config, "quota": quota, "model": "m", "max_tokens": 16}
    if quota.startswith("redis"):
        kwargs["namespace"] = f"bench:{secrets.token_hex(4)}:"
    ds = ray.data.from_items([{"id": i, "prompt": _prompt(i)} for i in range(args.rows)])
    out = ds.map_batches(
        BatchgateUDF,
        fn_constructor_kwargs=kwargs,
        compute=ray.data.ActorPoolStrategy(size=args.actors),
        num_cpus=0.25,
        batch_size=args.batch_size,
        batch_format="pandas",
    )
    return [{"id": r["id"], "ok": r["error"] is None} for r in out.take_all()]


def _ray_http(ray: Any, emu: EmulatorThread, args: argparse.Namespace) -> list[dict[str, Any]]:
    from ray.data.llm import HttpRequestProcessorConfig, build_processor  # noqa: PLC0415 — optional

    config = HttpRequestProcessorConfig(
        url=f"{emu.base_url('p').rstrip('/')}/chat/completions",
        headers={"Authorization": f"Bearer {API_KEY}"},
        qps=max(1, args.rpm // 60 // args.actors),
        max_retries=3,
        concurrency=(args.actors, args.actors),  # an int n would be a pool autoscaling from 1 to n
        batch_size=args.batch_size,
        http_request_stage={"num_cpus": 0.25},  # as the UDF's actors: all M fit on a small machine
    )

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        body = {"model": "gpt-4o-mini", "max_tokens": 16}
        return {
            "id": row["id"],
            "payload": {**body, "messages": [{"role": "user", "content": _prompt(row["id"])}]},
        }

    def postprocess(row: dict[str, Any]) -> dict[str, Any]:
        response = row.get("http_response") or {}
        return {"id": row["id"], "ok": bool(response.get("choices"))}

    processor = build_processor(config, preprocess=preprocess, postprocess=postprocess)
    ds = ray.data.from_items([{"id": i} for i in range(args.rows)])
    return list(processor(ds).take_all())


def _round(
    name: str, run: Callable[[EmulatorThread], list[dict[str, Any]]], args: argparse.Namespace
) -> dict[str, Any]:
    emu = _emulator(args.rpm, args.tpm)
    failure = ""
    started = time.monotonic()
    try:
        rows = run(emu)
    except Exception as exc:  # the dataset itself failed: every row is lost
        rows, failure = [], f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160]}"
    makespan = time.monotonic() - started
    stats = emu.stats()["providers"]["p"]
    emu.stop()
    ok = {r["id"] for r in rows if r["ok"]}
    span = (stats["last_success_admitted_s"] or 0.0) - (stats["first_request_s"] or 0.0)
    bound = args.rows / (args.rpm / 60.0)
    return {
        "system": name,
        "failed": args.rows - len(ok),
        "429s": int(stats["rejected"]["rate_limit"]),
        "requests": int(stats["completed"]) + int(sum(stats["rejected"].values())),
        "ratio": makespan / bound,
        "peak": int(stats["peak_in_flight"]),
        "pace": stats["completed"] / (args.rpm / 60.0 * span) if span > 0 else 0.0,
        "makespan": makespan,
        "failure": failure,
    }


def _systems(
    ray: Any, args: argparse.Namespace
) -> dict[str, Callable[[EmulatorThread], list[dict[str, Any]]]]:
    return {
        "redis": lambda emu: _batchgate(ray, emu, args, REDIS),
        "memory": lambda emu: _batchgate(ray, emu, args, "memory"),
        "ray-http": lambda emu: _ray_http(ray, emu, args),
    }


def _print(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    names = {
        "redis": "batchgate UDF, quota in Redis",
        "memory": "batchgate UDF, quota per actor",
        "ray-http": "ray.data.llm HTTP processor",
    }
    print(f"Ray Data, {args.rows} rows, {args.actors} actors, one key of {args.rpm} rpm / {args.tpm} tpm")
    print(
        f"{'system':<32} {'failed rows':>11} {'429s':>5} {'requests':>8} {'makespan/bound':>14} "
        f"{'pace':>5} {'peak in flight':>14} {'makespan s':>10}"
    )
    for r in rows:
        print(
            f"{names[r['system']]:<32} {r['failed']:>11} {r['429s']:>5} {r['requests']:>8} "
            f"{r['ratio']:>14.2f} {r['pace']:>5.2f} {r['peak']:>14} {r['makespan']:>10.1f}"
        )
        if r["failure"]:
            print(f"    the dataset failed: {r['failure']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--tpm", type=int, default=400_000)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--systems", default="redis,memory,ray-http")
    args = parser.parse_args()
    try:
        import ray  # noqa: PLC0415 — the bench's own optional dependency
    except ImportError:
        sys.exit("bench/ray_data.py needs Ray Data: pip install 'batchgate[ray]'")
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.max_errored_blocks = -1  # a failed batch loses its rows, not the whole dataset
    try:
        ray.data.range(4).map_batches(lambda batch: batch).take_all()  # Ray Data's own start-up, untimed
        systems = _systems(ray, args)
        rows = [_round(name, systems[name], args) for name in args.systems.split(",")]
    finally:
        ray.shutdown()
    _print(rows, args)


if __name__ == "__main__":
    main()
