"""Each emulated provider's addresses on the emulator's app, by its family: Bedrock's
(`bedrock_routes`), Azure's deployment and v1 paths (`azure_api.AZURE_PATHS`), Gemini's
(`gemini_api`), else the OpenAI family's endpoints and `/v1/messages` — a provider answering the
paths of the family it does not play with a 404 in its own shape (`serves=False`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from batchgate.emulator.azure_api import AZURE_PATHS
from batchgate.emulator.bedrock_routes import add_bedrock_routes
from batchgate.emulator.gemini_api import Serve, add_gemini_routes
from batchgate.emulator.openai_endpoints import PATHS
from batchgate.emulator.provider import EmulatedProvider


def add_provider_routes(
    app: web.Application, rt: EmulatedProvider, handler: Callable[..., Any], serve: Serve
) -> None:
    """Route provider `rt`'s paths; `handler(rt, serves=, endpoint=)` is the emulator's request
    path for one provider, `serve` the one Gemini's actions call."""
    if add_bedrock_routes(app, rt, handler):  # Bedrock's addresses only
        return
    if rt.family.name == "azure":  # Azure's addresses only
        for endpoint, path in AZURE_PATHS:
            app.router.add_route("*", f"/{rt.name}{path}", handler(rt, serves=True, endpoint=endpoint))
        return
    if rt.family.name == "gemini":  # Gemini's addresses only
        add_gemini_routes(app, rt, serve)
        return
    app.router.add_route("*", f"/{rt.name}/v1/messages", handler(rt, serves=rt.family.name == "anthropic"))
    for endpoint, path in PATHS.items():  # the OpenAI family's endpoints (PROTOCOLS.md)
        serves = rt.family.name == "openai"
        app.router.add_route("*", f"/{rt.name}{path}", handler(rt, serves=serves, endpoint=endpoint))
