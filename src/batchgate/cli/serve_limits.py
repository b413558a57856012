"""`batchgate serve`'s options for what one tenant or one client may hold (issue 40): the run
places, files, bytes and batches not ended of a key, its failed key checks, and each connection's
read timeouts (`--header-timeout`, `--body-timeout`, `--max-connections-per-client`, registered
with the other limits in `serve`); turned into `TenantLimits` and `ConnectionLimits` when serving.
Registering imports nothing of the server."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from batchgate.cli.arg_types import positive_int
from batchgate.errors import JobError

if TYPE_CHECKING:
    from batchgate.server.door.connections import ConnectionLimits
    from batchgate.server.tenancy.rates import TenantLimits


def add_tenant_arguments(serve: argparse.ArgumentParser) -> None:
    for flag, default, what in (
        ("--max-files-per-key", 10_000, "files one key may store; past it an upload gets a 429"),
        ("--max-stored-bytes-per-key", 100 * 1024**3, "bytes of files one key may store (413)"),
        (
            "--max-in-flight-per-key",
            1_000,
            "batches and jobs of one key not ended; past it a create gets a 429",
        ),
    ):
        serve.add_argument(
            flag, type=positive_int, default=default, metavar="N", help=f"{what} (default {default})"
        )
    serve.add_argument(
        "--max-auth-failures-per-minute",
        type=positive_int,
        default=100,
        metavar="N",
        help="failed key checks one client address may make a minute; past it its /v1 requests get"
        " a 429 until its turns refill (default 100)",
    )
    serve.add_argument(
        "--max-jobs-per-key",
        type=positive_int,
        default=None,
        metavar="N",
        help="of those, the most one key's batches may hold (default: half of --max-jobs, at least 1);"
        " a freed place goes to the key running the fewest",
    )


def tenant_limits(args: argparse.Namespace) -> TenantLimits:
    from batchgate.server.tenancy.rates import TenantLimits  # noqa: PLC0415 — the server only when serving

    if args.max_jobs_per_key is not None and args.max_jobs_per_key > args.max_jobs:
        raise JobError(
            f"--max-jobs-per-key ({args.max_jobs_per_key}) cannot exceed --max-jobs ({args.max_jobs})"
        )
    return TenantLimits(
        args.max_batches_per_minute,
        args.max_auth_failures_per_minute,
        args.max_jobs_per_key,
        args.max_files_per_key,
        args.max_stored_bytes_per_key,
        args.max_in_flight_per_key,
    )


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    from batchgate.server.door.connections import ConnectionLimits  # noqa: PLC0415 — the server only when serving

    return ConnectionLimits(args.header_timeout, args.body_timeout, args.max_connections_per_client)
