"""The job's own options as command-line flags (`--name`, `--priority`, `--not-before`,
`--deadline`, `--callback-url`, `--callback-secret-env`, `--metadata KEY=VALUE`, `--mode`,
`--retry-failed`): gathered into the mapping the jobs API takes and read by the one parser
(`config.job_spec`), so a flag is refused with the same words as a YAML key or an API field,
naming the flag. `plan` takes `--mode` and `--deadline` from here too (`add_mode_options`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from batchgate.errors import JobError, JobSpecError
from batchgate.models import ROUTE_MODES

if TYPE_CHECKING:
    from batchgate.config.job_spec import JobSpec


def add_mode_options(p: argparse.ArgumentParser) -> None:
    """`--mode` and `--deadline`: all of a job's spec that `plan` takes (read by `mode_fields`)."""
    p.add_argument(
        "--mode",
        choices=ROUTE_MODES,
        default=None,
        help="online, batch-api (provider Batch APIs) or auto (by deadline and price); overrides job.mode",
    )
    p.add_argument(
        "--deadline",
        default=None,
        metavar="HOURS|TIME",
        help="results wanted within HOURS of the job's creation, or by TIME (RFC 3339 with an offset, "
        "or unix seconds); overrides job.deadline_hours",
    )


def add_spec_options(p: argparse.ArgumentParser, *, local: bool = True) -> None:
    """The flags of a job's spec (`--retry-failed` is added by the caller with its own help);
    `local=False` (`submit`): without `--callback-secret-env` (a server signs with the key's own
    secret)."""
    add_mode_options(p)
    p.add_argument("--name", default=None, help="the job's name, shown by `batchgate jobs` and `status`")
    p.add_argument(
        "--priority",
        default=None,
        metavar="high|normal|low",
        help="a higher priority starts first and takes workers' chunks first (default: normal)",
    )
    p.add_argument(
        "--not-before",
        default=None,
        metavar="TIME",
        help="start no earlier than TIME (RFC 3339 with an offset, or unix seconds): the run waits",
    )
    p.add_argument("--callback-url", default=None, metavar="URL", help="POSTed (signed) when the job ends")
    if local:
        p.add_argument(
            "--callback-secret-env",
            default=None,
            metavar="VAR",
            help="the environment variable holding the callback's whsec_… signing secret",
        )
    p.add_argument(
        "--metadata",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a value kept with the job and shown by `status`, `jobs` and the report (repeatable)",
    )


def spec_fields(args: argparse.Namespace, retry_rounds: int = 0) -> dict[str, object]:
    """The flags given, as the jobs API's fields (a deadline in hours as `{"hours": h}`); `spec_of`
    reads them."""
    data = {
        **mode_fields(args),
        "name": args.name,
        "priority": args.priority,
        "not_before": _time(args.not_before),
        "callback_url": args.callback_url,
        "callback_secret_env": getattr(args, "callback_secret_env", None),
        "metadata": _pairs(args.metadata),
        "retry_failed": retry_rounds or None,
    }
    return {k: v for k, v in data.items() if v is not None}


def mode_fields(args: argparse.Namespace) -> dict[str, object]:
    """`--mode` and `--deadline` as the jobs API's fields (those given)."""
    deadline = _time(args.deadline)
    data = {"mode": args.mode, "deadline": {"hours": deadline} if isinstance(deadline, float) else deadline}
    return {k: v for k, v in data.items() if v is not None}


def spec_of(fields: dict[str, object]) -> JobSpec:
    """The spec of `spec_fields`, by the one parser: a bad value is a one-line error naming its flag."""
    from batchgate.config.job_spec import parse_job_spec  # noqa: PLC0415 — not at import: `--help` stays light

    try:
        return parse_job_spec(fields)
    except JobSpecError as exc:
        raise JobError(f"--{exc.field.split('.')[0].replace('_', '-')}: {exc.reason}") from None


def _time(text: str | None) -> float | str | None:
    """A number (hours for `--deadline`, unix seconds for `--not-before`) or the text as given."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _pairs(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise JobError(f"--metadata: expected KEY=VALUE; got {item[:64]!r}")
        out[key] = value
    return out
