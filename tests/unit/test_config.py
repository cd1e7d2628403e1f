"""Tests for bookied.config: bk_server.conf parsing, validation and writing."""

from __future__ import annotations

import logging
import socket
import string
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.bookied.config import (
    IGNORED_KEYS,
    OPTIONS,
    OPTIONS_BY_NAME,
    SECTIONS,
    BookieConfig,
    ConfigError,
    Resolver,
    find_option,
    load_config,
    load_config_text,
    read_properties,
    render_config,
    resolve_bookie_address,
    resolve_bookie_id,
    resolve_listen_host,
    startup_warnings,
)

LOGGER = "bookied.config"


def write(tmp_path: Path, text: str, name: str = "bk_server.conf") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# Schema


def test_schema_names_are_unique_and_match_dataclass():
    names = [opt.name for opt in OPTIONS]
    assert len(names) == len(set(names))
    assert len({opt.attr for opt in OPTIONS}) == len(OPTIONS)
    assert len({opt.flag for opt in OPTIONS}) == len(OPTIONS)
    assert set(OPTIONS_BY_NAME) == set(names)
    assert not IGNORED_KEYS & set(names)
    assert {opt.section for opt in OPTIONS} <= {name for name, _ in SECTIONS}


@pytest.mark.parametrize(
    "key, attr, flag",
    [
        ("bookiePort", "bookie_port", "--bookie-port"),
        ("useHostNameAsBookieID", "use_host_name_as_bookie_id", "--use-host-name-as-bookie-id"),
        ("journalMaxGroupWaitMSec", "journal_max_group_wait_msec", "--journal-max-group-wait-msec"),
        ("journalMaxSizeMB", "journal_max_size_mb", "--journal-max-size-mb"),
        ("dbStorage_writeCacheMaxSizeMb", "db_storage_write_cache_max_size_mb", "--db-storage-write-cache-max-size-mb"),
        ("zkLedgersRootPath", "zk_ledgers_root_path", "--zk-ledgers-root-path"),
    ],
)
def test_attribute_and_flag_names(key, attr, flag):
    opt = OPTIONS_BY_NAME[key]
    assert (opt.attr, opt.flag) == (attr, flag)
    assert find_option(key) is find_option(attr) is find_option(flag) is opt


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_every_option_is_documented_and_its_default_is_valid(opt):
    assert opt.meaning and opt.meaning[0].isupper() and opt.meaning.endswith(".")
    assert opt.meaning.count(". ") == 0, "meaning should be one sentence"
    assert opt.type in ("int", "float", "bool", "str", "list")
    assert opt.help_text().startswith(opt.meaning)
    if opt.default is not None:
        assert opt.convert(opt.format_value(opt.default)) == opt.default
    else:
        assert opt.default_text  # "unset" or "derived from ..."


def test_range_text():
    assert OPTIONS_BY_NAME["bookiePort"].range_text == "0 <= value <= 65535"
    assert OPTIONS_BY_NAME["diskUsageThreshold"].range_text == "0 < value < 1"
    assert OPTIONS_BY_NAME["journalMaxSizeMB"].range_text == "value >= 1"
    assert OPTIONS_BY_NAME["allowLoopback"].range_text is None


# ---------------------------------------------------------------------------
# Defaults

JAVA_DEFAULTS = {
    "bookiePort": 3181,
    "bookieId": None,
    "advertisedAddress": None,
    "listeningInterface": None,
    "allowLoopback": False,
    "useHostNameAsBookieID": False,
    "journalDirectories": ("/tmp/bk-txn",),
    "journalDirectory": "/tmp/bk-txn",
    "ledgerDirectories": ("/tmp/bk-data",),
    "indexDirectories": ("/tmp/bk-data",),
    "metadataServiceUri": None,
    "zkServers": None,
    "zkLedgersRootPath": "/ledgers",
    "zkTimeout": 10000,
    "journalMaxGroupWaitMSec": 2,
    "journalBufferedWritesThreshold": 524288,
    "journalMaxSizeMB": 2048,
    "journalSyncData": True,
    "journalWriteData": True,
    "diskUsageThreshold": 0.95,
    "diskUsageWarnThreshold": 0.90,
    "diskUsageLwmThreshold": 0.95,
    "diskCheckInterval": 10000,
    "gcWaitTime": 600000,
    "readOnlyModeEnabled": True,
    "httpServerEnabled": False,
    "httpServerPort": 8080,
    "nettyMaxFrameSizeBytes": 5242880,
    "flushInterval": 10000,
    "allowStorageExpansion": False,
    "maxAddsInProgressLimit": 0,
}


def test_defaults_without_a_file():
    cfg = load_config()
    for key, value in JAVA_DEFAULTS.items():
        assert cfg[key] == value, key
    assert cfg.bookie_port == 3181
    assert cfg.metadata is None and cfg.zk_connect_string is None
    assert cfg.source_of("bookiePort") is None


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(write(tmp_path, "")) == load_config()


