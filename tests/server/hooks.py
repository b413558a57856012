"""Callback receivers for the tests: a real HTTP server on 127.0.0.1 in a thread that records each
POST and answers with the statuses it is told; and a key with its webhook secret made by
`batchgate keys create` as a user runs it."""

from __future__ import annotations

import re
import selectors
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from batchgate.server.callbacks.outbox import Event, Outbox
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry
from waiting import WAIT_LIMIT_S, poll

from .harness import _env, _place


@dataclass(frozen=True)
class Delivery:
    headers: dict[str, str]
    body: bytes
    phase: int  # the receiver's phase when it arrived


@dataclass
class Receiver:
    """Answers `statuses` in turn (the last repeats); a 3xx carries `location`."""

    statuses: list[int]
    location: str = ""
    phase: int = 0
    deliveries: list[Delivery] = field(default_factory=list)
    port: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/batch?token=receiver-own-token"

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self.changed:
            status = self.statuses[min(len(self.deliveries), len(self.statuses) - 1)]
            self.deliveries.append(Delivery(headers, body, self.phase))
            self.changed.notify_all()
        return status

    def wait(self, count: int) -> list[Delivery]:
        """The first `count` deliveries, waiting for them (bounded; never a timing assertion)."""
        with self.changed:
            got = self.changed.wait_for(lambda: len(self.deliveries) >= count, timeout=WAIT_LIMIT_S)
            assert got, f"{len(self.deliveries)} deliveries arrived, expected {count}"
            return list(self.deliveries)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = receiver.answer({k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", receiver.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler


@contextmanager
def receiving(*statuses: int, location: str = "") -> Iterator[Receiver]:
    receiver = Receiver(list(statuses or (200,)), location)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.port = int(httpd.server_address[1])
    stop, wake = socket.socketpair()
    thread = threading.Thread(target=_serve, args=(httpd, stop), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        wake.send(b"x")
        thread.join()
        httpd.server_close()
        stop.close()
        wake.close()


def _serve(httpd: ThreadingHTTPServer, stop: socket.socket) -> None:
    """`httpd` until a byte arrives on `stop`: woken by either (`serve_forever` would look at its
    shutdown flag only every half second, and each test would wait that out)."""
    httpd.timeout = 0  # `handle_request` never blocks: a connection gone before its accept is no hang
    with selectors.DefaultSelector() as selector:
        selector.register(httpd, selectors.EVENT_READ)
        selector.register(stop, selectors.EVENT_READ)
        while all(key.fileobj is not stop for key, _ in selector.select()):
            httpd.handle_request()


def keys_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`batchgate keys ARGS --store ROOT/jobs.db` as a user runs it."""
    argv = [sys.executable, "-m", "batchgate", "keys", *args, *_place(root)]
    return subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=60, check=False)


def make_key(root: Path) -> tuple[str, str, str]:
    """`batchgate keys create`: the token (stdout), the key's id and its webhook secret (stderr)."""
    done = keys_cli(root, "create")
    assert done.returncode == 0, done.stderr
    key_id, secret = re.search(r"key (key-[0-9a-f]+)", done.stderr), re.search(r"whsec_\S+", done.stderr)
    assert key_id is not None, done.stderr
    assert secret is not None, done.stderr
    return done.stdout.strip(), key_id.group(1), secret.group(0)


def key_with_secret(root: Path) -> tuple[str, str]:
    token, _, secret = make_key(root)
    return token, secret


def events_of(root: Path, object_id: str) -> list[Event]:
    registry = Registry(root / REGISTRY_FILE)
    try:
        return Outbox(registry).of_object(object_id)
    finally:
        registry.close()


def wait_settled(root: Path, object_id: str) -> Event:
    """The batch's one event once it is no longer pending (bounded)."""
    events = poll(
        lambda: events_of(root, object_id),
        lambda events: bool(events) and events[0].state != "pending",
        lambda events: f"the callback of {object_id} to settle: {events}",
    )
    assert len(events) == 1, events
    return events[0]
