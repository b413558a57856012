"""Quick reliability figures for the README: fault kinds tried (each retried to success or failed
with its own error), crashes survived by one job, inputs and configs fuzzed, items lost (must be 0).

    python scripts/reliability_figures.py
"""

from __future__ import annotations

import asyncio
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# tests/, as pytest puts it on the path: the suites import each other's helpers
sys.path[:0] = [str(ROOT / "tests")]

from batchgate.config import config_from_dict, load_config  # noqa: E402
from batchgate.emulator import Emulator, emulator_config_from_dict  # noqa: E402
from batchgate.emulator.config import FAULT_KINDS  # noqa: E402
from batchgate.errors import ConnectError, QuotaExhaustedError  # noqa: E402
from batchgate.gateway import Gateway  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crash_loop  # noqa: E402

from reliability import test_fuzz  # noqa: E402

NEVER_RETRIED = {"insufficient_quota": QuotaExhaustedError}


def _config(url: str, kind: str = "openai") -> Any:
    return config_from_dict(
        {
            "providers": [{"name": "p", "kind": kind, "base_url": url}],
            "routes": [{"model": "m", "targets": ["p"]}],
            "settings": {
                "seed": 1,
                "retry": {"max_attempts": 8, "base_delay": 0.01, "max_delay": 0.05},
                "timeouts": {"connect": 2, "total": 0.5},
            },
        },
        environ={},
    )


async def _faults() -> tuple[int, int, int]:
    """(kinds tried, kinds handled, requests sent) over every emulator fault and two unreachables."""
    tried = handled = sent = 0
    for family in ("openai", "anthropic"):
        for fault in FAULT_KINDS:
            provider = {"name": "p", "family": family, "limits": {"rpm": 10**6},
                        "faults": {fault: 1.0 if fault in NEVER_RETRIED else 0.3}}  # fmt: skip
            emu = Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}))
            async with emu, Gateway(_config(emu.base_url("p"), family)) as gw:
                bodies = [{"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": f"x{i}"}]}
                          for i in range(20)]  # fmt: skip
                results = await gw.abatch(bodies)
                sent += gw.statistics().requests
            tried += 1
            expected = NEVER_RETRIED.get(fault)
            if expected is None:
                handled += all(r.ok for r in results)
            else:
                handled += all(isinstance(r.error, expected) and len(r.attempts) == 1 for r in results)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for url in (f"http://127.0.0.1:{port}/v1", "http://nonexistent.invalid/v1"):
        async with Gateway(_config(url)) as gw:
            (result,) = await gw.abatch([{"model": "m", "messages": [{"role": "user", "content": "x"}]}])
            sent += gw.statistics().requests
        tried += 1
        handled += isinstance(result.error, ConnectError) and len(result.attempts) == 8
    return tried, handled, sent


class _Factory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.n = 0

    def mktemp(self, name: str) -> Path:
        self.n += 1
        path = self.root / f"{name}{self.n}"
        path.mkdir()
        return path


def _fuzz() -> tuple[int, int]:
    """(JSONL inputs fuzzed, configs fuzzed), running the suite's hypothesis tests and counting."""
    counts = {"input": 0, "config": 0}
    check_input, check_config = test_fuzz._check_input, test_fuzz._check_config

    def counted_input(path: Path) -> tuple[int, int]:
        counts["input"] += 1
        return check_input(path)

    def counted_config(data: Any) -> None:
        counts["config"] += 1
        check_config(data)

    def counted_load(path: Any, environ: Any = None) -> Any:
        counts["config"] += 1
        return load_config(path, environ=environ)

    module = vars(test_fuzz)  # count the checks the hypothesis tests make
    module.update(_check_input=counted_input, _check_config=counted_config, load_config=counted_load)
    with tempfile.TemporaryDirectory(prefix="bg-fuzz-") as tmp:
        factory = _Factory(Path(tmp))
        test_fuzz.test_fuzzed_jsonl_gives_tasks_or_located_problems(factory)
        test_fuzz.test_random_bytes_as_input(factory)
        test_fuzz.test_fuzzed_config_structures_load_or_name_the_key()
        test_fuzz.test_fuzzed_yaml_text_loads_or_names_the_key_or_line(factory)
    return counts["input"], counts["config"]


def main() -> int:
    started = time.monotonic()
    tried, handled, sent = asyncio.run(_faults())
    crash = crash_loop.run(kills=10, items=400, seed=11, concurrency=4, latency_ms=60)
    inputs, configs = _fuzz()
    rows = [
        ("fault kinds tried (both API families + unreachable)", f"{tried}"),
        ("fault kinds handled (retried to success / failed cleanly)", f"{handled}"),
        ("requests sent through faults", f"{sent}"),
        ("SIGKILLs survived by one job (then resumed)", f"{crash['kills']}"),
        ("items in that job", f"{crash['items']}"),
        ("items lost", f"{crash['lost']}"),
        ("items written twice to OUT", f"{crash['repeated_in_out']}"),
        ("answered prompts sent again (bound: in flight at kills)",
         f"{crash['resent_after_success']} (<= {crash['resend_bound']})"),
        ("JSONL inputs fuzzed (0 unhandled exceptions)", f"{inputs}"),
        ("configs fuzzed (0 unhandled exceptions)", f"{configs}"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print(f"{'figure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"({time.monotonic() - started:.0f} s)")
    broken = crash_loop.violations(crash)
    for problem in broken:
        print(f"VIOLATION: {problem}")
    return 0 if not broken and handled == tried else 1


if __name__ == "__main__":
    sys.exit(main())
