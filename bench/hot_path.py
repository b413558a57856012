"""batchgate's own cost on the path of one request: CPU per request, and the files it passes through.

    python bench/hot_path.py [--requests 4000] [--runs 2] [--trees SRC ...] [--walk]

An overhead-bound load: an emulator process with no latency and no quota, a `batchgate run` of
`--requests` lines on it with `--quota memory` (no shared ledger: that cost is bench/overhead.py's
to show). CPU is the whole `batchgate run` process's (user + system, start-up included) ÷ the
requests. Each `--trees` entry is a `src` directory to import batchgate from (default: this
checkout's), so two commits are measured side by side, alternated, `--runs` times each.

`--walk` instead lists the batchgate files one request passes through: the same run traced
(`sys.setprofile`) at two sizes; a file holding a function entered at least once more per extra
request (0.9, for rounding) is on the per-request path (`--functions`: list those functions;
`--json`: each file's most-entered function's entries per request, as JSON; `--docs FILE`: write
the list into FILE between its `<!-- walk` and `<!-- /walk -->` lines — docs/architecture.md's
"The walk, counted", which `tests/test_walk_doc.py` holds to the code). A figures script.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import orjson

from batchgate.emulator import EmulatorProcess

EMULATOR = """seed: 1
providers:
  - name: alpha
    family: openai
    limits: {rpm: 100000000, tpm: 100000000000}
    latency: {ttft_p50_ms: 0, per_token_ms: 0}
"""
HERE = Path(__file__).resolve().parent.parent / "src"

# Run in the child for --walk: count entries into each batchgate file, in every thread.
_TRACE = """
import runpy, sys, threading, orjson
from collections import Counter
calls = Counter()
def prof(frame, event, arg):
    if event == "call":
        f = frame.f_code.co_filename
        if "/batchgate/" in f:
            calls[f + "::" + frame.f_code.co_qualname] += 1
threading.setprofile(prof)
sys.setprofile(prof)
sys.argv = ["batchgate"] + sys.argv[1:]
try:
    runpy.run_module("batchgate", run_name="__main__")
except SystemExit:
    pass
finally:
    sys.setprofile(None)
    threading.setprofile(None)
    with open("calls.json", "wb") as out:
        out.write(orjson.dumps(calls))
"""


def write_input(path: Path, lines: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(f'{{"custom_id":"t{i}","model":"m","max_tokens":4,"prompt":"echo item {i}"}}\n')


def run_args(lines: int) -> list[str]:
    return [
        "run",
        f"in{lines}.jsonl",
        "--config",
        "gw.yaml",
        "--output",
        f"out{lines}-{time.monotonic_ns()}.jsonl",
        "--store",
        f"jobs-{time.monotonic_ns()}.db",
        "--progress",
        "quiet",
        "--quota",
        "memory",
        "-q",
    ]


def cpu_run(tmp: Path, src: Path, lines: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one `batchgate run` importing batchgate from `src`."""
    env = dict(os.environ, PYTHONPATH=str(src))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "batchgate", *run_args(lines)],
        cwd=tmp,
        env=env,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"batchgate run failed ({src}): {done.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def traced(tmp: Path, src: Path, lines: int) -> Counter[str]:
    """Entries into each batchgate function ("file::qualname") in one traced run of `lines` lines."""
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run(
        [sys.executable, "-c", _TRACE, *run_args(lines)], cwd=tmp, env=env, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"traced run failed: {done.stderr.decode()[-2000:]}")
    raw: dict[str, int] = orjson.loads((tmp / "calls.json").read_bytes())
    root = str(src / "batchgate") + "/"
    return Counter({f.removeprefix(root): n for f, n in raw.items() if f.startswith(root)})


def walk(tmp: Path, src: Path, small: int, big: int, functions: bool = False) -> list[tuple[str, float]]:
    """The functions entered at least once per extra request (`functions`), or the files holding
    one, with their entries per request."""
    a, b = traced(tmp, src, small), traced(tmp, src, big)
    extra = big - small
    per = {f: (b[f] - a.get(f, 0)) / extra for f in b}
    hot = {f: n for f, n in per.items() if n >= 0.9}
    if not functions:
        files = {f.split("::")[0] for f in hot}
        totals: dict[str, float] = {}
        for f, n in per.items():
            if (file := f.split("::")[0]) in files:
                totals[file] = totals.get(file, 0.0) + n
        hot = totals
    return sorted(hot.items(), key=lambda x: -x[1])


