"""Pulsar entries made as a producer and broker make them, for tests and the benchmark.

The layout follows the real client's bytes in ``tests/vectors/pulsar`` (a
test checks that :func:`encode_entry` reproduces them byte for byte): the
producer's ``MessageMetadata``, the (batch) payload compressed as a whole, the
CRC32C over everything after it, and the broker's optional entry metadata in
front.
"""

from __future__ import annotations

import struct
import zlib

from crc32c import crc32c

from bkctl.wire.proto import pulsar_api_pb2 as pb

__all__ = ["batch_payload", "compress", "encode_entry", "marker", "metadata", "with_broker_metadata"]


def compress(codec: int, data: bytes) -> bytes:
    if codec == pb.NONE:
        return data
    if codec == pb.LZ4:
        import lz4.block

        return lz4.block.compress(data, store_size=False)
    if codec == pb.ZLIB:
        return zlib.compress(data)
    if codec == pb.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    if codec == pb.SNAPPY:
        import cramjam

        return bytes(cramjam.snappy.compress_raw(data))
    raise ValueError(f"codec {codec}")


def metadata(producer: str, sequence_id: int, publish_time: int, **fields) -> pb.MessageMetadata:
    md = pb.MessageMetadata(producer_name=producer, sequence_id=sequence_id, publish_time=publish_time)
    for name, value in fields.items():
        if name == "properties":
            md.properties.extend(pb.KeyValue(key=k, value=v) for k, v in value.items())
        else:
            setattr(md, name, value)
    return md


