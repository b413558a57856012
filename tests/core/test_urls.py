"""One rule hides a store URL's password wherever the URL is shown (a Postgres job store's errors
and resume hints, a Redis quota store's errors)."""

from __future__ import annotations

from batchgate.urls import without_password


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
