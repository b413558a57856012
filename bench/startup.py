"""Start-up figures: `batchgate --help` wall time, and how long `batchgate run` takes to send.

    python bench/startup.py [--runs 7] [--lines 40] [--no-tty]

`--help`: the median (and min, max) wall time of `python -m batchgate --help` over `--runs` runs,
and its CPU time (user + system), which a busy machine disturbs less.

`run`: the README's main command (`batchgate run reviews.jsonl --config batchgate.yaml --output
OUT`, three providers served by the embedded emulator) on the first `--lines` lines of
`examples/reviews.jsonl` (repeated with fresh custom_ids past its 2,000), each run a fresh job in
a fresh folder. The time is measured from the
emulator's side: it records the wall time its first provider request arrived
(`first_request_at` in the report's `emulator` section), minus the wall time just before the
process was spawned (so interpreter start-up, imports, config, validation, the job store and the
emulator's own start are all inside). stderr is a pseudo-terminal, as in a user's shell, so the
live display (rich) is part of what starts; `--no-tty` measures the quiet path instead.

Bytecode: a pip-installed package has its modules compiled to `.pyc` (pip does it at install,
Python does it on the first import of an editable install), so a user's `batchgate` does not
compile its ~300 modules on every start. A machine with PYTHONDONTWRITEBYTECODE=1 in the
environment (this development sandbox has it) compiles them every time, about 0.2-0.3 s more.
`--bytecode cached` (the default) measures what a user gets: the children run without that
variable after one warm-up run has written the caches; `--bytecode none` keeps it as the
environment has it; `--bytecode both` prints both.

Prints figures; asserts nothing about time (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

import batchgate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CLI = [sys.executable, "-m", "batchgate"]
ENV: dict[str, str] = dict(os.environ)  # the children's environment (`--bytecode` changes it)


def _drain(fd: int) -> None:
    """Read a pty's master side until the child closes it (so the child never blocks on a full pty)."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def help_seconds() -> tuple[float, float]:
    """Wall and CPU seconds of one `batchgate --help` (CPU time is steadier on a busy machine)."""
    start, cpu = time.perf_counter(), _children_cpu()
    subprocess.run([*CLI, "--help"], check=True, stdout=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start, _children_cpu() - cpu


def write_input(path: Path, lines: int) -> None:
    """The first `lines` lines of `examples/reviews.jsonl`, repeated (with fresh custom_ids) past
    its end."""
    src = (EXAMPLES / "reviews.jsonl").read_bytes().splitlines()
    with path.open("wb") as dst:
        for i in range(lines):
            line = orjson.loads(src[i % len(src)])
            if i >= len(src):
                line["custom_id"] = f"{line['custom_id']}-{i // len(src)}"
            dst.write(orjson.dumps(line) + b"\n")


def run_to_first_request(lines: int, tty: bool) -> float:
    """Seconds from spawning `batchgate run` to the emulator seeing its first request."""
    with tempfile.TemporaryDirectory(prefix="bg-startup-") as tmp_s:
        tmp = Path(tmp_s)
        write_input(tmp / "reviews.jsonl", lines)
        shutil.copy(EXAMPLES / "batchgate.yaml", tmp / "batchgate.yaml")
        cmd = [*CLI, "run", "reviews.jsonl", "--config", "batchgate.yaml", "--output", "out.jsonl"]
        reader = None
        if tty:
            master, slave = pty.openpty()
            reader = threading.Thread(target=_drain, args=(master,), daemon=True)
            reader.start()
        spawned = time.time()
        proc = subprocess.Popen(
            cmd, cwd=tmp, env=ENV, stdout=subprocess.DEVNULL, stderr=slave if tty else subprocess.DEVNULL
        )
        if tty:
            os.close(slave)
        code = proc.wait(timeout=300)
        if reader is not None:
            reader.join(5)
        if code != 0:
            raise SystemExit(f"batchgate run exited {code} in {tmp}")
        report = orjson.loads((tmp / "out.jsonl.report.json").read_bytes())
        first = report["emulator"]["first_request_at"]
        return float(first) - spawned


def _summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.3f} s  "
        f"(min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--lines", type=int, default=40, help="input lines per `run` (default %(default)s)")
    ap.add_argument("--no-tty", action="store_true", help="stderr not a terminal (no live display)")
    ap.add_argument(
        "--bytecode",
        choices=("cached", "none", "both"),
        default="cached",
        help="measure with .pyc caches written, as a user's install has them (default), with the "
        "environment's own setting, or both",
    )
    args = ap.parse_args()
    print(f"batchgate from {Path(batchgate.__file__).parent}")
    inherited = os.environ.get("PYTHONDONTWRITEBYTECODE")
    for mode in ("none", "cached") if args.bytecode == "both" else (args.bytecode,):
        ENV.clear()
        ENV.update(os.environ)
        if mode == "cached":
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            help_seconds(), run_to_first_request(args.lines, tty=False)  # warm-up: writes the caches
        label = "bytecode cached" if mode == "cached" else f"PYTHONDONTWRITEBYTECODE={inherited or '(unset)'}"
        print(f"-- {label}")
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    helps = [help_seconds() for _ in range(args.runs)]
    print(f"batchgate --help: {_summary([wall for wall, _ in helps])}")
    print(f"batchgate --help, CPU time: {_summary([cpu for _, cpu in helps])}")
    firsts = [run_to_first_request(args.lines, not args.no_tty) for _ in range(args.runs)]
    shape = "quiet, stderr not a tty" if args.no_tty else "live display on a tty"
    print(f"batchgate run -> first request at the emulator ({shape}): {_summary(firsts)}")


if __name__ == "__main__":
    main()
