"""The small filesystems of the full-disk and fault tests: a run killed before
its teardown leaves its mounts behind, and the next run unmounts them -- but
never one whose owner still runs (another worker's)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import smallfs


@pytest.fixture
def mounted(tmp_path):
    point = tmp_path / "fs"
    try:
        smallfs.mount_tmpfs(point, 4)
    except smallfs.CannotMount as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"mounting needs root here: {e}", pytrace=False)
        pytest.skip(str(e))
    yield point
    if os.path.ismount(point):
        smallfs.unmount(point)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_mount_whose_owner_is_gone_is_unmounted(mounted):
    owner = mounted.with_name(mounted.name + smallfs.OWNER_SUFFIX)
    assert owner.read_text() == str(os.getpid())
    owner.write_text(str(_dead_pid()))  # as a killed run left it
    assert mounted in smallfs.unmount_orphans()
    assert not os.path.ismount(mounted)
    assert not owner.exists()


def test_a_mount_whose_owner_runs_is_left_alone(mounted):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mounted.with_name(mounted.name + smallfs.OWNER_SUFFIX).write_text(str(sleeper.pid))
        assert mounted not in smallfs.unmount_orphans()
        assert os.path.ismount(mounted)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unmounting_removes_the_owner_note(mounted):
    smallfs.unmount(mounted)
    assert not os.path.ismount(mounted)
    assert not mounted.with_name(mounted.name + smallfs.OWNER_SUFFIX).exists()
