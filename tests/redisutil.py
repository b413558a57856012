"""The test Redis: the shared server (for the conformance suite) and private `redis-server`
processes a test may stop and start (for outages), skipping where absent or failing under CI.

Every test uses its own key namespace, so tests (and parallel runs) never see each other's keys.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from functools import cache, partial

import pytest
import redis

from waiting import wait_for

BASE_URL = os.environ.get("BATCHGATE_TEST_REDIS", "redis://127.0.0.1:6379/0")
_START_LIMIT_S = 10.0


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@cache
def _unreachable_reason() -> str | None:
    try:
        with redis.Redis.from_url(BASE_URL, socket_connect_timeout=3) as client:
            client.ping()
    except redis.RedisError as exc:
        return f"no Redis at {BASE_URL} ({type(exc).__name__}); start it or set BATCHGATE_TEST_REDIS"
    return None


def require_redis() -> None:
    """Skip the calling test where the Redis server is absent; fail it under CI."""
    reason = _unreachable_reason()
    if reason is not None:
        _skip_or_fail(reason)


def server_time() -> float:
    """The shared server's clock (`TIME`, seconds): the clock its quota scripts read."""
    with redis.Redis.from_url(BASE_URL) as client:
        seconds, micros = client.time()
    return float(seconds) + float(micros) / 1e6


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port, socket_connect_timeout=1) as client:
            client.ping()
    except redis.ConnectionError:
        return False
    return True


def fresh_namespace() -> str:
    return f"bgtest:{secrets.token_hex(6)}:"


def drop_namespace(namespace: str) -> None:
    with redis.Redis.from_url(BASE_URL) as client:
        keys = list(client.scan_iter(match=f"{namespace}*"))
        if keys:
            client.delete(*keys)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    """A `redis-server` of our own on a free port, without persistence, started and stopped at will."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _skip_or_fail("no redis-server binary on PATH")
        self.binary = str(binary)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        self._proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(partial(_answers, self.port), "redis-server to start", limit=_START_LIMIT_S)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        self._proc = None
