"""One delivery attempt: check and pin the callback host's addresses (`guard`), sign the event for
this attempt's timestamp (`signing`), POST it without following redirects, and say what came of it.

Outcomes: `delivered` (a 2xx), `refused` (the SSRF guard, final), `redirected` (a 3xx, final: a
redirect is never followed, so it could lead anywhere), `http_error` (another status; retried),
`unreachable` (no answer: the name did not resolve, connection, TLS or timeout; retried).
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from yarl import URL

from batchgate.config.schema import Secret
from batchgate.webhooks import guard, signing

ANSWER_BYTES = 1 << 16  # what is read of a receiver's answer
FINAL = frozenset({"delivered", "refused", "redirected"})


@dataclass(frozen=True, slots=True)
class Delivery:
    outcome: str
    reason: str | None = None

    @property
    def final(self) -> bool:
        return self.outcome in FINAL


async def send(
    url: str,
    event_id: str,
    body: bytes,
    secret: Secret | None,
    timestamp: int,
    *,
    allow: guard.AllowList,
    timeout_s: float,
    lookup: guard.Lookup = guard.system_lookup,
) -> Delivery:
    """One POST of the event to `url`, signed for `timestamp`; `lookup` resolves the host (once)."""
    try:
        parsed = guard.parse_url(url)
        host = parsed.host or ""
        addresses = await guard.resolve(host, parsed.port or 0, allow, lookup)
    except guard.CallbackUnresolved as exc:  # a DNS failure may pass: retried, as no answer is
        return Delivery("unreachable", exc.message)
    except guard.CallbackRefused as exc:
        return Delivery("refused", exc.message)
    connector = aiohttp.TCPConnector(
        resolver=guard.PinnedResolver(host, addresses), use_dns_cache=False, limit=1, force_close=True
    )
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    headers = signing.headers(secret, event_id, timestamp, body)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False) as session,
            session.post(parsed, data=body, headers=headers, allow_redirects=False) as answer,
        ):
            await answer.content.read(ANSWER_BYTES)
            status = answer.status
            location = answer.headers.get("Location", "")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Delivery("unreachable", f"no answer from {host}: {type(exc).__name__}")
    if 200 <= status < 300:
        return Delivery("delivered")
    if 300 <= status < 400:
        where = _host_of(location)
        return Delivery("redirected", f"answered {status}, a redirect to {where}; redirects are not followed")
    return Delivery("http_error", f"answered HTTP {status}")


def _host_of(location: str) -> str:
    try:
        return URL(location).host or "a relative URL"
    except ValueError:
        return "an invalid URL"
