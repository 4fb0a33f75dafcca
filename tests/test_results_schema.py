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


def _uncovered(test: Test) -> set[str]:
    """What `test` records that is neither a column of the spec nor said why not."""
    recorded = set(test.params()) | {"path", "row"}
    return recorded - set(schema.NOT_COLUMNS) - {c.name for c in schema.SPEC
                                                 if c.source == "test"}


def test_every_parameter_a_test_records_is_a_column_or_said_why_not():
    assert _uncovered(_test()) == set()
    columns = {c.name for c in schema.SPEC if c.source == "test"}
    assert set(schema.test_values(_test())) == columns


def test_a_field_added_to_test_without_a_column_fails_here():
    """The check above, on a Test grown by a field tomorrow: it names the field."""
    grown = dataclasses.make_dataclass("Grown", [("qos_depth", int, dataclasses.field(
        default=7))], bases=(Test,), frozen=True)
    t = grown(row=0, line=2, data_len=64, multicast=False, num_subscribers=1,
              best_effort=False, batch_size=0, datapath="host")
    assert _uncovered(t) == {"qos_depth"}


def test_the_csv_columns_keep_their_published_order():
    assert COLUMNS[:4] == ["run_id", "test", "repeat", "backend"] and COLUMNS[-1] == "unit"
    assert EXTRA_COLUMNS[0] == "row"
    # a column added later goes after the last one: those of a published table keep their place
    assert EXTRA_COLUMNS[EXTRA_COLUMNS.index("arch"):] == ["arch", "topology", "mqtt_qos",
                                                          "definition", "load", "load_len"]
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
    """The service's results table types the columns it filters and sorts on: written out
    here, as a database client would see them."""
    from sqlalchemy import Float, Integer, String

    from k8sdds.serve.schema import results

    expected = {"test": Integer, "repeat": Integer, "data_len": Integer, "value": Float,
                "datapath": String, "engine": String, "transport": String, "role": String,
                "kind": String, "metric": String, "unit": String}
    for name, kind in expected.items():
        assert isinstance(results.c[name].type, kind), name
    assert results.c["datapath"].index and results.c["metric"].index
