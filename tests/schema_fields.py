"""A dataclass that reads or writes a JSON file against the file's schema (store/schema.py):
where the two disagree, at every depth (tests/unit/model/test_summary_schema.py and
tests/unit/store/test_jsonfiles.py use it)."""

import dataclasses
import types
import typing

from analysis.model import activity, breakdown, tracesummary
from analysis.store import jsonfiles, schema

TYPES = {
    "Activity": activity.Activity,
    "MetricBreakdown": breakdown.MetricBreakdown,
    "Tail": breakdown.Tail,
    "TraceSummary": tracesummary.TraceSummary,
    "Breakdown": breakdown.Breakdown,
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


def mismatches(cls, spec, at="summary.json"):
    """Where the dataclass cls and the schema spec (an Obj) disagree: a list of lines."""
    spec = _unwrap(spec)
    if not isinstance(spec, schema.Obj):
        return [f"{at}: {cls.__name__} is checked as {type(spec).__name__}, not an object of fields"]
    fields = json_fields(cls)
    out = [f"{at}.{k}: in {cls.__name__}, not in the schema" for k in fields.keys() - spec.fields.keys()]
    out += [f"{at}.{k}: in the schema, not in {cls.__name__}" for k in spec.fields.keys() - fields.keys()]
    hints = typing.get_type_hints(cls, localns=TYPES)
    for name in fields.keys() & spec.fields.keys():
        out += _inside(_strip_none(hints[fields[name]]), spec.fields[name][0], f"{at}.{name}")
    return out


def json_fields(cls):
    """{key in the file: field name} of a dataclass (a field's metadata may name its key, or
    keep it out of the file)."""
    return {f.metadata.get("key", f.name): f.name for f in dataclasses.fields(cls) if f.metadata.get("in_file", True)}


# One Stats reads a metric's entry, its iqr entry and a component's: its keys are theirs.
STATS_ENTRIES = (schema.STATS, schema.IQR, schema.COMPONENT)


def _stats_mismatches(spec, at):
    if not any(spec is e for e in STATS_ENTRIES):
        return [f"{at}: Stats checked as another object than a metric's, an iqr or a component's entry"]
    keys = json_fields(jsonfiles.Stats).keys()
    every = set().union(*(e.fields.keys() for e in STATS_ENTRIES))
    out = [f"{at}.{k}: in Stats, not in the schema's entries" for k in keys - every]
    return out + [f"{at}.{k}: in the schema, not in Stats" for k in every - keys]


def _inside(t, spec, at):
    spec = _unwrap(spec)
    if t is jsonfiles.Stats:
        return _stats_mismatches(spec, at)
    if dataclasses.is_dataclass(t):
        return mismatches(t, spec, at)
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
