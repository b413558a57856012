"""Named SQL blocks: parse a `.sql` file of package data (`queries.sql` for SQLite, `postgres_queries.sql`
for Postgres) into a dict, and split a block into statements.

A line of the form `-- name --` starts a block that runs to the next such line; text before the
first header is commentary. Migrations are the blocks named `migration_NNNN`, in number order.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z][a-z0-9_]*) --\s*$")
_MIGRATION = re.compile(r"migration_(\d{4})")


def parse_queries(text: str) -> dict[str, str]:
    """`{name: sql}` for every `-- name --` block; a repeated name is an error."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            name = match.group(1)
            if name in blocks:
                raise ValueError(f"queries.sql: block {name!r} is defined twice")
            current = blocks[name] = []
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in blocks.items()}


@cache
def queries(filename: str = "queries.sql") -> dict[str, str]:
    """A store's named queries, read once from the package (SQLite's by default)."""
    text = resources.files("batchgate.jobs.store").joinpath(filename).read_text(encoding="utf-8")
    return parse_queries(text)


def migrations(named: dict[str, str]) -> list[str]:
    """Migration blocks in order; their numbers must run 1, 2, 3, ... without gaps."""
    found = sorted((int(m.group(1)), sql) for name, sql in named.items() if (m := _MIGRATION.fullmatch(name)))
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise ValueError(f"queries.sql: migrations must be numbered 1..N without gaps, got {numbers}")
    return [sql for _, sql in found]


def split_statements(block: str) -> list[str]:
    """Split a block into complete SQL statements (so a script can run inside one transaction)."""
    statements: list[str] = []
    pending = ""
    for line in block.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:60]!r}")
    return statements
