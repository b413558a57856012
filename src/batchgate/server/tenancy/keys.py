"""Client keys of the service: a high-entropy bearer token shown once, kept only as its SHA-256.

A token is `bgk-` and 32 random bytes (URL-safe base64); its id (`key-` and 8 hex digits) names
the owner of the files and batches the token creates. An admin key sees every owner's.
"""

from __future__ import annotations

import hashlib
import secrets

from batchgate.server.tenancy.registry import ApiKey, Registry

TOKEN_PREFIX = "bgk-"


def digest(token: str) -> str:
    """What the registry keeps of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_key(registry: Registry, *, admin: bool, name: str, now: int) -> tuple[ApiKey, str]:
    """A new key stored by its hash; returns it and the token (the only time the token exists)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(id="key-" + secrets.token_hex(4), admin=admin, name=name)
    registry.add_key(key, digest(token), now)
    return key, token


def authenticate(
    registry: Registry, authorization: str | None, x_api_key: str | None = None
) -> ApiKey | None:
    """The key an `Authorization: Bearer <token>` (or `x-api-key: <token>`) header names, or None."""
    token = ""
    if authorization and authorization.startswith("Bearer "):
        token = authorization[len("Bearer ") :].strip()
    elif x_api_key:
        token = x_api_key.strip()
    if not token or not token.isascii() or not token.isprintable():
        return None  # a token is printable ASCII: any other byte names no key (a 401, never a 500)
    return registry.key_by_hash(digest(token))
