"""The dashboard's tests: an emulator whose one provider fails some requests (so jobs have
errors to show), one `batchgate serve` subprocess sampling every 0.5 s, and headless Chromium
driven by Playwright. Without Playwright or Debian's chromium the browser tests skip with the
reason — and fail under CI=true, where `.ci/run` installs both."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from server.harness import Server, running

CHROMIUM = "/usr/bin/chromium"
MODEL = "m-web"


def web_emulator() -> EmulatorThread:
    """One OpenAI-family provider, 80 ms an answer, one request in eight a 500."""
    provider = {
        "name": "web",
        "family": "openai",
        "limits": {"rpm": 10**6, "tpm": 10**8},
        "latency": {"ttft_p50_ms": 80.0, "ttft_sigma": 0.1, "per_token_ms": 0},
        "faults": {"server_error": 0.125},
    }
    emu = EmulatorThread(emulator_config_from_dict({"seed": 7, "providers": [provider]}))
    emu.start()
    return emu


def web_config(path: Path, emu: EmulatorThread) -> Path:
    """The gateway paces the provider at 600 requests a minute (10 a second) and tries once, so
    the emulator's 500s end as failed items."""
    data: dict[str, Any] = {
        "providers": [
            {"name": "web", "kind": "openai", "base_url": emu.base_url("web"), "api_key_env": "EMU_KEY",
             "limits": {"rpm": 600}},
        ],
        "routes": [{"model": MODEL, "targets": ["web:gpt-4o-mini"]}],
        "settings": {"concurrency": 8, "retry": {"max_attempts": 1}, "seed": 1},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def requests(n: int, tag: str) -> list[dict[str, Any]]:
    """`n` inline job requests to the one route, custom_ids `TAG-0` ..."""
    return [
        {
            "custom_id": f"{tag}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": _body(f"hi {tag} {i}"),
        }
        for i in range(n)
    ]


def _body(text: str) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": text}]}


@pytest.fixture(scope="package")
def web_emu() -> Iterator[EmulatorThread]:
    emu = web_emulator()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture(scope="package")
def web_server(tmp_path_factory: pytest.TempPathFactory, web_emu: EmulatorThread) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("web")
    with running(root, web_config(root / "gateway.yaml", web_emu), "--sample-every", "0.5") as s:
        yield s


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401, PLC0415 — optional: only the browser tests need it
    except ImportError:
        return "playwright is not installed (pip install playwright; it is in the dev extra)"
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        return f"Debian's chromium is not installed ({CHROMIUM}; apt-get install chromium)"
    return None


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    why = _missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 — optional, checked above

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()
