"""The credentials of a `kind: gemini` entry: AI Studio's `x-goog-api-key`, or on Vertex AI an
OAuth bearer token from google-auth's default credentials (the `gemini` extra, imported lazily),
refreshed off the event loop when it expires (https://ai.google.dev/api#authentication,
https://cloud.google.com/docs/authentication/application-default-credentials).
"""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Any

from batchgate.clock import Clock
from batchgate.config import ProviderConfig
from batchgate.errors import AuthenticationError

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_EARLY = 60.0  # refresh a token this many seconds before it expires


class VertexToken:
    """A bearer token from google-auth, refreshed when it is about to expire (one refresh at a time)."""

    def __init__(self, provider: str, clock: Clock, credentials: Any = None) -> None:
        self._provider = provider
        self._clock = clock
        self._credentials = credentials
        self._lock = asyncio.Lock()

    async def header(self) -> str:
        """`Bearer TOKEN`, refreshed first when needed."""
        async with self._lock:
            if self._credentials is None:
                self._credentials = await asyncio.to_thread(_default_credentials, self._provider)
            creds = self._credentials
            if not creds.token or self._expiring(creds):
                await asyncio.to_thread(_refresh, creds, self._provider)
            return f"Bearer {creds.token}"

    def _expiring(self, creds: Any) -> bool:
        expiry = getattr(creds, "expiry", None)
        if expiry is None:
            return False
        if expiry.tzinfo is None:  # google-auth keeps `expiry` as a naive UTC datetime
            expiry = expiry.replace(tzinfo=UTC)
        return float(expiry.timestamp()) - _EARLY <= self._clock.wall()


def _default_credentials(provider: str) -> Any:
    try:
        import google.auth  # noqa: PLC0415 — optional extra `gemini`, only for Vertex AI
    except ImportError:
        raise AuthenticationError(
            f"{provider}: Vertex AI needs google-auth: pip install 'batchgate[gemini]'", provider=provider
        ) from None
    try:
        credentials, _ = google.auth.default(scopes=[SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise AuthenticationError(
            f"{provider}: no Google credentials ({type(exc).__name__}); run gcloud auth "
            "application-default login or set GOOGLE_APPLICATION_CREDENTIALS",
            provider=provider,
        ) from None
    return credentials


def _refresh(credentials: Any, provider: str) -> None:
    import google.auth.exceptions  # noqa: PLC0415 — optional extra `gemini`
    import google.auth.transport.requests  # noqa: PLC0415 — optional extra `gemini`

    try:
        credentials.refresh(google.auth.transport.requests.Request())
    except google.auth.exceptions.GoogleAuthError as exc:
        raise AuthenticationError(
            f"{provider}: Google credentials could not be refreshed ({type(exc).__name__})", provider=provider
        ) from None


def api_key_headers(config: ProviderConfig) -> dict[str, str]:
    """AI Studio's headers: the provider's own and `x-goog-api-key` when a key is set."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", **config.extra_headers()}
    if config.api_key is not None and config.api_key.reveal() and config.vertex is None:
        headers["x-goog-api-key"] = config.api_key.reveal()
    return headers
