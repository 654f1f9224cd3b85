"""What Sluice's Delta connectors read and write of a table's protocol (reader and writer features,
Delta's PROTOCOL.md): the source refuses, before the job starts, a table it would read wrong."""
from __future__ import annotations

from typing import Optional

from runtime.storage.delta_log import Protocol

# Reader features Sluice's Delta source reads right. typeWidening: a widened column (int to long,
# float to double, a larger decimal, date to timestamp_ntz) reads by casting the file's narrower
# values to the table's type, which is exact.
READ_FEATURES = frozenset({"deletionVectors", "columnMapping", "v2Checkpoint", "timestampNtz",
                           "vacuumProtocolCheck", "typeWidening", "typeWidening-preview"})


def check_reader_protocol(protocol: Protocol, table_path: str, what: str = "Delta source") -> None:
    """Fail naming the table, the feature and the fix when reading a table of ``protocol`` needs a
    reader feature Sluice does not implement (reader version 1 needs none, 2 is column mapping,
    3 lists them)."""
    version = protocol.min_reader_version
    if version > 3:
        missing = [f"reader version {version}"]
    else:
        missing = sorted(set(protocol.reader_features) - READ_FEATURES)
    if missing:
        raise NotImplementedError(
            f"{what}: the Delta table {table_path} needs reader feature(s) {missing} that Sluice's "
            f"DeltaSource does not read (it reads {sorted(READ_FEATURES - {'typeWidening-preview'})}). "
            "Read it with Spark (spark.read.format(\"delta\")) into a table without the feature, or "
            "turn the feature off on the table if Delta allows it (ALTER TABLE ... DROP FEATURE ...)")


# What delta-rs (``deltalake`` 1.6.6) commits to, by its protocol checker (crates/core/src/kernel/
# transaction/protocol.rs): a table needing another feature is refused at commit time with
# "Unsupported table features required". The legacy writer versions 2-6 imply their features.
DELTA_RS_READER_FEATURES = frozenset({"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint",
                                      "vacuumProtocolCheck"})
DELTA_RS_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                                      "generatedColumns", "columnMapping", "deletionVectors", "timestampNtz",
                                      "v2Checkpoint", "vacuumProtocolCheck"})
_LEGACY_WRITER = {2: {"appendOnly", "invariants"}, 3: {"checkConstraints"},
                  4: {"changeDataFeed", "generatedColumns"}, 5: {"columnMapping"}, 6: {"identityColumns"}}


def delta_rs_can_write(protocol: Protocol, metadata=None) -> Optional[str]:
    """None when Sluice's delta-rs commit (staged files, or delta-rs's MERGE) writes a table of
    ``protocol`` and ``metadata`` (``runtime.storage.delta_log``'s) right; else the reason, for
    the sink's choice of writer (the delta-spark path takes those tables) and its log line.
    Column mapping (name and id modes) is written by Sluice's own files under their physical
    names (``column_mapping.physical_table``)."""
    if protocol.min_reader_version > 3:
        return f"the table needs reader version {protocol.min_reader_version}, newer than delta-rs reads"
    if protocol.min_writer_version > 7:
        return f"the table needs writer version {protocol.min_writer_version}, newer than delta-rs writes"
    if protocol.min_writer_version == 7:
        writer = set(protocol.writer_features)
    else:
        writer = set().union(*(f for v, f in _LEGACY_WRITER.items() if v <= protocol.min_writer_version))
    reader = set(protocol.reader_features) if protocol.min_reader_version == 3 else set()
    missing = sorted((writer - DELTA_RS_WRITER_FEATURES) | (reader - DELTA_RS_READER_FEATURES))
    if missing:
        return f"the table needs feature(s) {missing}, which delta-rs does not write"
    return None
