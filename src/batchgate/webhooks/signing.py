"""Standard Webhooks as OpenAI sends them: a secret `whsec_<base64 of 32 random bytes>`, the event
body `{"id", "object": "event", "created_at", "type", "data": {"id"}}`, and the headers
`webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of
"id.timestamp.body">`. The official `openai` SDK's `webhooks.unwrap` verifies them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

import orjson

from batchgate.config.schema import Secret

SECRET_PREFIX = "whsec_"
EVENT_PREFIX = "evt_"
EVENT_TYPES = {
    "completed": "batch.completed",
    "failed": "batch.failed",
    "cancelled": "batch.cancelled",
    "expired": "batch.expired",
}


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def new_event_id() -> str:
    return EVENT_PREFIX + secrets.token_hex(12)


def event_body(event_id: str, event_type: str, created_at: int, object_id: str) -> bytes:
    """OpenAI's webhook event: the object that ended is named by its id only."""
    return orjson.dumps(
        {
            "id": event_id,
            "object": "event",
            "created_at": created_at,
            "type": event_type,
            "data": {"id": object_id},
        }
    )


def signature(secret: Secret, event_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header's value for this attempt (the secret revealed only here)."""
    key = base64.b64decode(secret.reveal().removeprefix(SECRET_PREFIX))
    signed = f"{event_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode("ascii")


def headers(secret: Secret | None, event_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The attempt's headers; without a secret (a local run given none) no `webhook-signature`."""
    signed = {} if secret is None else {"webhook-signature": signature(secret, event_id, timestamp, body)}
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        **signed,
        "Content-Type": "application/json",
        "User-Agent": "batchgate-webhooks",
    }
