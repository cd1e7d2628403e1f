"""One boolean vocabulary (bkctl.wire.text.parse_bool) for every place that reads
a yes/no: bk_server.conf, `autorecovery run --set`, BKCTL_FASTPATHS, config.toml
profiles and $BKCTL_ZK_ENABLE_SECURITY, the Spark data source's includeOpen.
Each of them takes the same words and refuses the same words, naming the key."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bkctl.wire.text import BOOLEAN_WORDS, NOT_A_BOOLEAN, parse_bool

TRUE = ["true", "TRUE", "True", " yes ", "Yes", "on", "ON", "1"]
FALSE = ["false", "FALSE", "no", "No", "off", "Off", " 0 "]
REFUSED = ["maybe", "2", "-1", "y", "n", "t", "f", "truee", "o n", "enabled"]


def bookied(value):
    from bkctl.bookied.config import load_config

    return load_config(overrides={"journalSyncData": value}).journal_sync_data


def bookied_file(value):
    from bkctl.bookied.config import load_config_text

    return load_config_text(f"readOnlyModeEnabled={value}\n").read_only_mode_enabled


def autorecovery_set(value):
    from bkctl.ops.bookie_conf import config_from_settings

    return config_from_settings({"enforceMinNumRacksPerWriteQuorum": value}).enforce_min_racks_per_write_quorum


def fastpaths(value):
    from bkctl.wire.fastpath import from_environment

    return from_environment({"BKCTL_FASTPATHS": value})


def profile_zk_enable_security(value):
    from bkctl.clusters import zk_security

    return zk_security({"zk_enable_security": value}).enable_security


def profile_zk_tls(value):
    from bkctl.clusters import zk_security

    return zk_security({"zk_tls": value}).tls


def env_zk_enable_security(value):
    from bkctl.clusters import zk_security

    os.environ["BKCTL_ZK_ENABLE_SECURITY"] = value
    try:
        return zk_security({}).enable_security
    finally:
        del os.environ["BKCTL_ZK_ENABLE_SECURITY"]


def spark_include_open(value):
    from bkctl.export.datasource import ReadOptions

    return ReadOptions(
        {"metadataServiceUri": "zk+hierarchical://127.0.0.1:1/ledgers", "ledgers": "all", "includeOpen": value}
    ).source.selection.include_open


READERS = [
    bookied,
    bookied_file,
    autorecovery_set,
    fastpaths,
    profile_zk_enable_security,
    profile_zk_tls,
    env_zk_enable_security,
    spark_include_open,
]
#: the key each reader names when it refuses a word
KEYS = {
    bookied: "journalSyncData",
    bookied_file: "readOnlyModeEnabled",
    autorecovery_set: "enforceMinNumRacksPerWriteQuorum",
    fastpaths: "BKCTL_FASTPATHS",
    profile_zk_enable_security: "zk_enable_security",
    profile_zk_tls: "zk_tls",
    env_zk_enable_security: "BKCTL_ZK_ENABLE_SECURITY",
    spark_include_open: "includeOpen",
}


def test_the_vocabulary():
    assert {w for w, v in BOOLEAN_WORDS.items() if v} == {"true", "yes", "on", "1"}
    assert {w for w, v in BOOLEAN_WORDS.items() if not v} == {"false", "no", "off", "0"}
    assert parse_bool(True, "k") is True and parse_bool(False, "k") is False  # TOML booleans
    with pytest.raises(ValueError) as info:
        parse_bool("maybe", "someKey")
    assert str(info.value) == f"someKey: 'maybe' {NOT_A_BOOLEAN}"
    with pytest.raises(ValueError):
        parse_bool(1, "k")  # type: ignore[arg-type] - a TOML integer is not a boolean


@pytest.mark.parametrize("read", READERS, ids=lambda r: r.__name__)
def test_every_reader_takes_the_same_words(read):
    assert [read(w) for w in TRUE] == [True] * len(TRUE)
    assert [read(w) for w in FALSE] == [False] * len(FALSE)


@pytest.mark.parametrize("read", READERS, ids=lambda r: r.__name__)
@pytest.mark.parametrize("word", REFUSED)
def test_every_reader_refuses_the_same_words_naming_the_key(read, word):
    with pytest.raises(Exception) as info:  # each reader's own error type: ConfigError, CommandError...
        read(word)
    message = str(info.value)
    assert KEYS[read] in message and NOT_A_BOOLEAN in message and "\n" not in message, message


def test_a_bad_bkctl_fastpaths_stops_bkctl_and_bookied_with_one_line(tmp_path):
    env = dict(os.environ, BKCTL_FASTPATHS="banana")
    for args, prefix in (
        (["-m", "bkctl", "-m", "zk+hierarchical://127.0.0.1:1/ledgers", "ledger", "list"], "bkctl: error: "),
        (
            ["-m", "bkctl.bookied", "--ledger-directories", str(tmp_path), "--journal-directories", str(tmp_path)],
            "bookied: ",
        ),
    ):
        r = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == f"{prefix}BKCTL_FASTPATHS: 'banana' {NOT_A_BOOLEAN}"
