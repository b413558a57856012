"""Callback delivery slots shared by key first (issue 40): a receiver that never answers holds
only its key's slots, so another key's callback is delivered while every one of those attempts
still hangs (before the first of them times out)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread
from batchgate.server.callbacks.delivery import MAX_AT_ONCE
from waiting import wait_for

from .harness import ALPHA, gateway_config, running
from .hooks import receiving
from .jobs_client import JobsClient, requests_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class Hole:
    """Accepts every connection, reads, never answers; counts those the client closed."""

    listener: socket.socket
    accepted: int = 0
    closed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
        with self.lock:
            self.closed += 1


@contextmanager
def hole() -> Iterator[Hole]:
    listener = socket.create_server(("127.0.0.1", 0))
    h = Hole(listener)
    thread = threading.Thread(target=h.serve, daemon=True)
    thread.start()
    try:
        yield h
    finally:
        listener.close()


def test_a_receiver_that_never_answers_for_one_key_does_not_delay_another_key_s_callback(
    tmp_path: Path, emu: EmulatorThread
) -> None:
    config = gateway_config(tmp_path / "gateway.yaml", emu)
    with running(tmp_path, config, "--callback-allow", "127.0.0.1") as server, hole() as black:
        a, b = JobsClient(server, server.keys_create()), JobsClient(server, server.keys_create())
        try:
            for i in range(MAX_AT_ONCE + 1):  # enough to take every slot the server has
                a.create(requests=requests_for(ALPHA, 1, f"a{i}"), callback_url=black.url)
            wait_for(lambda: black.accepted >= 8, "A's first attempts to hang")
            with receiving(200) as receiver:
                b.create(requests=requests_for(ALPHA, 1, "b"), callback_url=receiver.url)
                receiver.wait(1)
                with black.lock:
                    closed = black.closed
        finally:
            a.close()
            b.close()
    assert closed == 0  # B's arrived while all of A's first attempts still hung (10 s each)
