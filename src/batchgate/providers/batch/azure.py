"""The client for Azure OpenAI's Batch API: the OpenAI Batch API client at Azure's addresses.

Files at `{resource}/openai/files` (purpose `batch`) and batches at `{resource}/openai/batches`,
both with `?api-version=V` (the v1 surface: `/openai/v1/files`, `/openai/v1/batches`, no
api-version); each input line's `url` and the batch's `endpoint` are `/chat/completions` (no `/v1`)
and its `body.model` names the deployment (a "global batch" deployment): shared/PROTOCOLS.md
"Azure OpenAI" and Microsoft's "Getting started with Azure OpenAI batch deployments".
"""

from __future__ import annotations

import aiohttp

from batchgate.clock import Clock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.policy.poll import PollPolicy
from batchgate.providers.azure import AzureURLs, azure_urls
from batchgate.providers.batch.openai import OpenAIBatchClient


class AzureBatchClient(OpenAIBatchClient):
    """Runs batches on one Azure OpenAI resource (a global batch deployment)."""

    kind = "azure"

    def __init__(
        self,
        config: ProviderConfig,
        session: aiohttp.ClientSession,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
        clock: Clock | None = None,
        poll: PollPolicy | None = None,
    ) -> None:
        self.urls: AzureURLs = azure_urls(config, base_url)
        super().__init__(config, session, timeouts, base_url=base_url, clock=clock, poll=poll)

    def collections_base(self, config: ProviderConfig) -> str:
        return self.urls.batch_base()

    def line_url(self, path: str) -> str:
        return f"/{path}"

    def wire_model(self, model: str | None) -> str | None:
        return self.urls.deployment or model
