"""`batchgate run` against a server whose every answer has a 64 KiB head (issue 38: 8 tries a line,
800 billable answers for 100 lines): each line is tried twice, and the JSON report and the summary
say what the retries were spent on."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from .harness import MODEL, Cli, read_jsonl, write_input

pytestmark = pytest.mark.acceptance

LINES = 5
BIG_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Big: "
    + b"a" * (70 * 1024)
    + b"\r\n\r\n{}"
)


class _Answer(socketserver.StreamRequestHandler):
    """Reads each request on the connection (head, then its Content-Length body) and answers
    with the oversized head."""

    def handle(self) -> None:
        while True:
            length = 0
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if not line:
                return
            self.rfile.read(length)
            self.server.seen += 1  # type: ignore[attr-defined]
            self.wfile.write(BIG_HEAD)


@pytest.fixture
def big_head_server() -> Iterator[socketserver.ThreadingTCPServer]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    server.seen = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.slow  # a CLI run
def test_a_64_kib_head_is_tried_twice_a_line_and_the_report_counts_retries_by_cause(
    cli: Cli, big_head_server: socketserver.ThreadingTCPServer
) -> None:
    port = big_head_server.server_address[1]
    config = {
        "providers": [
            {"name": "p", "kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "api_key": "k"}
        ],
        "routes": [{"model": MODEL, "targets": ["p"]}],
        "settings": {"retry": {"max_attempts": 8, "base_delay": 0.01, "max_delay": 0.02}, "seed": 1},
    }
    cfg = cli.cwd / "gw.yaml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    src = write_input(cli.cwd / "in.jsonl", LINES)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out))
    assert big_head_server.seen == 2 * LINES  # type: ignore[attr-defined]
    rows = read_jsonl(out)
    assert len(rows) == LINES
    assert all(row["error"]["code"] == "too_large" for row in rows), rows[0]
    report = orjson.loads(Path(f"{out}.report.json").read_bytes())
    assert report["retries_by_cause"] == {"too_large": LINES}
    assert report["providers"]["p"]["retries_by_kind"] == {"too_large": LINES}
    assert f"retries by cause: too_large {LINES}" in done.stdout + done.stderr
