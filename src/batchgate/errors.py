"""The one error hierarchy of batchgate, classified by type, never by message text.

    BatchgateError
    ├── ConfigError              a config file is wrong (file, key, reason)
    ├── JobSpecError             a job option is wrong (field, reason): each front door words it
    ├── InputError               an input line is wrong (file, line, reason)
    ├── RoutingError             a request names no known route / no usable target
    │   └── NoTargetLeft         every target of its route was taken out (key refused, unreachable)
    │       └── RouteStopped         ... every one for a refused key: that route's items fail, others go on
    ├── InvalidRequestError      a request body `batchgate run` would refuse (a field's type); not sent
    ├── NeverFitsError           a request costs more than a provider's whole per-minute quota
    ├── DispatchStopped          the gateway stopped sending (a job is stopping); nothing was sent
    ├── QuotaStoreUnavailable    the shared quota store (Redis, the machine's ledger) cannot be reached
    ├── InternalError            an unexpected exception (a bug) while handling one request
    ├── ProviderError            anything that went wrong talking to a provider
    │   ├── TransportError       no usable HTTP answer: retryable
    │   │   ├── ConnectError         the connection broke before the answer (reset)
    │   │   │   └── UnreachableError     connection refused or DNS failure: nothing was sent
    │   │   ├── TLSError             the TLS handshake failed (a certificate not trusted): nothing sent
    │   │   ├── RequestTimeout       connect or total timeout elapsed (a hang)
    │   │   └── MalformedResponse    a 2xx whose body is truncated, not JSON, or lacks usage
    │   │       └── UnusableAnswer       an answer no retry can read: tried at most twice
    │   │           ├── AnswerTooLarge       its head or body (decompressed) past the client's bound
    │   │           └── GarbledHead          its status line or a header line is not HTTP/1.x
    │   └── HTTPStatusError      the provider answered with an error status
    │       ├── RateLimitError       429 (retryable, feeds AIMD)
    │       ├── OverloadedError      529 (retryable)
    │       ├── ServerError          5xx (retryable)
    │       ├── RetryableStatusError 408, 409 (retryable)
    │       ├── AuthenticationError  401, 403 (never retried)
    │       ├── BadRequestError      other 4xx (never retried)
    │       │   └── ModelRefusedError    403/404 `model_not_found`: the key may not use that model
    │       └── QuotaExhaustedError  insufficient_quota / spend limit (never retried; stops a job)
    ├── StoreError               the job store is unusable (locked, corrupted, foreign)
    ├── ServiceRequestError      a client's request to `batchgate serve` is refused (status, type, code)
    └── JobError                 a job cannot start or must stop
        ├── JobLockedError       another run holds the job
        ├── LeaseLostError       a worker's chunk lease expired or was taken: its commit is refused
        └── InputChangedError    the input changed under an existing job

A job that reaches its budget or error-rate threshold is not an error: it stops, with the reason
recorded (`jobs/guards.py`), and a later run resumes it.

Every class's docstring doubles as its default message. Errors never carry API keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class BatchgateError(Exception):
    """batchgate failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__class__.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def kind(self) -> str:
        """A stable, short name of the error class for reports ("rate_limit", "timeout", ...)."""
        return _KIND.get(type(self), type(self).__name__)


class ConfigError(BatchgateError):
    """The configuration is invalid."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        self.file, self.key, self.reason = file, key, reason
        where = f"{file}: {key}" if key else file
        super().__init__(f"{where}: {reason}")


class JobSpecError(BatchgateError):
    """A job option is invalid."""

    def __init__(self, field: str, reason: str, status: int = 400) -> None:
        self.field, self.reason = field, reason
        self.status = status  # 400: a wrong type or shape; 422: a well-formed value that cannot be used
        super().__init__(f"{field}: {reason}")


class InputError(BatchgateError):
    """An input line is invalid. `problems`: the first bad lines as `(line, reason)`, when the
    error is about many."""

    def __init__(
        self, file: str, line: int | None, reason: str, *, problems: Sequence[tuple[int, str]] = ()
    ) -> None:
        self.file, self.line, self.reason = file, line, reason
        self.problems = list(problems)
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {reason}")


class RoutingError(BatchgateError):
    """The request's model names no configured route."""


class NoTargetLeft(RoutingError):
    """Every target of the request's route was taken out (its key refused, or it cannot be
    reached): nothing more can be sent for it in this run, and the job stops."""

    route_only = False  # True: only that route stops, the job goes on (`RouteStopped`)


class RouteStopped(NoTargetLeft):
    """Every target of the request's route refused its API key: that route is stopped for this
    run — its items fail (the reason recorded; they run again once the key is fixed) — while the
    job's other routes go on."""

    route_only = True


class InvalidRequestError(BatchgateError):
    """The request body is invalid (checked as `batchgate run` checks an input line); it was not sent."""


class NeverFitsError(BatchgateError):
    """The request costs more than the provider's whole per-minute quota and can never be admitted."""


class DispatchStopped(BatchgateError):
    """The gateway stopped sending requests (the job is stopping); this one was not sent."""


class QuotaStoreUnavailable(BatchgateError):
    """The shared quota store cannot be reached: nothing more is sent (never a per-process limit)."""


