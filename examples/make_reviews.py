"""Writes examples/reviews.jsonl: 2,000 synthetic product reviews to classify (deterministic), and
examples/reviews-text.jsonl: the same reviews as plain fields (`custom_id`, `product`, `review`)
for the pipeline example (examples/review-pipeline.yaml).

python examples/make_reviews.py [COUNT] [PATH]
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

PRODUCTS = [
    "headphones",
    "coffee grinder",
    "desk lamp",
    "backpack",
    "keyboard",
    "water bottle",
    "phone case",
    "blender",
    "running shoes",
    "monitor stand",
    "tent",
    "electric kettle",
]
POSITIVE = [
    "I love it, works great and feels excellent.",
    "Fantastic quality, highly recommend.",
    "Amazing value, I am happy with it.",
    "Best purchase this year, wonderful design.",
    "Great battery and a perfect fit.",
]
NEGATIVE = [
    "Terrible, it broke after two days.",
    "Awful build quality, very disappointed.",
    "Worst purchase ever, returned it.",
    "Poor design and it stopped working.",
    "Bad smell and cheap plastic, I hate it.",
]
NEUTRAL = [
    "It arrived on Tuesday in a brown box.",
    "Does what the description says.",
    "The color is grey and the size is medium.",
    "Average product, nothing special.",
    "It is okay for the price.",
]
EXTRA = [
    "Shipping took a week.",
    "I bought it for my sister.",
    "The manual is in three languages.",
    "Bought it during a sale.",
    "Second one I own.",
    "",
]


def make(count: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    lines: list[dict[str, object]] = []
    for i in range(count):
        product = rng.choice(PRODUCTS)
        text = rng.choice(rng.choice([POSITIVE, NEGATIVE, NEUTRAL]))
        review = f"The {product}: {text} {rng.choice(EXTRA)}".strip()
        lines.append(
            {
                "custom_id": f"review-{i:05d}",
                "product": product,
                "review": review,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "review-classifier",
                    "max_tokens": 5,
                    "messages": [
                        {"role": "system", "content": "You label product reviews."},
                        {
                            "role": "user",
                            "content": "Classify the sentiment of this review as positive, "
                            f"negative or neutral. Answer with one word.\n\nReview: {review}",
                        },
                    ],
                },
            }
        )
    return lines


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    path = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).with_name("reviews.jsonl")
    lines = make(count)
    text_path = path.with_name(path.stem + "-text.jsonl")
    with path.open("w", encoding="utf-8") as f, text_path.open("w", encoding="utf-8") as t:
        for line in lines:
            fields = {
                "custom_id": line["custom_id"],
                "product": line.pop("product"),
                "review": line.pop("review"),
            }
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
            t.write(json.dumps(fields, separators=(",", ":")) + "\n")
    print(f"wrote {count} reviews to {path} and {text_path}")


if __name__ == "__main__":
    main()