def file_rates(tmp: Path, src: Path, small: int, big: int) -> dict[str, float]:
    """Each file's most-entered function's entries per extra request (files entered at all)."""
    a, b = traced(tmp, src, small), traced(tmp, src, big)
    rates: dict[str, float] = {}
    for f, n in b.items():
        file, rate = f.split("::")[0], (n - a.get(f, 0)) / (big - small)
        rates[file] = max(rates.get(file, 0.0), rate)
    return {f: round(r, 3) for f, r in sorted(rates.items()) if r > 0}


_BLOCK = re.compile(r"(<!-- walk[^\n]*-->\n)(.*?)(<!-- /walk -->)", re.S)


def docs_block(files: list[str]) -> str:
    """The Markdown list of the walk's files, by package."""
    groups: dict[str, list[str]] = {}
    for f in sorted(files):
        package = f.split("/")[0] + "/" if "/" in f else ""
        groups.setdefault(package, []).append(f)
    lines = [f"{len(files)} files hold a function entered at least once per request:", ""]
    for package, members in sorted(groups.items()):
        names = ", ".join(f"`{m}`" for m in members)
        lines.append(f"- {f'`{package}`' if package else 'the top level'} ({len(members)}): {names}")
    return "\n".join(lines) + "\n"


def write_docs(path: Path, files: list[str]) -> None:
    text = path.read_text(encoding="utf-8")
    if not _BLOCK.search(text):
        raise SystemExit(f"{path}: no <!-- walk ... --> ... <!-- /walk --> block to write the list into")
    new = _BLOCK.sub(lambda m: m.group(1) + docs_block(files) + m.group(3), text, count=1)
    path.write_text(new, encoding="utf-8")
    print(f"{path}: the walk's {len(files)} files written")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--trees", type=Path, nargs="+", default=[HERE])
    ap.add_argument("--walk", action="store_true")
    ap.add_argument("--functions", action="store_true", help="with --walk: per function, not per file")
    ap.add_argument("--json", action="store_true", help="with --walk: each file's rate per request, JSON")
    ap.add_argument("--docs", type=Path, help="with --walk: write the file list into this document")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bg-hot-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "emu.yaml").write_text(EMULATOR, encoding="utf-8")
        with EmulatorProcess(tmp / "emu.yaml") as emu:
            (tmp / "gw.yaml").write_text(
                "providers:\n  - {name: alpha, kind: openai, base_url: "
                f"'{emu.base_url('alpha')}', limits: {{}}}}\n"
                "routes:\n  - {model: m, targets: [alpha]}\nsettings: {concurrency: 64}\n",
                encoding="utf-8",
            )
            if args.walk:
                small, big = 50, 250
                for n in (small, big):
                    write_input(tmp / f"in{n}.jsonl", n)
                if args.json:
                    print(orjson.dumps(file_rates(tmp, args.trees[0], small, big)).decode())
                    return
                for src in args.trees:
                    files = walk(tmp, src, small, big, args.functions)
                    if args.docs is not None:
                        write_docs(args.docs, [f for f, _ in files])
                    what = "functions" if args.functions else "files"
                    print(f"{src}: {len(files)} {what} entered at least once per request")
                    for f, entries in files:
                        print(f"  {entries:7.1f}  {f}")
                return
            write_input(tmp / f"in{args.requests}.jsonl", args.requests)
            figures: dict[Path, list[tuple[float, float]]] = {src: [] for src in args.trees}
            for _ in range(args.runs):
                for src in args.trees:
                    figures[src].append(cpu_run(tmp, src, args.requests))
            for src, runs in figures.items():
                cpu = ", ".join(f"{c / args.requests * 1000:.3f}" for c, _ in runs)
                rate = ", ".join(f"{args.requests / w:,.0f}" for _, w in runs)
                print(f"{src}: CPU ms/request {cpu}; requests/s {rate}")


if __name__ == "__main__":
    main()
