"""Single-text embedding lines packed into few requests (issue 29): is a 100,000-line embeddings
job bound by tokens per minute rather than requests per minute? Prints figures; a figures
script, not a test.

    python bench/embed_packing.py [--lines 100000] [--words 12] [--rpm 3000] [--tpm 1000000] [--no-pack]

Writes `--lines` OpenAI Batch lines, each `/v1/embeddings` with one text of about `--words`
words (all different; `dimensions: 16` keeps OUT small), starts an emulator process whose key
allows `--rpm` requests and `--tpm` tokens a minute (token buckets, as OpenAI's limits are
modelled), runs `batchgate run` on the file and prints: the tokens the provider counted (the sum
of the OUT lines' usage), the TPM bound (those tokens ÷ TPM), the RPM bound one request a line
would have had (lines ÷ RPM), the makespan (first request admitted → run finished), its ratio to
the TPM bound, the requests sent, 429s, failed lines, and whether every OUT line holds the
emulator's vector of its own text (`embedding_vector`). `--no-pack` runs the same job with
`job: {pack_embeddings: 0}`, one request a line (at full size it takes the whole RPM bound).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from batchgate.emulator import EmulatorProcess, embedding_vector

WORDS = [
    "river",
    "stone",
    "paper",
    "light",
    "green",
    "quiet",
    "market",
    "window",
    "garden",
    "silver",
    "engine",
    "yellow",
]
DIMENSIONS = 16


def text_of(i: int, words: int) -> str:
    rng = random.Random(i)
    return f"passage {i}: " + " ".join(rng.choice(WORDS) for _ in range(words))


def write_input(path: Path, lines: int, words: int) -> None:
    with path.open("wb") as f:
        for i in range(lines):
            body = {"model": "embed", "input": text_of(i, words), "dimensions": DIMENSIONS}
            line = {"custom_id": f"e{i}", "method": "POST", "url": "/v1/embeddings", "body": body}
            f.write(orjson.dumps(line) + b"\n")


def emulator_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/_emulator/stats", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
    alpha: dict[str, Any] = data["providers"]["alpha"]
    return alpha


def check_out(path: Path, words: int) -> tuple[int, int, int, int]:
    """(lines, failed, tokens, wrong vectors) of OUT."""
    lines = failed = tokens = wrong = 0
    with path.open("rb") as f:
        for raw in f:
            row = orjson.loads(raw)
            lines += 1
            if row.get("error"):
                failed += 1
                continue
            tokens += row["usage"]["prompt_tokens"]
            i = int(row["custom_id"][1:])
            data = row["response"]["body"]["data"]
            wrong += [d["embedding"] for d in data] != [embedding_vector(text_of(i, words), DIMENSIONS)]
    return lines, failed, tokens, wrong


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--words", type=int, default=12)
    ap.add_argument("--rpm", type=int, default=3000)
    ap.add_argument("--tpm", type=int, default=1_000_000)
    ap.add_argument("--no-pack", action="store_true", help="one request a line (pack_embeddings: 0)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bg-embed-") as tmp_s:
        tmp = Path(tmp_s)
        write_input(tmp / "in.jsonl", args.lines, args.words)
        (tmp / "emu.yaml").write_text(
            "seed: 1\nproviders:\n  - name: alpha\n    family: openai\n"
            f"    limits: {{rpm: {args.rpm}, tpm: {args.tpm}}}\n"
            "    latency: {ttft_p50_ms: 80, ttft_sigma: 0.2, per_token_ms: 0}\n",
            encoding="utf-8",
        )
        with EmulatorProcess(tmp / "emu.yaml") as emu:
            (tmp / "gw.yaml").write_text(
                f"providers:\n  - {{name: alpha, kind: openai, base_url: '{emu.base_url('alpha')}', "
                f"limits: {{rpm: {args.rpm}, tpm: {args.tpm}}}}}\n"
                "routes:\n  - {model: embed, targets: ['alpha:text-embedding-3-small']}\n"
                + ("job: {pack_embeddings: 0}\n" if args.no_pack else ""),
                encoding="utf-8",
            )
            cmd = [sys.executable, "-m", "batchgate", "run", "in.jsonl", "--config", "gw.yaml"]
            cmd += ["--output", "out.jsonl", "--store", "jobs.db", "--progress", "quiet"]
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            first = None
            while proc.poll() is None:
                time.sleep(0.05)
                if first is None and emulator_stats(emu.url)["admitted"]:
                    first = time.perf_counter()
            end = time.perf_counter()
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            stats = emulator_stats(emu.url)
        if proc.returncode != 0 or first is None:
            print(f"run failed ({proc.returncode}):\n{stderr}")
            return
        lines, failed, tokens, wrong = check_out(tmp / "out.jsonl", args.words)
    makespan = end - first
    tpm_bound = tokens / args.tpm * 60
    print(f"lines {args.lines:,}, OUT lines {lines:,}, failed {failed}, wrong vectors {wrong}")
    print(f"tokens counted {tokens:,} ({tokens / max(1, lines):.1f} a line)")
    print(f"TPM bound {tpm_bound:.1f} s; RPM bound one request a line {args.lines / args.rpm * 60:.0f} s")
    print(f"makespan {makespan:.1f} s (first request → run done; load and validation {first - start:.1f} s)")
    print(f"makespan / TPM bound {makespan / tpm_bound:.2f}")
    print(f"requests admitted {stats['admitted']:,}, 429s {stats['rejected'].get('rate_limit', 0)}")


if __name__ == "__main__":
    main()
