"""The engine's packer, in front of dispatch: single-text embedding lines wait here to be sent
many to a request, so a job of short texts is bound by the provider's tokens per minute, not by
its requests per minute.

Each claimed line keeps its own engine task (the window still counts lines, the engine still
commits, fails and follows up each line as usual); a packable line's task hands its line here and
waits. A group is sent when it is full (`group.PackLimits`), or once the dispatch loop has started
what it claimed (`flush_soon`: after the started tasks' first steps, so a claimed chunk packs
whole). A pack is one request through `LiveTasks.run` — one slot, one budget reservation for the
pack's worst case, one set of retries — and its answer is split back by index, each line with its
vector and its share of the usage and of the bill. While a pack is on the wire its lines count
as sending (a stop's grace period waits for them). A pack the provider refuses as a bad request,
or that can never fit a quota, is split in halves and each half sent again, so one bad text fails
alone. Nothing is committed before the answer: a pack that dies with the process leaves its lines
running, and a resume sends them again (at-least-once, as for any line).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from batchgate.config import GatewayConfig
from batchgate.errors import BadRequestError, InvalidRequestError, MalformedResponse, NeverFitsError
from batchgate.inflight import InflightLimit
from batchgate.jobs.budget_gate import Amount
from batchgate.jobs.live_task import Abandoned, LiveTasks
from batchgate.jobs.pack.group import (
    PackLimits,
    limits_for,
    pack_key,
    packed_body,
    shares,
    split_answer,
    text_bytes,
)
from batchgate.jobs.store.protocol import TaskSpec
from batchgate.models import ChatBody, Result, Usage

Outcome = tuple[Result, int, str | None, Amount]  # what `LiveTasks.run` gives for one line
_SPLIT = (BadRequestError, InvalidRequestError, NeverFitsError)  # one bad text, or too big: halve


@dataclass(slots=True)
class _Group:
    specs: list[TaskSpec] = field(default_factory=list)
    waiting: list[asyncio.Future[Outcome]] = field(default_factory=list)
    tasks: list[asyncio.Task[object]] = field(default_factory=list)
    size: int = 0  # the texts' UTF-8 bytes: at least their tokens


class Packer:
    """Holds packable lines by what they share, and sends each group as one request."""

    def __init__(
        self,
        config: GatewayConfig,
        live: LiveTasks,
        slots: InflightLimit,
        *,
        inputs: int,
        stopping: Callable[[], bool],
    ) -> None:
        """`inputs`: the most lines a pack holds (the engine gives half its window, so one pack
        fills while another is sent; `job.pack_embeddings` may lower it, 0 or 1: no packing);
        `slots`: the engine's, one taken per pack."""
        self._config, self._live, self._slots = config, live, slots
        self._inputs = min(inputs, config.job.pack_embeddings)  # 0: `job.pack_embeddings` turns it off
        self._stopping = stopping
        self._limits: dict[str, PackLimits] = {}
        self._held: dict[bytes, _Group] = {}
        self._sending: set[asyncio.Task[None]] = set()
        self._flush: asyncio.Handle | None = None

    def key(self, spec: TaskSpec) -> bytes | None:
        """The line's pack key, or None when it is sent on its own."""
        return pack_key(spec.body) if self._inputs > 1 else None

    async def run(self, spec: TaskSpec, key: bytes) -> Outcome:
        """Send `spec` in a pack; its own outcome. Raises `Abandoned` when the pack is given up."""
        limits = self._limits_for(spec)
        size = text_bytes(spec)
        group = self._held.get(key)
        if group is not None and group.size + size > limits.tokens:
            self._send(self._held.pop(key))
            group = None
        if group is None:
            group = self._held[key] = _Group()
        waiting: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        me = asyncio.current_task()
        assert me is not None
        group.specs.append(spec)
        group.waiting.append(waiting)
        group.tasks.append(me)
        group.size += size
        if len(group.specs) >= limits.inputs:
            self._send(self._held.pop(key))
        try:
            return await waiting
        except asyncio.CancelledError:
            self._forget(key, group, waiting)
            raise

    def flush_soon(self) -> None:
        """Send every held group once the tasks started so far have handed in their lines."""
        if self._flush is None and self._held:
            self._flush = asyncio.get_running_loop().call_soon(self._send_held)

    async def close(self) -> None:
        """Cancel the packs still being sent (the end of a run: their lines are requeued)."""
        if self._flush is not None:
            self._flush.cancel()
        for task in list(self._sending):
            task.cancel()
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)

    def _limits_for(self, spec: TaskSpec) -> PackLimits:
        model = str(spec.body.get("model"))
        limits = self._limits.get(model)
        if limits is None:
            limits = self._limits[model] = limits_for(self._config, model, self._inputs)
        return limits

    def _forget(self, key: bytes, group: _Group, waiting: asyncio.Future[Outcome]) -> None:
        """A line cancelled while it waited: out of its group if the group is still held."""
        if self._held.get(key) is not group:
            return  # already sent: the pack goes on for the others
        i = group.waiting.index(waiting)
        group.size -= text_bytes(group.specs[i])
        del group.specs[i], group.waiting[i], group.tasks[i]
        if not group.specs:
            del self._held[key]

    def _send_held(self) -> None:
        self._flush = None
        held, self._held = self._held, {}
        for group in held.values():
            self._send(group)

    def _send(self, group: _Group) -> None:
        task = asyncio.ensure_future(self._deliver(group))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _deliver(self, group: _Group) -> None:
        try:
            async with self._slots:
                if self._stopping():
                    raise Abandoned(group.specs[0].custom_id)
                outcomes = await self._outcomes(group.specs, group.tasks)
        except Exception as exc:  # Abandoned, or a bug: every line hears it
            for waiting in group.waiting:
                if not waiting.done():
                    waiting.set_exception(exc)
            return
        for waiting, outcome in zip(group.waiting, outcomes, strict=True):
            if not waiting.done():
                waiting.set_result(outcome)

    async def _outcomes(self, specs: list[TaskSpec], tasks: list[asyncio.Task[object]]) -> list[Outcome]:
        """Send `specs` as one request (halving it when the provider refuses it); each line's outcome."""
        first = specs[0]
        pack = dataclasses.replace(
            first, body=packed_body(specs), custom_id=f"{first.custom_id}+{len(specs) - 1}"
        )
        self._live.sending.update(tasks)  # the lines are on the wire with their pack
        try:
            result, calls, _, billed = await self._live.run(pack)
        finally:
            self._live.sending.difference_update(tasks)
        if not result.ok and isinstance(result.error, _SPLIT) and len(specs) > 1:
            mid = len(specs) // 2
            halves = await self._outcomes(specs[:mid], tasks[:mid]) + await self._outcomes(
                specs[mid:], tasks[mid:]
            )
            return [(r, n + calls, problem, amount) for r, n, problem, amount in halves]
        if result.ok:
            try:
                return _split(result, calls, billed, specs)
            except ValueError as exc:
                provider = result.provider or ""
                error = MalformedResponse(f"{provider}: packed embeddings answer: {exc}", provider=provider)
                result = dataclasses.replace(result, ok=False, body=None, usage=None, error=error)
        each = shares(int(billed[1]), [1] * len(specs))
        return [
            (_for_line(result, spec), calls, None, (float(billed[0]) / len(specs), tokens))
            for spec, tokens in zip(specs, each, strict=True)
        ]


def _for_line(result: Result, spec: TaskSpec, answer: tuple[ChatBody, Usage] | None = None) -> Result:
    """The pack's result as `spec`'s line's, with its own body and usage when `answer` gives them."""
    if answer is None:
        return dataclasses.replace(result, index=spec.seq, custom_id=spec.custom_id)
    body, usage = answer
    return dataclasses.replace(result, index=spec.seq, custom_id=spec.custom_id, body=body, usage=usage)


def _split(result: Result, calls: int, billed: Amount, specs: list[TaskSpec]) -> list[Outcome]:
    """Each line's answer, usage and share of the bill (in proportion to its tokens)."""
    assert result.usage is not None
    lines = split_answer(result.body, result.usage, specs)
    total = max(1, result.usage.total_tokens)
    return [
        (
            _for_line(result, spec, (body, usage)),
            calls,
            None,
            (float(billed[0]) * usage.total_tokens / total, usage.total_tokens),
        )
        for spec, (body, usage) in zip(specs, lines, strict=True)
    ]
