"""The config's `tracing:` key: whether `batchgate run` and `serve` export OpenTelemetry traces.

    tracing: true                      # or a mapping:
    tracing: {enabled: true, service_name: batchgate-eu}

Where spans go is the standard OpenTelemetry environment's (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, ...),
read by the exporter itself; `--trace` turns tracing on as `tracing: true` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.config.section import Section, type_name

_TRACING = frozenset({"enabled", "service_name"})


@dataclass(frozen=True, slots=True)
class TracingSettings:
    enabled: bool = False
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "batchgate"


def read_tracing(top: Section) -> TracingSettings:
    raw = top.raw("tracing")
    if raw is None:
        return TracingSettings()
    if isinstance(raw, bool):
        return TracingSettings(enabled=raw)
    t = top.section("tracing", _TRACING)
    enabled = t.raw("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        t.fail("enabled", f"must be true or false, got {type_name(enabled)}")
    return TracingSettings(enabled=enabled is not False, service_name=t.string("service_name"))
