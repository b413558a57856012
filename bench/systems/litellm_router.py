"""LiteLLM: a `Router` with one deployment per provider carrying its declared `rpm`/`tpm`, and the
rate-limit-aware `usage-based-routing-v2` strategy, as LiteLLM's routing docs recommend; every
request is `router.acompletion(...)`, all gathered at once. Retries are the Router's defaults.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import

import litellm
from litellm.router import Router
from workload import Request, Spec

from systems.common import Recorder, error_kind


def _deployments(spec: Spec) -> list[dict[str, Any]]:
    out = []
    for name, p in spec.providers.items():
        params: dict[str, Any] = {
            "model": f"{'openai' if p.family == 'openai' else 'anthropic'}/{p.model}",
            "api_base": p.base_url,
            "api_key": "bench",
        }
        tpm = p.limits.get("tpm") or p.limits.get("itpm")
        if p.limits.get("rpm"):
            params["rpm"] = p.limits["rpm"]
        if tpm:
            params["tpm"] = tpm
        out.append({"model_name": name, "litellm_params": params})
    return out


async def _main(spec: Spec, rec: Recorder) -> None:
    litellm.suppress_debug_info = True
    kw: dict[str, Any] = {"model_list": _deployments(spec), "routing_strategy": "usage-based-routing-v2"}
    if spec.timeout is not None:
        kw["timeout"] = spec.timeout
    router = Router(**kw)

    async def one(r: Request) -> None:
        t0 = time.perf_counter()
        try:
            await router.acompletion(
                model=r.provider,
                messages=[{"role": "system", "content": r.system}, {"role": "user", "content": r.prompt}],
                max_tokens=r.max_tokens,
            )
        except Exception as exc:
            rec.fail(r.id, (time.perf_counter() - t0) * 1000, error_kind(exc))
        else:
            rec.ok(r.id, (time.perf_counter() - t0) * 1000)

    rec.start()
    await asyncio.gather(*(one(r) for r in spec.requests))
    rec.finish()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
