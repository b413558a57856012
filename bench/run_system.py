"""Child entry point: `python bench/run_system.py SYSTEM SPEC.json OUT.json` runs one system on the
spec's workload in this process and writes its outcome (plus the CPU seconds of the run) to OUT.
"""

from __future__ import annotations

import importlib
import resource
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from systems.common import Recorder
from workload import Spec

MODULES = {
    "langchain": "langchain_abatch",
    "litellm": "litellm_router",
    "batchgate": "batchgate_lib",
    "aiohttp-floor": "aiohttp_floor",
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str]) -> int:
    name, spec_path, out_path = argv
    module = importlib.import_module("systems." + MODULES.get(name, name))
    spec = Spec.load(Path(spec_path))
    rec = Recorder()
    cpu0 = _cpu()
    error = None
    try:
        module.run(spec, rec)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    rec.finish()
    out = rec.to_json()
    # CPU from the system's first request to its last answer (its own `rec.start()`), so every
    # system is measured without its imports and client set-up; the whole run if it never started.
    if out.get("cpu_run_s") is None:
        out["cpu_run_s"] = _cpu() - cpu0
    out["error"] = error
    Path(out_path).write_bytes(orjson.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
