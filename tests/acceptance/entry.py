"""Two ways into the same job, for tests parametrized over both: the CLI (`batchgate run`) and the
Python job API (`batchgate.Job(...).run()` in a child process, so it can be killed like the CLI).
Each takes the same input, config, output and store, and exits with the same codes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson

from .harness import Cli

_SCRIPT = """
import sys, orjson
from batchgate import Job
a = orjson.loads(sys.argv[1])
job = Job(a["input"], config=a["config"], output=a["output"], store=a["store"], ordered=a["ordered"])
report = job.run()
assert report == orjson.loads(job.report_path.read_bytes())
print("\\n".join(job.messages), file=sys.stderr)
sys.exit(job.exit_code)
"""


@dataclass
class Entry:
    kind: str  # "cli" | "python"
    cli: Cli

    def argv(self, src: Path, cfg: Path, out: Path, *, ordered: bool = False) -> list[str]:
        if self.kind == "cli":
            return ["run", str(src), "--config", str(cfg), "--output", str(out), "-q"] + (
                ["--ordered"] if ordered else []
            )
        spec = {"input": str(src), "config": str(cfg), "output": str(out), "store": str(self.cli.store),
                "ordered": ordered}  # fmt: skip
        return ["-c", _SCRIPT, orjson.dumps(spec).decode()]

    def _full(self, argv: list[str]) -> list[str]:
        if self.kind == "cli":
            return self.cli.argv(tuple(argv))
        return [sys.executable, *argv]

    def run(
        self, src: Path, cfg: Path, out: Path, *, ordered: bool = False
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self._full(self.argv(src, cfg, out, ordered=ordered)),
            cwd=self.cli.cwd,
            env=self.cli._env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        self.cli.transcript += [done.stdout, done.stderr]
        return done

    def start(self, src: Path, cfg: Path, out: Path) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            self._full(self.argv(src, cfg, out)),
            cwd=self.cli.cwd,
            env=self.cli._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.cli.started.append(proc)
        return proc
