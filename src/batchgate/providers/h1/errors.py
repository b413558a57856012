"""What the lean HTTP/1.1 client raises, by what went wrong (classified in
`batchgate.providers.classify`, never shown to a user as they are)."""

from __future__ import annotations


class H1Error(Exception):
    """Any failure of one HTTP exchange."""


class H1ProtocolError(H1Error):
    """The answer is not HTTP/1.x as it must be (a garbled status line or header, a head or body
    past its bound, a content coding we did not ask for)."""


class H1TooLarge(H1ProtocolError):
    """The head, or the body (decompressed included), is past the client's bound: no retry can
    read it."""


class H1GarbledHead(H1ProtocolError):
    """The status line or a header line is not HTTP/1.x: no retry of this server's answer can
    read it."""


class H1BodyBroken(H1Error):
    """The connection ended in the middle of the answer's body."""


class H1Disconnected(H1Error):
    """The connection ended before any of the answer came (the server closed or reset it)."""


class H1ConnectError(H1Error):
    """No connection could be made: refused, unreachable or unresolvable; the request never left."""

    def __init__(self, message: str, os_error: OSError | None = None) -> None:
        super().__init__(message)
        self.os_error = os_error


class H1DNSError(H1ConnectError):
    """The host name did not resolve."""


class ForeignHTTPError(H1Error):
    """Another HTTP client's failure carried through a `ChatTransport` (aiohttp's, by
    `batchgate.providers.http.SessionTransport`): classified as the original is."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class H1TLSError(H1Error):
    """The TLS handshake failed: the server's certificate is not trusted (or no protocol in
    common). `problem` says what, as the ssl module words it, and `host` where; nothing was sent."""

    def __init__(self, problem: str, host: str) -> None:
        super().__init__(f"TLS handshake with {host} failed: {problem}")
        self.problem, self.host = problem, host
        self.verify = False  # True: a certificate verification failure (a CA to give)


class H1ProxyError(H1ConnectError):
    """The proxy refused to open a tunnel to the target (`CONNECT` answered 407, 403, 502, ...):
    the message names the proxy (never its credentials) and its status; nothing was sent."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
