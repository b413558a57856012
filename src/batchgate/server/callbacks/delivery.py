"""`Callbacks`: the service's side of the outbox. `record_end` adds a batch's (or job's) end event
inside the transaction that records the end, `wake` arms the clock timer for the next due attempt
once that transaction committed; each attempt (`sender.send`) is followed by its record: delivered,
given up, or pending again after the next delay of the retry schedule (5 s, 30 s, 2 min, 10 min,
30 min, then hourly; `--callback-retry-delays`), until `give_up_after_s` (72 h) after the event.

Delivery slots are shared by key first: at most `MAX_AT_ONCE` attempts in flight, at most
`PER_OWNER_AT_ONCE` of them one key's, and due events are taken in turn from each key — so a
receiver that never answers for one key (64 callbacks, 10 s each, once made another key's 20 s
late) holds only that key's slots. No polling: one timer, for the earliest pending event not in
flight whose key has a slot free. At start the timer is armed
from the outbox, so events a stopped (or killed) server left pending are delivered then — at least
once, with the same `webhook-id` (an attempt that was answered but not yet recorded is repeated).
`counts` counts attempts by outcome (`delivered`, `http_error`, `unreachable`, `redirected`,
`refused`) and `given_up` the events abandoned; `figures()` is what `/metrics` reads of them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import Counter
from dataclasses import dataclass

from yarl import URL

from batchgate.clock import Clock, TimerHandle
from batchgate.config import NetworkSettings
from batchgate.errors import JobError, ServiceRequestError
from batchgate.server.callbacks.outbox import Event, Outbox, add
from batchgate.server.tenancy.registry import BatchRecord, Registry
from batchgate.webhooks import guard, signing
from batchgate.webhooks.sender import Delivery, send

log = logging.getLogger("batchgate.server.callbacks")

NO_ALLOW = guard.AllowList()
DEFAULT_DELAYS = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0)
GIVE_UP_S = 72 * 3600.0
TIMEOUT_S = 10.0
MAX_AT_ONCE = 32  # attempts in flight at once
PER_OWNER_AT_ONCE = 8  # of those, one key's: a receiver that never answers holds no more (issue 40)
CALLBACK_FIELD = "callback_url"  # in an OpenAI batch's metadata: where its end is announced


@dataclass(frozen=True, slots=True)
class CallbackSettings:
    allow: guard.AllowList = NO_ALLOW
    delays: tuple[float, ...] = DEFAULT_DELAYS
    give_up_after_s: float = GIVE_UP_S
    timeout_s: float = TIMEOUT_S
    network: NetworkSettings | None = None  # the proxy and CAs deliveries go through

    def delay(self, attempts: int) -> float:
        """The wait after the `attempts`-th failed attempt (the last delay repeats)."""
        return self.delays[min(attempts, len(self.delays)) - 1]


def create_secret(registry: Registry, key_id: str) -> str:
    """A new webhook secret for the client key `key_id` (replacing any it had), stored to sign its
    callbacks from now on, pending retries included; shown once."""
    secret = signing.new_secret()
    if not Outbox(registry).set_secret(key_id, secret):
        raise JobError(f"{registry.path}: no client key {key_id!r}")
    return secret


@dataclass(frozen=True, slots=True)
class DeliveryFigures:
    """Since the server started: attempts delivered, attempts not delivered (retried or not),
    events given up; and the events pending in the outbox now."""

    delivered: int
    failed_attempts: int
    given_up: int
    pending: int


class Callbacks:
    def __init__(self, registry: Registry, clock: Clock, settings: CallbackSettings | None = None) -> None:
        self.outbox = Outbox(registry)
        self.clock = clock
        self.settings = settings or CallbackSettings()
        self.counts: Counter[str] = Counter()
        self.given_up = 0
        self._timer: TimerHandle | None = None
        self._inflight: dict[str, str] = {}  # event id -> its owner key
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    def check_url(self, url: str, owner: str, param: str = "metadata") -> None:
        """At creation: a 400 for a malformed or plainly refused URL (a literal refused address),
        or an owner key without a webhook secret. Names are checked when delivering."""
        try:
            guard.check_literal(url, self.settings.allow)
        except guard.CallbackRefused as exc:
            raise ServiceRequestError(400, exc.message, param=param, code="invalid_callback_url") from None
        if self.outbox.secret(owner) is None:
            raise ServiceRequestError(
                400,
                "This key has no webhook secret to sign callbacks with; "
                "create a key with `batchgate keys create` (it prints one).",
                param=param,
                code="invalid_callback_url",
            )

    def check_metadata(self, metadata: dict[str, str] | None, owner: str) -> None:
        url = (metadata or {}).get(CALLBACK_FIELD)
        if url is not None:
            self.check_url(url, owner)

    def save_batch_end(self, b: BatchRecord, url: str | None = None) -> None:
        """Save the ended batch `b`, with its end event if `url` (a native job's `callback_url`) or
        its metadata names a callback URL."""
        registry = self.outbox.registry
        url = url or (b.metadata or {}).get(CALLBACK_FIELD)
        if url is None:
            registry.save_batch(b)
            return
        ended_at = max(b.times.values(), default=int(self.clock.wall()))
        with registry.transaction() as conn:
            registry.save_batch(b)
            self.record_end(conn, b.id, b.owner, url, b.status, ended_at)
        self.wake()

    def record_end(
        self, conn: sqlite3.Connection, object_id: str, owner: str, url: str, status: str, ended_at: int
    ) -> Event | None:
        """The end event of `object_id` (status `completed`, `failed`, `cancelled` or `expired`),
        added inside the caller's transaction; call `wake` once it committed."""
        event_type = signing.EVENT_TYPES.get(status)
        if event_type is None:
            return None
        event_id = signing.new_event_id()
        body = signing.event_body(event_id, event_type, ended_at, object_id)
        now = self.clock.wall()
        event = Event(event_id, object_id, owner, url, body, created_at=now, next_at=now)
        add(conn, event)
        return event

    def figures(self) -> DeliveryFigures:
        c = self.counts
        failed = sum(c.values()) - c["delivered"]
        return DeliveryFigures(c["delivered"], failed, self.given_up, self.outbox.pending())

    def start(self) -> None:
        """Deliver what is pending (events a stopped server left too)."""
        self._arm()

    def wake(self) -> None:
        self._arm()

    async def close(self) -> None:
        """Stop: attempts in flight are cancelled; their events stay pending for the next start."""
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._closing or len(self._inflight) >= MAX_AT_ONCE:
            return  # an attempt that ends arms it again
        at = self.outbox.next_at(self._inflight.keys(), self._full())
        if at is not None:
            self._timer = self.clock.call_at(self.clock.now() + max(0.0, at - self.clock.wall()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._closing:
            return
        room = MAX_AT_ONCE - len(self._inflight)
        due = self.outbox.due(self.clock.wall(), self._inflight.keys(), room, self._busy(), PER_OWNER_AT_ONCE)
        for event in due:
            self._inflight[event.id] = event.owner
            task = asyncio.ensure_future(self._deliver(event))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._arm()

    async def _deliver(self, event: Event) -> None:
        try:
            secret = self.outbox.secret(event.owner)
            if secret is None:
                attempt = Delivery("refused", "the owner key has no webhook secret")
            else:
                stamp = int(self.clock.wall())
                s = self.settings
                attempt = await send(
                    event.url,
                    event.id,
                    event.body,
                    secret,
                    stamp,
                    allow=s.allow,
                    timeout_s=s.timeout_s,
                    network=s.network,
                )
            self._settle(event, attempt)
        except Exception as exc:  # a bug: said in one line; the event stays pending
            log.error("callback %s: internal error: %s", event.id, type(exc).__name__)
        finally:
            self._inflight.pop(event.id, None)
            self._arm()

    def _busy(self) -> Counter[str]:
        return Counter(self._inflight.values())

    def _full(self) -> list[str]:
        """The owners with `PER_OWNER_AT_ONCE` attempts in flight: none of theirs starts now."""
        return [owner for owner, n in self._busy().items() if n >= PER_OWNER_AT_ONCE]

    def _settle(self, event: Event, attempt: Delivery) -> None:
        attempts, now = event.attempts + 1, self.clock.wall()
        self.counts[attempt.outcome] += 1
        host = URL(event.url).host  # never the path or query: they may carry the receiver's token
        if attempt.outcome == "delivered":
            self.outbox.record(event.id, "delivered", attempts, now, None)
            log.info(
                "callback %s for %s delivered to %s (attempt %d)", event.id, event.object_id, host, attempts
            )
        elif attempt.final or now - event.created_at >= self.settings.give_up_after_s:
            self.outbox.record(event.id, "failed", attempts, now, attempt.reason)
            self.given_up += 1
            log.warning("callback %s for %s not delivered: %s", event.id, event.object_id, attempt.reason)
        else:
            wait = self.settings.delay(attempts)
            self.outbox.record(event.id, "pending", attempts, now + wait, attempt.reason)
            log.info(
                "callback %s for %s: %s; retrying in %g s", event.id, event.object_id, attempt.reason, wait
            )
