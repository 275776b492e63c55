"""OTLP encoding of kept requests (render/otlp.py) with the OpenTelemetry packages, and the
sender's bounds: it never blocks, and what it cannot send is counted."""

import random
import threading
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from analysis.model.spans import Piece, Request
from analysis.render import otlp


def request(k=0):
    path = [
        Piece(0, 2_000_000, 2, "server", "user", "", 1),
        Piece(2_000_000, 2_000_010, 2, "server", "syscall", "write"),
    ]
    return Request("rtt", "", "svc", "h", 1, 1, "client", 100 + k, 2_000_110 + k, 1_000, path)


def test_encoded_as_one_trace_with_the_root_its_parent():
    msg = ExportTraceServiceRequest()
    msg.ParseFromString(otlp.encode([request()], random.Random(1)))
    rs = msg.resource_spans[0]
    res = {a.key: a.value for a in rs.resource.attributes}
    assert res["service.name"].string_value == "svc" and res["process.pid"].int_value == 1
    sp = rs.scope_spans[0].spans
    assert [s.name for s in sp] == ["round trip", "user", "write"]
    assert len({s.trace_id for s in sp}) == 1
    assert sp[0].parent_span_id == b"" and all(s.parent_span_id == sp[0].span_id for s in sp[1:])
    assert sp[0].start_time_unix_nano == 1_100 and sp[1].end_time_unix_nano == 2_001_100


def test_endpoint():
    assert otlp.endpoint("http://h:4318") == "http://h:4318/v1/traces"
    assert otlp.endpoint("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_a_receiver_that_hangs_never_blocks_put_and_drops_are_counted():
    gate = threading.Event()

    def hang(batch):
        gate.wait(10)
        return "timed out"

    s = otlp.Sender("http://127.0.0.1:9", size=4, post=hang)
    t0 = time.monotonic()
    for k in range(100):
        s.put(request(k))
    assert time.monotonic() - t0 < 1.0  # put() only queues
    gate.set()
    c = s.close(wait_s=5)
    assert c.sent == 0 and c.dropped == 100 and c.dropped_full >= 90 and c.last_error == "timed out"


def test_a_receiver_that_refuses_is_counted_and_one_that_takes_them_too():
    s = otlp.Sender("http://127.0.0.1:9", post=lambda batch: "")
    for k in range(10):
        s.put(request(k))
    assert s.close().sent == 10
    s = otlp.Sender("http://127.0.0.1:9", post=lambda batch: 1 / 0)
    s.put(request())
    c = s.close()
    assert c.dropped_failed == 1 and "ZeroDivisionError" in c.last_error


def test_a_receiver_that_is_down():
    s = otlp.Sender("http://127.0.0.1:9", timeout_s=0.5)  # nothing listens on the discard port
    s.put(request())
    c = s.close(wait_s=10)
    assert c.sent == 0 and c.dropped == 1
