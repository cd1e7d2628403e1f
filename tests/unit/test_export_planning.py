"""Export planning without Spark: ledger specs, time filters, ledger plans,
entry-range splitting, and the output directory's compose-and-swap."""

from __future__ import annotations

import errno
import json
import os

import pytest

from bkctl.export.output import MANIFEST, SUCCESS, NotAnExport, OutputDir, leaf_partitions, local_path
from bkctl.wire.domain import ledger_plan
from bkctl.wire.domain.ledger_plan import (
    EntryRange,
    LedgerPlan,
    LedgerPlanning,
    LedgerSpec,
    NoSuchLedgers,
    SpecError,
    parse_ctime,
    parse_ledger_spec,
    plan_ledgers,
    split_ranges,
)
from bkctl.wire.errors import Conflict, NotFound
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.fake_store import FakeMetadataStore

# ---------------------------------------------------------------- ledger specs


@pytest.mark.parametrize(
    "text, ids, ranges",
    [
        ("7", (7,), ()),
        ("1,2,5-9", (1, 2), ((5, 9),)),
        (" 3 , 1 ,2 ", (1, 2, 3), ()),
        ("5-5", (5,), ()),
        ("1-3,2-6,8-9", (), ((1, 6), (8, 9))),
        ("1-3,4-6", (), ((1, 6),)),
        ("4,1-5,9", (9,), ((1, 5),)),
        ("0", (0,), ()),
    ],
)
def test_parse_ledger_spec(text, ids, ranges):
    spec = parse_ledger_spec(text)
    assert not spec.all
    assert spec.ids == ids and spec.ranges == ranges


@pytest.mark.parametrize("text", ["all", "ALL", " all "])
def test_parse_ledger_spec_all(text):
    spec = parse_ledger_spec(text)
    assert spec.all and str(spec) == "all" and spec.contains(123456)


@pytest.mark.parametrize(
    "text", ["", " ", "1,,2", "a", "-1", "9-5", "1-", "1-2-3", "1.5", str(1 << 63), f"1-{1 << 63}"]
)
def test_parse_ledger_spec_rejects(text):
    with pytest.raises(SpecError):
        parse_ledger_spec(text)


def test_spec_contains_and_str():
    spec = parse_ledger_spec("1,2,5-9")
    assert [i for i in range(12) if spec.contains(i)] == [1, 2, 5, 6, 7, 8, 9]
    assert str(spec) == "1,2,5-9"
    assert parse_ledger_spec(str(spec)) == spec


# ---------------------------------------------------------------- time filters

NOW = 1_795_000_000_000  # 2026-11-18T...


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-21", 1_795_219_200_000),
        ("2026-11-21T00:00:00", 1_795_219_200_000),
        ("2026-11-21T00:00:00Z", 1_795_219_200_000),
        ("2026-11-21T01:00:00+01:00", 1_795_219_200_000),
        ("2026-11-21T10:30", 1_795_219_200_000 + 10 * 3_600_000 + 30 * 60_000),
        ("1795219200000", 1_795_219_200_000),
        ("7d", NOW - 7 * 86_400_000),
        ("12h", NOW - 12 * 3_600_000),
        ("90s", NOW - 90_000),
        ("2w", NOW - 14 * 86_400_000),
    ],
)
def test_parse_ctime(text, expected):
    assert parse_ctime(text, now_ms=NOW) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01", "12", "7y"])
def test_parse_ctime_rejects(text):
    with pytest.raises(SpecError):
        parse_ctime(text, now_ms=NOW)


def test_times_are_written_in_utc_with_milliseconds_and_dated_in_utc():
    from bkctl.wire.text import utc_date, utc_iso

    assert utc_iso(1_795_219_200_123) == "2026-11-21T00:00:00.123Z"
    assert utc_date(1_795_219_200_000 - 1) == "2026-11-20"
    assert utc_iso(None) is None and utc_date(None) is None


# ---------------------------------------------------------------- plans


