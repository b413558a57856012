"""`batchgate emulate --config FILE [--host H] [--port N]`: serve emulated providers until SIGINT or
SIGTERM. The first stdout line is `batchgate emulator listening on http://H:P` (tools read the port
from it), then one line per provider with the base URL to give its SDK."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchgate.emulator import EmulatorConfig

DEFAULT_PORT = 8400
EXIT_CANNOT_LISTEN = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "emulate",
        help="serve emulated OpenAI/Anthropic providers (quotas, latency, faults) over HTTP",
        description="Serve emulated LLM providers, each under its own path prefix, until interrupted.",
    )
    parser.add_argument("--config", required=True, type=Path, help="emulator YAML file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from batchgate.emulator.config import load_emulator_config  # noqa: PLC0415 — only when emulating

    config = load_emulator_config(args.config)
    try:
        import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

        asyncio.run(serve(config, args.host, args.port))
    except OSError as exc:
        print(
            f"batchgate: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_CANNOT_LISTEN
    return 0


async def serve(config: EmulatorConfig, host: str, port: int) -> None:
    """Run the emulator until SIGINT or SIGTERM, then stop it cleanly."""
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    from batchgate.emulator.runner import LISTENING_PREFIX  # noqa: PLC0415 — the server only when emulating
    from batchgate.emulator.server import Emulator  # noqa: PLC0415 — the server only when emulating

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    try:
        async with Emulator(config, host, port) as emulator:
            emulator.warm()
            print(f"{LISTENING_PREFIX}{emulator.url}", flush=True)
            for provider in config.providers:
                print(
                    f"  {provider.name} ({provider.family}): {emulator.base_url(provider.name)}", flush=True
                )
            await stopping.wait()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