def test_lookup_by_java_key():
    cfg = load_config(overrides={"bookiePort": "4000"})
    assert cfg["bookiePort"] == cfg.bookie_port == 4000
    assert cfg["bookie_port"] == 4000
    assert cfg.get("nope", "x") == "x"
    assert "bookiePort" in cfg and "nope" not in cfg
    with pytest.raises(KeyError):
        cfg["nope"]
    assert list(cfg.as_dict()) == [opt.name for opt in OPTIONS]
    assert isinstance(cfg, BookieConfig)


def test_config_is_frozen():
    cfg = load_config()
    with pytest.raises(AttributeError):
        cfg.bookie_port = 1  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Syntax


@pytest.mark.parametrize(
    "line",
    [
        "bookiePort=4181",
        "bookiePort = 4181",
        "bookiePort: 4181",
        "bookiePort:4181",
        "bookiePort 4181",
        "bookiePort\t4181",
        "   bookiePort=4181   ",
        "\tbookiePort =\t4181",
        "bookiePort=\\\n  4181",
        "bookiePort=41\\\n     81",
    ],
)
def test_separator_variants(tmp_path, line):
    assert load_config(write(tmp_path, line + "\n")).bookie_port == 4181


def test_comments_blank_lines_and_line_endings(tmp_path):
    text = (
        "# a comment\r\n"
        "! another comment\r\n"
        "   # indented comment\r\n"
        "\r\n"
        "bookiePort=4181\r\n"
        "#bookiePort=1\r\n"
        "httpServerPort=9090"
    )
    cfg = load_config(write(tmp_path, text))
    assert (cfg.bookie_port, cfg.http_server_port) == (4181, 9090)


def test_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "bk_server.conf"
    path.write_bytes(b"\xef\xbb\xbfbookiePort=4181\n")
    assert load_config(path).bookie_port == 4181


def test_latin1_file(tmp_path):
    path = tmp_path / "bk_server.conf"
    path.write_bytes("journalDirectory=/data/caf\xe9\n".encode("latin-1"))
    assert load_config(path).journal_directory == "/data/caf\xe9"


def test_continuation_skips_comment_lines_like_commons(tmp_path):
    text = "ledgerDirectories=/d1,\\\n    /d2,\\\n# a comment inside the value\n\n    /d3\nbookiePort=4181\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.ledger_directories == ("/d1", "/d2", "/d3")
    assert cfg.bookie_port == 4181


def test_even_backslashes_do_not_continue(tmp_path):
    cfg = load_config(write(tmp_path, "journalDirectory=C:\\\\\nbookiePort=4181\n"))
    assert cfg.journal_directory == "C:\\"
    assert cfg.bookie_port == 4181


def test_lists(tmp_path):
    text = "ledgerDirectories = /a , /b,,/c ,\njournalDirectories=/j\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.ledger_directories == ("/a", "/b", "/c")
    assert cfg.journal_directories == ("/j",)


def test_repeated_list_key_accumulates_like_java(tmp_path):
    cfg = load_config(write(tmp_path, "ledgerDirectories=/a\nledgerDirectories=/b,/c\n"))
    assert cfg.ledger_directories == ("/a", "/b", "/c")


def test_repeated_scalar_key_first_wins_with_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cfg = load_config(write(tmp_path, "bookiePort=4181\n\nbookiePort=5181\n"))
    assert cfg.bookie_port == 4181
    assert "bk_server.conf:3: bookiePort set again" in caplog.text
    assert "bk_server.conf:1" in caplog.text


def test_escapes(tmp_path):
    text = "journalDirectory=/data\\,x\\\\y\\u00e9\\tz\nledgerDirectories=/a\\,b,/c\nbookieId=bk\\=1\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.journal_directory == "/data,x\\y\u00e9\tz"
    assert cfg.ledger_directories == ("/a,b", "/c")
    assert cfg.bookie_id == "bk=1"


def test_empty_value_means_unset_for_strings_and_lists(tmp_path):
    cfg = load_config(write(tmp_path, "advertisedAddress=\nledgerDirectories=\nzkLedgersRootPath=\n"))
    assert cfg.advertised_address is None
    assert cfg.ledger_directories == ("/tmp/bk-data",)
    assert cfg.zk_ledgers_root_path == "/ledgers"


@pytest.mark.parametrize(
    "spelling, value",
    [
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("False", False),
        ("no", False),
        ("off", False),
    ],
)
def test_boolean_spellings(spelling, value):
    assert load_config_text(f"httpServerEnabled={spelling}").http_server_enabled is value


def test_java_float_suffix_is_accepted():
    assert load_config_text("diskUsageThreshold=0.97f").disk_usage_threshold == 0.97


def test_read_properties():
    text = "a=1\n# c\nb : x\\,y\nc\\ d  e\\\n  f\n"
    assert read_properties(text) == [(1, "a", "1"), (3, "b", "x,y"), (4, "c d", "ef")]


# ---------------------------------------------------------------------------
# Fallbacks