def _md(state="closed", last=-1, ctime=1_795_219_200_000, custom=None, segments=1):
    md = LedgerMetadata.new(["b1:1", "b2:1", "b3:1"], 2, 2, password=b"pw", custom_metadata=custom or {}, ctoken=1)
    from dataclasses import replace

    md = replace(md, ctime=ctime)
    for i in range(1, segments):
        md = md.with_ensemble_change(i * 10, ["b1:1", "b2:1", f"b{3 + i}:1"])
    if state == "closed":
        md = md.closed(last, 10 * (last + 1))
    elif state == "in_recovery":
        md = md.in_recovery()
    return md


def store_with(ledgers: dict[int, LedgerMetadata]) -> FakeMetadataStore:
    """A store holding these ledgers, its call log empty."""
    store = FakeMetadataStore().start()
    for ledger_id, md in ledgers.items():
        store.ledgers.create(md, ledger_id)
    store.calls.clear()
    return store


def test_resolve_spec_singles_ranges_and_missing():
    store = store_with({i: _md(last=i) for i in (1, 2, 5, 7, 40)})
    assert ledger_plan.resolve_spec(store, parse_ledger_spec("1,5-9")) == [1, 5, 7]
    assert ledger_plan.resolve_spec(store, parse_ledger_spec("all")) == [1, 2, 5, 7, 40]
    with pytest.raises(NoSuchLedgers) as info:
        ledger_plan.resolve_spec(store, parse_ledger_spec("1,3,4,10-20"))
    assert isinstance(info.value, NotFound)
    assert info.value.missing == ["3", "4", "10-20 (no ledger in that range)"]
    assert "no such ledgers: 3, 4" in str(info.value)


def test_resolve_spec_looks_ids_and_narrow_ranges_up_in_one_pipelined_read():
    store = store_with({i: _md() for i in (1, 5, 7)})
    assert ledger_plan.resolve_spec(store, parse_ledger_spec("1,7,4-6")) == [1, 5, 7]
    assert len(store.called("ledgers.read_many")) == 1 and store.called("ledgers.exists") == []
    with pytest.raises(NoSuchLedgers) as info:
        ledger_plan.resolve_spec(store, parse_ledger_spec("1,3,7,8-9"))
    assert info.value.missing == ["3", "8-9 (no ledger in that range)"]


def test_resolve_spec_wide_range_walks_once():
    store = store_with({i: _md() for i in (3, 50_000, 90_000)})
    assert ledger_plan.resolve_spec(store, parse_ledger_spec("10-100000")) == [50_000, 90_000]
    assert len(store.called("ledgers.ids")) == 1 and store.called("ledgers.exists") == []


def _planned(planning: LedgerPlanning) -> tuple[list[LedgerPlan], list[dict]]:
    """The plans, and the ledgers left out as the manifest's documents of them."""
    return planning.plans, [s.to_json() for s in planning.skipped]


def test_plan_ledgers_closed_empty_open_and_filters():
    store = store_with(
        {
            1: _md(last=-1),  # closed, empty
            2: _md(last=0, custom={"app": b"x", "raw": b"\xff"}),
            3: _md(last=2999, segments=2),
            4: _md(state="open"),
            5: _md(state="in_recovery"),
            6: _md(last=9, ctime=1_700_000_000_000),  # old
        }
    )
    plans, skipped = _planned(plan_ledgers(store, parse_ledger_spec("1-6")))
    assert [(p.ledger_id, p.first, p.last, p.entries) for p in plans] == [
        (1, 0, -1, 0),
        (2, 0, 0, 1),
        (3, 0, 2999, 3000),
        (6, 0, 9, 10),
    ]
    assert plans[1].metadata == {"app": "x", "raw": "\\xff"}
    assert plans[2].segments == 2 and plans[2].state == "CLOSED" and plans[2].length == 30000
    assert [s["ledger_id"] for s in skipped] == [4, 5]
    assert "--include-open" in skipped[0]["reason"]

    lacs = {4: 41, 5: -1}
    plans, skipped = _planned(
        plan_ledgers(
            store, parse_ledger_spec("4,5,6"), include_open=True, lac_of=lacs.__getitem__, since_ms=1_795_000_000_000
        )
    )
    assert [(p.ledger_id, p.state, p.last) for p in plans] == [(4, "OPEN", 41), (5, "IN_RECOVERY", -1)]
    assert skipped == [{"ledger_id": 6, "reason": "created before --since"}]

    plans, skipped = _planned(plan_ledgers(store, parse_ledger_spec("all"), until_ms=1_795_000_000_000))
    assert [p.ledger_id for p in plans] == [6]
    assert len(skipped) == 5


