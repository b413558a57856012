"""`batchgate keys revoke KEY_ID` (issue 40): a leaked key is refused at its next request by the
server already running (its keys were cached until a restart), and other keys still work."""

from __future__ import annotations

import httpx
import pytest

from .harness import Server
from .hooks import keys_cli, make_key

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # three `batchgate keys` runs


def test_a_revoked_key_is_refused_at_once_by_the_running_server(server: Server) -> None:
    token, key_id, _ = make_key(server.root)
    other = server.keys_create()
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{server.base_url}/batches", headers=auth).status_code == 200  # known, cached
    done = keys_cli(server.root, "revoke", key_id)
    assert done.returncode == 0, done.stderr
    assert httpx.get(f"{server.base_url}/batches", headers=auth).status_code == 401
    assert (
        httpx.get(f"{server.base_url}/batches", headers={"Authorization": f"Bearer {other}"}).status_code
        == 200
    )
    again = keys_cli(server.root, "revoke", key_id)
    assert again.returncode != 0
    assert f"no client key {key_id!r}" in again.stderr
    assert "Traceback" not in again.stderr