def test_journal_directory_fallback(tmp_path):
    cfg = load_config(write(tmp_path, "journalDirectory=/var/bk/journal\n"))
    assert cfg.journal_directories == ("/var/bk/journal",)
    assert cfg.is_derived("journalDirectories")


def test_journal_directories_win_over_journal_directory(tmp_path):
    text = "journalDirectory=/old\njournalDirectories=/j1,/j2\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.journal_directories == ("/j1", "/j2")
    assert cfg.journal_directory == "/old"
    assert not cfg.is_derived("journalDirectories")


def test_index_directories_fall_back_to_ledger_directories():
    cfg = load_config_text("ledgerDirectories=/l1,/l2")
    assert cfg.index_directories == ("/l1", "/l2")
    cfg = load_config_text("ledgerDirectories=/l1\nindexDirectories=/i1")
    assert cfg.index_directories == ("/i1",)


def test_low_water_mark_falls_back_to_threshold():
    cfg = load_config_text("diskUsageThreshold=0.8\ndiskUsageWarnThreshold=0.7")
    assert cfg.disk_usage_lwm_threshold == 0.8
    cfg = load_config_text("diskUsageLwmThreshold=0.85")
    assert cfg.disk_usage_lwm_threshold == 0.85


# ---------------------------------------------------------------------------
# Overrides


def test_overrides_beat_the_file(tmp_path):
    path = write(tmp_path, "bookiePort=4181\nledgerDirectories=/a,/b\nhttpServerEnabled=true\n")
    cfg = load_config(path, {"bookiePort": "5181", "ledgerDirectories": "/c", "httpServerEnabled": "false"})
    assert cfg.bookie_port == 5181
    assert cfg.ledger_directories == ("/c",)
    assert cfg.http_server_enabled is False
    assert cfg.source_of("bookiePort") == "command line"
    assert cfg.source_of("journalMaxSizeMB") is None


def test_source_of_names_file_and_line(tmp_path):
    path = write(tmp_path, "\nbookiePort=4181\n")
    assert load_config(path).source_of("bookiePort") == f"{path}:2"


def test_override_spellings_and_types():
    cfg = load_config(
        overrides={
            "bookie_port": 4000,
            "--http-server-port": "9000",
            "allow-loopback": True,
            "ledgerDirectories": ["/x", "/y"],
            "zkTimeout": None,  # skipped, like an unset click option
        }
    )
    assert cfg.bookie_port == 4000
    assert cfg.http_server_port == 9000
    assert cfg.allow_loopback is True
    assert cfg.ledger_directories == ("/x", "/y")
    assert cfg.zk_timeout == 10000


def test_unknown_override_is_an_error():
    with pytest.raises(ConfigError, match="unknown configuration key 'bookiePrt'.*bookiePort"):
        load_config(overrides={"bookiePrt": "1"})


def test_placement_policy_is_checked_and_reaches_autorecovery():
    from bkctl.wire.autorecovery.config import config_from_keys

    with pytest.raises(ConfigError, match="ensemblePlacementPolicy: 'com.example.Mine' is not supported"):
        load_config(overrides={"ensemblePlacementPolicy": "com.example.Mine"})
    cfg = load_config(
        overrides={
            "ensemblePlacementPolicy": "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy",
            "enforceMinNumRacksPerWriteQuorum": "true",
        }
    )
    ar = config_from_keys(cfg)
    assert ar.ensemble_placement_policy.endswith("RegionAwareEnsemblePlacementPolicy")
    assert ar.enforce_min_racks_per_write_quorum is True


def test_ignored_java_key_override_is_accepted():
    assert load_config(overrides={"numAddWorkerThreads": "4"}) == load_config()


def test_with_overrides_revalidates(tmp_path):
    base = load_config(write(tmp_path, "bookiePort=4181\nzkServers=zk1:2181\n"))
    changed = base.with_overrides({"bookiePort": "4182"})
    assert changed.bookie_port == 4182
    assert changed.zk_servers == ("zk1:2181",)
    with pytest.raises(ConfigError):
        base.with_overrides({"bookiePort": "x"})


# ---------------------------------------------------------------------------
# Unknown and ignored keys


def test_unknown_key_warns_with_file_and_line(tmp_path, caplog):
    path = write(tmp_path, "bookiePort=4181\n# comment\nnoSuchKey=1\nbookiePrt=2\n")
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        cfg = load_config(path)
    assert cfg.bookie_port == 4181
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.name for r in warnings] == [LOGGER, LOGGER]
    assert f"{path}:3: unknown key 'noSuchKey'" in warnings[0].getMessage()
    assert f"{path}:4: unknown key 'bookiePrt'" in warnings[1].getMessage()
    assert "did you mean 'bookiePort'" in warnings[1].getMessage()


