"""The typed readers of a results directory's JSON files (store/jsonfiles.py) against the files'
schemas (store/schema.py): every field the schema knows is a field of its type and the other way
round, at every depth; and each type reads what the writers write."""

import dataclasses
import json

import pytest
from schema_fields import mismatches

from analysis.errors import UsageError
from analysis.store import jsonfiles, schema
from analysis.store.host import host_info

TYPES = [
    (jsonfiles.Workload, schema.WORKLOAD, "workload.json"),
    (jsonfiles.TraceFile, schema.TRACE, "trace.json"),
    (jsonfiles.Meta, schema.META, "meta.json"),
    (jsonfiles.Samples, schema.SAMPLES, "samples.json"),
    (jsonfiles.SampledStack, schema.OFFCPU_STACK, "samples.json.offcpu[]"),
    (jsonfiles.SuiteFacts, schema.SUITE, "suite.json"),
    (jsonfiles.SuiteRow, schema.SUITE_ROW, "suite.json.rows[]"),
    (jsonfiles.Host, schema.HOST, "summary.json.host"),
    (jsonfiles.Thread, schema.THREAD, "workload.json.threads[]"),
    (jsonfiles.Task, schema.TASKS.value, "trace.json.tasks.*"),
    (jsonfiles.MergeFile, schema.MERGE, "merge.json"),
    (jsonfiles.PartStats, schema.PART_STATS, "merge.json.parts.*"),
]


@pytest.mark.parametrize(("cls", "spec", "at"), TYPES, ids=[t[2] for t in TYPES])
def test_each_type_has_the_fields_of_its_schema_and_no_other(cls, spec, at):
    if cls is jsonfiles.SuiteFacts:
        # suite.json: the facts and the rows beside them (SuiteFile)
        spec = schema.Obj({k + ("?" if opt else ""): s for k, (s, opt) in spec.fields.items() if k != "rows"})
    assert mismatches(cls, spec, at) == []


def test_the_check_sees_a_field_a_type_lacks():
    spec = schema.Obj({**{k + "?": s for k, (s, _) in schema.META.fields.items()}, "pid?": schema.INT})
    assert mismatches(jsonfiles.Meta, spec, "meta.json") == ["meta.json.pid: in the schema, not in Meta"]


def test_the_samplers_file_reads_typed():
    """samples.json as loaders/sample.c writes it: its maps by pid, stacks as tuples, the
    off-CPU entries with their ns; a key the schema does not know (stats) left out."""
    entry = {"pid": 10, "tid": 11, "comm": "ipcbench", "lost": False, "kstack": [18446744071578846736], "ustack": []}
    d = {
        "hz": 999,
        "event": "cpu-clock",
        "boot_id": "b",
        "stats": {"samples": 3},
        "maps": {"10": [{"start": 4096, "end": 8192, "offset": 0, "path": "/bin/x"}]},
        "oncpu": [{**entry, "count": 3}],
        "offcpu": [{**entry, "count": 2, "ns": 900, "blocked": True}],
    }
    schema.check(d, schema.SAMPLES, "samples.json")
    s = jsonfiles.Samples.from_json(d)
    assert s.maps == {10: [jsonfiles.Mapped(4096, 8192, 0, "/bin/x")]}
    assert s.oncpu[0].kstack == (18446744071578846736,) and s.oncpu[0].ns is None and s.oncpu[0].count == 3
    assert (s.offcpu[0].ns, s.offcpu[0].blocked, s.hz, s.boot_id) == (900, True, 999, "b")
    with pytest.raises(Exception, match="offcpu"):
        schema.check({"offcpu": [{**entry, "count": 2}]}, schema.SAMPLES, "samples.json")


def test_a_trace_file_reads_its_drops_and_tasks_typed():
    d = {"drops": {"total": 2, "lost_spans": [[10, 20, 2]]}, "tasks": {"7": {"comm": "hog"}, "8": None}}
    schema.check(d, schema.TRACE, "trace.json")
    t = jsonfiles.TraceFile.from_json(d)
    assert t.drops == jsonfiles.Drops(total=2, lost_spans=[[10, 20, 2]])
    assert t.tasks == {7: jsonfiles.Task(comm="hog"), 8: None}  # 8: seen, not named
    assert t.to_json()["tasks"] == d["tasks"]
    assert t.tracer.tids == [] and t.attach == {}


def test_a_trace_file_is_written_back_as_read():
    """A trace.json read and written again is the same text: the keys a writer left out (the
    synthetic run's tracer has only tids, no steal) stay out, a null steal figure stays null,
    the tasks keep their order."""
    from analysis.store import synthetic

    d = synthetic.trace_json(3)
    d["steal"] = {"source": "none: no steal", "per_cpu_ns": None, "total_ns": None, "user_hz": 100}
    d["tasks"] = {"9": {"comm": "b", "pid": 9}, "10": {"comm": "a"}}
    schema.check(d, schema.TRACE, "trace.json")
    t = jsonfiles.TraceFile.from_json(d)
    assert json.dumps(t.to_json()) == json.dumps(d)
    assert t.steal.per_cpu_ns is None and t.steal.user_hz == 100 and t.tracer == jsonfiles.Tracer()
    assert list(t.tasks) == [9, 10] and t.comm(10) == "a" and t.tasks[10].pid is None and t.comm(11) is None


