"""`batchgate serve --config FILE [--host H] [--port N] [--store PATH] [--data DIR]`: the job
service (OpenAI-compatible Files + Batches API) until SIGINT or SIGTERM. The first stdout line is
`batchgate serve listening on http://H:P` (tools read the port from it).

Callbacks: `--callback-allow CIDR|HOST` (repeatable) lets callbacks reach addresses the SSRF guard
refuses otherwise (loopback, private, ...); `--callback-retry-delays S,S,...` sets the waits between
attempts (default 5,30,120,600,1800,3600; the last repeats for 72 h).

Bodies: `--max-body CLASS=SIZE` (repeatable; classes upload, batch, live, other) bounds the request
bodies of a class of routes (`server.body_limits`). `--log-level` sets what the server logs.
Connections (`server.door.connections`): `--header-timeout S` (default 20: a request's whole head
within S of its connection's start or previous answer), `--body-timeout S` (default 30: a body
stalled that long while read), `--max-connections-per-client N` (default 128 per address).
`--max-batches-per-minute N` (default 120): what one key may create a minute (`tenancy.rates`);
`--max-jobs-per-key N` (default half of `--max-jobs`): the run places one key may hold;
`--max-auth-failures-per-minute N` (default 100): failed key checks an address may make a minute;
`--max-files-per-key`, `--max-stored-bytes-per-key`, `--max-in-flight-per-key`: what a key may keep.
`--loop auto|uvloop|asyncio`: the event loop the server runs on; `auto` (the default) takes uvloop
when it is installed (the `serve` extra), which spends less CPU per proxied live request.

`batchgate keys create [--admin] [--name NAME] [--store PATH] [--data DIR]`: a client key for the
service, printed once on stdout (only its SHA-256 is kept), and its webhook secret (`whsec_…`,
which signs the callbacks of its batches) printed once on stderr. `batchgate keys webhook-secret
KEY_ID`: a new webhook secret for the key (on stdout, once), replacing the old one. `batchgate keys
revoke KEY_ID`: the key is refused from its next request on, by a running server too.

Registering the parsers imports nothing heavy; the server is imported by the handler that runs."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from batchgate.cli.arg_types import positive_float, positive_int
from batchgate.cli.cache_option import add_cache_options, with_cache_options
from batchgate.cli.config_file import load_config
from batchgate.cli.observing import add_trace_option, tracing_for
from batchgate.cli.quota_option import add_quota_option, quota_spec
from batchgate.cli.serve_limits import add_tenant_arguments, connection_limits, tenant_limits
from batchgate.errors import JobError
from batchgate.jobs.store.location import parse_location

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop
    from collections.abc import Callable

    from batchgate.config import GatewayConfig
    from batchgate.server.callbacks.delivery import CallbackSettings
    from batchgate.server.door.body_limits import BodyLimits
    from batchgate.server.service import ServerPlace

DEFAULT_PORT = 8500
EXIT_CANNOT_LISTEN = 2
LOOPS = ("auto", "uvloop", "asyncio")


def _place_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", type=parse_location, default=None, help="job store (default .batchgate/server/jobs.db)"
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="folder for keys, files and batches (default: the store's)"
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="run the job service: an OpenAI-compatible Batch API over all your providers",
        description="Serve the OpenAI-compatible Files + Batches API; batches run as durable jobs. "
        "GET /metrics serves Prometheus metrics (the metrics extra; job ids only with an admin key).",
    )
    serve.add_argument("--config", required=True, type=Path, help="gateway config (providers, routes)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    serve.add_argument(
        "--expire-after",
        type=float,
        default=24 * 3600.0,
        metavar="SECONDS",
        help="a batch not ended this long after its creation expires (default 86400: OpenAI's 24 h window)",
    )
    serve.add_argument(
        "--max-jobs",
        type=int,
        default=64,
        help="batches run at once; the others wait their turn, higher priority first (default 64)",
    )
    serve.add_argument(
        "--callback-allow",
        action="append",
        default=[],
        metavar="CIDR|HOST",
        help="let callbacks reach this network or host although it is not public (repeatable)",
    )
    serve.add_argument(
        "--callback-retry-delays",
        default=None,
        metavar="S,S,...",
        help="seconds between callback attempts (default 5,30,120,600,1800,3600; the last repeats)",
    )
    serve.add_argument(
        "--sample-every",
        type=positive_float,
        default=5.0,
        metavar="SECONDS",
        help="how often the dashboard's charts sample each job and the providers' quotas (default 5)",
    )
    _limit_arguments(serve)
    add_tenant_arguments(serve)
    add_quota_option(serve)
    add_cache_options(serve)
    _place_arguments(serve)
    add_trace_option(serve)
    serve.set_defaults(handler=run_serve)
    _register_keys(subparsers)


def _limit_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="least severe message the server logs on stderr (default info)",
    )
    serve.add_argument(
        "--max-body",
        action="append",
        default=[],
        metavar="CLASS=SIZE",
        help="the largest request body of a class of routes (repeatable): upload (POST /v1/files,"
        " default 200M), batch (inline requests, 64M), live (chat/messages, 8M), other (1M)",
    )
    serve.add_argument(
        "--header-timeout",
        type=positive_float,
        default=20.0,
        metavar="SECONDS",
        help="a request's head must arrive within this of its connection's start or previous answer,"
        " or the connection closes (default 20; an idle kept-alive connection closes then too)",
    )
    serve.add_argument(
        "--body-timeout",
        type=positive_float,
        default=30.0,
        metavar="SECONDS",
        help="a request body that stalls this long while the server reads it closes its connection"
        " (default 30)",
    )
    serve.add_argument(
        "--max-connections-per-client",
        type=positive_int,
        default=128,
        metavar="N",
        help="connections one client address may hold open; one more is answered 429 (default 128)",
    )
    serve.add_argument(
        "--max-batches-per-minute",
        type=positive_int,
        default=120,
        metavar="N",
        help="batches, message batches and jobs one key may create a minute; past it a 429 (default 120)",
    )
    serve.add_argument(
        "--loop",
        choices=LOOPS,
        default="auto",
        help="the event loop: uvloop (the serve extra; less CPU per live request), asyncio's own,"
        " or auto (default): uvloop when it is installed",
    )


def _register_keys(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = subparsers.add_parser("keys", help="manage the service's client keys")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    keys_sub.required = True
    create = keys_sub.add_parser("create", help="create a client key (printed once)")
    create.add_argument("--admin", action="store_true", help="the key sees every key's files and batches")
    create.add_argument("--name", default="", help="a label for the key")
    _place_arguments(create)
    create.set_defaults(handler=run_keys_create)
    rotate = keys_sub.add_parser(
        "webhook-secret", help="give a key a new webhook secret (printed once; the old one stops signing)"
    )
    rotate.add_argument("key_id", metavar="KEY_ID", help="the key's id (key-…), as `keys create` said")
    _place_arguments(rotate)
    rotate.set_defaults(handler=run_keys_webhook_secret)
    revoke = keys_sub.add_parser("revoke", help="revoke a key: refused at once, by a running server too")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (key-…), as `keys create` said")
    _place_arguments(revoke)
    revoke.set_defaults(handler=run_keys_revoke)


def _place(args: argparse.Namespace) -> ServerPlace:
    from batchgate.server.service import DEFAULT_STORE, ServerPlace  # noqa: PLC0415 — the server only when serving

    return ServerPlace(store=args.store or DEFAULT_STORE, data=args.data)


def _warn_unpriced(config: GatewayConfig) -> None:
    """A model without a price is said at the start (an error under a money budget, unless the
    config's `budget.allow_unpriced`), as `batchgate run` says it."""
    from batchgate.jobs.pricing import check_prices, unpriced_warning  # noqa: PLC0415 — not for `--help`

    unpriced = check_prices(config, allow_unpriced=False)
    if unpriced:
        print(f"batchgate: {unpriced_warning(unpriced, config)}", file=sys.stderr)


def run_serve(args: argparse.Namespace) -> int:
    from batchgate.server.service import ServeLimits, serve  # noqa: PLC0415 — the server only when serving

    if args.expire_after <= 0:
        raise JobError(f"--expire-after must be a positive number of seconds, got {args.expire_after:g}")
    if args.max_jobs < 1:
        raise JobError(f"--max-jobs must be at least 1, got {args.max_jobs}")
    callbacks = _callback_settings(args)
    limits = _body_limits(args)
    loop_factory = _loop_factory(args.loop)
    config = with_cache_options(load_config(args.config), args)  # --cache: one cache, tenants' keys apart
    callbacks = replace(callbacks, network=config.network)  # the environment's proxy and CAs
    _warn_unpriced(config)
    place = _place(args)
    _log_to_stderr(args.log_level)
    try:
        ready = functools.partial(print, flush=True)
        work = serve(
            config,
            args.host,
            args.port,
            place,
            ready=ready,
            expire_after_s=args.expire_after,
            max_jobs=args.max_jobs,
            callbacks=callbacks,
            quota_store=quota_spec(args, config),
            sample_every_s=args.sample_every,
            limits=ServeLimits(limits, connection_limits(args), tenant_limits(args)),
        )
        import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

        with tracing_for(args, config), asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(work)
    except OSError as exc:
        print(
            f"batchgate: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_CANNOT_LISTEN
    return 0


def _loop_factory(choice: str) -> Callable[[], AbstractEventLoop] | None:
    """What makes the server's event loop for `--loop`: uvloop's (asked for, or `auto` when it is
    installed), or None for asyncio's own. Imported only here: no other command loads uvloop."""
    if choice == "asyncio" or (choice == "auto" and sys.platform == "win32"):
        return None
    try:
        import uvloop  # noqa: PLC0415 — optional extra (`serve`), only when serving
    except ImportError:
        if choice == "uvloop":
            missing = "--loop uvloop: uvloop is not installed (pip install 'batchgate[serve]')"
            raise JobError(missing) from None
        return None
    return uvloop.new_event_loop


def _log_to_stderr(level: str) -> None:
    from batchgate.observe.logsetup import TextFormatter  # noqa: PLC0415 — the server only when serving

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter())  # an event's fields (job, provider, task) as `run` logs them
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _callback_settings(args: argparse.Namespace) -> CallbackSettings:
    from batchgate.server.callbacks import delivery  # noqa: PLC0415 — the server only when serving
    from batchgate.webhooks import guard  # noqa: PLC0415 — the server only when serving

    delays: tuple[float, ...] = delivery.DEFAULT_DELAYS
    if args.callback_retry_delays is not None:
        try:
            delays = tuple(float(x) for x in args.callback_retry_delays.split(","))
        except ValueError:
            delays = ()
        if not delays or min(delays) <= 0:
            raise JobError(
                "--callback-retry-delays must be positive seconds separated by commas,"
                f" got {args.callback_retry_delays!r}"
            )
    try:
        allow = guard.parse_allow(args.callback_allow)
    except guard.CallbackRefused as exc:
        raise JobError(exc.message) from None
    return delivery.CallbackSettings(allow=allow, delays=delays)


def _body_limits(args: argparse.Namespace) -> BodyLimits:
    from batchgate.server.door.body_limits import parse_limits  # noqa: PLC0415 — the server only when serving

    try:
        return parse_limits(args.max_body)
    except ValueError as exc:
        raise JobError(str(exc)) from None


def run_keys_create(args: argparse.Namespace) -> int:
    from batchgate.clock import wall_time  # noqa: PLC0415 — clock.py imports asyncio: not for `--help`
    from batchgate.server.callbacks.delivery import create_secret  # noqa: PLC0415 — the server only when asked for
    from batchgate.server.tenancy.keys import create_key  # noqa: PLC0415 — the server only when asked for
    from batchgate.server.tenancy.registry import Registry  # noqa: PLC0415 — the server only when asked for

    place = _place(args)
    registry = Registry(place.registry)
    try:
        key, token = create_key(registry, admin=args.admin, name=args.name, now=int(wall_time()))
        secret = create_secret(registry, key.id)
    finally:
        registry.close()
    print(token)
    kind = "admin key" if key.admin else "key"
    print(f"created {kind} {key.id} in {place.registry}; the token above is shown only once", file=sys.stderr)
    print(f"webhook secret (signs this key's callbacks; shown only once): {secret}", file=sys.stderr)
    return 0


def run_keys_webhook_secret(args: argparse.Namespace) -> int:
    from batchgate.server.callbacks.delivery import create_secret  # noqa: PLC0415 — the server only when asked for
    from batchgate.server.tenancy.registry import Registry  # noqa: PLC0415 — the server only when asked for

    place = _place(args)
    if not place.registry.exists():
        raise JobError(f"{place.registry}: no service registry here (see --store / --data)")
    registry = Registry(place.registry)
    try:
        secret = create_secret(registry, args.key_id)
    finally:
        registry.close()
    print(secret)
    said = f"new webhook secret of {args.key_id}; shown only once, the old one no longer signs"
    print(said, file=sys.stderr)
    return 0


def run_keys_revoke(args: argparse.Namespace) -> int:
    from batchgate.server.tenancy.registry import Registry  # noqa: PLC0415 — the server only when asked for

    place = _place(args)
    if not place.registry.exists():
        raise JobError(f"{place.registry}: no service registry here (see --store / --data)")
    registry = Registry(place.registry)
    try:
        if not registry.revoke_key(args.key_id):
            raise JobError(f"{place.registry}: no client key {args.key_id!r}")
    finally:
        registry.close()
    print(
        f"revoked {args.key_id}: its requests are refused from now on (its files and batches stay)",
        file=sys.stderr,
    )
    return 0
