"""bkctl.wire.bookie_disk.layout: current/ directories, the layout stamp and atomic VERSION files."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
import sys

import pytest

from bkctl.wire.bookie_disk import layout


def test_prepare_fresh_dirs_creates_current_and_stamp(tmp_path):
    dirs = [str(tmp_path / "journal"), str(tmp_path / "ledgers")]
    out = layout.prepare_dirs(dirs)
    assert out == [os.path.join(d, "current") for d in dirs]
    for d in dirs:
        assert os.path.isdir(os.path.join(d, "current"))
        assert layout.read_layout_version(d) == layout.CURRENT_LAYOUT_VERSION
        with open(os.path.join(d, "current", layout.LAYOUT_FILE)) as f:
            text = f.read()
        assert "format=bookied-storage" in text
    # idempotent, and keeps what is there
    layout.write_version_file(dirs[0], "cookie text\n")
    assert layout.prepare_dirs(dirs) == out
    assert layout.read_version_file(dirs[0]) == "cookie text\n"


def test_prepare_existing_current_with_only_cookie_gets_stamped(tmp_path):
    d = str(tmp_path / "d")
    layout.write_version_file(d, '4\nbookieHost: "x:3181"\n')
    assert layout.read_layout_version(d) is None
    layout.prepare_dirs([d])
    assert layout.read_layout_version(d) == layout.CURRENT_LAYOUT_VERSION


@pytest.mark.parametrize(
    "name,is_dir",
    [
        ("VERSION", False),
        ("1a2b.txn", False),
        ("0.log", False),
        ("lastId", False),
        ("lastMark", False),
        ("lastMark.1", False),
        ("ab", True),
    ],
)
def test_old_java_layout_needs_upgrade(tmp_path, name, is_dir):
    good = tmp_path / "good"
    old = tmp_path / "old"
    old.mkdir()
    if is_dir:
        (old / name / "cd").mkdir(parents=True)
        (old / name / "cd" / "abcd.idx").write_bytes(b"x")
    else:
        (old / name).write_bytes(b"2\n")
    with pytest.raises(layout.UpgradeNeeded) as info:
        layout.prepare_dirs([str(good), str(old)])
    assert "upgrade needed" in str(info.value)
    assert str(old) in str(info.value)
    # nothing was created, not even for the good directory
    assert not good.exists()
    assert not (old / "current").exists()


def test_unrelated_files_do_not_block(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "README").write_text("hi")
    (d / "zz").mkdir()  # not hex
    layout.prepare_dirs([str(d)])
    assert layout.read_layout_version(str(d)) == layout.CURRENT_LAYOUT_VERSION


@pytest.mark.parametrize("name", ["3.log", "ledgers", "lastMark", "1f.txn"])
def test_java_storage_in_current_is_refused(tmp_path, name):
    d = tmp_path / "d"
    cur = d / "current"
    cur.mkdir(parents=True)
    (cur / "VERSION").write_text("cookie")
    if name == "ledgers":
        (cur / name).mkdir()
    else:
        (cur / name).write_bytes(b"\0" * 16)
    with pytest.raises(layout.LayoutError) as info:
        layout.prepare_dirs([str(d)])
    assert not isinstance(info.value, layout.UpgradeNeeded)
    assert "Java" in str(info.value)
    assert layout.read_layout_version(str(d)) is None


def test_layout_version_newer_and_older(tmp_path, monkeypatch):
    d = str(tmp_path / "d")
    layout.write_layout_version(d, layout.CURRENT_LAYOUT_VERSION + 1)
    with pytest.raises(layout.LayoutError) as info:
        layout.prepare_dirs([d])
    assert "newer" in str(info.value)
    layout.write_layout_version(d, 1)
    monkeypatch.setattr(layout, "CURRENT_LAYOUT_VERSION", 2)
    with pytest.raises(layout.UpgradeNeeded):
        layout.prepare_dirs([d])


def test_layout_file_roundtrip_and_garbage(tmp_path):
    d = str(tmp_path / "d")
    assert layout.read_layout_version(d) is None
    for v in (1, 7, 12345):
        layout.write_layout_version(d, v)
        assert layout.read_layout_version(d) == v
    with pytest.raises(ValueError):
        layout.write_layout_version(d, 0)
    path = os.path.join(d, "current", layout.LAYOUT_FILE)
    for junk in (
        b"\xff\xfe",
        b"format=other\nversion=1\n",
        b"format=bookied-storage\n",
        b"format=bookied-storage\nversion=x\n",
        b"garbage",
    ):
        with open(path, "wb") as f:
            f.write(junk)
        with pytest.raises(layout.LayoutError):
            layout.read_layout_version(d)
    with pytest.raises(layout.LayoutError):
        layout.prepare_dirs([d])


def test_version_file_atomic_roundtrip(tmp_path):
    d = str(tmp_path / "d")
    assert layout.read_version_file(d) is None
    layout.write_version_file(d, "first")
    layout.write_version_file(d, "second\n")
    assert layout.read_version_file(d) == "second\n"
    assert sorted(os.listdir(os.path.join(d, "current"))) == ["VERSION"]


def test_atomic_write_failure_keeps_old_content(tmp_path, monkeypatch):
    d = str(tmp_path / "d")
    layout.write_version_file(d, "old cookie")
    real_write = os.write

    def failing_write(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(OSError) as info:
        layout.write_version_file(d, "new cookie")
    monkeypatch.setattr(os, "write", real_write)
    assert info.value.errno == errno.ENOSPC
    assert layout.read_version_file(d) == "old cookie"
    assert sorted(os.listdir(os.path.join(d, "current"))) == ["VERSION"]


def test_not_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(layout.LayoutError):
        layout.prepare_dirs([str(f)])


def test_a_journal_mark_file_is_named_lastmark_or_lastmark_dot_a_number():
    assert layout.is_last_mark("lastMark") and layout.is_last_mark("lastMark.2")
    for other in ("lastMark.", "lastMark.x", "lastMarkx", "xlastMark", "lastId", "lastMark.2.tmp"):
        assert not layout.is_last_mark(other), other


def _fsync_failing_on_directories(monkeypatch, code: int) -> list[str]:
    """os.fsync answering ``code`` for a directory (as a file system that cannot sync one does),
    syncing files as ever; the kinds of what was synced, in order."""
    real = os.fsync
    synced: list[str] = []

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced.append("dir")
            raise OSError(code, os.strerror(code))
        synced.append("file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_a_directory_that_cannot_be_synced_is_said_once_and_its_files_still_written(tmp_path, monkeypatch, caplog):
    synced = _fsync_failing_on_directories(monkeypatch, errno.EINVAL)
    caplog.set_level(logging.WARNING, logger=layout.__name__)
    d = str(tmp_path / "einval-mount")
    layout.write_version_file(d, "cookie\n")  # fsyncs its file, then its folder
    layout.write_version_file(d, "cookie 2\n")
    layout.fsync_dir(tmp_path / "einval-mount" / "current")  # the same folder, named as a Path
    assert layout.read_version_file(d) == "cookie 2\n"
    assert synced.count("file") == 2 and synced.count("dir") >= 3
    folder = os.path.join(d, "current")
    said = [r.getMessage() for r in caplog.records if r.name == layout.__name__]
    assert [m for m in said if folder + " " in m] == [
        f"cannot fsync directory {folder} (Invalid argument): its file system does not sync directories; "
        "the files created or renamed in it are as durable as that file system makes them"
    ]  # once for the folder however often it is synced
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == layout.__name__)
    other = tmp_path / "other"
    other.mkdir()
    layout.fsync_dir(other)
    assert any(str(other) + " " in r.getMessage() for r in caplog.records)  # another folder: said too


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC, errno.EBADF])
def test_a_directory_sync_that_fails_otherwise_raises(tmp_path, monkeypatch, caplog, code):
    _fsync_failing_on_directories(monkeypatch, code)
    with pytest.raises(OSError) as failed:
        layout.fsync_dir(tmp_path)
    assert failed.value.errno == code
    with pytest.raises(OSError):  # and an atomic write through it fails, not half-promised
        layout.write_version_file(str(tmp_path / "d"), "cookie\n")
    assert not [r for r in caplog.records if r.name == layout.__name__]


def test_einval_from_a_file_sync_still_raises(tmp_path, monkeypatch):
    real = os.fsync

    def fsync(fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as failed:
        layout.write_version_file(str(tmp_path / "d"), "cookie\n")
    assert failed.value.errno == errno.EINVAL
    assert layout.read_version_file(str(tmp_path / "d")) is None  # nothing half written in its place


def test_bkctl_says_a_directory_it_cannot_sync_without_verbose(tmp_path):
    """bkctl drops library logging without -v, but not this: one ``warning:`` line per folder."""
    script = (
        "import errno, os, stat, sys\n"
        "real = os.fsync\n"
        "def fsync(fd):\n"
        "    if stat.S_ISDIR(os.fstat(fd).st_mode):\n"
        "        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))\n"
        "    real(fd)\n"
        "os.fsync = fsync\n"
        "from bkctl.cli import run\n"
        "run(['completion', 'show', 'bash'])\n"
        "from bkctl.wire.bookie_disk.layout import fsync_dir\n"
        "fsync_dir(sys.argv[1]); fsync_dir(sys.argv[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"warning: cannot fsync directory {tmp_path} (Invalid argument): its file system does not sync "
        "directories; the files created or renamed in it are as durable as that file system makes them"
    ]
