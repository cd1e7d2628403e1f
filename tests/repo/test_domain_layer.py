"""The domain layer sits under the commands (issue 67): the ledger and Pulsar rules every command
shares -- what a topic holds, who owns a ledger, the orphan sweep, disk attribution, how the
ledgers of an export are planned and cut into tasks -- live in ``bkctl.wire.domain``, under wire's
strict typing, and import no Spark, click or rich (:data:`NOT_IN_THE_DOMAIN`); ``bkctl/ops`` and
``bkctl/export`` orchestrate and render, and neither defines them again; ``bkctl/export`` imports nothing of ``bkctl/ops``
(read from the sources with ast, imports inside functions and under ``TYPE_CHECKING`` counted).
An operation (a module of ``bkctl/ops``) is a thin recipe, which the rules below see by what it does,
not by the names it defines (issue 76): it matches no regular expression (a stored name's form is a
rule of wire's), imports no ``*_format`` or ``paths`` module of wire (nor does ``bkctl/export``),
raises no ``CommandError`` and knows no exit code (``bkctl.ops.errors``; the commands map them), imports
nothing of rendering (``bkctl.render``, click, rich), and defines no class but its results
(dataclasses, NamedTuples, Enums; the errors in ``bkctl.ops.errors``). :data:`OPS_EXCEPTIONS` names
each module that breaks one today, with why.
Nothing in ``bkctl`` imports ``bookied`` but the modules that run a bookie or read one's own
files and configuration (:data:`READ_OR_RUN_A_BOOKIE`); the formats both need -- a bookie's
directory layout and cookies -- are ``bkctl.wire.bookie_disk``'s."""

from __future__ import annotations

import ast
import fnmatch
import tomllib

import pytest

from tests.repo.sources import MODULES, ROOT, imports, nodes, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: the domain modules
DOMAIN = [
    "bkctl.wire.domain.topic_state",
    "bkctl.wire.domain.ownership",
    "bkctl.wire.domain.orphans",
    "bkctl.wire.domain.topic_window",
    "bkctl.wire.domain.disk_attribution",
    "bkctl.wire.domain.ledger_plan",
    "bkctl.wire.domain.topic_plan",
]

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


def test_the_domain_modules_live_under_wire():
    for module in DOMAIN:
        assert module in MODULES, module
        assert MODULES[module].is_relative_to(ROOT / "wire" / "domain"), MODULES[module]


def test_the_domain_imports_no_spark_click_or_rich():
    bad = {(m, i) for m in _under("bkctl.wire.domain") for i in imports(m, MODULES[m], False, known=NOT_IN_THE_DOMAIN)}
    assert not bad, sorted(bad)


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


# -- an operation is a thin recipe (issue 76) -------------------------------------------------------

#: the calls of ``re`` that apply a regular expression
_RE_CALLS = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}
#: a class an operation may define: its results, and the one error module's errors
_RESULT_DECORATORS = {"dataclass"}
_RESULT_BASES = {"NamedTuple", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}
_ERRORS_MODULE = "bkctl.ops.errors"

#: (module, rule) -> why the module breaks the rule today; each entry must still be needed
#: (:func:`test_the_exceptions_are_still_needed`), so the list only shrinks
OPS_EXCEPTIONS = {
    ("bkctl.ops.ledger_meta", "regex"): "parses what an operator types (durations, sizes) and a dump file's name",
    ("bkctl.ops.prometheus", "regex"): "parses the Prometheus text exposition of a bookie's /metrics answer",
    ("bkctl.ops.cookies", "format"): "`cookie admin --list` shows the cookie's znode path (paths.cookie_path)",
    ("bkctl.ops.autorecovery_metrics", "class"): "the autorecovery daemon's /metrics server (a Twisted resource)",
    ("bkctl.ops.ledgers", "class"): "HeldLedger: the shell session's write handle and append lock",
    ("bkctl.ops.prometheus", "class"): "Scrape: a parsed /metrics answer, parsed in its constructor",
    ("bkctl.ops.replace_id", "class"): "_Pace: a rate limit shared by the rewrite's threads",
    ("bkctl.ops.top", "class"): "TopCollector and _Pending: the live view's state across refreshes",
    ("bkctl.ops.ledger_fsck", "class"): "FsckRun, OwnerNames: a check's state while it walks the ledgers",
    ("bkctl.ops.rebalance", "class"): "MoveListener (a Protocol), Unheard: the executor's callbacks",
}


