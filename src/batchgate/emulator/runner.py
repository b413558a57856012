"""Running the emulator outside the caller's event loop: `EmulatorThread` (its own loop in a background
thread, for sync tests and embedding) and `EmulatorProcess` (`python -m batchgate emulate` in a child
process, for benchmarks that must not share a core with the load generator).
"""

from __future__ import annotations

import asyncio
import selectors
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import orjson

from batchgate.emulator.azure_api import provider_base_url
from batchgate.emulator.config import EmulatorConfig, load_emulator_config
from batchgate.emulator.server import OPERATOR_PREFIX, Emulator

LISTENING_PREFIX = "batchgate emulator listening on "


def _base_url(config: EmulatorConfig, url: str, name: str) -> str:
    return provider_base_url(config, url, name)


class EmulatorThread:
    """The emulator on its own event loop in a daemon thread."""

    def __init__(self, config: EmulatorConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config
        self.emulator = Emulator(config, host, port)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            raise RuntimeError("the emulator thread is already started")
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="batchgate-emulator")
        self._thread.daemon = True
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the emulator did not start in time")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            await self.emulator.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await self.emulator.stop()

    def stop(self, timeout: float = 30.0) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        thread.join(timeout)

    def _call(self, fn: Any) -> Any:
        if self._loop is None or self._thread is None:
            raise RuntimeError("the emulator thread is not running")

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    @property
    def url(self) -> str:
        return self.emulator.url

    def base_url(self, name: str) -> str:
        return self.emulator.base_url(name)

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self.emulator.stats)
        return result

    def reset(self) -> None:
        self._call(self.emulator.reset)

    def received(self) -> dict[str, list[str]]:
        """Each provider's received prompts in arrival order (with `record_prompts: true`)."""
        result: dict[str, list[str]] = self._call(
            lambda: {k: list(v) for k, v in self.emulator.received.items()}
        )
        return result

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class EmulatorProcess:
    """`python -m batchgate emulate --config PATH --port N` in a child process."""

    def __init__(self, config_path: str | Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config_path = Path(config_path)
        self.config = load_emulator_config(self.config_path)  # fail here, with the key, not in the child
        self.host = host
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._url: str | None = None
        self._returncode: int | None = None

    def start(self, timeout: float = 30.0) -> None:
        if self._proc is not None:
            raise RuntimeError("the emulator process is already started")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as the child; closed in stop()
        command = [sys.executable, "-m", "batchgate", "emulate", "--config", str(self.config_path)]
        command += ["--host", self.host, "--port", str(self.port)]
        self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr)
        assert self._proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._proc.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout)
        line = self._proc.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
        if not line.startswith(LISTENING_PREFIX):
            reason = self._failure()
            self.stop()
            raise RuntimeError(f"the emulator process did not start: {reason or line or 'timed out'}")
        self._url = line[len(LISTENING_PREFIX) :]

    def _failure(self) -> str:
        """The child's last stderr line, if it has exited."""
        if self._stderr is None or self._proc is None:
            return ""
        try:
            self._proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return ""
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit code {self._proc.returncode}"

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
            self._returncode = proc.returncode
            self._url = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The child's exit code once stopped (0 after a clean SIGTERM), else None."""
        return self._returncode if self._proc is None else self._proc.poll()

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the emulator process is not running")
        return self._url

    def base_url(self, name: str) -> str:
        return _base_url(self.config, self.url, name)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}{OPERATOR_PREFIX}/stats", timeout=30) as response:
            result: dict[str, Any] = orjson.loads(response.read())
        return result

    def received(self) -> dict[str, list[str]]:
        """Each provider's received prompts in arrival order (with `record_prompts: true`)."""
        with urllib.request.urlopen(f"{self.url}{OPERATOR_PREFIX}/received", timeout=30) as response:
            result: dict[str, list[str]] = orjson.loads(response.read())["providers"]
        return result

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}{OPERATOR_PREFIX}/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
