"""The run directory and everything in it: one owner for its format (manifest, repeat keys,
results table, atomic writes, schema versions)."""

from k8sdds.results.files import atomic_write, sha256
from k8sdds.results.manifest import (
    SCHEMA_VERSION,
    ManifestError,
    RepeatEntry,
    RepeatKey,
    RunManifest,
    decode_test,
    encode_test,
    now,
)
from k8sdds.results.rundir import MANIFEST, RESULTS, SCHEDULE, SECRETS, RunDir, new_run_id
from k8sdds.results.table import COLUMNS, EXTRA_COLUMNS, rows_to_csv

__all__ = ["COLUMNS", "EXTRA_COLUMNS", "MANIFEST", "RESULTS", "SCHEDULE", "SCHEMA_VERSION",
           "SECRETS", "RunManifest", "ManifestError", "RepeatEntry", "RepeatKey", "RunDir",
           "atomic_write", "new_run_id", "now", "rows_to_csv", "sha256", "decode_test",
           "encode_test"]
