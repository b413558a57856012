"""The comparative benchmark's one entry command.

    python bench/compare.py [--quick] [--scenarios three_providers token_bound ...] [--systems ...]

For each scenario: write the emulator's YAML, start it in its own process (`EmulatorProcess`), and
run every system on the same workload, each in its own child process (so its CPU time and peak RSS
are its own), resetting the emulator before each. Prints one Markdown table per scenario and, unless
`--no-docs`, writes docs/benchmark.md and docs/benchmark.png.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import orjson  # noqa: E402
import yaml  # noqa: E402
from measure import Bound, Row, fill_row, provider_view, quota_bound, run_child, success_charge  # noqa: E402
from report import ScenarioResult, render_table, write_docs  # noqa: E402
from scenarios import COOKBOOK_PAUSE, MODELS, SCENARIOS, Scenario, build  # noqa: E402
from systems.batchgate_lib import gateway_config  # noqa: E402
from workload import Charger, ProviderSpec, Spec, cli_lines, iter_requests  # noqa: E402

from batchgate.emulator import EmulatorProcess  # noqa: E402

REQUIRES = {
    "langchain": ("langchain_core", "langchain_openai", "langchain_anthropic"),
    "litellm": ("litellm",),
}


def missing(system: str) -> list[str]:
    return [m for m in REQUIRES.get(system, ()) if importlib.util.find_spec(m) is None]


def hard_timeout(system: str, sc: Scenario, spec: Spec, bound: Bound | None) -> float:
    if system == "serial":
        return spec.serial_budget + 60.0
    if bound is None:
        return 60.0 + max(len(spec.requests), sc.cli_input_lines) / 250.0
    return 3.0 * bound.seconds + 60.0


def run_library_system(system: str, spec_path: Path, out_path: Path, timeout: float) -> tuple[Any, Any]:
    child = run_child(
        [sys.executable, str(BENCH / "run_system.py"), system, str(spec_path), str(out_path)], timeout
    )
    out = orjson.loads(out_path.read_bytes()) if out_path.exists() and not child.timed_out else None
    return child, out


def run_cli(
    sc: Scenario, spec: Spec, tmp: Path, timeout: float, extra: Sequence[str] = ()
) -> tuple[Any, Any]:
    """`batchgate run` on the scenario's workload (with `extra` arguments), as a user runs it."""
    config = tmp / "batchgate.yaml"
    width, transport = spec.extra.get("batchgate_concurrency"), spec.extra.get("batchgate_transport")
    mapping = gateway_config(spec.providers, spec.timeout, width, transport)
    config.write_text(yaml.safe_dump(mapping, sort_keys=False))
    inp = tmp / "input.jsonl"
    with inp.open("wb") as f:
        if sc.cli_input_lines:
            f.writelines(cli_lines(iter_requests(sc.cli_input_lines, ["alpha"], max_tokens=8)))
        else:
            f.writelines(cli_lines(spec.requests))
    output, store = tmp / "out.jsonl", tmp / "store.db"
    for stale in (output, store, tmp / "out.jsonl.errors.jsonl"):
        stale.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "batchgate", "run", str(inp), "--config", str(config)]
    cmd += ["--output", str(output), "--progress", "quiet", "--store", str(store), *extra]
    child = run_child(cmd, timeout)
    if child.timed_out or not output.exists():
        return child, None
    ok_ids: list[str] = []
    latencies: list[float] = []
    failed = 0
    keep_latency = not sc.cli_input_lines
    with output.open("rb") as f:
        for line in f:
            rec = orjson.loads(line)
            resp = rec.get("response")
            if resp is not None and resp.get("status_code") == 200 and rec.get("error") is None:
                ok_ids.append(rec["custom_id"])
                if keep_latency and rec.get("latency_ms") is not None:
                    latencies.append(rec["latency_ms"])
            else:
                failed += 1
    out = {
        "ok_ids": ok_ids,
        "failed": failed,
        "latencies_ms": latencies,
        "makespan": child.wall_s,
        "notes": ["makespan and CPU include process start-up"],
    }
    inp.unlink()
    return child, out


