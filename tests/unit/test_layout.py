"""LAYOUT znode and metadata service URI (wire/layout.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.golden import VECTORS
from bkctl.wire.errors import CodecError
from bkctl.wire.layout import (
    FACTORY_CLASSES,
    LedgerLayout,
    MetadataServiceURI,
    factory_class_for,
    manager_for_factory,
    parse_layout,
)

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
    assert uri.servers == ["zk1:2181", "zk2:2181"]
    assert uri.layout_manager == "hierarchical"
    assert str(uri) == "zk+hierarchical://zk1:2181;zk2:2181/ledgers"
    assert MetadataServiceURI.parse(str(uri)) == uri


@pytest.mark.parametrize(
    "text,manager,hosts,root,canonical",
    [
        ("zk://127.0.0.1:2181/ledgers", "null", "127.0.0.1:2181", "/ledgers", "zk://127.0.0.1:2181/ledgers"),
        ("zk+null://h:2181/ledgers", "null", "h:2181", "/ledgers", "zk://h:2181/ledgers"),
        ("zk+flat://h1:1,h2:2", "flat", "h1:1,h2:2", "/ledgers", "zk+flat://h1:1;h2:2/ledgers"),
        ("zk+longhierarchical://h/", "longhierarchical", "h", "/ledgers", "zk+longhierarchical://h/ledgers"),
        ("zk+ms://h:2181/a/b/", "ms", "h:2181", "/a/b", "zk+ms://h:2181/a/b"),
        ("ZK+Hierarchical://h:2181/bk", "hierarchical", "h:2181", "/bk", "zk+hierarchical://h:2181/bk"),
        ("zk+hierarchical://[::1]:2181/ledgers", "hierarchical", "[::1]:2181", "/ledgers",
         "zk+hierarchical://[::1]:2181/ledgers"),
    ],
)
def test_uri_variants(text, manager, hosts, root, canonical):
    uri = MetadataServiceURI.parse(text)
    assert (uri.scheme, uri.manager, uri.hosts, uri.root) == ("zk", manager, hosts, root)
    assert str(uri) == canonical
    assert MetadataServiceURI.parse(str(uri)) == uri
    assert uri.layout_manager == (None if manager == "null" else manager)


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("h1:2181/ledgers", "expected zk"),
        ("etcd://h:2379/ledgers", "only the zk backend"),
        ("zk+bogus://h:2181/ledgers", "unknown ledger manager 'bogus'"),
        ("zk+legacyhierarchical://h:2181/ledgers", "unknown ledger manager"),
        ("zk://", "empty host"),
        ("zk://h1;;h2/ledgers", "empty host"),
        ("zk://h:99999/ledgers", "bad host:port"),
        ("zk://h:port/ledgers", "bad host:port"),
        ("zk://h a:1/ledgers", "bad host:port"),
        ("zk://h:1/a//b", "bad path"),
        ("zk://h:1/ledgers?x=1", "query"),
    ],
)
def test_bad_uris(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        MetadataServiceURI.parse(text)


def test_factory_table_is_complete():
    assert set(FACTORY_CLASSES) == {"flat", "hierarchical", "longhierarchical", "legacyhierarchical", "ms"}
