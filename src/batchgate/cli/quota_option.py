"""`--quota STORE`, shared by `run`, `resume`, `retry`, `worker` and `serve`: where a process shares
its providers' quotas with the others using the same keys. The command line wins over the config's
`quota.store`; with neither, a process shares on this machine (`local`, a ledger in the user's cache
directory), so two batchgate processes on one key never each pace to the whole limit."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchgate.config import GatewayConfig
    from batchgate.quota.store.location import StoreSpec

HELP = (
    "where provider quotas are shared with other processes: local (this machine: the default, "
    "unless the config's quota.store says otherwise), memory (this process alone), sqlite:PATH "
    "or a redis:// URL"
)


def add_quota_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quota", type=_quota_name, default=None, metavar="STORE", help=HELP)


def quota_spec(args: argparse.Namespace, config: GatewayConfig) -> StoreSpec:
    """`--quota` wins over the config's `quota.store`; by default quotas are shared on this machine."""
    from batchgate.quota.store.location import resolve  # noqa: PLC0415 — the quota package: not for --help

    configured = config.quota.store
    if args.quota is None:
        return configured or resolve("local", os.environ)
    return resolve(args.quota, os.environ, configured.namespace if configured else None)


def _quota_name(text: str) -> str:
    from batchgate.quota.store.location import resolve  # noqa: PLC0415 — only when --quota is given

    try:
        resolve(text, os.environ)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
