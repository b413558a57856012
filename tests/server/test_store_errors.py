"""The server's error middleware: a job store failure is a JSON error body with a one-line message
(never a bare 500, a traceback or the store's path), in OpenAI's shape and in Anthropic's."""

from __future__ import annotations

import httpx
import orjson
from aiohttp import web

from batchgate.errors import StoreError
from batchgate.server.app import errors
from loopback import serving

SECRET_PATH = "/srv/secret-place/jobs.db"


async def _broken(request: web.Request) -> web.Response:
    raise StoreError(f"{SECRET_PATH}: the job database is corrupted or not a batchgate job database")


async def test_a_store_error_is_a_json_500_with_a_one_line_message() -> None:
    app = web.Application(middlewares=[errors])
    app.router.add_get("/v1/batches/x", _broken)
    app.router.add_get("/v1/messages/batches/x", _broken)
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        for path in ("/v1/batches/x", "/v1/messages/batches/x"):
            got = await client.get(path)
            assert got.status_code == 500
            assert got.headers["content-type"].startswith("application/json")
            message = orjson.loads(got.content)["error"]["message"]
            assert "job store" in message
            assert "\n" not in message
            assert SECRET_PATH not in got.text
            assert "Traceback" not in got.text