def regexes(path) -> list[str]:
    """``line: re.call`` for each regular expression the file applies (``re.compile``, ``re.match``...)."""
    found = []
    for node in nodes(tree(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RE_CALLS:
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "re":
                found.append(f"{node.lineno}: re.{node.func.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "re":
            found.append(f"{node.lineno}: from re import")
    return found


def format_imports(module: str, path) -> list[str]:
    """The modules of wire that spell stored names or bytes (``*_format``, ``paths``) that ``module`` imports."""
    return sorted(
        i
        for i in imports(module, path, False)
        if i.startswith("bkctl.wire.") and (i.endswith("_format") or i.rpartition(".")[2] == "paths")
    )


def exit_codes(module: str, path) -> list[str]:
    """What ties ``module`` to exit codes: an import of ``bkctl.exitcodes``, a name ``CommandError``."""
    found = [f"imports {i}" for i in imports(module, path, False) if i == "bkctl.exitcodes"]
    for node in nodes(tree(path)):
        if isinstance(node, ast.Name) and node.id == "CommandError":
            found.append(f"{node.lineno}: CommandError")
    return found


def rendering(module: str, path) -> list[str]:
    """The rendering ``module`` imports: ``bkctl.render``, click, rich."""
    product = {i for i in imports(module, path, False) if i == "bkctl.render"}
    return sorted(product | imports(module, path, False, known={"click", "rich"}))


def classes_beyond_results(module: str, path) -> list[str]:
    """The classes ``module`` defines that are not results (dataclass, NamedTuple, Enum); the errors
    module's exceptions are its results."""
    found = []
    for node in nodes(tree(path)):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = {
            ast.unparse(d.func if isinstance(d, ast.Call) else d).rpartition(".")[2] for d in node.decorator_list
        }
        bases = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
        if decorators & _RESULT_DECORATORS or bases & _RESULT_BASES or module == _ERRORS_MODULE:
            continue
        found.append(f"{node.lineno}: {node.name}")
    return found


RULES = {
    "regex": lambda m, p: regexes(p),
    "format": format_imports,
    "exit codes": exit_codes,
    "rendering": rendering,
    "class": classes_beyond_results,
}


def _broken(rule: str) -> dict[str, list[str]]:
    found = {m: RULES[rule](m, MODULES[m]) for m in _under("bkctl.ops")}
    return {m: what for m, what in found.items() if what}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_an_operation_is_a_thin_recipe(rule):
    bad = {m: what for m, what in _broken(rule).items() if (m, rule) not in OPS_EXCEPTIONS}
    assert not bad, bad


def test_the_exceptions_are_still_needed():
    stale = [(m, rule) for m, rule in OPS_EXCEPTIONS if m not in MODULES or m not in _broken(rule)]
    assert not stale, stale


def test_export_imports_no_stored_name_format():
    bad = {m: format_imports(m, MODULES[m]) for m in _under("bkctl.export") if format_imports(m, MODULES[m])}
    assert not bad, bad


def test_the_recipe_rules_see_a_violation(tmp_path):
    probe = tmp_path / "recipe.py"
    probe.write_text(
        "import re\n"
        "from dataclasses import dataclass\n"
        "from enum import Enum\n"
        "KEY = re.compile(r'(\\d+)-ledger-(\\d+)')\n"
        "def f(store):\n"
        "    from bkctl.wire.metadata import paths\n"
        "    from bkctl.wire.pulsar.offload_format import uuid_of\n"
        "    from bkctl.exitcodes import CommandError, USAGE\n"
        "    from bkctl.render import human_size\n"
        "    import click\n"
        "    if re.fullmatch('x', store.root):\n"
        "        raise CommandError('no', USAGE)\n"
        "class Result(Enum):\n    A = 1\n"
        "@dataclass(frozen=True)\nclass Row:\n    a: int\n"
        "class Walker:\n    pass\n"
    )
    module = "bkctl.ops.recipe"
    assert regexes(probe) == ["4: re.compile", "11: re.fullmatch"]
    assert format_imports(module, probe) == ["bkctl.wire.metadata.paths", "bkctl.wire.pulsar.offload_format"]
    assert exit_codes(module, probe) == ["imports bkctl.exitcodes", "12: CommandError"]
    assert rendering(module, probe) == ["bkctl.render", "click"]
    assert classes_beyond_results(module, probe) == ["18: Walker"]
