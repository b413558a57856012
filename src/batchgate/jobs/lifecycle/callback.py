"""A local run's end posted to the job's `callback_url`: OpenAI's event body (`batch.completed`,
`batch.failed`, `batch.cancelled`; `data.id` the job id) as Standard Webhooks, signed with the
`whsec_…` secret in the variable `callback_secret_env` names (unsigned when none is named), sent
through the SSRF guard (`batchgate.webhooks.guard`: the owner's loopback and private networks are
let through, link-local and cloud metadata addresses never) with redirects never followed. A few
attempts on the injected clock, then the run says it was not delivered; it never fails the run.
The server delivers its jobs' ends from its durable outbox instead (`server/callbacks`)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping

from yarl import URL

from batchgate.clock import Clock
from batchgate.config import NetworkSettings, Secret
from batchgate.config.job_spec import JobSpec
from batchgate.errors import JobSpecError
from batchgate.webhooks import guard, sender, signing

RETRY_DELAYS = (2.0, 10.0)  # seconds before the second and third attempt
TIMEOUT_S = 10.0
# A local run belongs to the machine's owner: its own loopback and private networks are allowed.
LOCAL_ALLOW = guard.AllowList(
    tuple(
        ipaddress.ip_network(n)
        for n in ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
    )
)


def callback_secret(spec: JobSpec, environ: Mapping[str, str] | None = None) -> Secret | None:
    """The secret `callback_secret_env` names (None: none named, the callback goes unsigned)."""
    if spec.callback_secret_env is None:
        return None
    value = (os.environ if environ is None else environ).get(spec.callback_secret_env, "")
    if not value.startswith(signing.SECRET_PREFIX) or len(value) <= len(signing.SECRET_PREFIX):
        raise JobSpecError(
            "callback_secret_env",
            f"${spec.callback_secret_env} must hold a whsec_… secret (`batchgate keys create` prints one)",
        )
    return Secret(value)


def event_type(exit_code: int) -> str:
    """The event of a run's end by its exit code: 0, 4 or 6 completed, 130 cancelled, else failed."""
    status = {0: "completed", 4: "completed", 6: "completed", 130: "cancelled"}.get(exit_code, "failed")
    return signing.EVENT_TYPES[status]


async def announce_end(
    spec: JobSpec,
    job_id: str,
    exit_code: int,
    clock: Clock,
    say: Callable[[str], None],
    network: NetworkSettings | None = None,
) -> str | None:
    """Post the end to `spec.callback_url` (if any), through `network`'s proxy and CAs; the last
    attempt's outcome."""
    if spec.callback_url is None:
        return None
    secret = callback_secret(spec)
    event_id = signing.new_event_id()
    body = signing.event_body(event_id, event_type(exit_code), int(clock.wall()), job_id)
    host = URL(spec.callback_url).host or "?"
    attempt = sender.Delivery("unreachable")
    for delay in (0.0, *RETRY_DELAYS):
        if delay:
            await clock.sleep(delay)
        attempt = await sender.send(
            spec.callback_url,
            event_id,
            body,
            secret,
            int(clock.wall()),
            allow=LOCAL_ALLOW,
            timeout_s=TIMEOUT_S,
            network=network,
        )
        if attempt.final:
            break
    if attempt.outcome == "delivered":
        say(f"callback: job {job_id}'s end delivered to {host}")
    else:
        say(f"callback: job {job_id}'s end not delivered to {host}: {attempt.reason}")
    return attempt.outcome
