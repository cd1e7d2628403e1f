"""LAYOUT znode and metadata service URI (wire/metadata/layout.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.bookied.config import ConfigError, load_config
from bkctl.wire import fastpath
from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.layout import (
    FACTORY_CLASSES,
    LedgerLayout,
    MetadataServiceURI,
    MetadataServiceURIError,
    factory_class_for,
    manager_for_factory,
    parse_layout,
)
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.golden import VECTORS

GOLDEN = (VECTORS / "zk" / "raw" / "ledgers__LAYOUT.bin").read_bytes()


def test_golden_layout():
    layout = parse_layout(GOLDEN)
    assert layout.format_version == 2
    assert layout.manager_factory_class == "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
    assert layout.manager_version == 1
    assert layout.manager == "hierarchical"
    assert layout.serialize() == GOLDEN
    assert LedgerLayout.for_manager("hierarchical").serialize() == GOLDEN
    assert LedgerLayout.parse(GOLDEN) == layout


@pytest.mark.parametrize(
    "name,cls",
    [
        ("flat", "FlatLedgerManagerFactory"),
        ("hierarchical", "HierarchicalLedgerManagerFactory"),
        ("longhierarchical", "LongHierarchicalLedgerManagerFactory"),
        ("legacyhierarchical", "LegacyHierarchicalLedgerManagerFactory"),
        ("ms", "MSLedgerManagerFactory"),
    ],
)
def test_short_names_map_to_factories(name, cls):
    assert factory_class_for(name) == "org.apache.bookkeeper.meta." + cls
    assert manager_for_factory("org.apache.bookkeeper.meta." + cls) == name
    assert manager_for_factory("shaded.org.apache.bookkeeper.meta." + cls) == name
    layout = LedgerLayout.for_manager(name)
    assert layout.serialize() == f"2\norg.apache.bookkeeper.meta.{cls}:1".encode()
    assert parse_layout(layout.serialize()) == layout


def test_unknown_manager():
    with pytest.raises(ValueError, match="unknown ledger manager"):
        factory_class_for("bogus")
    assert manager_for_factory("com.example.MyFactory") is None
    assert parse_layout(b"2\ncom.example.MyFactory:3").manager is None


def test_format_1_layout():
    layout = parse_layout(b"1\nflat:1")
    assert layout.format_version == 1 and layout.manager == "flat"
    assert layout.serialize(1) == b"1\nflat:1"
    assert layout.serialize() == b"2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1"
    assert layout.matches(LedgerLayout.for_manager("flat"))
    assert not layout.matches(LedgerLayout.for_manager("hierarchical"))
    with pytest.raises(ValueError, match="format-1"):
        LedgerLayout.for_manager("longhierarchical").serialize(1)


def test_matches_and_shading():
    mine = LedgerLayout.for_manager("hierarchical")
    shaded = LedgerLayout("shaded.org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory", 1)
    assert mine.matches(mine)
    assert not mine.matches(shaded)
    assert mine.matches(shaded, tolerate_shading=True)
    assert not mine.matches(LedgerLayout(mine.manager_factory_class, 2))


@pytest.mark.parametrize(
    "data,pattern",
    [
        (b"", "format version"),
        (b"3\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1", "format 3 is not supported"),
        (b"0\nflat:1", "not supported"),
        (b"2", "lacks the ledger manager"),
        (b"2\n", "lacks the ledger manager"),
        (b"2\nfoo", "invalid ledger manager line"),
        (b"2\na:b:c", "invalid ledger manager line"),
        (b"2\nfoo:x", "invalid manager version"),
        (b"2\nfoo:--1", "invalid manager version"),  # bench/fuzz.py: int() raised ValueError
        (b"2\nfoo:-", "invalid manager version"),
        (b"2\nfoo:1\nextra", "extra lines"),
        (b"\xff", "UTF-8"),
    ],
)
def test_malformed_layouts(data, pattern):
    with pytest.raises(CodecError, match=pattern):
        parse_layout(data)


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_random_layout_bytes_raise_only_codec_error(data):
    try:
        parse_layout(data)
    except CodecError:
        pass


# ---------------------------------------------------------------------------
# metadataServiceUri
# ---------------------------------------------------------------------------
def test_uri_from_spec():
    uri = MetadataServiceURI.parse("zk+hierarchical://zk1:2181;zk2:2181/ledgers")
    assert (uri.scheme, uri.manager, uri.hosts, uri.root) == ("zk", "hierarchical", "zk1:2181,zk2:2181", "/ledgers")
    assert uri.servers == ("zk1:2181", "zk2:2181")
    assert uri.layout_manager == "hierarchical"
    assert str(uri) == "zk+hierarchical://zk1:2181;zk2:2181/ledgers"
    assert MetadataServiceURI.parse(str(uri)) == uri


# One parser for bkctl, bookied's config and the metadata store: (URI, manager,
# ZooKeeper connect string, ledgers root, canonical form).  The first four rows
# are where bookied's config and this module used to disagree.
GOOD_URIS = [
    # plain zk:// is Java's +null: the manager comes from LAYOUT (was "hierarchical" in bookied)
    ("zk://h/ledgers", "null", "h", "/ledgers", "zk://h/ledgers"),
    ("zk://127.0.0.1:2181/ledgers", "null", "127.0.0.1:2181", "/ledgers", "zk://127.0.0.1:2181/ledgers"),
    ("zk+null://h:2181/ledgers", "null", "h:2181", "/ledgers", "zk://h:2181/ledgers"),
    ("zk+flat://h1:1,h2:2/bk", "flat", "h1:1,h2:2", "/bk", "zk+flat://h1:1;h2:2/bk"),
    (
        "zk+hierarchical://zk1:2181;zk2:2181;zk3/ledgers",
        "hierarchical",
        "zk1:2181,zk2:2181,zk3",
        "/ledgers",
        "zk+hierarchical://zk1:2181;zk2:2181;zk3/ledgers",
    ),
    ("zk+longhierarchical://h/a/b", "longhierarchical", "h", "/a/b", "zk+longhierarchical://h/a/b"),
    ("ZK+Hierarchical://h:2181/bk", "hierarchical", "h:2181", "/bk", "zk+hierarchical://h:2181/bk"),
    (
        "zk+hierarchical://[::1]:2181/ledgers",
        "hierarchical",
        "[::1]:2181",
        "/ledgers",
        "zk+hierarchical://[::1]:2181/ledgers",
    ),
    (" zk://h:1/l ", "null", "h:1", "/l", "zk://h:1/l"),
]

BAD_URIS = [
    # no root: Java would use the ZooKeeper root itself (was defaulted to /ledgers here)
    ("zk+flat://h1:1,h2:2", "has no ledgers root path"),
    ("zk://h:2181/", "must not end with '/'"),
    # zk+ms is Java's (deprecated MetaStore manager) but nothing here can use it (was accepted here)
    ("zk+ms://h:2181/ledgers", "do not support"),
    # a query string used to pass bookied's check and fail at start
    ("zk://h:1/ledgers?x=1", "has a query or fragment"),
    ("zk://h:1/ledgers#frag", "has a query or fragment"),
    ("h1:2181/ledgers", "is not a metadata service URI"),
    ("etcd://h:2379/ledgers", "uses metadata driver 'etcd'"),
    ("zk+bogus://h:2181/ledgers", "unknown ledger manager 'bogus'"),
    ("zk+legacyhierarchical://h:2181/ledgers", "unknown ledger manager"),
    ("zk+hierarchical+x://h:2181/ledgers", "unknown ledger manager"),
    ("zk://", "names no ZooKeeper server"),
    ("zk:///ledgers", "names no ZooKeeper server"),
    ("zk://h1;;h2/ledgers", "empty server"),
    ("zk://h:99999/ledgers", "port outside 1..65535"),
    ("zk://h:0/ledgers", "port outside 1..65535"),
    ("zk://h:port/ledgers", "not a host[:port]"),
    ("zk://h a:1/ledgers", "not a host[:port]"),
    ("zk://user@h:1/ledgers", "not a host[:port]"),
    ("zk://h:1/a//b", "empty, '.' or '..' component"),
    ("zk://h:1/a/../b", "empty, '.' or '..' component"),
    ("zk://h:1/led gers", "blanks"),
]


@pytest.mark.parametrize("text,manager,hosts,root,canonical", GOOD_URIS)
def test_uri_variants(text, manager, hosts, root, canonical):
    uri = MetadataServiceURI.parse(text)
    assert (uri.scheme, uri.manager, uri.hosts, uri.root) == ("zk", manager, hosts, root)
    assert uri.servers == tuple(hosts.split(","))
    assert str(uri) == canonical
    assert MetadataServiceURI.parse(str(uri)) == uri
    assert uri.layout_manager == (None if manager == "null" else manager)


@pytest.mark.parametrize("text,pattern", BAD_URIS)
def test_bad_uris(text, pattern):
    with pytest.raises(MetadataServiceURIError, match=re.escape(pattern)) as info:
        MetadataServiceURI.parse(text)
    assert str(info.value).startswith(f"metadata service URI {text!r} ")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("text,manager,hosts,root,canonical", GOOD_URIS)
def test_bookied_config_reads_the_uri_as_the_store_does(text, manager, hosts, root, canonical):
    cfg = load_config(overrides={"metadataServiceUri": text})
    assert cfg.metadata == MetadataServiceURI.parse(text)
    assert (cfg.zk_servers, cfg.zk_ledgers_root_path) == (tuple(hosts.split(",")), root)


@pytest.mark.parametrize("text,pattern", BAD_URIS)
def test_bookied_config_refuses_what_the_store_would(text, pattern):
    with pytest.raises(ConfigError, match=re.escape(pattern)):
        load_config(overrides={"metadataServiceUri": text})


@pytest.mark.parametrize("text,pattern", BAD_URIS)
def test_the_metadata_store_refuses_bad_uris_before_connecting(text, pattern):
    with pytest.raises(ValueError, match=re.escape(pattern)):
        ZKMetadataStore(text, twins=fastpath.selected())


def test_zk_keys_make_the_uri_java_derives():
    uri = MetadataServiceURI.for_servers(["a:1", "b"], "/bk")
    assert str(uri) == "zk+hierarchical://a:1;b/bk"
    with pytest.raises(MetadataServiceURIError, match="must not end with"):
        MetadataServiceURI.for_servers(["a:1"], "/bk/")


def test_factory_table_is_complete():
    assert set(FACTORY_CLASSES) == {"flat", "hierarchical", "longhierarchical", "legacyhierarchical", "ms"}
