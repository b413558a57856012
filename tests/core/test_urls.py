"""One rule hides a store URL's password wherever the URL is shown (a Postgres job store's errors
and resume hints, a Redis quota store's errors); a provider URL in an error hides its key-like
query values too; a path is put on a base URL before its query."""

from __future__ import annotations

import pytest

from batchgate.urls import joined, shown, without_password


def test_a_urls_password_is_taken_out_of_its_address_and_its_query() -> None:
    shown = {
        "postgresql://u:hunter2@h:5432/db?connect_timeout=2": "postgresql://u@h:5432/db?connect_timeout=2",
        "postgres://h/db?password=hunter2&sslpassword=hunter2&options=-csearch_path%3Ds": (
            "postgres://h/db?options=-csearch_path%3Ds"
        ),
        "redis://:hunter2@127.0.0.1:6379/0": "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1:6379/0": "redis://127.0.0.1:6379/0",  # nothing to hide: unchanged
        "postgresql://u:hunter2@[::1/db": "postgresql://(unparsable address)",
    }
    assert {url: without_password(url) for url in shown} == shown


@pytest.mark.parametrize(
    ("base", "segments", "expected"),
    [
        (
            "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
            ("chat/completions",),
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://gw.example.com/v1/",
            ("/files", "f-1", "content"),
            "https://gw.example.com/v1/files/f-1/content",
        ),
        (
            "https://gw.example.com/v1?t=1",
            ("batches?limit=5",),
            "https://gw.example.com/v1/batches?t=1&limit=5",
        ),
        (
            "http://127.0.0.1:8400/alpha/v1",
            ("chat/completions",),
            "http://127.0.0.1:8400/alpha/v1/chat/completions",
        ),
    ],
)
def test_a_path_goes_before_the_base_urls_query(base: str, segments: tuple[str, ...], expected: str) -> None:
    assert joined(base, *segments) == expected


def test_a_shown_url_hides_its_password_and_key_like_query_values() -> None:
    url = "https://user:pw@x.example.com/a?api-version=2024-10-21&api-key=K1&sig=S2&token=T3&key=K4&n=1"
    hidden = "https://user@x.example.com/a?api-version=2024-10-21&api-key=***&sig=***&token=***&key=***&n=1"
    assert shown(url) == hidden
    assert shown("https://x.example.com/a?api-version=1") == "https://x.example.com/a?api-version=1"
