"""Autorecovery pieces without ZooKeeper: the byte-rate limiter (task.Clock), the
bk_server.conf keys of `bkctl autorecovery run`, and which entries a bookie holds."""

import re

import pytest
from twisted.internet import task

from bkctl.cli import run
from bkctl.exitcodes import USAGE
from bkctl.ops.bookie_conf import config_from_settings
from bkctl.wire.autorecovery.checker import entries_held
from bkctl.wire.autorecovery.config import AutoRecoveryConfig
from bkctl.wire.autorecovery.worker import RateLimiter, ReplicationWorker
from bkctl.wire.client.cork import Cork
from bkctl.wire.metadata.ledger import LedgerMetadata

NO_ZOOKEEPER = "zk+hierarchical://127.0.0.1:1/ledgers"


class Held:
    """A write handed to a limiter: ``called`` once the limiter let it go."""

    def __init__(self, clock=None):
        self.clock = clock
        self.called = False
        self.at = None

    def __call__(self, tag=None):
        assert not self.called  # let go once
        self.called = True
        self.at = self.clock.seconds() if self.clock is not None else None
        self.tag = tag


def test_rate_limiter_spaces_writes_to_the_rate():
    clock = task.Clock()
    limiter = RateLimiter(1000, clock)  # bytes/s
    first = Held()
    assert limiter(500, first) is True and first.called  # the first write goes at once
    waits = [Held() for _ in range(3)]
    assert [limiter(500, w) for w in waits] == [False] * 3
    assert not any(w.called for w in waits)
    clock.advance(0.49)
    assert not waits[0].called
    clock.advance(0.02)
    assert waits[0].called and not waits[1].called
    clock.advance(0.5)  # t = 1.01
    assert waits[1].called and not waits[2].called
    clock.advance(0.5)  # t = 1.51
    assert waits[2].called
    clock.advance(10)  # idle: no debt carried forward
    assert limiter(100, Held()) is True


@pytest.mark.parametrize("phase", [0.0, 0.0037])
def test_rate_limiter_lets_many_small_writes_go_together_never_early(phase):
    """400 KB/s of 100-byte entries: one timer per tick, not one per entry; each
    write goes at its time or within a tick after it, and the rate holds."""
    clock = task.Clock()
    limiter = RateLimiter(400_000, clock, phase=phase)
    due, waits = [], []
    for i in range(4_000):  # one second's worth, asked for at once
        w = Held(clock)
        limiter(100, w)
        due.append(i * 100 / 400_000)
        waits.append(w)
    assert waits[0].called and not any(w.called for w in waits[1:])
    # 1 s / TICK, and one more where the grid's phase cuts the second's last tick in two
    assert len(clock.getDelayedCalls()) == (100 if phase == 0 else 101)
    assert all(round((c.getTime() - phase) / RateLimiter.TICK, 6).is_integer() for c in clock.getDelayedCalls())
    while clock.getDelayedCalls():
        clock.advance(min(c.getTime() for c in clock.getDelayedCalls()) - clock.seconds())
    assert all(w.called for w in waits)
    for i, w in enumerate(waits[1:], 1):
        assert due[i] - 1e-9 <= w.at <= due[i] + RateLimiter.TICK + 1e-9, (i, w.at)


def test_rate_limiters_do_not_share_a_grid():
    """Daemons whose clocks agree (NTP) must not let their waiting writes go at
    the same instants: each limiter's grid has its own phase."""
    clock = task.Clock()
    limiters = [RateLimiter(1000, clock) for _ in range(4)]
    assert len({limiter.phase for limiter in limiters}) == 4
    assert all(0 <= limiter.phase < RateLimiter.TICK for limiter in limiters)
    for limiter in limiters:
        limiter(500, Held())
        limiter(500, Held())
    assert len({round(c.getTime(), 9) for c in clock.getDelayedCalls()}) == 4


def test_rate_limiter_off():
    for rate in (-1, 0):
        now = Held()
        assert RateLimiter(rate, task.Clock())(10**9, now, "x") is True
        assert now.called and now.tag == "x"  # called with the arguments given


