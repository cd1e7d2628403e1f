"""The offload vector cases (tests/vectors/offload): what each holds, and the entries each ledger
must give back (from the Pulsar case's entry files, tests/vectors/pulsar)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import broker_ledgers
from tests.support import pulsar_entries as pe

ROOT = Path(__file__).resolve().parents[1] / "vectors" / "offload"


def cases() -> list[str]:
    return sorted(p.name for p in ROOT.iterdir() if (p / "expected.json").is_file())


def expected(case: str) -> dict:
    return json.loads((ROOT / case / "expected.json").read_text())


def ledger_entries(case: str) -> dict[int, list[bytes]]:
    """Each ledger's entries in id order, as the broker wrote them."""
    doc = expected(case)
    files = pe.case_entries(doc["pulsar_case"])
    out: dict[int, list[bytes]] = {}
    for part in doc["topic_entries_in_order"]:
        one = [files[i] for i in part["pulsar_case_entry_files"]]
        out.setdefault(part["ledger_id"], []).extend(one * part["repeat"])
    return out


def objects(case: str) -> dict[str, bytes]:
    folder = ROOT / case / "objects"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def blob_metadata(case: str) -> dict:
    path = ROOT / case / "blob-metadata.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def managed_ledger(case: str) -> bytes:
    return (ROOT / case / "managed-ledger.bin").read_bytes()


def ledger_znode(case: str, ledger_id: int) -> bytes:
    return (ROOT / case / "ledgers" / f"{ledger_id}.zk.bin").read_bytes()


# ---------------------------------------------------------------- planting a case


class Planted:
    """One case laid out as a broker leaves it: its objects in ``bucket`` (or MapFiles under
    ``fs_root``), its BookKeeper ledgers, its managed ledger (driver metadata pointing at the
    test's store).  ``topic`` is the topic to export."""

    def __init__(self, case: str, topic: str, managed_ledger: str, info):
        self.case = case
        self.topic = topic
        self.managed_ledger = managed_ledger
        self.info = info


def driver_metadata_for(info, endpoint: str | None, bucket: str | None, fs_root: Path | None) -> None:
    """Point every offloaded ledger's driver metadata at the test's store (as README step 1/2 says)."""
    for li in info.ledgerInfo:
        if not li.HasField("offloadContext"):
            continue
        for kv in li.offloadContext.driverMetadata.properties:
            if kv.key == "bucket" and bucket is not None:
                kv.value = bucket
            elif kv.key == "serviceEndpoint" and endpoint is not None:
                kv.value = endpoint
            elif kv.key == "storageBasePath" and fs_root is not None:
                kv.value = f"file://{fs_root}"


def upload(case: str, client, bucket: str, keys: list[str] | None = None) -> None:
    """Each object of ``case`` under its key, with the offloader's user metadata and content type;
    a data object with parts of 5 MiB or more goes up as a multipart upload, one part per block."""
    metadata = blob_metadata(case)
    parts_doc = json.loads((ROOT / case / "parts.json").read_text()) if (ROOT / case / "parts.json").is_file() else {}
    for key, data in objects(case).items():
        if keys is not None and key not in keys:
            continue
        doc = metadata[key]
        user = {k: v for k, v in doc["user_metadata_as_set"].items()}
        parts = parts_doc.get(key, {}).get("parts", [])
        if len(parts) > 1 and all(p["size"] >= 5 << 20 for p in parts[:-1]):
            up = client.create_multipart_upload(
                Bucket=bucket, Key=key, Metadata=user, ContentType="application/octet-stream"
            )
            done = []
            for p in parts:
                got = client.upload_part(
                    Bucket=bucket,
                    Key=key,
                    UploadId=up["UploadId"],
                    PartNumber=p["part_id"],
                    Body=data[p["offset"] : p["offset"] + p["size"]],
                )
                done.append({"PartNumber": p["part_id"], "ETag": got["ETag"]})
            client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": done}
            )
        else:
            client.put_object(Bucket=bucket, Key=key, Body=data, Metadata=user, ContentType="application/octet-stream")


def lay_out_filesystem(case: str, fs_root: Path) -> None:
    import shutil

    src = ROOT / case / "filesystem"
    if src.is_dir():
        shutil.copytree(src, fs_root, dirs_exist_ok=True)


def plant(
    case: str,
    store,
    bk,
    managed_ledgers: str,
    *,
    s3=None,
    bucket=None,
    fs_root=None,
    upload_objects=True,
    write_kept=False,
    keys=None,
):
    # bk None: the ledgers only in BookKeeper are not written (enough for `offload verify`);
    # write_kept: the offloaded ledgers kept in BookKeeper are written entry by entry too (not
    # given the Java client's znode); keys: only these objects are uploaded
    """Lay ``case`` out (see :class:`Planted`): ``store`` a metadata store of the cluster, ``bk``
    a BlockingBookKeeper, ``s3`` an S3Endpoint.  Ledgers in BookKeeper get the case's ids; those
    offloaded and kept in BookKeeper get the Java client's znode (their entries are read from the
    offloaded copy), those only in BookKeeper are written entry by entry."""
    from bkctl.wire.metadata.ledger import parse_ledger_metadata
    from bkctl.wire.pulsar.managed_ledger import parse_managed_ledger_info

    doc = expected(case)
    entries = ledger_entries(case)
    for ledger in doc["ledgers"]:
        lid = ledger["ledger_id"]
        if ledger["storage"] == "bookkeeper" or (write_kept and not ledger.get("bookkeeper_deleted")):
            if bk is None:
                continue
            broker_ledgers.write_ledger(bk, doc["managed_ledger_name"], entries[lid], ensemble=2, ledger_id=lid)
        elif not ledger.get("bookkeeper_deleted"):
            store.ledgers.create(parse_ledger_metadata(ledger_znode(case, lid)), lid)
    if upload_objects and s3 is not None and bucket is not None:
        upload(case, s3.client(), bucket, keys)
    if fs_root is not None:
        lay_out_filesystem(case, fs_root)
    info = parse_managed_ledger_info(managed_ledger(case))
    driver_metadata_for(info, s3.endpoint_url if s3 is not None else None, bucket, fs_root)
    store.client.create(f"{managed_ledgers}/{doc['managed_ledger_name']}", info.SerializeToString(), makepath=True)
    return Planted(case, doc["topic"], doc["managed_ledger_name"], info)