def test_wrong_case_key_gets_a_hint(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        load_config_text("bookieport=1", source="x.conf")
    assert "x.conf:1: unknown key 'bookieport'" in caplog.text
    assert "case-sensitive" in caplog.text


def test_each_unsupported_java_key_is_warned_about_once(tmp_path, caplog):
    text = (
        "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
        "entryLogFilePreallocationEnabled=true\n"
        "numAddWorkerThreads=8\n"
        "entryLogFilePreallocationEnabled=false\n"
        "auditorLedgerVerificationPercentage=10\n"
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cfg = load_config(write(tmp_path, text))
    assert cfg == load_config()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4, warnings
    path = str(tmp_path / "bk_server.conf")
    for line, key in (
        (1, "ledgerStorageClass"),
        (2, "entryLogFilePreallocationEnabled"),
        (3, "numAddWorkerThreads"),
        (5, "auditorLedgerVerificationPercentage"),
    ):
        assert (
            f"{path}:{line}: {key} is a Java bookie setting that bookied does not support; it has no effect" in warnings
        )


def test_an_unsupported_key_given_as_an_override_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        load_config(overrides={"journalQueueSize": "100"})
    assert "command line: journalQueueSize is a Java bookie setting that bookied does not support" in caplog.text


def test_force_read_only_needs_read_only_mode():
    with pytest.raises(ConfigError, match="forceReadOnlyBookie: 'true' contradicts readOnlyModeEnabled=false"):
        load_config_text("readOnlyModeEnabled=false\nforceReadOnlyBookie=true\n")
    assert not load_config_text("readOnlyModeEnabled=false\n").read_only_mode_enabled


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("journalSyncData=false", ["journalSyncData=false: journal writes are NOT fsynced"]),
        (
            "journalWriteData=false\nflushInterval=5000",
            ["journalWriteData=false: entries are NOT journaled", "flushInterval 5000 ms"],
        ),
        ("journalAdaptiveGroupWrites=false", ["journalAdaptiveGroupWrites=false is not supported by bookied"]),
    ],
)
def test_startup_warnings(text, expected):
    warnings = startup_warnings(load_config_text(text))
    assert len(warnings) == (1 if expected else 0)
    for phrase in expected:
        assert phrase in warnings[0]


def test_stock_java_sample_loads_quietly(caplog):
    sample = """
bookiePort=3181
# listeningInterface=eth0
httpServerEnabled=false
httpServerPort=8080
httpServerClass=org.apache.bookkeeper.http.vertx.VertxHttpServer
journalDirectories=/tmp/bk-txn
ledgerDirectories=/tmp/bk-data
metadataServiceUri=zk+hierarchical://localhost:2181/ledgers
zkServers=localhost:2181
zkTimeout=10000
zkEnableSecurity=false
"""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cfg = load_config_text(sample, source="bk_server.conf")
    # only the key bookied cannot honour is mentioned
    assert [r.getMessage().split(" is a Java")[0] for r in caplog.records] == [
        "bk_server.conf:6: httpServerClass"
    ]  # zkEnableSecurity is supported
    assert cfg.metadata_service_uri == "zk+hierarchical://localhost:2181/ledgers"
    assert cfg.zk_servers == ("localhost:2181",)


# ---------------------------------------------------------------------------
# Bad values


def test_error_message_format(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "\n" * 11 + "bookiePort=abc\n")
    with pytest.raises(ConfigError) as info:
        load_config("bk_server.conf")
    assert str(info.value) == "bk_server.conf:12: bookiePort: 'abc' is not an integer"
    err = info.value
    assert (err.key, err.value, err.path, err.line) == ("bookiePort", "abc", "bk_server.conf", 12)
    assert isinstance(err, Exception)


