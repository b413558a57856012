"""Telling an input's bad lines: each one on its own line (the first `SHOWN_PROBLEMS`, in input
order) and one error for the run, naming `--skip-invalid` (`skip_invalid=True` from Python) and
saying whether anything was sent before the bad line was read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from batchgate.errors import InputError
from batchgate.jobs.input.read import ValidationReport
from batchgate.text import plural

SHOWN_PROBLEMS = 20
SHOWN_IN_ERROR = 3  # reasons a Python caller's error carries in its message (all 20 in `.problems`)


def invalid_input(
    path: Path, report: ValidationReport, *, python: bool, sent: int | None = None
) -> InputError:
    """The error of an input with bad lines; from Python it names `skip_invalid=True` and carries
    the first reasons (the CLI printed them above it). `sent`: the tasks that were read (and sent,
    their results kept) before the first bad line was (the input is read behind the sending)."""
    first = report.problems[0]
    hint = "skip_invalid=True" if python else "--skip-invalid"
    if sent is not None:
        done = (
            f"the first {plural(sent, 'task')}, read before it, were sent and their results kept; none after"
        )
        in_all = f"{plural(report.problem_count, 'invalid line')} in all; {done}"
        fix = f"fix and re-run to continue the job, or pass {hint}"
    else:
        in_all = f"{plural(report.problem_count, 'invalid line')} in all; nothing was sent"
        fix = f"fix it or pass {hint}" if report.problem_count == 1 else f"fix them or pass {hint}"
    problems = [(p.line_no, p.reason) for p in report.problems[:SHOWN_PROBLEMS]]
    if report.problem_count == 1:  # one bad line, one line: the error names it
        return InputError(str(path), first.line_no, f"{first.reason} ({in_all}; {fix})", problems=problems)
    listed = ""
    if python:
        shown = "; ".join(f"line {n}: {why}" for n, why in problems[:SHOWN_IN_ERROR])
        more = " ..." if report.problem_count > SHOWN_IN_ERROR else ""
        listed = f": {shown}{more}"
    reason = f"{in_all} (the first on line {first.line_no}){listed}; {fix}"
    return InputError(str(path), None, reason, problems=problems)


def show_problems(
    path: Path, report: ValidationReport, err: Callable[[str], None], *, skip_invalid: bool, python: bool
) -> None:
    """The problems in input order (a lone problem is the error itself, so it is not repeated)."""
    if report.problem_count == 1 and not skip_invalid:
        return
    shown = report.problems[:SHOWN_PROBLEMS]
    for problem in shown:
        err(problem.describe(path))
    more = report.problem_count - len(shown)
    if more > 0:
        err(f"... and {plural(more, 'more invalid line')}")
    if skip_invalid:
        hint = "skip_invalid=True" if python else "--skip-invalid"
        err(f"skipping {plural(report.problem_count, 'invalid line')} ({hint})")
