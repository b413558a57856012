"""A URL as messages, hints and logs may show it: one rule for every store address (a Postgres job
store, a Redis quota store) — its password taken out, of the address and of the query."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def without_password(url: str) -> str:
    """`url` without its password: `scheme://user:pw@host/db?password=pw&sslpassword=pw&x=1` shows
    as `scheme://user@host/db?x=1` (a form a resume hint can give back: libpq then reads
    PGPASSWORD or ~/.pgpass). A URL that does not parse shows as its scheme alone."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # e.g. an unclosed IPv6 bracket
        scheme = url.partition("://")[0] if "://" in url else "url"
        return f"{scheme}://(unparsable address)"
    netloc = parts.netloc
    if password is not None:
        host = netloc.rsplit("@", 1)[1]
        netloc = f"{parts.username}@{host}" if parts.username else host
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if "password" not in k.lower()]
    query = parts.query if len(kept) == len(pairs) else urlencode(kept)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
