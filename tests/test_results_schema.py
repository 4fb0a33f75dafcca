"""The one column spec of the results table (results/schema.py) and what is generated from
it: results.csv's columns, analysis' parameters and old-run defaults, the service's table."""

from __future__ import annotations

import dataclasses

import pandas as pd

from k8sdds.model import Test
from k8sdds.results import schema
from k8sdds.results.table import COLUMNS, EXTRA_COLUMNS, HEADER


def _test(**kw) -> Test:
    return Test(row=3, line=5, data_len=1024, multicast=False, num_subscribers=1,
                best_effort=False, batch_size=0, datapath="host", number=1, **kw)


def test_every_parameter_a_test_records_is_a_column_or_said_why_not():
    recorded = set(_test().params()) | {"path", "row"}
    columns = {c.name for c in schema.SPEC if c.source == "test"}
    assert recorded - set(schema.NOT_COLUMNS) == columns
    assert set(schema.test_values(_test())) == columns


def test_a_field_added_to_test_without_a_column_fails_here():
    """What the test above does for a field added tomorrow: it shows up as missing."""
    grown = dataclasses.make_dataclass("Grown", [("qos_depth", int, dataclasses.field(
        default=7))], bases=(Test,), frozen=True)
    t = grown(row=0, line=2, data_len=64, multicast=False, num_subscribers=1,
              best_effort=False, batch_size=0, datapath="host")
    assert "qos_depth" in set(t.params()) - {c.name for c in schema.SPEC}


def test_the_csv_columns_keep_their_published_order():
    assert COLUMNS[:4] == ["run_id", "test", "repeat", "backend"] and COLUMNS[-1] == "unit"
    assert EXTRA_COLUMNS[0] == "row"
    # a column added later goes after the last one: those of a published table keep their place
    assert EXTRA_COLUMNS[EXTRA_COLUMNS.index("arch"):] == ["arch", "topology", "mqtt_qos"]
    assert HEADER.split(",") == schema.NAMES


def test_an_old_runs_table_gets_every_column_with_its_old_value():
    from k8sdds.analysis.load import PARAMS, typed

    old = pd.DataFrame([{c: v for c, v in zip(COLUMNS, [
        "r", 1, 1, "emulated", "host", "node-node", "ddsperf", "udp", 64, "false", 1, "false",
        0, "true", "sub0", "node1", "summary", 0.0, "throughput_mbps", 1.0, "Mb/s"],
        strict=True)}])
    df = typed(old)
    assert set(schema.NAMES) <= set(df.columns) and set(PARAMS) <= set(df.columns)
    assert df["secure"].tolist() == [False] and df["streams"].tolist() == [1]
    assert df["placement"].tolist() == ["cross-node"] and df["latency_test"].tolist() == [True]


def test_the_services_typed_columns_are_typed_as_the_schema_says():
    from sqlalchemy import Float, Integer, String

    from k8sdds.serve.schema import TYPED, results

    sql = {str: String, int: Integer, float: Float}
    assert set(TYPED) <= set(schema.NAMES)
    for name in TYPED:
        assert isinstance(results.c[name].type, sql[schema.BY_NAME[name].type]), name