def batch_payload(messages: list[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    """``[u32 size][SingleMessageMetadata][payload]`` for each message."""
    out = bytearray()
    for smd, body in messages:
        smd.payload_size = len(body)
        raw = smd.SerializeToString()
        out += struct.pack(">I", len(raw)) + raw + body
    return bytes(out)


def encode_entry(md: pb.MessageMetadata, payload: bytes, codec: int = pb.NONE) -> bytes:
    """``[0x0e01][crc32c][u32 size][metadata][payload]``, the payload
    compressed with ``codec`` (``compression``/``uncompressed_size`` set)."""
    if codec != pb.NONE:
        md.compression = codec
        md.uncompressed_size = len(payload)
        payload = compress(codec, payload)
    raw = md.SerializeToString()
    body = struct.pack(">I", len(raw)) + raw + payload
    return struct.pack(">HI", 0x0E01, crc32c(body)) + body


def with_broker_metadata(entry: bytes, broker_timestamp: int | None = None, index: int | None = None) -> bytes:
    bem = pb.BrokerEntryMetadata()
    if broker_timestamp is not None:
        bem.broker_timestamp = broker_timestamp
    if index is not None:
        bem.index = index
    raw = bem.SerializeToString()
    return struct.pack(">HI", 0x0E02, len(raw)) + raw + entry


def marker(
    marker_type: int, txn: tuple[int, int] | None = None, payload: bytes = b"", publish_time: int = 1_795_000_000_000
) -> bytes:
    """A marker entry as Pulsar's ``Markers.java`` writes one: ``marker_type``
    set; a transaction's (``TXN_COMMIT`` 21, ``TXN_ABORT`` 22) by producer
    ``pulsar.txn.marker`` with sequence id -1 (as a uint64) and the
    transaction's id, no payload; a replicated subscription's (10-13) by
    ``pulsar.marker`` with sequence id 0 and its PulsarMarkers message as payload."""
    if txn is None:
        md = metadata("pulsar.marker", 0, publish_time, marker_type=marker_type)
    else:
        md = metadata(
            "pulsar.txn.marker",
            2**64 - 1,
            publish_time,
            marker_type=marker_type,
            txnid_most_bits=txn[0],
            txnid_least_bits=txn[1],
        )
    return encode_entry(md, payload)


# ---------------------------------------------------------------- the vectors


def vectors_dir():
    from tests.support.golden import VECTORS

    return VECTORS / "pulsar"


def all_cases() -> list[str]:
    """The cases of one managed ledger each in the message formats (the schema cases
    ``s_*`` are :func:`schema_cases`: their expected files say what a schema reader sees)."""
    return sorted(p.name for p in (vectors_dir() / "entries").iterdir() if not p.name.startswith("s_"))


def case_folders() -> list[tuple[str, str]]:
    """``(case, folder)`` of every case of :func:`all_cases` in each folder that has it: the
    entries as the client wrote them, and with the broker's entry metadata."""
    return [
        (case, folder)
        for folder in ("entries", "entries_with_broker_entry_metadata")
        for case in all_cases()
        if (vectors_dir() / folder / case).is_dir()
    ]


def schema_cases() -> list[str]:
    """The schema cases (``s_*``): entries, the schema store (``schemas/<case>/``)
    and ``expected/<case>.json`` in the ``schema/1`` format."""
    return sorted(p.name for p in (vectors_dir() / "entries").iterdir() if p.name.startswith("s_"))


def schema_case(case: str) -> dict:
    """A schema case: ``expected`` (its expected JSON), ``manifest`` (its store's),
    ``locator`` (the znode's bytes or None), ``ledgers`` (schema ledger id in the
    vectors -> its entry's bytes, the missing ones left out, the orphans in),
    ``entries`` (managed-ledger name -> the entries, by entry id; one per
    partition for a partitioned topic) and ``ids`` (its messageids JSON)."""
    import json

    root = vectors_dir()
    expected = json.loads((root / "expected" / f"{case}.json").read_text())
    manifest = json.loads((root / "schemas" / case / "manifest.json").read_text())
    locator = root / "schemas" / case / "locator.bin"
    ledgers = {int(f.parent.name): f.read_bytes() for f in (root / "schemas" / case).glob("ledgers/*/0.bin")}
    folder = root / "entries" / case
    names = expected.get("managed_ledger_names") or [expected["managed_ledger_name"]]
    if (folder / "partition-0").is_dir():
        entries = {name: case_entries(f"{case}/partition-{n}") for n, name in enumerate(names)}
    else:
        entries = {names[0]: case_entries(case)}
    return {
        "expected": expected,
        "manifest": manifest,
        "locator": locator.read_bytes() if locator.exists() else None,
        "ledgers": ledgers,
        "entries": entries,
        "ids": json.loads((root / "messageids" / f"{case}.json").read_text()),
    }


def _format(case: str) -> str:
    import json

    return json.loads((vectors_dir() / "expected" / f"{case}.json").read_text()).get("format", "sent/1")


def cases() -> list[str]:
    """The cases whose ``expected`` lists what the application sent (``a_*`` .. ``g_*``)."""
    return [c for c in all_cases() if _format(c) != "consumer-view/1"]


def consumer_view_cases() -> list[str]:
    """The cases whose ``expected`` says what a consumer receives (``t_*``, ``m_*``, ``k_*``)."""
    return [c for c in all_cases() if _format(c) == "consumer-view/1"]


def case_entries(case: str, folder: str = "entries") -> list[bytes]:
    """The stored entries of a case, by entry id."""
    files = sorted((vectors_dir() / folder / case).glob("*.bin"), key=lambda p: int(p.stem))
    return [f.read_bytes() for f in files]


def expected_messages(case: str) -> list[dict]:
    """What the application sent, in the order a reader meets the messages,
    each with the message id the real client got back (``ledger_id`` 1000)."""
    import base64
    import json

    root = vectors_dir()
    sent = json.loads((root / "expected" / f"{case}.json").read_text())
    ids = json.loads((root / "messageids" / f"{case}.json").read_text())
    out = []
    for i in ids["storage_order_of_send_indexes"]:
        m = dict(sent["messages"][i])
        m["payload"] = base64.b64decode(m["payload_b64"])
        m["ordering_key"] = None if m["ordering_key_b64"] is None else base64.b64decode(m["ordering_key_b64"])
        m["id"] = ids["messages"][i]
        m["producer_name"] = sent["producer_name"]
        schema = sent.get("schema_version_returned_by_recording_broker_b64")
        m["schema_version"] = None if schema is None else base64.b64decode(schema)
        out.append(m)
    return out


def received_messages(case: str) -> list[dict]:
    """What a consumer of the case's topic receives, in order, whatever the
    case's format: ``entry_id``, ``batch_index``, ``payload``, ``key``,
    ``ordering_key``, ``properties``, ``event_time``, ``sequence_id``,
    ``publish_time`` (None for the cases that did not record it),
    ``producer_name``, ``replicated_from``, ``deliver_at``, ``txn_id``."""
    import base64
    import json

    doc = json.loads((vectors_dir() / "expected" / f"{case}.json").read_text())
    if doc.get("format") == "consumer-view/1":
        return [
            {
                "entry_id": m["entry_id"],
                "batch_index": m["batch_index"],
                "payload": base64.b64decode(m["payload_b64"]),
                "key": m["partition_key"],
                "ordering_key": None if m["ordering_key_b64"] is None else base64.b64decode(m["ordering_key_b64"]),
                "properties": m["properties"],
                "event_time": m["event_timestamp"],
                "sequence_id": m["sequence_id"],
                "publish_time": m["publish_time"],
                "producer_name": m["producer_name"],
                "replicated_from": m["replicated_from"],
                "deliver_at": m["deliver_at"],
                "txn_id": m["txn_id"],
            }
            for m in doc["consumer_view"]["messages"]
        ]
    out = []
    for m in expected_messages(case):
        ident = m["id"]
        out.append(
            {
                "entry_id": ident["entry_id"],
                "batch_index": ident["batch_index"],
                "payload": m["payload"],
                "key": m["partition_key"],
                "ordering_key": m["ordering_key"],
                "properties": m["properties"],
                "event_time": m["event_timestamp"],
                "sequence_id": m["expected_sequence_id"],
                "publish_time": None,
                "producer_name": m["producer_name"],
                "replicated_from": None,
                "deliver_at": m["deliver_at"],
                "txn_id": None,
            }
        )
    return out


def typed_json(value, arrow_type):
    """A typed value as Arrow gives it back (``to_pylist``) in the vectors' JSON
    conventions: bytes base64, timestamps epoch milliseconds, decimals integers,
    maps objects."""
    import base64
    import datetime as dt
    import decimal

    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return {f.name: typed_json(value[f.name], f.type) for f in arrow_type}
    if pa.types.is_map(arrow_type):
        return {k: typed_json(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_list(arrow_type):
        return [typed_json(v, arrow_type.value_type) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, decimal.Decimal):
        return int(value)
    return value
