"""summary.json's schema (store/schema.py, what a reader checks) against the dataclasses that
write it (store/summaryfile.py): every field of a type is a field of its
object in the schema and the other way round, at every depth, so neither can gain a key that
the other does not know."""

import dataclasses

from schema_fields import mismatches

from analysis.store import schema
from analysis.store import summaryfile as summary


def test_the_schema_knows_every_field_of_the_summary_and_no_other():
    assert mismatches(summary.RunSummary, schema.SUMMARY) == []


def test_the_check_sees_a_field_the_schema_does_not_know():
    @dataclasses.dataclass
    class Inner:
        a: int
        b: int

    @dataclasses.dataclass
    class Outer:
        x: int
        inner: dict[str, Inner] | None

    spec = schema.Obj(
        {"x": schema.INT, "y?": schema.INT, "inner?": schema.Opt(schema.MapOf(schema.Obj({"a": schema.INT})))}
    )
    assert sorted(mismatches(Outer, spec)) == [
        "summary.json.inner.*.b: in Inner, not in the schema",
        "summary.json.y: in the schema, not in Outer",
    ]


def test_a_sweeps_summary_has_the_fields_the_schema_knows():
    """A sweep's summary.json is checked against SUMMARY and SWEEP: SweepSummary writes every
    field of SWEEP, and none that neither knows."""
    fields = {f.name for f in dataclasses.fields(summary.SweepSummary)}
    assert schema.SWEEP.fields.keys() <= fields
    assert fields <= schema.SWEEP.fields.keys() | schema.SUMMARY.fields.keys()
    # the fit and each size's figures, field by field
    assert mismatches(summary.CopyFit, schema.SWEEP.fields["copy"][0], "summary.json.copy") == []
    per_size = schema.SWEEP.fields["per_size"][0].value
    assert mismatches(summary.SweepSize, per_size, "summary.json.per_size.*") == []
