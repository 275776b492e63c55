"""A dataclass that reads or writes a JSON file against the file's schema (store/schema.py):
where the two disagree, at every depth (tests/unit/store/test_summaryfile_schema.py and
tests/unit/store/test_jsonfiles.py use it)."""

import dataclasses
import types
import typing

from analysis.store import jsonfiles, schema, summaryfile

TYPES = {
    "Activity": summaryfile.Activity,
    "MetricBreakdown": summaryfile.MetricBreakdown,
    "Tail": summaryfile.Tail,
    "SummaryTrace": jsonfiles.SummaryTrace,
    "Breakdown": summaryfile.Breakdown,
    "IterationColumns": object,
    "pd": object,
}


def _strip_none(t):
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0] if len(args) == 1 else t
    return t


def _unwrap(spec):
    return spec.spec if isinstance(spec, schema.Opt) else spec


def mismatches(cls, spec, at="summary.json", only=None):
    """Where the dataclass cls and the schema spec (an Obj) disagree: a list of lines. only:
    the keys of cls the file holds (None: every one)."""
    spec = _unwrap(spec)
    if not isinstance(spec, schema.Obj):
        return [f"{at}: {cls.__name__} is checked as {type(spec).__name__}, not an object of fields"]
    fields = typed_fields(cls)
    if only is not None:
        fields = {k: v for k, v in fields.items() if k in only}
    out = [f"{at}.{k}: in {cls.__name__}, not in the schema" for k in fields.keys() - spec.fields.keys()]
    out += [f"{at}.{k}: in the schema, not in {cls.__name__}" for k in spec.fields.keys() - fields.keys()]
    for name in fields.keys() & spec.fields.keys():
        hint, keys = fields[name]
        out += _inside(_strip_none(hint), spec.fields[name][0], f"{at}.{name}", keys)
    return out


def json_fields(cls):
    """{key in the file: field name} of a dataclass (a field's metadata may name its key, or
    keep it out of the file)."""
    return {f.metadata.get("key", f.name): f.name for f in dataclasses.fields(cls) if f.metadata.get("in_file", True)}


def typed_fields(cls):
    """{key in the file: (its type, the keys of it the file holds or None)} of a dataclass. A
    field whose metadata has "flat" (summary.json's trace: SummaryTrace.file) gives the keys it
    names of its type as keys of cls's object, and its metadata may name the keys of one of
    those the file holds (SummaryTrace's drops)."""
    hints = typing.get_type_hints(cls, localns=TYPES)
    out = {}
    for f in dataclasses.fields(cls):
        if "flat" in f.metadata:
            inner = typing.get_type_hints(hints[f.name], localns=TYPES)
            out.update({k: (inner[k], f.metadata.get(k)) for k in f.metadata["flat"]})
        elif f.metadata.get("in_file", True):
            out[f.metadata.get("key", f.name)] = (hints[f.name], None)
    return out


# One Stats reads a metric's entry, its iqr entry and a component's: its keys are theirs.
STATS_ENTRIES = (schema.STATS, schema.IQR, schema.COMPONENT)


def _stats_mismatches(spec, at):
    if not any(spec is e for e in STATS_ENTRIES):
        return [f"{at}: Stats checked as another object than a metric's, an iqr or a component's entry"]
    keys = json_fields(jsonfiles.Stats).keys()
    every = set().union(*(e.fields.keys() for e in STATS_ENTRIES))
    out = [f"{at}.{k}: in Stats, not in the schema's entries" for k in keys - every]
    return out + [f"{at}.{k}: in the schema, not in Stats" for k in every - keys]


def _inside(t, spec, at, only=None):
    spec = _unwrap(spec)
    if t is jsonfiles.Stats:
        return _stats_mismatches(spec, at)
    if dataclasses.is_dataclass(t):
        return mismatches(t, spec, at, only)
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is dict and dataclasses.is_dataclass(args[1]):
        if not isinstance(spec, schema.MapOf):
            return [f"{at}: a map of {args[1].__name__} checked as {type(spec).__name__}"]
        return _inside(args[1], spec.value, f"{at}.*")
    if origin is list and dataclasses.is_dataclass(args[0]):
        if not isinstance(spec, schema.ListOf):
            return [f"{at}: a list of {args[0].__name__} checked as {type(spec).__name__}"]
        return _inside(args[0], spec.item, f"{at}[]")
    return []