@pytest.mark.parametrize("rate", [-1, 1_000_000])
def test_batched_limiter_lets_a_ticks_writes_go_together(rate):
    """Batched, no write goes at once, with a rate or without: those asked for
    before a tick of the limiter's grid go at that tick, with one timer, in the
    order they were asked for."""
    clock = task.Clock()
    clock.advance(1.0)
    limiter = RateLimiter(rate, clock, phase=0.004, batched=True)
    order = []
    first = [Held() for _ in range(5)]
    for i, w in enumerate(first):
        assert limiter(100, lambda i=i, w=w: (order.append(i), w())) is False
    assert not any(w.called for w in first)
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(0.0039)
    assert not any(w.called for w in first)
    clock.advance(0.0002)  # t = 1.0041: past the tick at 1.004
    assert all(w.called for w in first) and order == [0, 1, 2, 3, 4]
    later = Held()
    limiter(100, later)  # asked for after the tick: the next one, 10 ms on
    clock.advance(RateLimiter.TICK - 0.0002)
    assert not later.called
    clock.advance(0.0002)
    assert later.called


def test_a_held_write_that_fails_does_not_keep_the_ticks_others_back():
    clock = task.Clock()
    limiter = RateLimiter(-1, clock, phase=0.0, batched=True)
    before, after = Held(), Held()

    def broken():
        raise RuntimeError("bug")

    limiter(100, before)
    limiter(100, broken)
    limiter(100, after)
    clock.advance(RateLimiter.TICK)
    assert before.called and after.called
    assert not clock.getDelayedCalls()


def test_a_ticks_writes_leave_once_per_connection():
    """What a tick lets go is sent as one burst: the connections hold the frames
    and write each its own once, at the end (the client's cork), not once per entry."""
    clock = task.Clock()
    cork = Cork()
    limiter = RateLimiter(-1, clock, phase=0.0, batched=True, cork=cork)
    corked = []
    for _ in range(3):
        limiter(100, lambda: corked.append(cork.holders is not None))
    clock.advance(RateLimiter.TICK)
    assert corked == [True, True, True] and cork.holders is None


def test_a_workers_adds_leave_in_batches_on_its_grid():
    """With no replicationRateByBytes (the default) a worker's adds still wait for
    the next tick of its grid, so that what it copies reaches a bookie in batches."""
    clock = task.Clock()
    worker = ReplicationWorker(type("Client", (), {"store": None})(), AutoRecoveryConfig(), clock)
    waits = [Held() for _ in range(3)]
    assert [worker.pace(140, w) for w in waits] == [False] * 3
    assert not any(w.called for w in waits)
    clock.advance(RateLimiter.TICK)
    assert all(w.called for w in waits)


def test_config_keys_in_javas_units():
    c = config_from_settings(
        {
            "lostBookieRecoveryDelay": "30",
            "openLedgerRereplicationGracePeriod": "2500",
            "lockReleaseOfFailedLedgerGracePeriod": "1000",
            "rereplicationEntryBatchSize": "5",
            "replicationRateByBytes": "-1",
            "auditorReplicasCheckInterval": "3600",
        }
    )
    assert c.lost_bookie_recovery_delay == 30
    assert c.open_ledger_rereplication_grace_period == pytest.approx(2.5)
    assert c.lock_release_of_failed_ledger_grace_period == pytest.approx(1.0)
    assert (c.rereplication_entry_batch_size, c.replication_rate_by_bytes) == (5, -1)
    assert c.auditor_replicas_check_interval == 3600


def test_placement_keys():
    c = config_from_settings(
        {
            "ensemblePlacementPolicy": "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy",
            "enforceMinNumRacksPerWriteQuorum": "true",
            "minNumRacksPerWriteQuorum": "3",
            "networkTopologyScriptFileName": "/bin/rack-of",
            "auditorPeriodicPlacementPolicyCheckInterval": "60",
        }
    )
    assert c.ensemble_placement_policy.endswith("RegionAwareEnsemblePlacementPolicy")
    assert (c.enforce_min_racks_per_write_quorum, c.min_racks_per_write_quorum) == (True, 3)
    assert (c.network_topology_script, c.auditor_placement_policy_check_interval) == ("/bin/rack-of", 60)


@pytest.mark.parametrize(
    "settings, word",
    [
        (
            {"ensemblePlacementPolicy": "com.example.MyPolicy"},
            "ensemblePlacementPolicy: 'com.example.MyPolicy' is not supported",
        ),
        ({"enforceMinNumRacksPerWriteQuorum": "maybe"}, "is not a boolean"),
        ({"nope": "1"}, "unknown autorecovery key 'nope'"),
        ({"bookiePort": "3181"}, "unknown autorecovery key"),
        ({"lostBookieRecoveryDelay": "x"}, "is not an integer"),
        ({"lostBookieRecoveryDelay": "-1"}, "must not be negative"),
        ({"rereplicationEntryBatchSize": "0"}, "must be at least 1"),
    ],
)
def test_config_errors_name_the_key(settings, word):
    with pytest.raises(ValueError, match=word):
        config_from_settings(settings)


