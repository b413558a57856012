"""Azure OpenAI's wire: OpenAI's bodies at Azure's addresses, with Azure's key header, error bodies
and rate-limit headers (shared/PROTOCOLS.md "Azure OpenAI"; Microsoft's Azure OpenAI REST
reference and "Getting started with Azure OpenAI batch deployments").

Addresses (served by `emulator.server` and `emulator.batch.service` under `/<name>`):
`/openai/deployments/{deployment}/chat/completions?api-version=V` (and `/embeddings`,
`/completions`), the Responses API at `/openai/responses?api-version=V` (the body's model names the
deployment), the v1 surface `/openai/v1/chat/completions` (and `/embeddings`, `/responses`,
`/completions`) with no api-version, and the Batch API at `/openai/files` and `/openai/batches`
(`?api-version=V`) or `/openai/v1/files`, `/openai/v1/batches`.

- A deployment path (or `/openai/files`, `/openai/batches`) without `api-version` is a 404
  `{"error": {"code": "404", "message": "Resource not found"}}`: Azure answers so rather than a 400
  (github.com/MicrosoftDocs/azure-docs/issues/114602, and the SDK traces users quote, e.g.
  github.com/langchain-ai/langchainjs/issues/5754).
- The deployment in the path is the model; one the resource does not have (not in the provider's
  `models`) is a 404 `DeploymentNotFound` ("The API deployment for this resource does not exist.
  ...", as users meet it: github.com/MicrosoftDocs/azure-docs/issues/114013). On v1 the body's
  `model` names the deployment.
- The key goes in the `api-key` header: none is a 401 "Access denied due to missing subscription
  key ...", a wrong one a 401 "Access denied due to invalid subscription key or wrong API endpoint
  ...", both with `code` "401" and no `type` (Azure's error shape; an `Authorization: Bearer` Entra
  token is not emulated).
- A 429 says `code` "429" and "Please retry after N seconds", with `retry-after` and
  `retry-after-ms`; every answer carries `x-ratelimit-remaining-requests` and
  `x-ratelimit-remaining-tokens` (Azure sends the remaining counts, not OpenAI's limit and reset).
- Validation errors (a bad body) keep OpenAI's shape and words: Azure relays them.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from batchgate.emulator.config import EmulatorConfig
from batchgate.emulator.limiter import DimensionState
from batchgate.emulator.openai_api import OpenAIFamily
from batchgate.emulator.wire import ApiError

_MISSING_KEY = (
    "Access denied due to missing subscription key. Make sure to include subscription key when "
    "making requests to an API."
)
_BAD_KEY = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid "
    "key for an active subscription and use a correct regional API endpoint for your resource."
)
_NO_DEPLOYMENT = (
    "The API deployment for this resource does not exist. If you created the deployment within the "
    "last 5 minutes, please wait a moment and try again."
)
_AZURE_ONLY = frozenset({"auth", "not_found", "unknown_model", "rate_limit"})  # Azure's own bodies
API_VERSION = "api-version"
KEY_HEADER = "api-key"
_ENDPOINTS = ("chat", "chat/completions"), ("embeddings", "embeddings"), ("completions", "completions")
# (endpoint, path under /<name>): the deployment paths (api-version required) and the v1 surface
AZURE_PATHS: tuple[tuple[str, str], ...] = (
    *((e, f"/openai/deployments/{{deployment}}/{p}") for e, p in _ENDPOINTS),
    ("responses", "/openai/responses"),  # the Responses API: not under a deployment
    *((e, f"/openai/{{v1:v1}}/{p}") for e, p in (*_ENDPOINTS, ("responses", "responses"))),
)


def provider_base_url(config: EmulatorConfig, url: str, name: str) -> str:
    """The base URL to give provider `name`'s official SDK: OpenAI's `/<name>/v1`, or the
    resource `/<name>` (Azure's `azure_endpoint`, Anthropic's base URL)."""
    return f"{url}/{name}/v1" if config.provider(name).family == "openai" else f"{url}/{name}"


def resource_not_found() -> ApiError:
    """Azure's answer to a path it does not route (a deployment path without `api-version`)."""
    return ApiError(404, "", "Resource not found", code="404", reason="not_found")


class AzureFamily(OpenAIFamily):
    """OpenAI's bodies with Azure's key header, errors and rate-limit headers."""

    name = "azure"
    path = "/openai/v1/chat/completions"

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> None:
        if api_key is None:
            return
        given = headers.get(KEY_HEADER)
        if not given:
            raise ApiError(401, "", _MISSING_KEY, code="401", reason="auth")
        if given != api_key:
            raise ApiError(401, "", _BAD_KEY, code="401", reason="auth")

    def route_model(self, match_info: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The deployment a deployment path names (the request's model), after checking its
        `api-version`; None on the v1 surface (the body names it)."""
        if "v1" not in match_info and not query.get(API_VERSION):
            raise resource_not_found()
        return match_info.get("deployment")

    def error_body(self, err: ApiError, rid: str) -> bytes:
        if err.reason in _AZURE_ONLY or not err.etype:
            return orjson.dumps({"error": {"code": err.code or str(err.status), "message": err.message}})
        return super().error_body(err, rid)

    def ratelimit_headers(self, states: tuple[DimensionState, ...], wall: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        for s in states:
            if s.dimension in ("requests", "tokens"):
                headers[f"x-ratelimit-remaining-{s.dimension}"] = str(s.remaining)
        return headers

    def not_found(self, method: str, path: str) -> ApiError:
        return resource_not_found()

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(404, "", _NO_DEPLOYMENT, code="DeploymentNotFound", reason="unknown_model")

    def rate_limited(self, dimension: str, limit: int) -> ApiError:
        what = "token rate limit" if dimension == "tokens" else "call rate limit"
        return ApiError(
            429,
            "",
            f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API have exceeded "
            f"{what} of your current pricing tier (limit {limit}). Please retry after the seconds "
            "retry-after gives.",
            code="429",
            reason="rate_limit",
        )
