"""Never destroy an input (issue 30): an output, errors file, log file, store or report page that is
the input, the config or another file the run reads — the same file by inode, however the path is
spelt (`./x`, a symlink, a hard link) — is one clear error line, a non-zero exit, nothing sent and
nothing written; `report --html` writes its page owner-only like every other artefact."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from batchgate.emulator import EmulatorThread

from .graph_harness import graph_config, write_pipeline, write_reviews
from .harness import Cli, gateway_config, one_error_line, provider_totals, write_input

pytestmark = pytest.mark.acceptance


def _alias(path: Path, how: str) -> Path:
    """Another name for `path`: the same string with ./, a symlink or a hard link."""
    if how == "dot":
        return Path(".") / path.name  # relative to the CLI's cwd, which holds `path`
    alias = path.with_name(f"{how}-{path.name}")
    if how == "symlink":
        alias.symlink_to(path.name)
    else:
        os.link(path, alias)
    return alias


def _assert_refused(cli: Cli, emu: EmulatorThread, done: object, kept: dict[Path, bytes]) -> str:
    assert getattr(done, "returncode", 0) != 0
    line = one_error_line(getattr(done, "stderr", ""))
    for path, data in kept.items():
        assert path.read_bytes() == data, f"{path} was written"
    assert provider_totals(emu)["admitted"] == 0
    assert not cli.store.exists(), "the job store was created"
    return line


@pytest.mark.parametrize(
    ("flag", "target", "how"),
    [
        ("--output", "input", "dot"),
        ("--output", "input", "symlink"),
        ("--output", "config", "hardlink"),
        ("--errors", "input", "symlink"),
        ("--log-file", "input", "hardlink"),
        ("--output", "same", "same"),
    ],
)
def test_run_refuses_to_write_over_what_it_reads(
    cli: Cli, emu: EmulatorThread, flag: str, target: str, how: str
) -> None:
    src = write_input(cli.cwd / "in.jsonl", 5)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    kept = {src: src.read_bytes(), cfg: cfg.read_bytes()}
    victim = {"input": src, "config": cfg, "same": src}[target]
    path = victim if how == "same" else _alias(victim, how)
    args = ["run", str(src), "--config", str(cfg), "--progress", "quiet"]
    args += ["--output", str(cli.cwd / "out.jsonl")] if flag != "--output" else []
    done = cli.run(*args, flag, str(path))
    line = _assert_refused(cli, emu, done, kept)
    assert f"the {target if target != 'same' else 'input'} (" in line, line
    assert "nothing was written" in line
    assert not (cli.cwd / "out.jsonl").exists()


def test_a_pipeline_file_is_not_written_over(cli: Cli, emu: EmulatorThread) -> None:
    src = write_reviews(cli.cwd / "in.jsonl", 4)
    cfg = graph_config(cli.cwd / "gw.yaml", emu)
    pipe = write_pipeline(cli.cwd / "p.yaml")
    kept = {src: src.read_bytes(), cfg: cfg.read_bytes(), pipe: pipe.read_bytes()}
    done = cli.run("run", str(src), "--config", str(cfg), "--pipeline", str(pipe), "--output",
                   str(_alias(pipe, "symlink")), "--progress", "quiet")  # fmt: skip
    assert "the pipeline file (" in _assert_refused(cli, emu, done, kept)


@pytest.mark.slow
def test_resume_and_report_refuse_the_jobs_own_files(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 5)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    out = cli.cwd / "out.jsonl"
    done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    kept = {p: p.read_bytes() for p in (src, cfg, out)}
    sent = provider_totals(emu)["admitted"]

    for args in (("resume", "--errors", "./in.jsonl"), ("retry", "--errors", str(_alias(cfg, "symlink")))):
        done = cli.run(*args)
        assert done.returncode != 0
        assert "would overwrite the" in one_error_line(done.stderr)
    for flag, page in (
        ("--html", str(_alias(src, "hardlink"))),
        ("-o", "./out.jsonl"),
        ("--html", str(cli.store)),
    ):
        done = cli.run("report", flag, page)
        assert done.returncode != 0
        assert "would overwrite the job" in one_error_line(done.stderr)
    for path, data in kept.items():
        assert path.read_bytes() == data
    assert provider_totals(emu)["admitted"] == sent


@pytest.mark.slow
def test_the_report_page_is_owner_only(cli: Cli, emu: EmulatorThread) -> None:
    src = write_input(cli.cwd / "in.jsonl", 3)
    cfg = gateway_config(cli.cwd / "gw.yaml", emu)
    done = cli.run("run", str(src), "--config", str(cfg), "--output", "out.jsonl", "--progress", "quiet")
    assert done.returncode == 0, done.stderr
    page, summary = cli.cwd / "page.html", cli.cwd / "summary.txt"
    assert cli.run("report", "--html", str(page)).returncode == 0
    assert cli.run("report", "--summary", "-o", str(summary)).returncode == 0
    for path in (page, summary):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