# `--set` takes what bookied takes, and refuses what it refuses (bookied's schema
# checks both); these four once disagreed.  Refusals come before ZooKeeper is
# asked anything (the URI below has no server).
@pytest.mark.parametrize(
    "setting, message",
    [
        ("minNumRacksPerWriteQuorum=0", "minNumRacksPerWriteQuorum: '0' must be at least 1"),
        ("networkTopologyScriptNumberArgs=0", "networkTopologyScriptNumberArgs: '0' must be at least 1"),
        (
            "lostBookieRecoveryDelay=99999999999",
            "lostBookieRecoveryDelay: '99999999999' is too large (at most 2147483647)",
        ),
    ],
)
def test_autorecovery_run_set_refuses_what_bookied_refuses(setting, message, capsys):
    from bkctl.bookied.config import ConfigError, load_config

    key, _, value = setting.partition("=")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(overrides={key: value})
    assert run(["-m", NO_ZOOKEEPER, "autorecovery", "run", "--set", setting]) == USAGE
    err = capsys.readouterr().err.strip()
    assert err == f"bkctl: error: --set: {message}"


def test_autorecovery_run_set_takes_what_bookied_takes(capsys):
    from bkctl.bookied.config import load_config

    assert load_config(overrides={"enforceMinNumRacksPerWriteQuorum": "yes"}).enforce_min_num_racks_per_write_quorum
    assert config_from_settings({"enforceMinNumRacksPerWriteQuorum": "yes"}).enforce_min_racks_per_write_quorum
    # past --set, the next check (the bookie id) is the one that stops the command
    assert (
        run(
            [
                "-m",
                NO_ZOOKEEPER,
                "autorecovery",
                "run",
                "--set",
                "enforceMinNumRacksPerWriteQuorum=yes",
                "--bookie-id",
                "readonly",
            ]
        )
        == USAGE
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("bkctl: error: --bookie-id 'readonly'") and "\n" not in err


def test_entries_held_by_each_position():
    # E3 Qw2: entry e is on positions e%3 and (e+1)%3
    md = LedgerMetadata.new(("a:1", "b:1", "c:1"), 2, 2, password=b"")
    md = md.with_ensemble_change(10, ("a:1", "b:1", "d:1"))
    assert entries_held(md, 0, 0, 99) == (0, 9)  # a holds 0,2,3,5,6,8,9
    assert entries_held(md, 0, 1, 99) == (0, 9)  # b holds 0,1,3,4,6,7,9
    assert entries_held(md, 0, 2, 99) == (1, 8)
    assert entries_held(md, 1, 2, 10) == (10, 10)  # d holds 10 of a segment that ends at 10
    assert entries_held(md, 1, 1, 9) is None  # the segment is empty
    single = LedgerMetadata.new(("a:1", "b:1", "c:1"), 2, 2, password=b"")
    assert entries_held(single, 0, 2, 0) is None  # entry 0 is on positions 0 and 1 only


def test_set_takes_the_autorecovery_section_of_the_schema():
    """`autorecovery run --set` says it takes the keys of bookied.conf(5)'s Autorecovery
    section but autoRecoveryDaemonEnabled and autoRecoveryDaemonCpuPriority (bookied's own);
    the daemon's keys and the schema must agree."""
    from bkctl.bookied.config import OPTIONS
    from bkctl.wire.autorecovery.config import CONFIG_KEYS

    section = {opt.name for opt in OPTIONS if opt.section == "autorecovery"}
    assert set(CONFIG_KEYS) == section - {"autoRecoveryDaemonEnabled", "autoRecoveryDaemonCpuPriority"}


def test_the_daemons_defaults_are_the_schemas():
    """AutoRecoveryConfig's defaults are bookied.conf(5)'s (in the config's units): a default
    changed on one side only (rereplicationEntryBatchSize went from Java's 10 to 40) fails here."""
    from dataclasses import fields

    from bkctl.bookied.config import OPTIONS_BY_NAME
    from bkctl.wire.autorecovery.config import CONFIG_KEYS, AutoRecoveryConfig, config_from_keys

    defaults = {f.name: f.default for f in fields(AutoRecoveryConfig)}
    for key, (name, scale) in CONFIG_KEYS.items():
        schema = OPTIONS_BY_NAME[key].default
        assert defaults[name] == (schema * scale if schema is not None and scale != 1 else schema), key
    # and a config built from the schema's defaults alone is the dataclass's
    assert config_from_keys({k: OPTIONS_BY_NAME[k].default for k in CONFIG_KEYS}) == AutoRecoveryConfig()
