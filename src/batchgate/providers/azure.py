"""Azure OpenAI: where a `kind: azure` provider's requests go (`AzureURLs`), and its chat client.

Azure speaks OpenAI's wire with its own addresses (shared/PROTOCOLS.md "Azure OpenAI";
Microsoft's REST reference and "Getting started with Azure OpenAI batch deployments"):

    chat      {resource}/openai/deployments/{deployment}/chat/completions?api-version=V
              (and /embeddings, /completions; the Responses API at {resource}/openai/responses?...)
    batch     {resource}/openai/files?api-version=V, {resource}/openai/batches?api-version=V
    v1        {resource}/openai/v1/chat/completions, /openai/v1/files, /openai/v1/batches

`base_url` may be the resource (`https://x.openai.azure.com`, with `deployment:` and
`api_version:`), a deployment URL (`.../openai/deployments/d?api-version=V`: the query stays after
every path), or the v1 surface (`.../openai/v1`, no api-version; also `base_url: emulator`
without an `api_version`). Without a deployment the model
a route sends names it (as the `openai` SDK's `AzureOpenAI` does). The key goes in the `api-key`
header (`providers.openai.openai_headers`); the body's `model` is the deployment. Error bodies and
rate-limit headers (`retry-after`, `retry-after-ms`, `x-ratelimit-remaining-*`) are OpenAI's
readers'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.providers.openai import OpenAIClient
from batchgate.providers.transport import ChatTransport
from batchgate.urls import joined

_DEPLOYMENT = re.compile(r"^(.*)/openai/deployments/([^/]+)$")
V1 = "/openai/v1"
RESPONSES_PATH = "responses"  # Azure's Responses API: /openai/responses?api-version=V, /openai/v1/responses


@dataclass(frozen=True, slots=True)
class AzureURLs:
    """One Azure provider's addresses: `resource` (scheme, host and any path before `/openai`),
    the query every call carries (`api-version` and whatever else the base URL had), whether it
    is the v1 surface, and the deployment (None: the model names it)."""

    resource: str
    query: str
    v1: bool
    deployment: str | None

    def chat_base(self, model: str) -> str:
        """The base a chat, embeddings or responses path is put on, for `model`."""
        if self.v1:
            return self._at(V1)
        return self._at(f"/openai/deployments/{quote(self.deployment or model, safe='')}")

    def batch_base(self) -> str:
        """The base of the files and batches collections."""
        return self._at(V1 if self.v1 else "/openai")

    def model(self, model: str) -> str:
        """The body's `model`: the deployment."""
        return self.deployment or model

    def _at(self, path: str) -> str:
        parts = urlsplit(self.resource)
        return urlunsplit(parts._replace(path=parts.path + path, query=self.query))


def azure_urls(config: ProviderConfig, base_url: str | None = None) -> AzureURLs:
    """The addresses of `config` (a `kind: azure` provider) served at `base_url` (default its own)."""
    parts = urlsplit((base_url or config.base_url).rstrip("/"))
    path = parts.path.rstrip("/")
    pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "api-version"]
    version = config.api_version or dict(parse_qsl(parts.query)).get("api-version")
    deployment = config.deployment
    v1 = path.endswith(V1)
    if v1:
        path = path.removesuffix(V1)
    elif (found := _DEPLOYMENT.match(path)) is not None:
        path, deployment = found.group(1), deployment or found.group(2)
    else:
        path = path.removesuffix("/openai")
        v1 = version is None and config.emulated  # the emulator's resource, no api_version: v1
    if version is not None and (not v1 or config.api_version is not None):
        pairs.append(("api-version", version))  # v1 takes one only when asked (`preview`)
    resource = urlunsplit(parts._replace(path=path, query="", fragment=""))
    return AzureURLs(resource, urlencode(pairs), v1, deployment)


class AzureClient(OpenAIClient):
    """The OpenAI client at Azure's addresses, the deployment as the body's model."""

    kind = "azure"

    def __init__(
        self,
        config: ProviderConfig,
        transport: ChatTransport,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
    ) -> None:
        super().__init__(config, transport, timeouts, base_url=base_url)
        self.urls = azure_urls(config, base_url)

    def url(self, path: str, model: str) -> str:
        if path == RESPONSES_PATH:  # not under a deployment: the body's model names it
            return joined(self.urls.batch_base(), path)
        return joined(self.urls.chat_base(model), path)

    def wire_model(self, model: str) -> str:
        return self.urls.model(model)