@pytest.mark.parametrize(
    "key, value, problem",
    [
        ("bookiePort", "abc", "is not an integer"),
        ("bookiePort", "3181.5", "is not an integer"),
        ("bookiePort", "70000", "out of range (0..65535)"),
        ("bookiePort", "-1", "out of range"),
        ("bookiePort", "", "is empty"),
        ("bookiePort", "3181,3182", "unescaped ','"),
        ("httpServerPort", "http", "is not an integer"),
        ("zkTimeout", "0", "must be at least 1"),
        ("diskUsageThreshold", "1.5", "out of range"),
        ("diskUsageThreshold", "1", "out of range"),
        ("diskUsageThreshold", "0", "out of range"),
        ("diskUsageThreshold", "lots", "is not a number"),
        ("diskUsageWarnThreshold", "-0.1", "out of range"),
        ("diskUsageWarnThreshold", "0.97", "is above diskUsageThreshold (0.95)"),
        ("diskUsageLwmThreshold", "0.99", "is above diskUsageThreshold (0.95)"),
        ("journalMaxSizeMB", "-1", "must be at least 1"),
        ("journalBufferedWritesThreshold", "-1", "must not be negative"),
        ("nettyMaxFrameSizeBytes", "-5242880", "must be at least 1"),
        ("dbStorage_writeCacheMaxSizeMb", "0", "must be at least 1"),
        ("journalMaxGroupWaitMSec", "99999999999999999999", "is too large"),
        ("httpServerEnabled", "maybe", "is not a boolean"),
        ("readOnlyModeEnabled", "2", "is not a boolean (true/false, yes/no, on/off, 1/0)"),
        ("bookieId", "readonly", "is reserved"),
        ("bookieId", "bk/1", "is not a valid bookie id"),
        ("bookieId", "bk 1", "is not a valid bookie id"),
        ("advertisedAddress", "host name", "not allowed in a bookie id"),
        ("listeningInterface", "eth 0", "must not contain blanks"),
        ("zkLedgersRootPath", "ledgers", "must be an absolute ZooKeeper path"),
        ("zkLedgersRootPath", "/ledgers/", "must not end with '/'"),
        ("zkServers", "zk1:2181,zk 2", "is not a host[:port]"),
        ("zkServers", "zk1:99999", "port outside 1..65535"),
        ("metadataServiceUri", "etcd://etcd1:2379/ledgers", "only ZooKeeper (zk) is supported"),
        ("metadataServiceUri", "zk+hierarchical://zk1:2181,zk2:2181/ledgers", "unescaped ','"),
        ("metadataServiceUri", "zk+weird://zk1:2181/ledgers", "unknown ledger manager 'weird'"),
        ("metadataServiceUri", "zk+ms://zk1:2181/ledgers", "do not support"),
        ("metadataServiceUri", "zk://zk1:2181/ledgers?timeout=5", "has a query"),
        ("metadataServiceUri", "zk://zk1:2181/ledgers/", "must not end with '/'"),
        ("metadataServiceUri", "zk+hierarchical://zk1:2181", "no ledgers root path"),
        ("metadataServiceUri", "zk+hierarchical:///ledgers", "names no ZooKeeper server"),
        ("metadataServiceUri", "localhost:2181", "is not a metadata service URI"),
        ("journalDirectory", "\\u12", "malformed \\uXXXX"),
    ],
)
def test_bad_values_name_key_value_and_line(key, value, problem):
    text = f"# header\n{key}={value}\n"
    with pytest.raises(ConfigError) as info:
        load_config_text(text, source="bk.conf")
    message = str(info.value)
    assert message.startswith(f"bk.conf:2: {key}: {value!r} "), message
    assert problem in message
    assert info.value.key == key and info.value.line == 2


def test_bad_override_has_no_file_location():
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"bookiePort": "abc"})
    assert str(info.value) == "bookiePort: 'abc' is not an integer"
    assert info.value.path is None and info.value.line is None


def test_warn_default_above_lowered_threshold_blames_the_threshold():
    with pytest.raises(ConfigError) as info:
        load_config_text("\ndiskUsageThreshold=0.85", source="f")
    assert str(info.value).startswith("f:2: diskUsageThreshold: '0.85' is below diskUsageWarnThreshold (0.9")


def test_ephemeral_port_needs_allow_ephemeral_ports():
    with pytest.raises(ConfigError, match="f:1: bookiePort: '0' asks for an ephemeral port"):
        load_config_text("bookiePort=0", source="f")
    assert load_config_text("bookiePort=0\nallowEphemeralPorts=true").bookie_port == 0


def test_http_port_clash():
    with pytest.raises(ConfigError, match="httpServerPort: '3181' is the same port as bookiePort"):
        load_config(overrides={"httpServerEnabled": "true", "httpServerPort": "3181"})
    # Not enabled: no clash.
    load_config(overrides={"httpServerPort": "3181"})


def test_unreadable_file(tmp_path):
    missing = tmp_path / "nope.conf"
    with pytest.raises(ConfigError, match="nope.conf: cannot read configuration"):
        load_config(missing)


# ---------------------------------------------------------------------------
# Metadata service URI


def test_uri_derived_from_zk_servers():
    cfg = load_config_text("zkServers=zk1:2181, zk2:2181\nzkLedgersRootPath=/bk/ledgers")
    assert cfg.metadata_service_uri == "zk+hierarchical://zk1:2181;zk2:2181/bk/ledgers"
    assert cfg.is_derived("metadataServiceUri")
    assert cfg.zk_connect_string == "zk1:2181,zk2:2181"
    meta = cfg.metadata
    assert meta is not None
    assert (meta.manager, meta.servers, meta.root) == ("hierarchical", ("zk1:2181", "zk2:2181"), "/bk/ledgers")


def test_uri_derived_with_default_root():
    cfg = load_config(overrides={"zkServers": "localhost:2181"})
    assert cfg.metadata_service_uri == "zk+hierarchical://localhost:2181/ledgers"


def test_zk_keys_follow_the_uri():
    cfg = load_config_text("metadataServiceUri=zk+hierarchical://a:2181;b:2182/my/ledgers")
    assert cfg.zk_servers == ("a:2181", "b:2182")
    assert cfg.zk_ledgers_root_path == "/my/ledgers"
    assert cfg.is_derived("zkServers") and cfg.is_derived("zkLedgersRootPath")
    assert cfg.zk_connect_string == "a:2181,b:2182"


