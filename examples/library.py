import asyncio
from collections.abc import AsyncIterator
from typing import Any

from batchgate import Gateway, load_config


async def main() -> None:
    reviews = ["Wonderful, works great.", "Arrived broken, awful.", "It is a blue square."]
    requests = [
        {
            "custom_id": f"review-{i}",  # batchgate's own: kept off the wire, back on the result
            "model": "review-classifier",  # a route in the config
            "max_tokens": 5,
            "messages": [{"role": "user", "content": f"Classify the sentiment of this review: {text}"}],
        }
        for i, text in enumerate(reviews)
    ]
    async with Gateway(load_config("examples/batchgate.yaml")) as gw:
        results = await gw.abatch(requests)  # aligned with the inputs
        for result in results:
            print(result.custom_id, result.ok, result.text, result.provider, len(result.attempts))

        async def many() -> AsyncIterator[dict[str, Any]]:  # any async iterable, read lazily
            for i in range(100):
                yield {**requests[i % 3], "custom_id": f"stream-{i}"}

        async for result in gw.stream(many(), window=4096):
            if not result.ok:
                print(result.custom_id, result.error)
        print(gw.statistics().items_succeeded, "succeeded")  # per provider: gw.statistics().providers


asyncio.run(main())
