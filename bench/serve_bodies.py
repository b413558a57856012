"""What a huge request body costs `batchgate serve`'s memory: the server's peak resident memory
(VmHWM, read from /proc) before and after one 190 MB JSON body to `/v1/chat/completions` with a
declared Content-Length, one sent chunked, one gzip body inflating to 190 MB, and four chunked ones
at once. Each answer's status is printed with the figure (413 when the body bound holds).

    python bench/serve_bodies.py [--mb 190]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
from serve_bench import MODEL, Served, emulator, served, write_config

MIB = 1 << 20
_FILLER = b"a" * MIB


def peak_mib(server: Served) -> float:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) / 1024


def chat_body(mb: int) -> Iterator[bytes]:
    yield b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "'
    for _ in range(mb):
        yield _FILLER
    yield b'"}]}'


def post(server: Served, mb: int, way: str) -> int:
    headers = {"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"}
    content: bytes | Iterator[bytes] = chat_body(mb)
    if way == "declared":
        headers["Content-Length"] = str(sum(len(c) for c in chat_body(mb)))
    elif way == "gzip":
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        content = b"".join(packer.compress(c) for c in chat_body(mb)) + packer.flush()
        headers["Content-Encoding"] = "gzip"
    with httpx.Client(timeout=300) as http:
        return http.post(server.url + "/v1/chat/completions", content=content, headers=headers).status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=190, help="body size in MiB (default 190)")
    args = parser.parse_args()
    emu = emulator(rpm=10**6, latency_ms=5)
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            served(Path(tmp), write_config(Path(tmp) / "g.yaml", emu, None, 16)) as s,
        ):
            print(f"server at start: peak {peak_mib(s):.0f} MiB")
            for way in ("declared", "chunked", "gzip"):
                status = post(s, args.mb, way)
                print(f"one {args.mb} MiB body, {way}: {status}, peak {peak_mib(s):.0f} MiB")
            codes: list[int] = []
            threads = [
                threading.Thread(target=lambda: codes.append(post(s, args.mb, "chunked"))) for _ in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(f"four {args.mb} MiB bodies at once, chunked: {sorted(codes)}, peak {peak_mib(s):.0f} MiB")
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
