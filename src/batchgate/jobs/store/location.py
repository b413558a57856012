"""Where a job store lives and how to open one: a file path (SQLite, the default) or a
`postgresql://` URL (Postgres; needs the `postgres` extra, imported only when asked for).

Everything shown to users about a store (errors, the `--store` part of a resume hint) comes from
here and never carries a password.
"""

from __future__ import annotations

from pathlib import Path

from batchgate.errors import JobError, StoreError
from batchgate.jobs.store.protocol import DEFAULT_STORE, JobStore
from batchgate.urls import without_password

__all__ = [
    "DEFAULT_STORE",
    "StoreLocation",
    "choose_location",
    "describe",
    "open_store",
    "parse_location",
    "resume_hint",
    "store_exists",
]

StoreLocation = Path | str  # a str is always a postgresql:// URL
URL_SCHEMES = ("postgresql://", "postgres://")  # a job store at one of these is Postgres


def parse_location(text: str | Path) -> StoreLocation:
    """A `--store` or `job.store` value: a Postgres URL stays a string, anything else is a path."""
    if isinstance(text, str) and text.startswith(URL_SCHEMES):
        return text
    return Path(text)


def choose_location(cli: StoreLocation | None, configured: str | None) -> StoreLocation:
    """`--store` wins over the config's `job.store`, which wins over the default file."""
    if cli is not None:
        return cli
    return parse_location(configured) if configured else DEFAULT_STORE


def store_exists(location: StoreLocation) -> bool:
    """Whether the store may already hold jobs (a server always may; a file only if it is there)."""
    return isinstance(location, str) or location.exists()


def describe(location: StoreLocation) -> str:
    """The store as messages may show it: a path, or the URL without its password."""
    return without_password(location) if isinstance(location, str) else str(location)


def resume_hint(location: StoreLocation) -> str:
    """The ` --store …` a resume command needs ("" for the default file); never a password."""
    if location == DEFAULT_STORE:
        return ""
    if isinstance(location, str):
        return f" --store {without_password(location)}"
    return f" --store {location.resolve()}"


async def open_store(location: StoreLocation, *, create: bool) -> JobStore:
    """Open the store; `create` makes a SQLite file's folder (owner-only) when missing."""
    if isinstance(location, str):
        try:
            from batchgate.jobs.store.postgres import PgJobStore  # noqa: PLC0415 — psycopg only when asked for
        except ImportError:
            raise StoreError(
                f"{describe(location)}: a Postgres job store needs psycopg: pip install 'batchgate[postgres]'"
            ) from None
        return await PgJobStore.open(location)
    from batchgate.jobs.store.sqlite import SqliteJobStore  # noqa: PLC0415 — start-up: only the chosen backend

    if create and not location.parent.exists():
        try:
            location.parent.mkdir(mode=0o700, parents=True)
        except OSError as exc:
            raise JobError(f"{location}: cannot create the job store folder ({exc.strerror})") from None
    elif not create and not location.exists():
        raise JobError(f"no job store at {location} (pass --store)")
    return await SqliteJobStore.open(location)