def run_scenario(sc: Scenario, systems: list[str] | None, quick: bool) -> ScenarioResult:
    families = sc.families()
    charger = Charger()
    charges = charger.charges(families, sc.requests)
    latency = {p["name"]: p.get("latency", {}) for p in sc.emulator["providers"]}
    bound = quota_bound(charges, sc.enforced(), latency)
    cost_by_id = success_charge(charger, families, sc.requests) if sc.requests else None
    n_requests = len(sc.requests) or sc.cli_input_lines
    result = ScenarioResult(sc, bound, [])
    print(f"\n## {sc.title}\n", flush=True)
    if bound is not None:
        print(f"quota lower bound: {bound.describe()}", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"bench-{sc.name}-") as tmpdir:
        tmp = Path(tmpdir)
        emu_yaml = tmp / "emulator.yaml"
        emu_yaml.write_text(yaml.safe_dump(sc.emulator, sort_keys=False))
        with EmulatorProcess(emu_yaml) as emu:
            providers = {
                n: ProviderSpec(fam, MODELS[n], sc.declared()[n], emu.base_url(n))
                for n, fam in families.items()
            }
            spec = Spec(sc.name, providers, sc.requests, timeout=sc.timeout, pause_after_429=COOKBOOK_PAUSE)
            spec_path = tmp / "spec.json"
            spec.dump(spec_path)
            for system in sc.systems:
                if systems and system not in systems:
                    continue
                row = Row(system, requests=n_requests)
                absent = missing(system)
                if absent:
                    row.status = "not installed"
                    row.notes.append("missing: " + ", ".join(absent))
                    result.rows.append(row)
                    print(f"  {system:14s} not installed ({', '.join(absent)})", flush=True)
                    continue
                emu.reset()
                time.sleep(0.3)
                timeout = hard_timeout(system, sc, spec, bound)
                out_path = tmp / f"{system}.json"
                if system == "batchgate-cli":
                    child, out = run_cli(sc, spec, tmp, timeout)
                else:
                    child, out = run_library_system(system, spec_path, out_path, timeout)
                view = provider_view(emu.stats())
                _fill(row, child, out, view, bound, cost_by_id, system)
                result.rows.append(row)
                print(f"  {system:14s} {_summary(row)}", flush=True)
    print()
    print(render_table(result), flush=True)
    return result


def _fill(row: Row, child: Any, out: Any, view: Any, bound: Bound | None, cost: Any, system: str) -> None:
    if child.timed_out:
        row.status = f"timed out ({child.wall_s:.0f} s)"
    elif out is None or out.get("error"):
        reason = (out or {}).get("error") or child.stderr_tail or f"exit {child.returncode}"
        row.status = "error: " + reason[:120]
    makespan = None
    if out is not None:
        makespan = out.get("extrapolated_makespan") or out["makespan"]
        row.extrapolated = bool(out.get("extrapolated_makespan"))
        row.notes.extend(out.get("notes", []))
    fill_row(
        row,
        view=view,
        bound=bound,
        ok_ids=out["ok_ids"] if out is not None else None,
        failed=out["failed"] if out is not None else None,
        makespan=makespan if out is not None else None,
        cost_by_id=cost,
        latencies_ms=out.get("latencies_ms", []) if out is not None else [],
    )
    if row.extrapolated and out is not None:
        row.req_per_s = len(out["ok_ids"]) / out["makespan"] if out["makespan"] else None
    cpu = out.get("cpu_run_s") if out is not None else None
    if cpu is None or system == "batchgate-cli":
        cpu = child.cpu_s
    attempted = (row.completed or 0) + (row.failed or 0) if row.extrapolated else row.requests
    row.cpu_ms_per_req = 1000.0 * cpu / attempted if attempted else None
    row.peak_rss_mb = child.maxrss_mb


def _summary(row: Row) -> str:
    parts = [row.status, f"completed={row.completed}", f"failed={row.failed}"]
    if row.makespan is not None:
        parts.append(f"makespan={row.makespan:.1f}s" + (" (extrapolated)" if row.extrapolated else ""))
    if row.ratio is not None:
        parts.append(f"ratio={row.ratio:.2f}")
    if row.r429_per_req is not None:
        parts.append(f"429/req={row.r429_per_req:.3f}")
    if row.cpu_ms_per_req is not None:
        parts.append(f"cpu={row.cpu_ms_per_req:.2f}ms/req")
    parts.append(f"rss={row.peak_rss_mb:.0f}MB")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller workloads (~5 minutes in all)")
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--systems", nargs="+", default=None, help="run only these systems")
    parser.add_argument("--no-docs", action="store_true", help="print tables only")
    args = parser.parse_args(argv)
    started = time.time()
    results = [run_scenario(build(name, args.quick), args.systems, args.quick) for name in args.scenarios]
    elapsed = time.time() - started
    print(f"\nbenchmark finished in {elapsed / 60:.1f} min", flush=True)
    if not args.no_docs:
        command = "python bench/compare.py" + (" --quick" if args.quick else "")
        if args.scenarios != list(SCENARIOS):
            command += " --scenarios " + " ".join(args.scenarios)
        md, png = write_docs(results, BENCH.parent / "docs", command=command, elapsed_s=elapsed)
        print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