def test_a_trace_files_features_and_marks_read_typed_and_write_back_as_read():
    """features and marks as loaders/features.c and loaders/marks.c write them: typed records
    (a feature by its name beside possible and why_impossible; the marks' names by address,
    sites, calibration), written back key for key in the file's order."""
    d = {
        "drops": {"total": 0},
        "features": {
            "btf": {"ok": True, "detail": "vmlinux"},
            "ringbuf": {"ok": False, "detail": "old kernel"},
            "possible": True,
            "why_impossible": "",
        },
        "marks": {
            "names": {"4096": "get", "8192": "set"},
            "probes": ["prog:begin"],
            "sites": [{"kind": "usdt", "target": "prog", "bytes": ["0f1f44"]}],
            "calibration": {"binary": "ipcbench", "probes": ["ipcbench:mark"], "error": None},
            "count": 12,
        },
    }
    schema.check(d, schema.TRACE, "trace.json")
    t = jsonfiles.TraceFile.from_json(d)
    assert t.features.checks["ringbuf"] == jsonfiles.Feature(ok=False, detail="old kernel") and t.features.possible
    assert t.marks is not None and t.marks.names == {4096: "get", 8192: "set"} and t.marks.count == 12
    assert t.marks.sites == [jsonfiles.MarkSite(kind="usdt", target="prog", bytes=["0f1f44"])]
    assert t.marks.calibration == jsonfiles.MarkCalibration(binary="ipcbench", probes=["ipcbench:mark"])
    assert json.dumps(t.to_json()) == json.dumps(d)
    assert jsonfiles.TraceFile.from_json({"marks": None}).to_json() == {"marks": None}
    with pytest.raises(UsageError, match="features.btf"):
        schema.check({"drops": {"total": 0}, "features": {"btf": True}}, schema.TRACE, "trace.json")


def test_a_summarys_trace_is_written_back_as_read():
    """summary.json's trace (SummaryTrace): every key in the order the analysis writes them,
    trace.json's records as the tracer wrote them; read and written again, the same text."""
    from analysis.store import synthetic

    tj = synthetic.trace_json(3)
    s = jsonfiles.SummaryTrace(file=jsonfiles.TraceFile.from_json(tj), records=5, partial=False)
    d = s.to_json()
    assert list(d) == list(jsonfiles.SUMMARY_TRACE_KEYS)
    assert d["tracer"] == {"tids": []} and d["left_trace"] == {} and d["drops"] == {"total": 0, "per_cpu": [0, 0]}
    schema.check(d, schema.TRACE_SUMMARY, "summary.json")
    again = jsonfiles.SummaryTrace.from_json(json.loads(json.dumps(d)))
    assert (again.file.tasks, again.records, again.drops) == (s.file.tasks, 5, s.drops)
    assert json.dumps(again.to_json()) == json.dumps(d)


def test_the_host_writes_as_read():
    """summary.json's host is written from Host field by field (model.summary._plain): read back
    it is the same Host, its facts in the file's order without the unknown ones."""
    h = host_info()
    assert jsonfiles.Host.from_json(dataclasses.asdict(h)) == h
    assert [k for k, _ in jsonfiles.Host(kernel="6.1", cores=2, cpu_model="").facts()] == ["kernel", "cores"]


def test_a_suite_file_reads_its_facts_and_rows():
    d = {
        "started": "now",
        "host": {"kernel": "6.18"},
        "runs": 2,
        "rows": [{"experiment": "pipe", "metric": "rtt", "mean_ns": 8000.0}],
    }
    schema.check(d, schema.SUITE, "suite.json")
    s = jsonfiles.SuiteFile.from_json(d)
    assert s.facts.host.kernel == "6.18" and s.facts.runs == 2 and s.facts.traced is None
    assert s.rows == [jsonfiles.SuiteRow(experiment="pipe", metric="rtt", mean_ns=8000.0)]
    # run/suite.py writes the facts (to_json) before the rows: read back, the same facts
    assert jsonfiles.SuiteFile.from_json({**s.facts.to_json(), "rows": d["rows"]}).facts == s.facts


@pytest.mark.parametrize(
    ("d", "only_uid", "count", "pids"),
    [
        ({}, None, 0, []),  # before --only-uid, or without it
        ({"only_uid": None, "left_trace": {"count": 0, "tasks": []}}, None, 0, []),
        (
            {
                "only_uid": {"uid": 1000, "calls": {"setuid": 105, "capset": 126}},
                "left_trace": {
                    "count": 2,
                    "tasks": [
                        {"pid": 7, "tid": 7, "comm": "mount", "why": "setuid exec", "ts": 10},
                        {"pid": 8, "tid": 9, "comm": "setpriv", "why": "credential change", "ts": 20},
                    ],
                },
            },
            1000,
            2,
            [7, 8],
        ),
    ],
)
def test_trace_json_reads_the_tasks_that_left_the_trace(d, only_uid, count, pids):
    """trace.json's --only-uid fields as loaders/tracejson.c writes them, checked and typed."""
    full = {"drops": {"total": 0}, **d}
    schema.check(full, schema.TRACE, "trace.json")
    t = jsonfiles.TraceFile.from_json(full)
    assert (t.only_uid.uid if t.only_uid else None) == only_uid
    assert t.left_trace.count == count and [x.pid for x in t.left_trace.tasks] == pids
    if count:
        assert t.only_uid is not None and t.only_uid.calls["capset"] == 126
        assert t.left_trace.tasks[1] == jsonfiles.LeftTask(8, 9, "setpriv", "credential change", 20)
    with pytest.raises(Exception, match="left_trace"):
        schema.check({**full, "left_trace": {"tasks": [{"comm": "x"}]}}, schema.TRACE, "trace.json")
