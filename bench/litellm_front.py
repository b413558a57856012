"""The LiteLLM proxy in front of batchgate's emulator (issue 38): does batchgate pace at the
proxy's limits whether they are declared to it, declared 2× too high, or not declared at all?
Prints figures and whether each case meets the target; asserts nothing (it runs on the real clock).

    pip install -e '.[bench]'      # litellm[proxy]
    python bench/litellm_front.py [--rpm 300] [--lines 600] [--latency-ms 300] [--cases ...]

The real LiteLLM proxy (`litellm --config`, a subprocess on loopback, no database) holds one
deployment with `rpm: --rpm` under its router's `usage-based-routing-v2`, which counts per
calendar minute and answers the excess with its own 429 (`throttling_error`, only
`llm_provider-retry-after: 60`; `num_retries: 0`, so the router does not hold the request and
retry it itself); on a 200 it reports `x-ratelimit-limit-requests` (shared/PROTOCOLS.md,
"Servers in front of providers"). Behind it, the emulator (`EmulatorThread`) with no limit and
no rate-limit headers of its own, so LiteLLM's limit is the only one. Each case starts on a fresh
calendar minute and sends `--lines` requests through a `Gateway` at once; it prints done/failed,
the 429s per request sent, and the pace: the lines over LiteLLM's limit, over the seconds from the
first request sent to the sending of the last one that succeeded (as the quota matrix measures).
Target (issue 38): 0 failed, ≤ 1% 429s, pace ≥ 0.9 in every case.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import yaml

from batchgate.config import config_from_dict
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.gateway import Gateway
from batchgate.models import Result

PACE, R429 = 0.9, 0.01
CASES = {"declared": 1.0, "double": 2.0, "undeclared": None}  # the rpm declared to batchgate × LiteLLM's


def _emulator(latency_ms: float) -> EmulatorThread:
    latency = {"ttft_p50_ms": latency_ms, "ttft_sigma": 0.2, "per_token_ms": 0}
    provider = {"name": "up", "family": "openai", "headers": "none", "latency": latency}
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def _drain(stream: IO[str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as out:
        for line in stream:
            out.write(line)


def _litellm(tmp: Path, upstream: str, rpm: int, key: str) -> tuple[subprocess.Popen[str], str]:
    """LiteLLM's proxy on a free loopback port, started once its server says it is running."""
    config = {
        "model_list": [
            {
                "model_name": "m",
                "litellm_params": {
                    "model": "openai/gpt-4o-mini",
                    "api_base": upstream,
                    "api_key": "sk-up",
                    "rpm": rpm,
                },
            }
        ],
        "router_settings": {"routing_strategy": "usage-based-routing-v2", "num_retries": 0},
    }
    path = tmp / "litellm.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = _free_port()
    env = {**os.environ, "LITELLM_MASTER_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [str(Path(sys.executable).parent / "litellm"), "--config", str(path), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*command, "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    log = tmp / "litellm.log"
    with log.open("w", encoding="utf-8") as out:
        for line in proc.stdout:  # its own words, not a poll: it says when it listens
            out.write(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise SystemExit(f"litellm exited before listening; its output is in {log}")
    threading.Thread(target=_drain, args=(proc.stdout, log), daemon=True).start()
    return proc, f"http://127.0.0.1:{port}/v1"


def _free_port() -> int:
    import socket  # noqa: PLC0415 — only here

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(url: str, key: str, rpm: float | None) -> Any:
    provider: dict[str, Any] = {"name": "litellm", "kind": "openai", "base_url": url, "api_key": key}
    if rpm is not None:
        provider["limits"] = {"rpm": rpm}
    routes = [{"model": "m", "targets": ["litellm"]}]
    return config_from_dict({"providers": [provider], "routes": routes}, source="bench", environ={})


def _figures(results: list[Result], rpm: int) -> tuple[int, int, float, int, float]:
    """(done, failed, 429s per request sent, 429s, pace) of one case's results."""
    attempts = [a for r in results for a in r.attempts]
    sent = [a.started for r in results if r.ok for a in r.attempts if a.status == 200]
    span = max(sent) - min(a.started for a in attempts) if sent else 0.0
    pace = len(results) / (rpm / 60) / span if span > 0 else 0.0
    refused = sum(1 for a in attempts if a.status == 429)
    done = sum(1 for r in results if r.ok)
    return done, len(results) - done, refused / max(1, len(attempts)), refused, pace


async def _case(url: str, key: str, declared: float | None, lines: int) -> list[Result]:
    bodies = [
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"echo {i}"}]}
        for i in range(lines)
    ]
    async with Gateway(_config(url, key, declared)) as gw:
        return await gw.abatch(bodies)


def _fresh_minute() -> None:
    """Wait for LiteLLM's next calendar minute (its router counts per minute of the wall clock)."""
    time.sleep(60.0 - time.time() % 60.0 + 0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rpm", type=int, default=300, help="LiteLLM's deployment rpm")
    parser.add_argument("--lines", type=int, default=600)
    parser.add_argument("--latency-ms", type=float, default=300.0, help="the emulator's p50")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = parser.parse_args(argv)
    key = "sk-bench-" + secrets.token_hex(16)
    emu = _emulator(args.latency_ms)
    met = True
    with tempfile.TemporaryDirectory(prefix="litellm-front-") as tmp:
        proc, url = _litellm(Path(tmp), emu.emulator.base_url("up"), args.rpm, key)
        try:
            print(f"LiteLLM {_version()} in front of the emulator: rpm {args.rpm}, {args.lines} lines a case")
            for case in args.cases:
                factor = CASES[case]
                declared = None if factor is None else args.rpm * factor
                _fresh_minute()
                results = asyncio.run(_case(url, key, declared, args.lines))
                done, failed, share, refused, pace = _figures(results, args.rpm)
                ok = failed == 0 and share <= R429 and pace >= PACE
                met &= ok
                told = "undeclared" if declared is None else f"declared rpm {declared:g}"
                print(
                    f"{case:10s} ({told:18s}) done {done} failed {failed}  429s {refused} "
                    f"({100 * share:.2f}% of requests sent)  pace {pace:.3f}  {'✓' if ok else '✗'}",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            emu.stop()
    print(f"target (0 failed, ≤ {100 * R429:g}% 429s, pace ≥ {PACE}): {'met' if met else 'NOT met'}")
    return 0 if met else 1


def _version() -> str:
    from importlib.metadata import version  # noqa: PLC0415 — only for the heading

    return version("litellm")


if __name__ == "__main__":
    sys.exit(main())
