"""What a Bedrock request costs batchgate's CPU before it leaves: the OpenAI → Converse translation
and the SigV4 signature (botocore), per request, beside the whole exchange with the emulator.

    python bench/bedrock_sign.py [--requests 2000]

Prints the median µs of `openai_to_converse` and of `SigV4Signer.sign` over `--requests` bodies
(the README's review prompts), and the requests per second one client reaches against the
embedded emulator (signature checked on its side too, so that figure includes the check), for
Converse and ConverseStream. Asserts nothing about time (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.config.bedrock import BedrockSettings
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.providers import make_chat_client
from batchgate.providers.bedrock_auth import SigV4Signer
from batchgate.providers.bedrock_translate import openai_to_converse
from batchgate.providers.h1 import H1Transport

KEY_ID, SECRET = "AKIDBENCH", "bench/secret"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
REVIEWS = Path(__file__).resolve().parents[1] / "examples" / "reviews.jsonl"


def bodies(n: int) -> list[dict[str, Any]]:
    lines = REVIEWS.read_bytes().splitlines()
    return [orjson.loads(lines[i % len(lines)])["body"] for i in range(n)]


def per_call_us(fn: Any, items: list[Any]) -> float:
    times = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


async def exchange_rate(items: list[dict[str, Any]], stream: bool) -> float:
    entry = {"name": "br", "family": "bedrock", "api_key": f"{KEY_ID}:{SECRET}", "limits": {"rpm": 10**9}}
    async with Emulator(emulator_config_from_dict({"providers": [entry]})) as emu:
        settings = BedrockSettings(region="us-east-1", stream=stream)
        provider = ProviderConfig(name="br", kind="bedrock", base_url=emu.base_url("br"), bedrock=settings)
        transport = H1Transport()
        client = make_chat_client(provider, transport, TimeoutConfig(connect=2.0, total=30.0))
        start = time.perf_counter()
        for body in items:
            await client.send(body, model=MODEL)
        elapsed = time.perf_counter() - start
        await transport.close()
    return len(items) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET)
    items = bodies(args.requests)
    settings = BedrockSettings(region="us-east-1")
    provider = ProviderConfig(name="br", kind="bedrock", base_url="http://127.0.0.1:1/br", bedrock=settings)
    signer = SigV4Signer(provider, provider.base_url)
    url = f"{provider.base_url}/model/{MODEL}/converse"
    datas = [orjson.dumps(openai_to_converse(b, default_max_tokens=64)) for b in items]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    translate = per_call_us(lambda b: openai_to_converse(b, default_max_tokens=64), items)
    sign = per_call_us(lambda d: signer.sign("POST", url, d, headers), datas)
    print(f"per request (median of {len(items)}): translate {translate:.1f} µs, SigV4 sign {sign:.1f} µs")
    few = items[: min(len(items), 500)]
    for stream in (False, True):
        rate = asyncio.run(exchange_rate(few, stream))
        print(f"one client, one at a time, {'ConverseStream' if stream else 'Converse'}: {rate:.0f} req/s")


if __name__ == "__main__":
    main()
