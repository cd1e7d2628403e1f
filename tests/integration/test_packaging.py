"""What pip installs: the wheel in a fresh venv, beside PyPI's `shell` and `bookied`.

The repository's folders wire/, bookied/ and shell/ must install as bkctl.wire,
bkctl.bookied and bkctl.shell, so that no generic top-level name of ours exists in
site-packages, nothing of ours can be shadowed by a file in the working directory,
and installing or uninstalling another distribution never touches our files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from bkctl.wire import fastpath

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("packaging"),
]  # module-scoped fixtures: one xdist worker runs the whole module


def _run(*cmd, cwd=None, check=True, java_options: str | None = None) -> subprocess.CompletedProcess:
    # A fresh shell: no Python path, and no Spark setting another test's process made (an
    # export run in-process sets PYSPARK_PYTHON to the test venv's Python).
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PYSPARK_")
    }
    if java_options is not None:
        env["JDK_JAVA_OPTIONS"] = java_options  # read by every `java` the command starts
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _pip(py: Path, *args) -> subprocess.CompletedProcess:
    """The suite's pip acting on the venv of ``py`` (``pip --python``): the fresh venv is made
    without a pip of its own, whose install (ensurepip: 9 CPU-seconds) cost more than the rest."""
    return _run(sys.executable, "-m", "pip", "--python", py, *args)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools leaves build/ and *.egg-info in the tree it builds.
    src = tmp_path_factory.mktemp("src") / "bkctl"
    _copy_build_inputs(src)
    _plant_built_extensions(src)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, src)
    (whl,) = out.glob("bkctl-*.whl")
    return whl


def _copy_build_inputs(src: Path) -> None:
    """What the wheel's build reads of the checkout, copied to ``src``: pyproject.toml, setup.py,
    the readme, the top-level modules and the package folders pyproject names (its ``package-dir``
    and ``bkctl/``), without what a build or a run leaves in them.  Not the whole checkout: its
    tests/ and the lint's .mypy_cache are most of its bytes, and ``./dev test`` runs the lint
    beside the suite, so the cache's files come and go while this copies (a file listed and
    gone before its copy fails the copy)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools_table = project["tool"]["setuptools"]
    folders = {"bkctl", *setuptools_table["package-dir"].values()}
    files = {"pyproject.toml", "setup.py", project["project"]["readme"]}
    files |= {f"{module}.py" for module in setuptools_table["py-modules"]}
    src.mkdir()
    for name in files:
        shutil.copy2(REPO / name, src / name)
    for name in folders:
        shutil.copytree(
            REPO / name, src / name, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so")
        )


def _plant_built_extensions(src: Path) -> None:
    """The C extensions ``./dev setup`` compiled in the checkout (its editable install, from the
    same setup.py), each put where the wheel's build_ext would write it (``build/lib.PLATFORM/``
    under its module's installed name), with its time: build_ext then takes it as up to date
    rather than compiling it again (some 10 CPU-seconds for them all).  One older than any of
    its sources, or missing, is compiled as before; and the module's name is setup.py's, so a
    name that installs elsewhere still puts the .so there, which the wheel test sees."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    lib = src / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    for built in (b for top in ("wire", "bookied", "shell", "bkctl") for b in (REPO / top).rglob(f"*{suffix}")):
        rel = built.relative_to(REPO)
        installed = rel.parts if rel.parts[0] == "bkctl" else ("bkctl", *rel.parts)
        target = lib.joinpath(*installed)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv holding our wheel, PyPI's `shell` and `bookied`; our
    dependencies come from the test environment's site-packages through a
    .pth line (a plain path: the editable install's finder there is not run)."""
    root = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", root)
    py = root / "bin" / "python"
    _pip(py, "install", "-q", "--no-deps", "shell==1.0.1", "bookied==0.0.3")
    _pip(py, "install", "-q", "--no-deps", wheel)
    site = Path(_run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "zz_bkctl_test_deps.pth").write_text("\n".join(deps) + "\n")
    return root


def test_wheel_holds_every_package_folder_under_bkctl(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    # and the module through which PySpark registers the bookkeeper data source by itself
    assert tops == {"bkctl", "pyspark_bookkeeper.py"}
    # Every folder with an __init__.py is packaged (pyproject lists packages by hand).
    folders = {
        p.parent.relative_to(REPO)
        for p in REPO.glob("*/**/__init__.py")
        if p.parts[len(REPO.parts)] in ("wire", "bookied", "shell", "bkctl")
    }
    for folder in folders:
        parts = folder.parts
        installed = "/".join(parts if parts[0] == "bkctl" else ("bkctl", *parts))
        assert f"{installed}/__init__.py" in names, folder
    assert "bkctl/wire/proto/bookkeeper.proto" in names
    assert "bkctl/bookied/bookied.service" in names
    assert "bkctl/bookied/bkctl-autorecovery.service" in names
    # the topic export's fast path, compiled by the wheel's build (setup.py)
    assert [n for n in names if n.startswith("bkctl/wire/pulsar/_packed.") and n.endswith(".so")], names
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"bkctl": "bkctl.cli:main", "bookied": "bkctl.bookied.main:run"}


