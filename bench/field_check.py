"""What the field check (`providers/fields.py`) adds to validation, per input line.

    python bench/field_check.py [--lines 20000] [--runs 5]

Builds a route of one OpenAI and one Anthropic target and times `RouteFit.problem` (what `run`,
`plan` and serve's batch input call for every line) on OpenAI-shaped chat bodies, plain and with
tools, and on Anthropic-shaped lines, beside the field check alone (`targets_refusal`): the
median microseconds per line over `--runs` runs. Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from batchgate.config import config_from_dict
from batchgate.endpoints import MESSAGES_PARAMS
from batchgate.jobs.fits import RouteFit
from batchgate.messages_in import messages_to_chat
from batchgate.providers.fields import targets_refusal

TOOL = {"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}


def bodies(n: int) -> dict[str, list[dict[str, Any]]]:
    def chat(i: int) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": f"Review {i}: fine, thanks."}]}

    def messages(i: int) -> dict[str, Any]:
        params = {"model": "m", "max_tokens": 64, "top_k": 5, "messages": chat(i)["messages"]}
        return {**messages_to_chat(params), MESSAGES_PARAMS: params}

    return {
        "chat": [chat(i) for i in range(n)],
        "chat+tools": [{**chat(i), "tools": [TOOL], "tool_choice": "auto"} for i in range(n)],
        "anthropic-shaped": [messages(i) for i in range(n)],
    }


Check = Callable[[Mapping[str, Any]], object]


def per_line_us(check: Check, lines: list[dict[str, Any]], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for body in lines:
            check(body)
        times.append((time.perf_counter() - start) / len(lines) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    config = config_from_dict(
        {
            "providers": [
                {"name": "oai", "kind": "openai", "base_url": "http://127.0.0.1:9"},
                {"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:9"},
            ],
            "routes": [{"model": "m", "targets": ["oai", "claude"]}],
        }
    )
    fit = RouteFit(config)
    targets = fit.providers("m")
    print(f"{'lines':<18} {'RouteFit.problem':>18} {'field check alone':>18}  (µs per line, median)")
    for name, lines in bodies(args.lines).items():
        whole = per_line_us(fit.problem, lines, args.runs)
        alone = per_line_us(lambda b: targets_refusal(targets, b), lines, args.runs)
        print(f"{name:<18} {whole:>18.1f} {alone:>18.1f}")


if __name__ == "__main__":
    main()
