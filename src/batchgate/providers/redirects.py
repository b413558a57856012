"""Which redirect answers are followed, and how: the one rule (`next_hop`, pure) and the one loop
(`follow`) of the chat path (`transport.call`) and the aiohttp session (`http.send`), so both
behave the same.

    307, 308                  followed with the same method and body (RFC 9110 §15.4.8, §15.4.9)
    301, 302, 303 to a GET    followed as a GET
    301, 302, 303 to a POST   an error naming the new URL: a client may re-send it as a GET
                              (RFC 9110 §15.4.2-4), which would drop the body, so none is guessed

A redirect is followed only to the same host (an http → https upgrade allowed, never https →
http), since the request carries the API key; and at most `MAX_HOPS` times. Every refusal is a
`BadRequestError` (never retried: the same request gets the same answer) that names the
`Location`, so the user can put it in `base_url`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from batchgate.config import Secret
from batchgate.errors import BadRequestError
from batchgate.providers.classify import scrub, shorten

A = TypeVar("A", bound=tuple[int, Mapping[str, str], bytes])  # an answer: status, headers, body
MAX_HOPS = 5
SAME_METHOD = frozenset({307, 308})
AS_GET = frozenset({301, 302, 303})
_SAFE = frozenset({"GET", "HEAD"})


def next_hop(
    method: str,
    url: str,
    status: int,
    headers: Mapping[str, str],
    *,
    hops: int,
    provider: str,
    api_key: Secret | None = None,
) -> tuple[str, str] | None:
    """(method, URL) to send next after a redirect answer to `method url`, or None when the answer
    is no redirect (or has no Location); a `BadRequestError` naming the target when it is one
    batchgate will not follow. `hops`: redirects already followed for this request."""
    if status not in SAME_METHOD and status not in AS_GET:
        return None
    location = headers.get("Location") or headers.get("location")
    if not location:
        return None
    target = urljoin(url, location.strip())
    shown = shorten(scrub(target, api_key), 200)

    def refuse(why: str) -> BadRequestError:
        message = f"{provider}: HTTP {status} redirect to {shown} not followed: {why}"
        return BadRequestError(message, provider=provider, status=status, headers=headers)

    if status in AS_GET and method.upper() not in _SAFE:
        raise refuse(f"a {method} is not re-sent as a GET; set base_url to the new URL")
    if hops >= MAX_HOPS:
        raise refuse(f"{MAX_HOPS} redirects followed already (a loop?)")
    old, new = urlsplit(url), urlsplit(target)
    if new.scheme not in ("http", "https") or (old.scheme == "https" and new.scheme != "https"):
        raise refuse("https is never redirected to another scheme")
    if (new.hostname or "").lower() != (old.hostname or "").lower():
        raise refuse("another host is not sent the API key; set base_url to the new URL")
    return (method if status in SAME_METHOD else "GET"), target


async def follow(
    exchange: Callable[[str, str, bool], Awaitable[A]],
    method: str,
    url: str,
    *,
    provider: str,
    api_key: Secret | None,
) -> A:
    """`exchange(method, url, with_body)` again at each redirect `next_hop` follows (the body
    only while the method is the same); the first answer that is not one."""
    hops, first = 0, method
    while True:
        answer = await exchange(method, url, method == first)
        hop = next_hop(method, url, answer[0], answer[1], hops=hops, provider=provider, api_key=api_key)
        if hop is None:
            return answer
        (method, url), hops = hop, hops + 1
