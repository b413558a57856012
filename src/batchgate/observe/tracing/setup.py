"""Tracing on for one process: the SDK's tracer provider (resource `service.name`), its span
processor and exporter — OTLP over HTTP/protobuf, configured by the standard `OTEL_EXPORTER_OTLP_*`
variables, which the exporter reads itself — and the tracer installed in `batchgate.trace_hooks`.

The batch processor's queue and export sizes stay at the SDK's defaults unless `OTEL_BSP_*` set
them; `tracing_on` is a context manager whose end exports the spans left, waiting at most
`FLUSH_S` for a collector that does not answer (the exporter's retries end there, its failure one
log line; its retry warnings are not shown: one per try).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from batchgate import trace_hooks
from batchgate.config import GatewayConfig
from batchgate.jobs.pricing import PriceTable
from batchgate.observe.tracing.spans import SCOPE, OtelTracer

FLUSH_S = 3.0
_EXPORTER_LOG = "opentelemetry.exporter.otlp.proto.http"


class _Otlp(OTLPSpanExporter):
    """The OTLP/HTTP exporter, counting the spans it could not export; its shutdown may be called
    early (to end its retries) and again."""

    unexported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.unexported += len(spans)
        return result

    def shutdown(self) -> None:
        if not self._shutdown:
            super().shutdown()  # type: ignore[no-untyped-call]


def provider_for(
    service_name: str | None, exporter: SpanExporter | None = None
) -> tuple[TracerProvider, SpanProcessor, SpanExporter]:
    """A tracer provider exporting by OTLP/HTTP in batches (or to `exporter`, synchronously:
    tests), its span processor (request spans go to it directly: `request_span`) and exporter."""
    attributes = {}
    if service_name is not None or not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name or "batchgate"
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)  # `_close`
    processor: SpanProcessor
    if exporter is None:
        logging.getLogger(_EXPORTER_LOG).setLevel(logging.ERROR)
        exporter = _Otlp()
        processor = BatchSpanProcessor(exporter)
    else:
        processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider, processor, exporter


@contextlib.contextmanager
def tracing_on(
    config: GatewayConfig | None = None, exporter: SpanExporter | None = None
) -> Iterator[OtelTracer]:
    """Requests, jobs and batches traced while the block runs (their costs priced by `config`'s
    price table); at its end the spans left are exported and tracing is off again."""
    settings = config.tracing if config is not None else None
    service = settings.service_name if settings is not None else None
    provider, processor, exporter = provider_for(service, exporter)
    prices = PriceTable(config.prices) if config is not None else None
    tracer = OtelTracer(provider.get_tracer(SCOPE), processor, provider.resource, prices)
    previous = trace_hooks.install(tracer)
    try:
        yield tracer
    finally:
        trace_hooks.install(previous)
        _close(provider, exporter)
        tracer.unexported = exporter.unexported if isinstance(exporter, _Otlp) else 0


def _close(provider: TracerProvider, exporter: SpanExporter) -> None:
    """Export what is left and stop, waiting at most `FLUSH_S` for the collector: past it the
    exporter's retries end (the SDK's flush runs the last export in the caller's thread, bounded
    only by the exporter's own timeout, 10 s by default)."""
    closing = threading.Thread(target=provider.shutdown, name="batchgate-trace-close", daemon=True)
    closing.start()
    closing.join(FLUSH_S)
    if closing.is_alive():
        exporter.shutdown()  # wakes the retry's wait: the export gives up
        closing.join(FLUSH_S)
