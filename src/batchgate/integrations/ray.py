"""A Ray Data UDF sending each row's chat request through one batchgate `Gateway` per actor, its
quota held in a shared store (Redis), so M actors on any number of nodes hold one provider limit
(extra: `pip install 'batchgate[ray]'`).

    answered = ds.map_batches(
        BatchgateUDF,
        fn_constructor_kwargs={"config": "batchgate.yaml", "quota": "redis://10.0.0.5:6379/0", "model": "m"},
        compute=ray.data.ActorPoolStrategy(size=4), batch_size=32, batch_format="pandas",  # or "numpy"
    )

A row's request is its `request` column (an OpenAI chat body: a dict, or JSON text) or else its
`prompt` column (text, sent as one user message to `model`). Rows come back with their columns
plus `answer` (text), `usage` (prompt/completion/total tokens), `provider` and `error` (None, or
"kind: message"): a request that fails — at the provider, or because its row is not a request —
is a row with `error` set, never a failed batch. The actor keeps one gateway (and its quota
state) open for its lifetime on an event loop of its own thread: a batch waits for its answers
there, so the actor's requests of one batch run concurrently under the gateway's pacing.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import math
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson

from batchgate.config import GatewayConfig, config_from_dict, load_config
from batchgate.gateway import Gateway
from batchgate.models import ChatBody, Result
from batchgate.quota.store.location import resolve

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("batchgate.integrations.ray needs Ray Data: pip install 'batchgate[ray]'") from exc

T = TypeVar("T")
OUTPUT_COLUMNS = ("answer", "usage", "provider", "error")
Cells = tuple[str | None, dict[str, int] | None, str | None, str | None]  # a row's OUTPUT_COLUMNS


def _plain(value: object) -> object:
    """A value as plain Python: Arrow turns lists into numpy arrays and absent keys into None."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def row_body(request: object, prompt: object, *, model: str | None, max_tokens: int | None) -> ChatBody:
    """The chat body of one row (ValueError saying why when the row holds none)."""
    body: ChatBody
    if request is not None and not (isinstance(request, float) and math.isnan(request)):  # NaN: absent
        if isinstance(request, str | bytes):
            try:
                request = orjson.loads(request)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"the request column is not JSON ({exc})") from None
        plain = _plain(request)
        if not isinstance(plain, dict):
            raise ValueError(f"the request column holds {type(plain).__name__}, not a chat body")
        body = plain
    elif isinstance(prompt, str):
        body = {"messages": [{"role": "user", "content": prompt}]}
    else:
        raise ValueError("the row has neither a request nor a prompt")
    if model is not None:
        body.setdefault("model", model)
    if "model" not in body:
        raise ValueError("the request names no model (give the UDF a `model`)")
    if max_tokens is not None:
        body.setdefault("max_tokens", max_tokens)
    return body


def result_columns(result: Result) -> Cells:
    """A result's (answer, usage, provider, error) cells."""
    usage = result.usage
    cells = (
        {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
        if usage is not None
        else None
    )
    if result.ok:
        return result.text, cells, result.provider, None
    error = result.error
    message = f"{error.kind}: {error.message}" if error is not None else "error: the request failed"
    return None, cells, result.provider, message


class _LoopThread:
    """An event loop running in a daemon thread of its own, for coroutines submitted from others."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="batchgate-ray", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[object, None, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _gateway_config(config: GatewayConfig | Mapping[str, object] | str | Path) -> GatewayConfig:
    if isinstance(config, GatewayConfig):
        return config
    if isinstance(config, Mapping):
        return config_from_dict(dict(config))
    return load_config(config)


class BatchgateUDF:
    """A callable class for `Dataset.map_batches`: one gateway per actor, requests per row.

    `config` is a gateway config (object, dict or YAML path); `quota` where provider quotas
    live (`redis://…` to share them across actors and nodes; `local` for one machine's actors;
    `memory` for none; default: the config's `quota.store`); `namespace` prefixes its Redis keys.
    """

    def __init__(
        self,
        config: GatewayConfig | Mapping[str, object] | str | Path,
        *,
        quota: str | None = None,
        namespace: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        prompt_column: str = "prompt",
        request_column: str = "request",
    ) -> None:
        cfg = _gateway_config(config)
        store = resolve(quota, os.environ, namespace) if quota is not None else None
        self.model, self.max_tokens = model, max_tokens
        self.prompt_column, self.request_column = prompt_column, request_column
        self._loop: _LoopThread | None = _LoopThread()
        self.gateway = Gateway(cfg, quota_store=store)
        try:
            self._loop.run(self.gateway.start())
        except BaseException:
            self._loop.stop()
            self._loop = None
            raise

    def __call__(self, batch: Any) -> Any:
        rows = len(next(iter(batch.values()), ())) if isinstance(batch, Mapping) else len(batch)
        requests = self._column(batch, self.request_column, rows)
        prompts = self._column(batch, self.prompt_column, rows)
        cells: list[Cells] = []
        bodies: list[tuple[int, ChatBody]] = []
        for i in range(rows):
            try:
                bodies.append(
                    (i, row_body(requests[i], prompts[i], model=self.model, max_tokens=self.max_tokens))
                )
            except ValueError as exc:
                cells.append((None, None, None, f"input: {exc}"))
                continue
            cells.append((None, None, None, None))
        for (i, _), result in zip(bodies, self._run([b for _, b in bodies]), strict=True):
            cells[i] = result_columns(result)
        return _with_columns(batch, cells)

    @staticmethod
    def _column(batch: Any, name: str, rows: int) -> Sequence[Any]:
        return list(batch[name]) if name in batch else [None] * rows

    def _run(self, bodies: list[ChatBody]) -> list[Result]:
        if self._loop is None:
            raise RuntimeError("the BatchgateUDF is closed")
        return self._loop.run(self.gateway.abatch(bodies)) if bodies else []

    def close(self) -> None:
        """Close the gateway (its quota store connection) and stop the loop; idempotent."""
        if self._loop is not None:
            loop, self._loop = self._loop, None
            try:
                loop.run(self.gateway.close())
            finally:
                loop.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at an actor's exit nothing is left to tell
            self.close()


def _with_columns(batch: Any, cells: list[Cells]) -> Any:
    """The batch (a pandas DataFrame or a dict of numpy arrays) with the output columns added."""
    columns = list(zip(*cells, strict=True)) if cells else [() for _ in OUTPUT_COLUMNS]
    frame = not isinstance(batch, Mapping)
    pandas: Any = importlib.import_module("pandas") if frame else None  # only for a DataFrame batch
    out: Any = batch.copy() if frame else dict(batch)
    for name, values in zip(OUTPUT_COLUMNS, columns, strict=True):
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
        # an object Series, or pandas would read text cells as strings and None as NaN
        out[name] = pandas.Series(array, index=out.index, dtype=object) if frame else array
    return out