def test_plan_ledgers_unknown_ledger_is_not_found():
    store = store_with({1: _md(last=3)})
    with pytest.raises(NoSuchLedgers) as info:
        plan_ledgers(store, parse_ledger_spec("1,2"))
    assert info.value.missing == ["2"]


def test_plan_ledgers_open_needs_lac_reader():
    with pytest.raises(ValueError):
        plan_ledgers(store_with({}), LedgerSpec(all=True), include_open=True)


def test_plans_json_roundtrip():
    plans = [LedgerPlan(7, "CLOSED", 123, {"k": "v"}, 0, 99, 1000, 2), LedgerPlan(8, "OPEN", None, {}, 0, -1)]
    back = ledger_plan.plans_from_json(ledger_plan.plans_to_json(plans))
    assert back == plans and back[0].metadata == {"k": "v"} and back[0].segments == 2
    with pytest.raises(SpecError):
        ledger_plan.plans_from_json("{}")
    with pytest.raises(SpecError):
        ledger_plan.plans_from_json('[{"ledger_id": 1}]')


# ---------------------------------------------------------------- splitting


def test_split_ranges():
    plans = [
        LedgerPlan(1, "CLOSED", 5, {}, 0, -1),
        LedgerPlan(2, "CLOSED", 5, {"a": "b"}, 0, 0),
        LedgerPlan(3, "CLOSED", 5, {}, 0, 249),
        LedgerPlan(4, "OPEN", 6, {}, 0, 99),
    ]
    ranges = split_ranges(plans, 100)
    assert [(r.ledger_id, r.first, r.last) for r in ranges] == [
        (2, 0, 0),
        (3, 0, 99),
        (3, 100, 199),
        (3, 200, 249),
        (4, 0, 99),
    ]
    assert ranges[0].metadata == {"a": "b"} and ranges[-1].state == "OPEN" and ranges[-1].ctime_ms == 6
    assert sum(r.entries for r in ranges) == sum(p.entries for p in plans)


@pytest.mark.parametrize("entries, split", [(1, 1), (10, 3), (100_000, 100_000), (100_001, 100_000), (7, 100)])
def test_split_ranges_cover_exactly(entries, split):
    ranges = split_ranges([LedgerPlan(9, "CLOSED", 0, {}, 0, entries - 1)], split)
    assert ranges[0].first == 0 and ranges[-1].last == entries - 1
    assert all(b.first == a.last + 1 for a, b in zip(ranges, ranges[1:]))
    assert all(1 <= r.entries <= split for r in ranges)
    assert len(ranges) == -(-entries // split)


def test_split_ranges_rejects_bad_size():
    with pytest.raises(SpecError):
        split_ranges([], 0)


def test_entry_range_entries():
    assert EntryRange(1, 10, 19, None, "CLOSED").entries == 10


# ---------------------------------------------------------------- output directory


def _partition(root, rel, names=("part-0.parquet",)):
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / name).write_text(f"{rel}/{name}")
    return d


def _export(root, manifest=None, partition_by="ledger_id"):
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).write_text(json.dumps(manifest or {"partition_by": partition_by, "ledgers": {}}))
    (root / SUCCESS).write_text("")


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_local_path(tmp_path):
    assert local_path(f"file://{tmp_path}/x") == tmp_path / "x"
    assert local_path(str(tmp_path / "a" / ".." / "b")) == tmp_path / "b"
    with pytest.raises(ValueError):
        local_path("hdfs://nn/exports")


