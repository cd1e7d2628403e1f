"""The metadata store has no back door (issue 34): only its ZooKeeper implementation,
``wire/metadata/zk/``, speaks kazoo, so everything else works the same on the tests'
in-memory store (read from the sources with ast, nothing imported):

* no other product module imports kazoo, at any level (inside functions and under
  ``TYPE_CHECKING`` too).  Naming the ``"kazoo"`` logger to set its level is not an
  import and stays allowed; the ZooKeeper security settings (``wire/metadata/zksecurity.py``)
  are plain settings, turned into kazoo's arguments by the store's session;
* no other product module reaches into a store for its raw client or session: an
  attribute ``client``, ``_zk`` or ``_session`` of an expression that names a store
  (``store.client``, ``self.store.client``, ``self._store._zk``...).  A store held under
  another name would slip through: the import rule is the one that cannot be dodged.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.repo.sources import MODULES, nodes, tree

pytestmark = pytest.mark.xdist_group("product-sources")  # one worker parses the sources once

#: the only package that may speak kazoo
ZK_STORE = "bkctl.wire.metadata.zk"
_RAW = {"client", "_zk", "_session"}
_STORE_NAME = re.compile(r"(^|\.)_?\w*store$", re.IGNORECASE)


def back_doors(path: Path) -> list[str]:
    """``line: what`` for each kazoo import and each raw-client access in the file."""
    found = []
    for node in nodes(tree(path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else []
        else:
            names = []
        found += [f"{node.lineno}: imports {name}" for name in names if name.split(".")[0] == "kazoo"]
        if isinstance(node, ast.Attribute) and node.attr in _RAW and _STORE_NAME.search(ast.unparse(node.value)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_outside_the_zookeeper_store_speaks_kazoo():
    inside = [m for m in MODULES if m == ZK_STORE or m.startswith(ZK_STORE + ".")]
    assert len(inside) > 5  # the store's modules were found, and are the ones allowed
    bad = {
        f"{MODULES[m].relative_to(MODULES[m].parents[len(m.split('.')) - 1])}:{line}"
        for m, path in MODULES.items()
        if m not in inside
        for line in back_doors(path)
    }
    assert not bad, sorted(bad)


def test_the_check_sees_a_back_door(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import logging\n"
        "logging.getLogger('kazoo').setLevel(logging.WARNING)\n"
        "def later(self, store, bk):\n"
        "    from kazoo.client import KazooState\n"
        "    bk.client.pool\n"
        "    store.client.get('/x')\n"
        "    self._store._zk.delete('/x')\n"
        "    import kazoo.exceptions\n"
    )
    assert back_doors(probe) == [
        "4: imports kazoo.client",
        "8: imports kazoo.exceptions",
        "6: store.client",
        "7: self._store._zk",
    ]
