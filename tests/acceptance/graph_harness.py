"""Configs and inputs for the fan-out and pipeline acceptance tests: three routes on the test
emulator (one per provider, and one spread over both) and a two-step review pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from batchgate.emulator import EmulatorThread

from .harness import gateway_config, prompt

ROUTES = ("r-alpha", "gamma-3.5")


def graph_config(path: Path, emu: EmulatorThread, **kwargs: Any) -> Path:
    """The harness config plus one route per provider."""
    gateway_config(path, emu, **kwargs)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["routes"] += [
        {"model": "r-alpha", "targets": ["alpha:gpt-4o-mini"]},
        {"model": "gamma-3.5", "targets": ["gamma:claude-3-5-haiku-latest"]},
    ]
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def mood_of(i: int) -> str:
    return ("positive", "negative", "neutral")[i % 3]


def write_reviews(path: Path, n: int) -> Path:
    """Pipeline input: one object per line with the review text; every third one is negative."""
    lines = [
        {"custom_id": f"item-{i:05d}", "text": prompt(i, mood_of(i)).split("Review: ")[1]} for i in range(n)
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def write_pipeline(path: Path, *, equals: str = "negative", route2: str = "gamma-3.5") -> Path:
    steps = [
        {
            "name": "classify",
            "route": "r-alpha",
            "prompt": "Classify the sentiment of this review: {{ text }}",
            "max_tokens": 5,
            "validate": "^(positive|negative|neutral)$",
        },
        {
            "name": "summary",
            "route": route2,
            "prompt": "Summarise this {{ steps.classify.answer }} review: {{ text }}",
            "max_tokens": 40,
            "when": {"step": "classify", "equals": equals},
        },
    ]
    path.write_text(yaml.safe_dump({"steps": steps}), encoding="utf-8")
    return path