def test_leaf_partitions(tmp_path):
    _partition(tmp_path, "ledger_id=5")
    _partition(tmp_path, "date=2026-11-21/ledger_id=7")
    _partition(tmp_path, "date=2026-11-21/ledger_id=8")
    _partition(tmp_path, "other")
    assert leaf_partitions(tmp_path) == {
        "date=2026-11-21/ledger_id=7": 7,
        "date=2026-11-21/ledger_id=8": 8,
        "ledger_id=5": 5,
    }


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("replace", ["ledger_id=1/new.parquet", "ledger_id=2/part-0.parquet", "ledger_id=3/new.parquet"]),
        (
            "append",
            [
                "ledger_id=1/new.parquet",
                "ledger_id=1/part-0.parquet",
                "ledger_id=2/part-0.parquet",
                "ledger_id=3/new.parquet",
            ],
        ),
        ("overwrite", ["ledger_id=1/new.parquet", "ledger_id=3/new.parquet"]),
    ],
)
def test_compose_and_finish(tmp_path, mode, expected):
    out = tmp_path / "export"
    _export(out)
    _partition(out, "ledger_id=1")
    _partition(out, "ledger_id=2")
    _partition(out, "ledger_id=4")  # exported again, but empty now: dropped unless appending/keeping
    target = OutputDir(out)
    with target.locked():
        assert target.check_target(mode, "ledger_id") is not None
        _partition(target.staging, "ledger_id=1", ["new.parquet"])
        _partition(target.staging, "ledger_id=3", ["new.parquet"])
        (target.staging / "_SUCCESS").write_text("spark's")
        target.compose(mode, [1, 3, 4])
        target.finish({"partition_by": "ledger_id", "ledgers": {}, "mode": mode})
    if mode == "append":
        expected = sorted(expected + ["ledger_id=4/part-0.parquet"])
    assert _files(out) == sorted([MANIFEST, SUCCESS] + expected)
    assert json.loads((out / MANIFEST).read_text())["mode"] == mode
    assert (out / SUCCESS).read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no lock file, staging or old copy left


def test_failed_export_leaves_previous_untouched(tmp_path):
    out = tmp_path / "export"
    _export(out)
    _partition(out, "ledger_id=1")
    before = {p: (out / p).read_bytes() for p in _files(out)}
    target = OutputDir(out)
    with pytest.raises(RuntimeError), target.locked():
        _partition(target.staging, "ledger_id=1", ["new.parquet"])
        target.compose("replace", [1])
        raise RuntimeError("spark died")
    assert {p: (out / p).read_bytes() for p in _files(out)} == before
    assert not target.staging.exists()


@pytest.mark.parametrize("failing", [1, 2])
def test_a_folder_that_cannot_be_synced_is_the_exports_error(tmp_path, monkeypatch, failing):
    """The staging folder's sync fails (1st): ExportError, the previous export kept as it was and
    the staging folder gone; the parent's, after the swap (2nd): ExportError, the new export in place."""
    from bkctl.export.source import ExportError

    out = tmp_path / "export"
    _export(out)
    _partition(out, "ledger_id=1")
    before = {p: (out / p).read_bytes() for p in _files(out)}
    real, syncs = os.fsync, []

    def fsync(fd):
        syncs.append(fd)
        if len(syncs) == failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = OutputDir(out)
    with pytest.raises(ExportError) as failed, target.locked():
        _partition(target.staging, "ledger_id=3", ["new.parquet"])
        target.compose("replace", [3])
        target.finish({"partition_by": "ledger_id", "ledgers": {}, "mode": "replace"})
    assert not target.staging.exists()
    if failing == 1:
        assert str(failed.value) == (
            f"--out {out}: cannot sync {target.staging}: Input/output error; the previous export is kept"
        )
        assert {p: (out / p).read_bytes() for p in _files(out)} == before
    else:
        assert str(failed.value) == (
            f"--out {out}: cannot sync {tmp_path}: Input/output error; "
            "the new export is in place but may not survive a crash"
        )
        assert "ledger_id=3/new.parquet" in _files(out)