class InternalError(BatchgateError):
    """An unexpected error while handling this request; it fails alone, the batch goes on."""

    @classmethod
    def of(cls, exc: Exception) -> InternalError:
        """Name the unexpected exception (its type, and its text cut short) without raising it."""
        lines = str(exc).splitlines()
        text = f": {lines[0][:200]}" if lines else ""
        return cls(f"internal error: {type(exc).__name__}{text}")


class ProviderError(BatchgateError):
    """A provider call failed."""

    def __init__(
        self,
        message: str | None = None,
        *,
        provider: str = "",
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self.headers: Mapping[str, str] = headers or {}
        self.body = body
        super().__init__(message)


class TransportError(ProviderError):
    """No usable HTTP answer from the provider."""


class ConnectError(TransportError):
    """Could not connect to the provider, or the connection broke before the answer."""


class UnreachableError(ConnectError):
    """Could not reach the provider (connection refused, DNS failure): nothing was sent.

    `cause` says which, for people: "connection refused", "DNS failure" or "unreachable"
    (chosen from the type of the underlying exception where the error is made)."""

    def __init__(self, message: str | None = None, *, provider: str = "", cause: str = "unreachable") -> None:
        super().__init__(message, provider=provider)
        self.cause = cause


class TLSError(TransportError):
    """The TLS handshake with the provider failed (its certificate not trusted, or no common
    protocol): nothing was sent, and no retry can succeed until the trust store changes.

    `cause` names the problem and the host, for people (the ssl module's verify message, e.g.
    "CERTIFICATE_VERIFY_FAILED: self-signed certificate in certificate chain (api.corp:443)").
    Never counted as "unreachable": the server answered, batchgate refused to trust it."""

    def __init__(self, message: str | None = None, *, provider: str = "", cause: str = "TLS failure") -> None:
        super().__init__(message, provider=provider)
        self.cause = cause


class RequestTimeout(TransportError):
    """The provider did not answer in time."""


class MalformedResponse(TransportError):
    """The provider answered 2xx with a body that is truncated, not JSON, or lacks usage."""


class UnusableAnswer(MalformedResponse):
    """The provider's answer can never be read as it is sent, so trying again would only pay for
    it again: a request is tried at most twice for it (`batchgate.policy.retry`)."""


class AnswerTooLarge(UnusableAnswer):
    """The answer's head or body (once decompressed) is past the client's bound."""


class GarbledHead(UnusableAnswer):
    """The answer's status line or a header line is not HTTP/1.x."""


class HTTPStatusError(ProviderError):
    """The provider answered with an error status."""


class RateLimitError(HTTPStatusError):
    """The provider rejected the request with 429 (rate limited)."""


class OverloadedError(HTTPStatusError):
    """The provider is overloaded (529)."""


class ServerError(HTTPStatusError):
    """The provider failed with a 5xx status."""


class RetryableStatusError(HTTPStatusError):
    """The provider answered 408 or 409, which is worth retrying."""


class AuthenticationError(HTTPStatusError):
    """The provider refused the API key (401/403)."""


class BadRequestError(HTTPStatusError):
    """The provider refused the request as invalid (4xx)."""


class ModelRefusedError(BadRequestError):
    """The provider's key may not use the request's model (403 or 404 `model_not_found`; Azure's
    404 `DeploymentNotFound`): that (provider, model) target is out, the provider's other models
    are not (`policy.takeout`)."""


class QuotaExhaustedError(HTTPStatusError):
    """The account's quota or spend limit is exhausted; retrying cannot help."""


class StoreError(BatchgateError):
    """The job store is unusable."""


class ServiceRequestError(BatchgateError):
    """The request was refused."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        self.status, self.type, self.code, self.param = status, type, code, param
        super().__init__(message)


class JobError(BatchgateError):
    """The job cannot continue."""


class JobLockedError(JobError):
    """Another batchgate run holds this job."""


class LeaseLostError(JobError):
    """The lease on this chunk expired or was taken over; nothing was written (fencing)."""


class InputChangedError(JobError):
    """The input file changed under an existing job."""


_KIND: dict[type[BaseException], str] = {
    ConnectError: "connect",
    UnreachableError: "unreachable",
    TLSError: "tls",
    RequestTimeout: "timeout",
    MalformedResponse: "malformed_response",
    UnusableAnswer: "unusable_answer",
    AnswerTooLarge: "too_large",
    GarbledHead: "garbled_head",
    RateLimitError: "rate_limit",
    OverloadedError: "overloaded",
    ServerError: "server_error",
    RetryableStatusError: "retryable_status",
    AuthenticationError: "authentication",
    BadRequestError: "bad_request",
    ModelRefusedError: "model_refused",
    QuotaExhaustedError: "quota_exhausted",
    NeverFitsError: "never_fits",
    DispatchStopped: "stopped",
    QuotaStoreUnavailable: "quota_store",
    InternalError: "internal_error",
    RoutingError: "routing",
    InvalidRequestError: "invalid_request",
    NoTargetLeft: "no_target",
    RouteStopped: "route_stopped",
}


class UnsupportedField(ConfigError):
    """A request field the target kind cannot carry: refused, never dropped (issue 41)."""

    def __init__(self, field: str, target_kind: str, reason: str, file: str = "<request>") -> None:
        self.field, self.target_kind = field, target_kind
        super().__init__(file, field, f"cannot be sent to a {target_kind} target: {reason}")
