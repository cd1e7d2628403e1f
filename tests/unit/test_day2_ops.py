"""Pure parts of the day-2 operations: ledger list filters, sizes and durations, the HTTP admin
address taken from a bookie's registration."""

import pytest

from bkctl.exitcodes import exit_code_for
from bkctl.ops.bookie_http import http_address
from bkctl.ops.ledger_meta import LedgerFilter, Totals, ledger_id_from_file_name, parse_duration, parse_size
from bkctl.ops.ledgers import describe
from bkctl.ops.results import to_json
from bkctl.wire.errors import BKError
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from tests.support.fake_store import FakeMetadataStore

DAY = 86400 * 1000


def test_durations_and_sizes():
    assert parse_duration("90") == 90 and parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400
    assert parse_duration("7d") == 7 * 86400 and parse_duration("2w") == 14 * 86400
    assert parse_size("1048576") == 1 << 20 and parse_size("512k") == 512 << 10 and parse_size("1GiB") == 1 << 30
    for bad in ("7x", "", "h", "1h 2"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    with pytest.raises(ValueError):
        parse_size("lots")
    assert ledger_id_from_file_name("/backups/ledger-42.meta") == 42
    assert ledger_id_from_file_name("l1-v2") is None and ledger_id_from_file_name("meta") is None


def test_ledger_filter():
    now = 100 * DAY
    md = LedgerMetadata.new(
        ["a:1", "b:1"], 2, 2, ctime=now - 3 * DAY, custom_metadata={"pulsar/managed-ledger": b"t/ns/persistent/orders"}
    )
    closed = md.closed(9, 5000)
    f = LedgerFilter(meta=(("pulsar/managed-ledger", "*/orders"),), now_ms=now)
    assert f(md) and f.active and not LedgerFilter().active
    assert not LedgerFilter(meta=(("pulsar/managed-ledger", "*/billing"),))(md)
    assert LedgerFilter(meta=(("pulsar/*", "t/*"),))(md) and not LedgerFilter(meta=(("app", "*"),))(md)
    assert LedgerFilter(older_than=2 * 86400, now_ms=now)(md) and not LedgerFilter(older_than=4 * 86400, now_ms=now)(md)
    assert LedgerFilter(open_longer_than=86400, now_ms=now)(md)
    assert not LedgerFilter(open_longer_than=86400, now_ms=now)(closed)  # closed: not open for long
    assert LedgerFilter(min_size=5000)(closed) and not LedgerFilter(min_size=5001)(closed)
    seen = Totals()
    for row in (describe(1, closed), describe(2, md)):
        seen.add(row)
    assert to_json(seen) == {"count": 2, "entries": 10, "bytes": 5000}


def _store(info, registered=True):
    store = FakeMetadataStore().start()
    if registered:
        store.registration.register("bk5:3181", info)
    return store


def test_http_address_from_the_registration():
    info = BookieServiceInfo.for_bookie("10.0.0.5", 3181, http_port=8000)
    assert http_address(_store(info), "bk5:3181") == "10.0.0.5:8000"  # Java publishes 0.0.0.0: the RPC host
    assert http_address(_store(info), "bk5:3181", "h:1") == "h:1"
    with pytest.raises(BKError) as e:
        http_address(_store(BookieServiceInfo.for_bookie("10.0.0.5", 3181)), "bk5:3181")
    assert exit_code_for(e.value) == 1 and "no HTTP endpoint" in str(e.value)
    with pytest.raises(BKError) as e:
        http_address(_store(info, registered=False), "bk5:3181")
    assert exit_code_for(e.value) == 3
    with pytest.raises(BKError) as e:
        http_address(_store(info), "bk5:3181", "nonsense")
    assert exit_code_for(e.value) == 2
