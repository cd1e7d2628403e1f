"""A real, small filesystem for full-disk tests and the fault harness.

Mounting needs root (CI runs as root).  Where the mount is impossible a test
skips -- except under CI (``CI=true``), where it fails: a full-disk test that
silently stops running would be a skip called done.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

from bkctl.sandbox.zookeeper import pid_alive


class CannotMount(RuntimeError):
    pass


#: beside each mount point, the pid of the process that mounted it
OWNER_SUFFIX = ".mounted-by"


def _owner_file(path: Path) -> Path:
    return path.with_name(path.name + OWNER_SUFFIX)


def _claim(path: Path) -> None:
    """Mount points are ours: a run killed before its teardown leaves them
    mounted (a loop device each, of a handful), and the next run unmounts
    those whose owner is gone (:func:`unmount_orphans`)."""
    unmount_orphans()
    _owner_file(path).write_text(str(os.getpid()))


def unmount_orphans(mounts: str = "/proc/self/mounts") -> list[Path]:
    """Unmount the small filesystems whose mounting process is gone; returns them."""
    try:
        with open(mounts) as f:
            points = [Path(line.split()[1].encode().decode("unicode_escape")) for line in f if line.strip()]
    except OSError:
        return []
    gone = []
    for point in points:
        if not point.name:  # the root
            continue
        owner = _owner_file(point)
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not pid_alive(pid):
            unmount(point)  # and its owner note
            gone.append(point)
    return gone


def mount_tmpfs(path: Path, size_mb: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise CannotMount("mounting a small filesystem needs root")
    _claim(path)
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise CannotMount(f"mount -t tmpfs failed: {out.stderr.strip() or out.returncode}")


def mount_ramfs(path: Path) -> None:
    """A ramfs: memory without a size limit (keep what goes in small) and without direct I/O,
    whose open refuses O_DIRECT (EINVAL) where tmpfs now takes it (Linux 6.6 on)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise CannotMount("mounting a ramfs needs root")
    _claim(path)
    out = subprocess.run(
        ["mount", "-t", "ramfs", "-o", "mode=0755", "ramfs", str(path)], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise CannotMount(f"mount -t ramfs failed: {out.stderr.strip() or out.returncode}")


def mount_ext4_image(path: Path, image: Path, size_mb: int) -> None:
    """A loop-mounted ext4 in ``image`` (a file on the real disk, so its fsyncs
    reach that disk: a competing writer there makes it a slow disk)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise CannotMount("mounting a small filesystem needs root")
    _claim(path)
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    for cmd in (["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], ["mount", "-o", "loop", str(image), str(path)]):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise CannotMount(f"{' '.join(cmd[:2])} failed: {out.stderr.strip() or out.returncode}")


def unmount(path: Path) -> None:
    out = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if out.returncode != 0:  # something still holds it: detach now, freed once released
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)
    _owner_file(path).unlink(missing_ok=True)


@contextlib.contextmanager
def small_filesystem(path: Path, size_mb: int):
    mount_tmpfs(path, size_mb)
    try:
        yield path
    finally:
        unmount(path)


def mount_or_explain(path: Path, size_mb: int) -> None:
    """mount_tmpfs for a pytest test: skip outside CI, fail under CI=true."""
    _or_explain(lambda: mount_tmpfs(path, size_mb), f"a {size_mb} MB tmpfs at {path}, to fill up")


def ramfs_or_explain(path: Path) -> None:
    """mount_ramfs for a pytest test: skip outside CI, fail under CI=true."""
    _or_explain(lambda: mount_ramfs(path), f"a ramfs at {path}, which refuses O_DIRECT")


def _or_explain(mount, wanted: str) -> None:
    import pytest

    try:
        mount()
    except CannotMount as e:
        message = f"this test needs a real filesystem ({wanted}), which needs root: {e}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def usage(path: Path) -> float:
    st = os.statvfs(path)
    return 1.0 - st.f_bavail / st.f_blocks


def fill(path: Path, name: str, leave_bytes: int) -> Path:
    """Grow ``path/name`` until ``leave_bytes`` (about) are left free."""
    filler = path / name
    st = os.statvfs(path)
    room = st.f_bavail * st.f_frsize - leave_bytes
    if room > 0:
        with open(filler, "ab") as f:
            try:  # instant where the filesystem allocates without writing (ext4, tmpfs)
                os.posix_fallocate(f.fileno(), os.fstat(f.fileno()).st_size, room)
            except OSError:
                pass
    with open(filler, "ab") as f:
        chunk = b"\xa5" * (256 * 1024)
        while True:
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                f.write(chunk[: max(4096, min(len(chunk), free - leave_bytes))])
                f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    return filler


def shrink_to_usage(path: Path, filler: Path, target: float) -> None:
    """Truncate ``filler`` so that the filesystem's usage is about ``target``."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    used = total - st.f_bavail * st.f_frsize
    excess = used - int(target * total)
    if excess > 0:
        size = filler.stat().st_size
        os.truncate(filler, max(0, size - excess))