def test_uri_wins_over_conflicting_zk_keys(caplog):
    text = "metadataServiceUri=zk+hierarchical://a:2181/ledgers\nzkServers=other:2181\nzkLedgersRootPath=/elsewhere\n"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cfg = load_config_text(text, source="f")
    assert cfg.zk_servers == ("a:2181",)
    assert cfg.zk_ledgers_root_path == "/ledgers"
    assert "f:2: zkServers 'other:2181' ignored" in caplog.text
    assert "f:3: zkLedgersRootPath '/elsewhere' ignored" in caplog.text


def test_consistent_zk_keys_do_not_warn(caplog):
    text = "metadataServiceUri=zk+hierarchical://a:2181;b:2181/ledgers\nzkServers=a:2181,b:2181\n"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        load_config_text(text)
    assert not caplog.records


@pytest.mark.parametrize(
    "uri, manager",
    [
        ("zk://zk1:2181/ledgers", "null"),  # as Java: the manager comes from LAYOUT
        ("ZK+LongHierarchical://zk1:2181/ledgers", "longhierarchical"),
        ("zk+null://zk1:2181/ledgers", "null"),
    ],
)
def test_uri_managers(uri, manager):
    parsed = load_config_text(f"metadataServiceUri={uri}").metadata
    assert parsed.manager == manager
    assert parsed.servers == ("zk1:2181",)


def test_no_metadata_configured():
    cfg = load_config()
    assert cfg.metadata_service_uri is None and cfg.zk_servers is None


# ---------------------------------------------------------------------------
# Bookie id


def fake_resolver(*, hostname="bk1", addresses=None, interfaces=None, names=None) -> Resolver:
    addresses = {"bk1": "10.0.0.5", "bk1.example.com": "10.0.0.5"} if addresses is None else addresses
    interfaces = {"eth0": "10.0.0.5", "lo": "127.0.0.1"} if interfaces is None else interfaces
    names = {"10.0.0.5": "bk1.example.com", "127.0.0.1": "localhost"} if names is None else names

    def host_address(name: str) -> str:
        try:
            return addresses[name]
        except KeyError:
            raise OSError(f"unknown host {name}") from None

    def interface_address(name: str) -> str:
        try:
            return interfaces[name]
        except KeyError:
            raise OSError(f"no such network interface {name!r}") from None

    return Resolver(
        local_hostname=lambda: hostname,
        host_address=host_address,
        interface_address=interface_address,
        canonical_name=lambda ip: names.get(ip, ip),
    )


def test_configured_bookie_id_wins():
    cfg = load_config(overrides={"bookieId": "bookie-1", "advertisedAddress": "x"})
    assert resolve_bookie_id(cfg, fake_resolver()) == "bookie-1"


def test_advertised_address_wins_over_interface():
    cfg = load_config(
        overrides={"advertisedAddress": "bk.public.example", "listeningInterface": "eth0", "bookiePort": "3182"}
    )
    assert resolve_bookie_id(cfg, fake_resolver()) == "bk.public.example:3182"


def test_advertised_loopback_is_taken_as_given_like_java():
    cfg = load_config(overrides={"advertisedAddress": "127.0.0.1"})
    assert resolve_bookie_id(cfg, fake_resolver()) == "127.0.0.1:3181"


def test_default_is_ip_of_local_host_name():
    assert resolve_bookie_id(load_config(), fake_resolver()) == "10.0.0.5:3181"


def test_listening_interface_address():
    cfg = load_config(overrides={"listeningInterface": "eth0", "bookiePort": "4000"})
    assert resolve_bookie_id(cfg, fake_resolver(hostname="unresolvable")) == "10.0.0.5:4000"
    assert resolve_listen_host(cfg, fake_resolver()) == "10.0.0.5"
    assert resolve_listen_host(load_config(), fake_resolver()) == "0.0.0.0"


def test_host_name_as_bookie_id():
    cfg = load_config(overrides={"useHostNameAsBookieID": "true"})
    assert resolve_bookie_id(cfg, fake_resolver()) == "bk1.example.com:3181"
    cfg = cfg.with_overrides({"useShortHostName": "true"})
    assert resolve_bookie_id(cfg, fake_resolver()) == "bk1:3181"


def test_loopback_is_refused_by_default():
    # The usual Debian /etc/hosts maps the host name to 127.0.1.1.
    resolver = fake_resolver(addresses={"bk1": "127.0.1.1"})
    with pytest.raises(ConfigError) as info:
        resolve_bookie_id(load_config(), resolver)
    message = str(info.value)
    assert "127.0.1.1:3181" in message and "loopback" in message and "allowLoopback" in message
    assert info.value.key == "allowLoopback"
    allowed = load_config(overrides={"allowLoopback": "true"})
    assert resolve_bookie_id(allowed, resolver) == "127.0.1.1:3181"


def test_loopback_interface_is_refused():
    cfg = load_config(overrides={"listeningInterface": "lo"})
    with pytest.raises(ConfigError, match="loopback"):
        resolve_bookie_id(cfg, fake_resolver())


