"""The `batchgate` command: parses arguments, dispatches to one module per subcommand, and turns
every batchgate error into a one-line message and a non-zero exit (never a bare traceback).

May import: anything in batchgate (it is the top layer); nothing imports it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from batchgate.errors import BatchgateError

# Each subcommand module exposes `register(subparsers) -> None`, which adds its parser and sets
# `handler=<callable(args) -> int>` as a default.
SUBCOMMANDS: tuple[str, ...] = (
    "batchgate.cli.run",
    "batchgate.cli.jobs",
    "batchgate.cli.cancel",
    "batchgate.cli.emulate",
    "batchgate.cli.serve",
    "batchgate.cli.submit",
    "batchgate.cli.worker",
    "batchgate.cli.cache",
)

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="batchgate",
        description="Run large batches of LLM requests across providers as fast as their quotas allow.",
    )
    parser.add_argument("--version", action=_Version, help="print batchgate's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        import_module(name).register(sub)
    return parser


class _Version(argparse.Action):
    """`--version`; the installed distribution's metadata is read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[object] | None,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 — only when asked for

        try:
            number = version("batchgate")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        print(f"batchgate {number} (Python {sys.version.split()[0]})")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except BatchgateError as exc:
        print(f"batchgate: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("batchgate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
