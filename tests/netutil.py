"""Real network pieces for the network tests: a private CA (`trustme`), a TLS front that serves a
plain loopback server (the emulator) over https and lets in only connections from one source
address, and a real HTTP proxy (`proxy.py`) whose upstream connections come from that address.

Together they make "a network that allows only the proxy": the front on 127.0.0.1 closes at once
every connection that does not come from `PROXY_SOURCE` (127.0.0.2, still loopback), and only
the proxy dials from there, so a client that connects directly is refused, and every connection
the front served is counted (`TLSFront.served`, `TLSFront.refused`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import trustme

PROXY_SOURCE = "127.0.0.2"
HOSTS = ("127.0.0.1", "localhost")


def make_ca() -> tuple[trustme.CA, trustme.LeafCert]:
    """A private CA and a server certificate it signs for 127.0.0.1 and localhost."""
    ca = trustme.CA()
    return ca, ca.issue_cert(*HOSTS)


@dataclass
class TLSFront:
    """https on 127.0.0.1 in front of a plain `upstream` port, on its own loop in a thread."""

    server_cert: trustme.LeafCert
    upstream: int
    only_from: str | None = PROXY_SOURCE  # None: anyone may connect
    client_ca: trustme.CA | None = None  # a CA client certificates must be signed by (mTLS)
    tls: bool = True  # False: plain http, still only from `only_from`
    served: int = 0
    refused: int = 0
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://localhost:{self.port}"  # a name: proxy.py binds its source only for names

    def __enter__(self) -> TLSFront:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            server.close()
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.run_until_complete(asyncio.sleep(0.01))  # let the aborted transports close
            self._loop.close()

        self._thread = threading.Thread(target=run, name="tls-front", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._loop is not None
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server_cert.configure_cert(context)
        if self.client_ca is not None:
            self.client_ca.configure_trust(context)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")[0]
        if self.only_from is not None and peer != self.only_from:
            self.refused += 1  # a direct connection: this network drops it
            writer.transport.abort()
            return
        up: asyncio.StreamWriter | None = None
        try:
            if self.tls:
                await writer.start_tls(self._context())
            self.served += 1
            up_reader, up = await asyncio.open_connection("127.0.0.1", self.upstream)
            await asyncio.gather(_pipe(reader, up), _pipe(up_reader, writer), return_exceptions=True)
        except (ssl.SSLError, OSError):
            pass
        finally:
            for stream in (writer, up):
                if stream is not None:
                    stream.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


@contextlib.contextmanager
def real_proxy(*, basic_auth: str | None = None, tls: tuple[str, str] | None = None) -> Iterator[int]:
    """proxy.py on 127.0.0.1 (one acceptor process, a thread per connection), dialling upstream
    from `PROXY_SOURCE`; yields its port. `basic_auth` "user:pass": it answers 407 to requests
    without them; `tls` (certificate file, key file): an https:// proxy, itself spoken to over TLS."""
    import proxy  # noqa: PLC0415 — a test-only dependency (the dev extra)

    args = ["--hostname", "127.0.0.1", "--port", "0", "--num-acceptors", "1", "--threaded"]
    args += ["--log-level", "WARNING"]
    if basic_auth is not None:
        args += ["--basic-auth", basic_auth]
    if tls is not None:
        args += ["--cert-file", tls[0], "--key-file", tls[1]]
    with proxy.Proxy(args, plugins=[SourceAddress]) as running:
        try:
            yield int(running.flags.port)
        finally:
            _wake_to_stop(running)


def _wake_to_stop(running: Any) -> None:
    """Tell proxy.py's acceptors to stop and wake them with a connection: an acceptor checks its
    stop flag only between selects of up to a second, so its shutdown would otherwise wait that
    second out (most of a network test's time)."""
    for acceptor in running.acceptors.acceptors:
        acceptor.running.set()
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", running.flags.port), timeout=5):
        pass


def _source_plugin() -> type:
    from proxy.http.proxy import HttpProxyBasePlugin  # noqa: PLC0415

    class Plugin(HttpProxyBasePlugin):
        """Dials every upstream from `PROXY_SOURCE` (the only address the TLS front lets in)."""

        def resolve_dns(self, host: str, port: int) -> tuple[str | None, tuple[str, int] | None]:
            return None, (PROXY_SOURCE, 0)

    return Plugin


SourceAddress = _source_plugin()
