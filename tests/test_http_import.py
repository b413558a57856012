"""`batchgate run` imports aiohttp with its SSL contexts' CAs loaded on first use, not at import: an
https request is still verified against the system's CAs (here SSL_CERT_FILE), in a fresh
interpreter, over a real TLS socket."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import asyncio, ssl, sys
from batchgate.cli.http_import import import_aiohttp
import_aiohttp()
import aiohttp, aiohttp.connector
from aiohttp import web
from batchgate.providers.http import create_session

assert aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"] == 0  # none parsed yet
assert "set_default_verify_paths" not in vars(ssl.SSLContext)  # ssl is as it was

async def main() -> None:
    app = web.Application()
    app.router.add_get("/", lambda request: web.Response(text="hello over tls"))
    runner = web.AppRunner(app)
    await runner.setup()
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(sys.argv[1], sys.argv[2])
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served).start()
    port = runner.addresses[0][1]
    try:
        async with create_session(connect_timeout=5) as session:
            async with session.get(f"https://127.0.0.1:{port}/") as answer:
                print(await answer.text())
        ctx = aiohttp.connector._SSL_CONTEXT_VERIFIED
        print("cas", ctx.cert_store_stats()["x509_ca"], ctx.verify_mode == ssl.CERT_REQUIRED)
    except aiohttp.ClientConnectorCertificateError:
        print("refused: certificate not trusted")
    finally:
        await runner.cleanup()

asyncio.run(main())
"""


def _self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but the openssl command is missing")
        pytest.skip("the openssl command is missing")
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject, *files],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def _probe(cert: Path, key: Path, trusted: Path) -> str:
    env = {**os.environ, "SSL_CERT_FILE": str(trusted), "SSL_CERT_DIR": str(trusted.parent / "none")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(cert), str(key)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_an_https_request_is_verified_with_the_cas_loaded_at_first_use(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "server")
    other, _ = _self_signed(tmp_path, "other")
    trusted = _probe(cert, key, trusted=cert)
    assert trusted.splitlines() == ["hello over tls", "cas 1 True"]
    assert _probe(cert, key, trusted=other).strip() == "refused: certificate not trusted"
