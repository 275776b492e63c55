"""Kept requests' spans (model/spans.py) sent as OTLP/HTTP protobuf (`ipctrace watch --otlp
URL`), encoded and posted by the OpenTelemetry project's Python packages (opentelemetry-sdk's
ReadableSpan, opentelemetry-exporter-otlp-proto-http's exporter).

A receiver that is down or slow never holds up the tracing: put() only appends to a bounded
queue (a request that finds it full is dropped and counted), and one thread of its own takes
batches off it and posts them, each post bounded by a timeout; a batch the receiver refuses or
that times out is dropped and counted. close() gives the queue a last bounded moment."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.model.spans import Request, resource, spans

QUEUE = 2000  # requests waiting to be sent, at most
BATCH = 64  # requests a post carries, at most
TIMEOUT_S = 2.0  # one post's bound


@dataclass
class Counts:
    sent: int = 0  # requests the receiver took
    dropped_full: int = 0  # dropped: the queue was full (the receiver slower than the requests)
    dropped_failed: int = 0  # dropped: the receiver refused or did not answer in time
    last_error: str = ""

    @property
    def dropped(self) -> int:
        return self.dropped_full + self.dropped_failed


def endpoint(url: str) -> str:
    """The traces endpoint of an OTLP/HTTP receiver given by its base URL (as
    OTEL_EXPORTER_OTLP_ENDPOINT is), or the endpoint itself."""
    url = url.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def readable_spans(req: Request, rng: random.Random | None = None) -> list:
    """The request's spans as the SDK's ReadableSpan: one trace, ids random (rng for tests)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    rng = rng or random.SystemRandom()
    trace_id = rng.getrandbits(128) or 1
    res = Resource.create(resource(req))
    scope = InstrumentationScope("ipctrace.watch")
    ctxs: list[SpanContext] = []
    out = []
    for s in spans(req):
        ctx = SpanContext(
            trace_id, rng.getrandbits(64) or 1, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )
        ctxs.append(ctx)
        out.append(
            ReadableSpan(
                name=s.name,
                context=ctx,
                parent=None if s.parent is None else ctxs[s.parent],
                resource=res,
                attributes=s.attributes,
                kind=SpanKind.SERVER if s.parent is None else SpanKind.INTERNAL,
                instrumentation_scope=scope,
                start_time=s.start_ns,
                end_time=s.end_ns,
            )
        )
    return out


def encode(reqs: Sequence[Request], rng: random.Random | None = None) -> bytes:
    """The OTLP ExportTraceServiceRequest of these requests, serialized (what a post carries)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans([s for r in reqs for s in readable_spans(r, rng)]).SerializeToString()


class Sender:
    """Requests put() are sent by a thread of its own, a batch at a time; never blocks the caller."""

    def __init__(self, url: str, size: int = QUEUE, timeout_s: float = TIMEOUT_S, post: Callable | None = None):
        self.url, self.timeout_s = endpoint(url), timeout_s
        self.q: queue.Queue[Request | None] = queue.Queue(maxsize=size)
        self.counts = Counts()
        self._post = post or self._exporter_post
        self._exporter: Any = None
        self.thread = threading.Thread(target=self._run, name="ipctrace-otlp", daemon=True)
        self.thread.start()

    def put(self, req: Request) -> None:
        try:
            self.q.put_nowait(req)
        except queue.Full:
            self.counts.dropped_full += 1

    def _exporter_post(self, reqs: list[Request]) -> str:
        """ "" if the receiver took them, else why not."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self._exporter is None:
            self._exporter = OTLPSpanExporter(endpoint=self.url, timeout=self.timeout_s)
        got = self._exporter.export([s for r in reqs for s in readable_spans(r)])
        return "" if got == SpanExportResult.SUCCESS else f"{self.url} did not take them"

    def _run(self) -> None:
        done = False
        while not done:
            first = self.q.get()
            batch = [] if first is None else [first]
            done = first is None
            while len(batch) < BATCH and not done:
                try:
                    nxt = self.q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    done = True
                else:
                    batch.append(nxt)
            if not batch:
                continue
            try:
                why = self._post(batch)
            except Exception as e:  # noqa: BLE001 - a receiver's failure is counted, never raised
                why = f"{type(e).__name__}: {e}"
            if why:
                self.counts.dropped_failed += len(batch)
                self.counts.last_error = why
            else:
                self.counts.sent += len(batch)

    def close(self, wait_s: float = 5.0) -> Counts:
        """What was sent and dropped, after at most wait_s for the queue to empty; what is still
        queued then is dropped and counted."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.q.put(None, timeout=max(deadline - time.monotonic(), 0.01))
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    break
        self.thread.join(max(deadline - time.monotonic(), 0.0))
        if self.thread.is_alive():
            left = self.q.qsize()
            self.counts.dropped_full += left
        if self._exporter is not None:
            self._exporter.shutdown()
        return self.counts
