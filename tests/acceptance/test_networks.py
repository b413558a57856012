"""Issue 38's network rows as a user meets them, with the real CLI (`batchgate run`, a
subprocess): a network that lets only the corporate proxy out (a real `proxy.py`; the provider,
the emulator behind `tests/netutil.py`'s TLS front, drops every connection not dialled by the
proxy) with `HTTPS_PROXY` and the private CA as `REQUESTS_CA_BUNDLE`; and the same private CA not
given, which stops the run with the certificate problem named on stderr and in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchgate.emulator import EmulatorThread
from netutil import TLSFront, make_ca, real_proxy

from .harness import MODEL, Cli, expected_ids, ids_once, read_jsonl, write_input

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]
EXIT_NO_TARGET = 5


@pytest.fixture
def ca_pem(tmp_path: Path) -> tuple[Any, Path]:
    authority, leaf = make_ca()
    pem = tmp_path / "corp-ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    return leaf, pem


def _config(path: Path, base_url: str) -> Path:
    data: dict[str, Any] = {
        "providers": [{"name": "alpha", "kind": "openai", "base_url": base_url, "api_key_env": "ALPHA_KEY"}],
        "routes": [{"model": MODEL, "targets": ["alpha:gpt-4o-mini"]}],
        "prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}},
        "settings": {"timeouts": {"connect": 3, "total": 20}},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _port(emu: EmulatorThread) -> int:
    return int(emu.base_url("alpha").split(":")[2].split("/")[0])


def test_a_run_on_a_network_that_allows_only_https_proxy(
    cli: Cli, emu: EmulatorThread, ca_pem: tuple[Any, Path]
) -> None:
    leaf, pem = ca_pem
    n = 30
    src = write_input(cli.cwd / "in.jsonl", n)
    out = cli.cwd / "out.jsonl"
    with TLSFront(leaf, _port(emu)) as front, real_proxy(basic_auth="corp:pr0xy-pw") as port:
        cfg = _config(cli.cwd / "gw.yaml", f"{front.url}/alpha/v1")
        cli.env.update(
            {
                "ALPHA_KEY": "sk-net-0123456789",
                "HTTPS_PROXY": f"http://corp:pr0xy-pw@127.0.0.1:{port}",
                "REQUESTS_CA_BUNDLE": str(pem),
            }
        )
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert done.returncode == 0, done.stderr
    assert ids_once(read_jsonl(out)) == expected_ids(n)
    assert front.served >= 1
    assert front.refused == 0  # not one connection went around the proxy
    assert all("pr0xy-pw" not in text for text in cli.transcript)


def test_a_private_ca_not_given_names_the_certificate_problem(
    cli: Cli, emu: EmulatorThread, ca_pem: tuple[Any, Path]
) -> None:
    leaf, _ = ca_pem
    src = write_input(cli.cwd / "in.jsonl", 20)
    out = cli.cwd / "out.jsonl"
    with TLSFront(leaf, _port(emu), only_from=None) as front:
        cfg = _config(cli.cwd / "gw.yaml", f"{front.url}/alpha/v1")
        cli.env["ALPHA_KEY"] = "sk-net-0123456789"
        done = cli.run("run", str(src), "--config", str(cfg), "--output", str(out), "-q")
    assert done.returncode == EXIT_NO_TARGET, done.stderr
    stop = [line for line in done.stderr.splitlines() if " stopped: " in line]
    assert len(stop) == 1, done.stderr
    assert "TLS: CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate" in stop[0]
    assert f"localhost:{front.port}" in stop[0]
    assert "ca_bundle" in stop[0]
    assert "unreachable" not in stop[0]
    report_text = (cli.cwd / "out.jsonl.report.json").read_text(encoding="utf-8")
    assert "CERTIFICATE_VERIFY_FAILED" in report_text
    report = orjson.loads(report_text)
    alpha = report["providers"]["alpha"]
    assert set(alpha["errors_by_kind"]) == {"tls"}
    assert alpha["unreachable_attempts"] == 0