def test_host_name_resolving_to_loopback_is_refused():
    resolver = fake_resolver(addresses={"bk1": "10.0.0.5", "localhost": "127.0.0.1"}, names={"10.0.0.5": "localhost"})
    cfg = load_config(overrides={"useHostNameAsBookieID": "true"})
    with pytest.raises(ConfigError, match="localhost:3181 is the loopback address 127.0.0.1"):
        resolve_bookie_id(cfg, resolver)


def test_ipv6_loopback_is_refused():
    resolver = fake_resolver(addresses={"bk1": "::1"})
    with pytest.raises(ConfigError, match="loopback"):
        resolve_bookie_address(load_config(), resolver)


def test_unknown_interface(tmp_path):
    path = write(tmp_path, "listeningInterface=eth9\n")
    with pytest.raises(ConfigError) as info:
        resolve_bookie_id(load_config(path), fake_resolver())
    assert str(info.value).startswith(f"{path}:1: listeningInterface: 'eth9' cannot be used")


def test_unresolvable_host_name():
    with pytest.raises(ConfigError, match="cannot resolve the local host name 'ghost'"):
        resolve_bookie_id(load_config(), fake_resolver(hostname="ghost"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux interface ioctl")
def test_real_loopback_interface():
    names = [name for _index, name in socket.if_nameindex()]
    if "lo" not in names:
        pytest.skip("no lo interface")
    cfg = load_config(overrides={"listeningInterface": "lo", "allowLoopback": "true"})
    assert resolve_bookie_id(cfg) == "127.0.0.1:3181"
    assert resolve_listen_host(cfg) == "127.0.0.1"
    with pytest.raises(ConfigError, match="loopback"):
        resolve_bookie_id(cfg.with_overrides({"allowLoopback": "false"}))
    with pytest.raises(ConfigError, match="no such network interface"):
        resolve_bookie_id(cfg.with_overrides({"listeningInterface": "nosuchif0"}))


# ---------------------------------------------------------------------------
# Rendering


def test_render_round_trip_of_defaults(tmp_path):
    cfg = load_config()
    text = render_config(cfg)
    assert "bookiePort=3181" in text
    assert "#journalDirectories=/tmp/bk-txn" in text  # derived: written commented out
    assert load_config(write(tmp_path, text)) == cfg
    assert load_config_text(render_config(cfg, comments=False)) == cfg
    assert load_config_text(render_config(cfg, only_changed=True)) == cfg


def test_render_round_trip_of_awkward_values(tmp_path, caplog):
    overrides = {
        "bookiePort": "4181",
        "bookieId": "bk\\1=[x]",
        "journalDirectories": ["/j,1", "/j#2", "C:\\journal\\", "/caf\u00e9 \U0001f600"],
        "ledgerDirectories": "/l1,/l2",
        "indexDirectories": ["/i: 1!"],
        "diskUsageThreshold": "0.9",
        "diskUsageWarnThreshold": "0.85",
        "diskUsageLwmThreshold": "0.875",
        "metadataServiceUri": "zk+longhierarchical://zk1:2181;zk2:2181/a/b",
        "httpServerEnabled": "true",
        "httpServerPort": "0",
        "journalSyncData": "off",
    }
    cfg = load_config(overrides=overrides)
    text = render_config(cfg)
    text.encode("ascii")  # Java reads .properties as ISO-8859-1: keep the file ASCII
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = load_config(write(tmp_path, text))
    assert not caplog.records
    assert again == cfg
    assert again.journal_directories == ("/j,1", "/j#2", "C:\\journal\\", "/caf\u00e9 \U0001f600")
    assert again.metadata_service_uri == "zk+longhierarchical://zk1:2181;zk2:2181/a/b"
    assert load_config_text(render_config(cfg, only_changed=True)) == cfg


def test_render_only_changed_is_short():
    cfg = load_config(overrides={"bookiePort": "4181", "zkServers": "zk1:2181"})
    text = render_config(cfg, comments=False, only_changed=True)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == ["bookiePort=4181", "zkServers=zk1:2181"]


def test_render_keeps_derived_values_following_their_source():
    cfg = load_config(overrides={"ledgerDirectories": "/l"})
    text = render_config(cfg, comments=False)
    assert "#indexDirectories=/l" in text
    # Editing ledgerDirectories in the written file still moves the index with it.
    edited = text.replace("ledgerDirectories=/l", "ledgerDirectories=/m")
    assert load_config_text(edited).index_directories == ("/m",)


# Property test: any valid configuration survives render -> load.

_path_text = st.text(min_size=1, max_size=12).map(lambda s: "/" + s.strip()).filter(lambda s: s.strip() == s)
_host = st.from_regex(r"[a-z][a-z0-9\-]{0,8}(\.[a-z]{2,4})?", fullmatch=True)
_zk_server = st.builds(lambda h, p: f"{h}:{p}", _host, st.integers(1, 65535))
_zk_path = st.lists(st.from_regex(r"[A-Za-z0-9_\-]{1,6}", fullmatch=True), min_size=1, max_size=3).map(
    lambda parts: "/" + "/".join(parts)
)
_id_text = st.text(alphabet=string.ascii_letters + string.digits + ":;<=>?@[\\]^_.-", min_size=1, max_size=16).filter(
    lambda s: s.lower() != "readonly"
)


def _value_strategy(opt):
    special = {
        "bookiePort": st.integers(1, 65535),
        "bookieId": _id_text,
        "advertisedAddress": _id_text,
        "listeningInterface": st.from_regex(r"[a-z]{2,4}[0-9]{0,2}", fullmatch=True),
        "httpServerHost": _host,
        "prometheusStatsHttpAddress": _host,
        "ensemblePlacementPolicy": st.sampled_from(
            [
                "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
                "RegionAwareEnsemblePlacementPolicy",
                "random",
            ]
        ),
        "tlsProviderFactoryClass": st.just("org.apache.bookkeeper.tls.TLSContextFactory"),
        "zkServers": st.lists(_zk_server, min_size=1, max_size=3),
        "zkLedgersRootPath": _zk_path,
        "metadataServiceUri": st.builds(
            lambda layout, servers, path: f"zk{layout}://{';'.join(servers)}{path}",
            st.sampled_from(["", "+hierarchical", "+longhierarchical"]),
            st.lists(_zk_server, min_size=1, max_size=3),
            _zk_path,
        ),
    }
    if opt.name in special:
        return special[opt.name]
    if opt.choices:
        return st.sampled_from(opt.choices)
    if opt.type == "bool":
        return st.booleans()
    if opt.type == "int":
        return st.integers(opt.min, min(opt.max, 10**12))
    if opt.type == "float":
        return st.floats(0.05, 0.95)
    if opt.type == "list":
        return st.lists(_path_text, min_size=1, max_size=3)
    return _path_text


_COMPACTION_SCHEDULE = {
    "gcWaitTime",
    "minorCompactionInterval",
    "majorCompactionInterval",
    "minorCompactionThreshold",
    "majorCompactionThreshold",
}


@st.composite
def _overrides(draw):
    chosen = {}
    for opt in OPTIONS:
        if (opt.section == "disk" and opt.type == "float") or opt.name in _COMPACTION_SCHEDULE:
            continue
        if draw(st.booleans()):
            chosen[opt.name] = draw(_value_strategy(opt))
    if draw(st.booleans()):  # a schedule Java accepts: minor below major, intervals >= gcWaitTime
        wait_s = draw(st.integers(1, 10**6))
        minor_s = draw(st.integers(wait_s, 10**7))
        minor = draw(st.floats(0.05, 0.5))
        chosen.update(
            gcWaitTime=wait_s * 1000,
            minorCompactionInterval=minor_s,
            majorCompactionInterval=draw(st.integers(minor_s + 1, 10**8)),
            minorCompactionThreshold=minor,
            majorCompactionThreshold=draw(st.floats(minor + 0.01, 1.0)),
        )
    threshold = draw(st.floats(0.1, 0.95))
    chosen["diskUsageThreshold"] = threshold
    if draw(st.booleans()):
        chosen["diskUsageWarnThreshold"] = draw(st.floats(0.05, threshold))
    else:
        chosen["diskUsageWarnThreshold"] = min(0.9, threshold)
    if draw(st.booleans()):
        chosen["diskUsageLwmThreshold"] = draw(st.floats(0.05, threshold))
    if chosen.get("httpServerPort") == chosen.get("bookiePort", 3181):
        chosen.pop("httpServerPort")
    if chosen.get("forceReadOnlyBookie") and chosen.get("readOnlyModeEnabled") is False:
        chosen.pop("forceReadOnlyBookie")  # refused: see test_force_read_only_needs_read_only_mode
    return chosen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overrides=_overrides(), comments=st.booleans(), only_changed=st.booleans())
def test_render_load_round_trip_property(overrides, comments, only_changed):
    cfg = load_config(overrides=overrides)
    text = render_config(cfg, comments=comments, only_changed=only_changed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bk_server.conf"
        path.write_text(text, encoding="utf-8")
        again = load_config(path)
    assert again == cfg
    assert again.as_dict() == cfg.as_dict()


def test_lines_without_key_and_include_directives_warn(caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cfg = load_config_text("=5\ninclude=other.conf\nbookiePort=4181", source="f")
    assert cfg.bookie_port == 4181
    assert "f:1: line without a key ignored" in caplog.text
    assert "f:2: 'include' directives are not supported" in caplog.text


def test_an_invalid_uri_override_is_a_config_error():
    with pytest.raises(ConfigError, match="metadataServiceUri: 'http://x/y' uses metadata driver 'http'"):
        load_config(overrides={"metadataServiceUri": "http://x/y"})
    cfg = load_config(overrides={"metadataServiceUri": "zk://a:1,b:2/l"})
    assert str(cfg.metadata) == "zk://a:1;b:2/l" and cfg.zk_servers == ("a:1", "b:2")
