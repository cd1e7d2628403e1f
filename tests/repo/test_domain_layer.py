"""The domain layer sits under the commands (issue 67): the ledger and Pulsar rules every command
shares -- what a topic holds, who owns a ledger, the orphan sweep, disk attribution, how the
ledgers of an export are planned and cut into tasks -- live in ``bkctl.wire.domain``, under wire's
strict typing, and import no Spark, click or rich (:data:`NOT_IN_THE_DOMAIN`); ``bkctl/ops`` and
``bkctl/export`` orchestrate and render, and neither defines them again; ``bkctl/export`` imports nothing of ``bkctl/ops``
(read from the sources with ast, imports inside functions and under ``TYPE_CHECKING`` counted).
Nothing in ``bkctl`` imports ``bookied`` but the modules that run a bookie or read one's own
files and configuration (:data:`READ_OR_RUN_A_BOOKIE`); the formats both need -- a bookie's
directory layout and cookies -- are ``bkctl.wire.bookie_disk``'s."""

from __future__ import annotations

import ast
import fnmatch
import tomllib

import pytest

from tests.repo.sources import MODULES, ROOT, imports, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: the domain modules, and names each defines that no module of bkctl/ops or bkctl/export may define again
DOMAIN = {
    "bkctl.wire.domain.topic_state": {"LedgerState", "PositionSource", "Backlog", "cursor_state", "resolve_topics"},
    "bkctl.wire.domain.ownership": {"Owners", "LedgerOwnership", "pulsar_component", "topic_of_schema_id"},
    "bkctl.wire.domain.orphans": {"OrphanSweep", "Orphan"},
    "bkctl.wire.domain.topic_window": {"Pushdown", "offloaded_copy"},
    "bkctl.wire.domain.disk_attribution": {"Owner", "Tally", "Walk", "walk_ledgers", "entry_log_classes"},
    "bkctl.wire.domain.ledger_plan": {
        "LedgerSpec",
        "LedgerPlan",
        "EntryRange",
        "parse_ledger_spec",
        "resolve_spec",
        "parse_ctime",
        "plan_ledgers",
        "split_ranges",
        "task_entries",
    },
    "bkctl.wire.domain.topic_plan": {"TopicSpec", "TopicRange", "TopicPlan", "plan_topic", "cursor_json"},
}

#: the libraries a domain rule never needs: the commands' (click, rich) and the reading's (Spark, Arrow)
NOT_IN_THE_DOMAIN = {"pyspark", "pyarrow", "click", "rich"}


#: the modules of bkctl (and shell) that may import bookied: they run bookieds or read a bookie's
#: own files and configuration with bookied's readers
READ_OR_RUN_A_BOOKIE = {
    "bkctl.sandbox.*": "runs bookieds (sandbox up) and checks their configuration",
    "bkctl.ops.inspect": "bookie inspect/check: a bookie's journal, entry logs and index, read by bookied's readers",
    "bkctl.ops.bookie_conf": "a bookie's bk_server.conf, read by bookied's configuration schema",
}


def _top_level_names(module: str) -> set[str]:
    body = tree(MODULES[module]).body
    return {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _under(prefix: str) -> list[str]:
    return sorted(m for m in MODULES if m == prefix or m.startswith(prefix + "."))


def test_the_domain_modules_live_under_wire_and_define_their_rules():
    for module, names in DOMAIN.items():
        assert module in MODULES, module
        assert MODULES[module].is_relative_to(ROOT / "wire" / "domain"), MODULES[module]
        assert names <= _top_level_names(module), (module, names - _top_level_names(module))


def test_the_domain_imports_no_spark_click_or_rich():
    bad = {(m, i) for m in _under("bkctl.wire.domain") for i in imports(m, MODULES[m], False, known=NOT_IN_THE_DOMAIN)}
    assert not bad, sorted(bad)


def test_ops_and_export_define_no_domain_rule_again():
    taken = set().union(*DOMAIN.values())
    again = {(m, name) for m in _under("bkctl.ops") + _under("bkctl.export") for name in _top_level_names(m) & taken}
    assert not again, sorted(again)


def test_export_imports_nothing_of_ops():
    bad = {(m, i) for m in _under("bkctl.export") for i in imports(m, MODULES[m], False) if i.startswith("bkctl.ops")}
    assert not bad, sorted(bad)


def test_bkctl_imports_bookied_only_where_it_runs_or_reads_a_bookie():
    assert "bkctl.ops.inspect" in MODULES and "bkctl.ops.bookie_conf" in MODULES  # the allowed ones exist
    bad = {
        (m, i)
        for m in MODULES
        if m.startswith(("bkctl.", "bkctl.shell")) and not m.startswith(("bkctl.wire", "bkctl.bookied"))
        if not any(fnmatch.fnmatch(m, allowed) for allowed in READ_OR_RUN_A_BOOKIE)
        for i in imports(m, MODULES[m], False)
        if i.startswith("bkctl.bookied")
    }
    assert not bad, sorted(bad)


def test_a_bookies_disk_layout_and_cookies_are_wires():
    for module in ("bkctl.wire.bookie_disk.layout", "bkctl.wire.bookie_disk.identity"):
        assert MODULES[module].is_relative_to(ROOT / "wire" / "bookie_disk"), module
    assert not [
        m for m in MODULES if m.startswith("bkctl.bookied.") and m.rpartition(".")[2] in ("disk_layout", "identity")
    ]


def test_the_domain_is_under_wires_strict_typing_and_in_no_exemption():
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    strict = [o for o in overrides if o.get("disallow_untyped_defs") is True]
    exempt = [p for o in overrides if o.get("ignore_errors") for p in o["module"]]
    for module in [*DOMAIN, "bkctl.wire.bookie_disk.layout", "bkctl.wire.bookie_disk.identity"]:
        assert any(fnmatch.fnmatch(module, p) for o in strict for p in o["module"]), module
        assert not [p for p in exempt if fnmatch.fnmatch(module, p)], module


def test_the_checks_see_a_violation(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("def later():\n    from bkctl.ops.pulsar import show_topic\n")
    assert imports("bkctl.export.probe", source, False) == {"bkctl.ops.pulsar"}
    other = tmp_path / "probe2.py"  # (sources are parsed once per path)
    other.write_text("def later():\n    from bkctl.bookied import storage\n")
    assert imports("bkctl.ops.probe2", other, False) == {"bkctl.bookied.storage"}
    assert "Owner" in _top_level_names("bkctl.wire.domain.disk_attribution")
    spark = tmp_path / "probe3.py"
    spark.write_text("def later():\n    from pyspark.sql import SparkSession\n")
    assert imports("bkctl.wire.domain.probe3", spark, False, known=NOT_IN_THE_DOMAIN) == {"pyspark"}
