"""The object store's orphan sweep (``pulsar offload orphans``, wire/domain/offloads.py): only what
is Pulsar's -- its key form, or the offloader's user metadata under any key -- is judged, by the
one rule the ledger sweep uses too (wire/domain/orphans.py's ``judge``); the rest is counted apart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bkctl.wire.domain.offloads import OffloadOrphanScan
from bkctl.wire.domain.orphans import Verdict, judge
from bkctl.wire.errors import ObjectMissing
from bkctl.wire.objects import ObjectInfo, Upload
from bkctl.wire.pulsar.offload_format import is_offloader_metadata
from bkctl.wire.pulsar.offload_store import OffloadLocation, OffloadRecord, OffloadSettings
from tests.support import offload_cases as oc

NOW = 1_800_000_000.0
DAY = 86_400.0
UUID = "0b7c3a10-1111-4222-8333-944455556666"
NAMED_UUID = "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1"
OFFLOADER = oc.blob_metadata("s3_a_plain")[f"{NAMED_UUID}-ledger-4001"]["user_metadata_as_read_back"]


@pytest.mark.parametrize("case", [c for c in oc.cases() if c.startswith("s3_")])
def test_every_blob_the_offloader_wrote_carries_its_metadata(case):
    docs = oc.blob_metadata(case)
    assert docs
    for doc in docs.values():
        assert is_offloader_metadata(doc["user_metadata_as_read_back"])
        assert is_offloader_metadata(doc["user_metadata_as_set"])  # any case


@pytest.mark.parametrize(
    "metadata",
    [{}, {"role": "data"}, {"pulsarclustername": "standalone"}, {"bkctl-archive": "1"}, {"content": "x"}],
)
def test_metadata_of_others_is_not_the_offloader_s(metadata):
    assert not is_offloader_metadata(metadata)


def test_the_one_rule():
    assert judge(False, False, 0, 10) is Verdict.FOREIGN  # not Pulsar's: never an orphan, however old
    assert judge(True, True, 0, 10) is Verdict.NAMED
    assert judge(True, False, 11, 10) is Verdict.YOUNG
    assert judge(True, False, None, 10) is Verdict.YOUNG  # no known age: not judged
    assert judge(True, False, 10, 10) is Verdict.ORPHAN


class Bucket:
    """Objects with user metadata, as S3 keeps them (a listing gives none: ``head`` does)."""

    name = "s3://test"

    def __init__(self, objects: dict[str, tuple[int, float, dict[str, str]]], uploads: list[Upload]):
        self.objects = objects
        self.pending = uploads
        self.heads: list[str] = []

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        for key, (size, modified, _md) in sorted(self.objects.items()):
            yield ObjectInfo(key, size, modified)

    def head(self, key: str) -> ObjectInfo:
        self.heads.append(key)
        if key not in self.objects:
            raise ObjectMissing(f"{self.name}: {key}: no such object")
        size, modified, md = self.objects[key]
        return ObjectInfo(key, size, modified, md)

    def uploads(self) -> Iterator[Upload]:
        return iter(self.pending)


def _scan(bucket: Bucket) -> tuple[OffloadOrphanScan, list]:
    where = (("bucket", "test"), ("region", ""), ("serviceEndpoint", ""))
    named = OffloadLocation(4001, "t/ns/persistent/a", NAMED_UUID, "aws-s3", where, complete=True)
    record = OffloadRecord("persistent://t/ns/a", "t/ns/persistent/a", named, 10, 495)
    scan = OffloadOrphanScan([record], OffloadSettings(), DAY, now=NOW, store_of=lambda loc, settings: bucket)
    return scan, [o.to_json() for o in scan]


def test_an_object_with_the_offloader_s_metadata_is_judged_whatever_its_key():
    old, new = NOW - 2 * DAY, NOW - 60
    bucket = Bucket(
        {
            f"{NAMED_UUID}-ledger-4001": (495, old, OFFLOADER),  # named by the managed ledger
            f"{NAMED_UUID}-ledger-4001-index": (300, old, OFFLOADER),
            f"{UUID}-ledger-9999": (100, old, {}),  # the key form alone: Pulsar's
            "renamed/by-hand-9998": (200, old, OFFLOADER),  # the offloader's metadata: Pulsar's
            "renamed/too-young": (50, new, OFFLOADER),
            "bkbackup/archive.json": (70, old, {}),  # a backup archive: not Pulsar's
            "bkbackup/ledgers/9999/none-0-3.data": (30, old, {"role": "data"}),
        },
        [
            Upload(f"{UUID}-ledger-9997", "u1", old, 1000),
            Upload("bkbackup/ledgers/1/big.data", "u2", old, 5000),  # not the key form: left alone
        ],
    )
    scan, rows = _scan(bucket)
    assert sorted((r["kind"], r["key"], r["size"], r["ledger_id"], r["pulsar_key"]) for r in rows) == [
        ("object", f"{UUID}-ledger-9999", 100, 9999, True),
        ("object", "renamed/by-hand-9998", 200, None, False),
        ("upload", f"{UUID}-ledger-9997", 1000, 9997, True),
    ]
    assert (scan.orphans, scan.orphan_bytes, scan.uploads, scan.upload_bytes) == (2, 300, 1, 1000)
    assert (scan.named, scan.young, scan.foreign, scan.foreign_bytes) == (2, 1, 3, 70 + 30 + 5000)
    assert scan.stores == ["s3://test"]
    # only the objects not in the key form were asked for their metadata
    assert sorted(bucket.heads) == sorted(k for k in bucket.objects if "-ledger-" not in k)


def test_an_object_deleted_between_the_listing_and_its_head_is_neither_counted_nor_listed():
    bucket = Bucket({"gone-meanwhile": (10, NOW - 2 * DAY, OFFLOADER)}, [])
    listing = list(bucket.list())
    bucket.objects.clear()
    bucket.list = lambda prefix="": iter(listing)  # type: ignore[method-assign]
    scan, rows = _scan(bucket)
    assert rows == [] and (scan.orphans, scan.foreign, scan.young) == (0, 0, 0)


def test_a_long_listing_is_judged_page_by_page_in_its_own_order(monkeypatch):
    from bkctl.wire.domain import offloads

    monkeypatch.setattr(offloads, "LISTING_PAGE", 3)
    old = NOW - 2 * DAY
    objects = {}
    for i in range(10):
        objects[f"k{i:02d}-by-hand"] = (i + 1, old, OFFLOADER if i % 2 else {})
        objects[f"{UUID[:-2]}{i:02d}-ledger-{i}"] = (100, old, {})
    scan, rows = _scan(Bucket(objects, []))
    assert [r["key"] for r in rows] == sorted(k for k, v in objects.items() if v[2] or "-ledger-" in k)
    assert (scan.orphans, scan.foreign, scan.foreign_bytes) == (15, 5, 1 + 3 + 5 + 7 + 9)
