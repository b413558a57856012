"""URLs as batchgate builds and shows them: a URL as messages, hints and logs may show it (one rule
for every store address — a Postgres job store, a Redis quota store — its password taken out, of
the address and of the query; `shown` also hides query values that look like keys, for a provider's
URL in an error), and `joined`, the one way an endpoint's path is put on a provider's `base_url`
(its query, e.g. Azure's `?api-version=`, kept after the path)."""

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


# Query parameters whose values are secrets (Azure's `api-key`, a signed URL's `sig`, a `token`):
# a URL an error message shows has their values replaced.
_SECRET_QUERY_WORDS = ("key", "sig", "token", "secret", "password", "auth", "credential")
REDACTED = "***"


def joined(base_url: str, *segments: str) -> str:
    """`base_url` with `segments` appended to its path, its query (and fragment) kept after it:
    `https://x/openai/deployments/d?api-version=v` + `chat/completions` is
    `https://x/openai/deployments/d/chat/completions?api-version=v`, as the provider publishes it.
    A segment's own query (`files?limit=5`) is merged after the base's."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    query = parts.query
    for segment in segments:
        seg_path, _, seg_query = segment.partition("?")
        seg_path = seg_path.strip("/")
        if seg_path:
            path = f"{path}/{seg_path}"
        if seg_query:
            query = f"{query}&{seg_query}" if query else seg_query
    return urlunsplit(parts._replace(path=path, query=query))


def shown(url: str) -> str:
    """`url` as an error message may show it: no password, and the values of query parameters that
    look like keys (`api-key`, `key`, `sig`, `token`, ...) replaced by `***`."""
    clean = without_password(url)
    parts = urlsplit(clean)
    if not parts.query:
        return clean
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not any(_secret_name(k) for k, _ in pairs):
        return clean
    kept = [(k, REDACTED if _secret_name(k) else v) for k, v in pairs]
    return urlunsplit(parts._replace(query=urlencode(kept, safe="*")))


def _secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_QUERY_WORDS)