def test_an_export_onto_a_file_system_that_cannot_sync_folders_is_made_and_says_so(tmp_path, monkeypatch, caplog):
    """fsync of a folder answered EINVAL (a mount that cannot sync directories): the export is
    made all the same, each folder it could not sync named once in a warning (fsync_dir)."""
    import stat

    out = tmp_path / "export"
    _export(out)
    real = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    caplog.set_level("WARNING")
    target = OutputDir(out)
    with target.locked():
        _partition(target.staging, "ledger_id=3", ["new.parquet"])
        target.compose("replace", [3])
        target.finish({"partition_by": "ledger_id", "ledgers": {}, "mode": "replace"})
    assert "ledger_id=3/new.parquet" in _files(out)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cannot fsync directory")]
    assert any(f"cannot fsync directory {tmp_path} " in m for m in said), said  # the folder --out is in
    assert len(said) == len(set(said))  # once each


def test_interrupted_swap_is_recovered(tmp_path):
    out = tmp_path / "export"
    _export(out)
    _partition(out, "ledger_id=1")
    before = _files(out)
    out.rename(tmp_path / ".export.bkctl-old-abc")  # a crash between the two renames
    with OutputDir(out).locked() as target:
        assert target.path.is_dir()
    assert _files(out) == before


def test_check_target_refuses_foreign_or_different_layout(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(NotAnExport):
        OutputDir(foreign).check_target("replace", "ledger_id")
    with pytest.raises(NotAnExport):
        OutputDir(foreign).check_target("append", "ledger_id")
    assert OutputDir(foreign).check_target("overwrite", "ledger_id") is None
    assert OutputDir(tmp_path / "new").check_target("replace", "ledger_id") is None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert OutputDir(empty).check_target("replace", "date") is None
    dated = tmp_path / "dated"
    _export(dated, partition_by="date")
    with pytest.raises(Conflict):
        OutputDir(dated).check_target("replace", "ledger_id")
    assert OutputDir(dated).check_target("replace", "date")["partition_by"] == "date"


def test_second_export_of_same_dir_is_refused(tmp_path):
    from bkctl.export.output import ExportLocked

    with OutputDir(tmp_path / "x").locked(), pytest.raises(ExportLocked), OutputDir(tmp_path / "x").locked():
        pass
    assert list(tmp_path.iterdir()) == []
    # free again once the first one is done
    with OutputDir(tmp_path / "x").locked(), pytest.raises(ExportLocked), OutputDir(tmp_path / "x").locked():
        pass


def test_a_lock_on_a_deleted_lock_file_is_not_taken(tmp_path, monkeypatch):
    """An export that opened the lock file just before its holder deleted it and
    let go gets the lock of a file no one else sees: it must open the path again."""
    import fcntl

    target = OutputDir(tmp_path / "x")
    real_flock = fcntl.flock
    calls = []

    def flock_after_the_holder_left(fd, op):
        if not calls:  # the holder deletes the file between our open and our flock
            os.unlink(target.lock_path)
        calls.append(fd)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_holder_left)
    with target.locked():
        assert len(calls) == 2  # the first lock was let go, the second is on the file at the path
        assert target.lock_path.exists()
    assert not target.lock_path.exists()


def test_spark_error_cause_finds_the_python_exception():
    from bkctl.export.job import spark_error_cause

    jvm = (
        "An error occurred while calling o93.save.\n: org.apache.spark.SparkException: Job aborted.\n"
        "Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/x/worker.py", line 1, in main\n    process()\n'
        '  File "/x/ledger.py", line 2, in _open\n    raise Unauthorized(msg)\n'
        "bkctl.wire.client.errors.Unauthorized: wrong password for ledger 3\n\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    )
    assert spark_error_cause(RuntimeError(jvm)) == "bkctl.wire.client.errors.Unauthorized: wrong password for ledger 3"
    assert spark_error_cause(RuntimeError("no traceback here")) is None
