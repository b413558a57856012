"""Tracing on for one process: the SDK's tracer provider (resource `service.name`), its span
processor and exporter — OTLP over HTTP/protobuf, configured by the standard `OTEL_EXPORTER_OTLP_*`
variables, which the exporter reads itself — and the tracer installed in `batchgate.trace_hooks`.

The batch processor's queue and export sizes stay at the SDK's defaults unless `OTEL_BSP_*` set
them; `tracing_on` is a context manager whose end flushes and shuts down what it started.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from batchgate import trace_hooks
from batchgate.config import GatewayConfig
from batchgate.jobs.pricing import PriceTable
from batchgate.observe.tracing.spans import SCOPE, OtelTracer


def provider_for(
    service_name: str | None, exporter: SpanExporter | None = None
) -> tuple[TracerProvider, SpanProcessor]:
    """A tracer provider exporting by OTLP/HTTP (or to `exporter`, synchronously: tests), and its
    span processor (request spans go to it directly: `request_span`)."""
    attributes = {}
    if service_name is not None or not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name or "batchgate"
    provider = TracerProvider(resource=Resource.create(attributes))
    processor: SpanProcessor = (
        BatchSpanProcessor(OTLPSpanExporter()) if exporter is None else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    return provider, processor


@contextlib.contextmanager
def tracing_on(
    config: GatewayConfig | None = None, exporter: SpanExporter | None = None
) -> Iterator[OtelTracer]:
    """Requests, jobs and batches traced while the block runs (their costs priced by `config`'s
    price table); at its end the spans left are exported and tracing is off again."""
    settings = config.tracing if config is not None else None
    provider, processor = provider_for(settings.service_name if settings is not None else None, exporter)
    prices = PriceTable(config.prices) if config is not None else None
    tracer = OtelTracer(provider.get_tracer(SCOPE), processor, provider.resource, prices)
    previous = trace_hooks.install(tracer)
    try:
        yield tracer
    finally:
        trace_hooks.install(previous)
        provider.shutdown()  # flushes the batch processor's queue