def test_generic_names_are_not_ours(venv, tmp_path):
    py = venv / "bin" / "python"
    probe = (
        "import importlib.util as u, shell\n"
        "print(u.find_spec('wire'))\n"
        "print(shell.__file__)\n"
        "print(u.find_spec('bookied').origin)\n"
        "import bkctl.wire.client.ledger_handle, bkctl.bookied.main, bkctl.shell.repl\n"
        "from bkctl.wire.pulsar import _packed\n"
        "print('ours ok', hasattr(_packed, 'PackedRows'))\n"
    )
    out = _run(py, "-c", probe, cwd=tmp_path).stdout.splitlines()
    assert out[0] == "None"  # `import wire` fails
    assert out[1].endswith("site-packages/shell.py")  # PyPI's shell, untouched
    assert "site-packages/bookied/" in out[2]  # PyPI's bookied, untouched
    assert out[3] == "ours ok True"  # the installed wheel's C extension loads


def test_cli_works_beside_shadowing_files(venv, tmp_path):
    for name in ("shell.py", "wire.py", "bookied.py"):
        (tmp_path / name).write_text("raise SystemExit('shadowed: ' + __name__)\n")
    bindir = venv / "bin"
    for cmd in (
        [bindir / "python", "-m", "bkctl", "--help"],
        [bindir / "bkctl", "--help"],
        [bindir / "bkctl", "shell", "--help"],
        [bindir / "bookied", "--help"],
    ):
        proc = _run(*cmd, cwd=tmp_path)
        assert "Usage" in proc.stdout or "usage" in proc.stdout, cmd
        assert "shadowed" not in proc.stdout + proc.stderr


def test_uninstalling_pypi_bookied_leaves_ours(venv, tmp_path):
    """Our modules survive.  (PyPI's bookied also ships a `bookied` console
    script, the one file two distributions of that name cannot both own: pip
    removes it with PyPI's package; `python -m bkctl.bookied` is the same daemon.)"""
    py = venv / "bin" / "python"
    _pip(py, "uninstall", "-y", "-q", "bookied")
    _run(py, "-c", "import bkctl.bookied.main, bkctl.bookied.journal", cwd=tmp_path)
    assert "usage" in _run(py, "-m", "bkctl.bookied", "--help", cwd=tmp_path).stdout


# ---------------------------------------------------------------- the docs' Spark snippet

README_URI = "zk+hierarchical://zk1:2181/ledgers"

#: The snippet's JVM compiles with C1 only and collects with the serial collector, as bkctl's
#: own sessions do (bkctl/export/spark_session.py): a JVM's JIT and GC threads, not what it
#: runs -- the snippet, Spark's lookup of the data source, its Python workers, are as written.
#: With C2 and G1 the JVM was most of this module's CPU.
SNIPPET_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def readme_spark_snippet() -> str:
    """The Python block of docs/export.md's "Reading from Spark directly"."""
    section = (REPO / "docs" / "export.md").read_text().split("## Reading from Spark directly", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_spark_snippet_runs_as_written_on_a_fresh_install(
    venv, tmp_path, metadata_uri, zk_namespace, bookie_cluster
):
    """Only the cluster's address is changed: the fresh venv's Python runs the
    snippet against a cluster (three bookieds on the suite's ZooKeeper) holding the topic
    and subscription it names (``orders``: the vector a_plain's 5 messages; ``billing``
    acknowledged up to entry 1), with no registration line and no environment prepared (but
    the JVM's compiler and collector: :data:`SNIPPET_JVM`)."""
    pytest.importorskip("pyspark")
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from tests.support import broker_ledgers
    from tests.support import pulsar_entries as pe

    snippet = readme_spark_snippet()
    assert README_URI in snippet and "register" not in snippet.split("import")[-1]
    uri = metadata_uri
    bookie_cluster(3)
    name = "public/default/persistent/orders"
    entries = pe.case_entries("a_plain")
    with BlockingBookKeeper(uri, timeout=60) as bk:
        written = broker_ledgers.write_ledger(bk, name, entries)
    info = broker_ledgers.managed_ledger_info([written], timestamp=1)
    billing = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=written.ledger_id, markDeleteEntryId=1)
    with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
        # the cluster's root is the znode above its ledgers (zk_namespace), Pulsar's folders beside them
        store.client.create(f"{zk_namespace}/managed-ledgers/{name}", info.SerializeToString(), makepath=True)
        store.client.create(f"{zk_namespace}/managed-ledgers/{name}/billing", billing.SerializeToString())
    env_python = venv / "bin" / "python"
    proc = _run(env_python, "-c", snippet.replace(README_URI, uri), cwd=tmp_path, java_options=SNIPPET_JVM)
    shown = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    ids = [line.split("|")[1].strip() for line in shown[1:]]
    assert ids == [f"{written.ledger_id}:{e}:-1" for e in (2, 3, 4)], proc.stdout


def test_the_venv_running_the_suite_shows_the_data_source_to_sparks_lookup(tmp_path):
    """PySpark's workers find ``bookkeeper`` by listing top-level ``pyspark_*`` modules
    (``pkgutil.iter_modules``); an editable install's import hook lists none, so ``./dev setup``
    links the module into the venv. Without it the README's snippet fails in the dev venv."""
    # run away from the checkout, whose root `python -c` would put on sys.path
    listing = "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules()))"
    listed = _run(sys.executable, "-c", listing, cwd=tmp_path)
    assert "'pyspark_bookkeeper'" in listed.stdout
    imported = _run(sys.executable, "-c", "import pyspark_bookkeeper as m; print(m.DefaultSource.name())", cwd=tmp_path)
    assert imported.stdout.strip() == "bookkeeper"
