"""What is wrong with a batch's input file, in OpenAI's validation shape (`errors.data`): one entry
per bad line, at most `SHOWN_PROBLEMS`, the server's own paths left out."""

from __future__ import annotations

from pathlib import Path

from batchgate.config import GatewayConfig
from batchgate.errors import InputError
from batchgate.jobs.fits import RouteFit
from batchgate.jobs.input.read import validate_input
from batchgate.server.tenancy.registry import BatchError, LineProblem

SHOWN_PROBLEMS = 100  # a failed validation lists at most this many lines in `errors`


def line_problems(config: GatewayConfig, path: Path, *, endpoint: str | None = None) -> list[LineProblem]:
    """One entry per bad line of `path` (empty when every line is fine); `endpoint`: the one
    endpoint (`batchgate.endpoints`) every line of the batch must name (serve's /v1/batches)."""
    fit = RouteFit(config, endpoint=endpoint)
    report = validate_input(path, known_models=config.route_models(), check=fit.problem)
    return [
        {"code": "invalid_request", "message": p.reason, "param": None, "line": p.line_no}
        for p in report.problems[:SHOWN_PROBLEMS]
    ]


def problems(config: GatewayConfig, path: Path, endpoint: str | None) -> list[BatchError]:
    """Why `path` cannot run: its bad lines, or that it holds no request at all (an empty or
    blank-only file fails validation, as OpenAI's does)."""
    try:
        found = line_problems(config, path, endpoint=endpoint)
    except InputError:  # empty, or nothing but blank lines
        found = []
    errors: list[BatchError] = [
        {"code": p["code"], "message": p["message"], "param": p["param"], "line": p["line"]} for p in found
    ]
    return errors or [{"code": "empty_file", "message": "The batch input file is empty.", "line": None}]
