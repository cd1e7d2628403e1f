"""A local throw-away cluster: one real ZooKeeper and N ``bookied`` processes.

Everything lives in one directory (default ``./.bkctl-sandbox``)::

    sandbox.json            pids, ports and the metadata URI (the state file)
    zookeeper/              zoo.cfg, zookeeper.log, data/
    bookie-<i>/             bk_server.conf, bookied.log, journal/, ledgers/

Processes run in their own sessions and outlive the command that started
them; later commands find them through ``sandbox.json`` and only ever signal
a recorded pid after checking (``/proc/<pid>/cmdline``) that it still is the
process the sandbox started.  ``down`` keeps the data, so ``up`` brings the
same cluster back (same ZooKeeper port when it is free, same bookie ports).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

from ..exitcodes import NOT_FOUND, UNREACHABLE, USAGE
from .bookies import bookie_alive, bookie_paths, bookied_available, running_bookieds, start_bookie
from .state import (
    HOST,
    STATE_FILE,
    STATE_VERSION,
    Progress,
    SandboxError,
    load_state,
    locked,
    metadata_uri_for,
    quiet,
    sandbox_dir,
    save_state,
)
from .zookeeper import (
    MAIN_CLASS,
    ZooKeeperError,
    ZooKeeperServer,
    is_zookeeper_process,
    pid_alive,
    port_free,
    server_answers,
    terminate_pid,
)

# --------------------------------------------------------------------------
# ZooKeeper


def _zk_dir(directory: Path) -> Path:
    return directory / "zookeeper"


def zookeeper_alive(directory: Path, record: dict | None) -> bool:
    """Whether the recorded ZooKeeper still runs (and is ours)."""
    if not record or not record.get("pid"):
        return False
    return is_zookeeper_process(int(record["pid"]), _zk_dir(directory))


#: the sandbox ZooKeeper's Java heap unless ``sandbox up --zk-heap`` says otherwise
DEFAULT_ZK_HEAP_MB = 256
#: the largest znode (and packet) the sandbox's ZooKeeper takes: Pulsar's -Djute.maxbuffer
ZK_JUTE_MAXBUFFER = 10 * 1024 * 1024


def ensure_zookeeper(
    directory: Path, state: dict, port: int | None = None, progress: Progress = quiet, heap_mb: int | None = None
) -> dict:
    """Reuse the recorded ZooKeeper if it runs, else start one with *heap_mb* MiB of
    heap (None: the heap it was last started with, else :data:`DEFAULT_ZK_HEAP_MB`);
    returns its record."""
    record = state.get("zookeeper") or {}
    heap = heap_mb or int(record.get("heap_mb") or DEFAULT_ZK_HEAP_MB)
    if zookeeper_alive(directory, record):
        running = int(record["port"])
        if port is not None and port != running:
            raise SandboxError(
                f"the sandbox ZooKeeper in {directory} already listens on port {running}; "
                f"run `bkctl sandbox down --dir {directory}` before asking for port {port}",
                USAGE,
            )
        if not server_answers(HOST, running, timeout=2.0):
            raise SandboxError(
                f"the sandbox ZooKeeper (pid {record['pid']}) does not answer on {HOST}:{running}; "
                f"see {_zk_dir(directory) / 'zookeeper.log'}",
                UNREACHABLE,
            )
        if heap_mb is not None and heap_mb != int(record.get("heap_mb") or DEFAULT_ZK_HEAP_MB):
            raise SandboxError(
                f"the sandbox ZooKeeper in {directory} already runs with a "
                f"{int(record.get('heap_mb') or DEFAULT_ZK_HEAP_MB)} MiB heap; run `bkctl sandbox down --dir "
                f"{directory}` before asking for {heap_mb} MiB",
                USAGE,
            )
        progress(f"ZooKeeper already running on {HOST}:{running} (pid {record['pid']})")
        return {"port": running, "pid": int(record["pid"]), "started": False, "heap_mb": heap}
    if port is None and record.get("port") and port_free(HOST, int(record["port"])):
        port = int(record["port"])  # same port as last time keeps the URI stable
    # Pulsar runs its ZooKeeper with 10 MB packets: a managed ledger of tens of thousands of
    # ledgers is a znode over the 1 MiB default (apache/pulsar#11490)
    server = ZooKeeperServer(
        _zk_dir(directory), port, heap_mb=heap, jvm_options=[f"-Djute.maxbuffer={ZK_JUTE_MAXBUFFER}"]
    )
    progress(f"starting ZooKeeper ({heap} MiB heap)...")
    try:
        server.start()
    except ZooKeeperError as exc:
        raise SandboxError(str(exc)) from None
    progress(f"ZooKeeper listening on {server.connect_string} (pid {server.pid})")
    return {"port": server.port, "pid": server.pid, "started": True, "heap_mb": heap}


def init_cluster(uri: str, timeout: float = 20.0) -> bool:
    """``initnewcluster`` unless already done; True if it was created now."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.errors import ClusterExists, ZKStoreError
    from bkctl.wire.metadata.zk import ZKMetadataStore

    try:
        with ZKMetadataStore(uri, timeout=timeout, twins=fastpath.GENERAL) as store:
            if store.cluster.exists():
                return False
            try:
                store.cluster.init()
            except ClusterExists:
                return False
            return True
    except ZKStoreError as exc:
        raise SandboxError(f"cannot initialise the cluster at {uri}: {exc}", UNREACHABLE) from None


# --------------------------------------------------------------------------
# the S3 server (sandbox up --s3)

#: the bucket `sandbox up --s3` creates
SANDBOX_BUCKET = "bkctl-sandbox"


def _s3_dir(directory: Path) -> Path:
    return directory / "s3"


def s3_alive(directory: Path, record: dict | None) -> bool:
    """Whether the recorded S3 server still runs (and is ours)."""
    from .s3 import is_weed_process

    if not record or not record.get("pid"):
        return False
    return is_weed_process(int(record["pid"]), _s3_dir(directory))


def ensure_s3(directory: Path, state: dict, progress: Progress = quiet) -> dict:
    """Reuse the recorded S3 server if it runs, else start one (the same S3 port when it is
    free); create :data:`SANDBOX_BUCKET`; returns its record (no keys: they stay in its
    credentials file)."""
    from .s3 import REGION, S3Server, S3ServerError, ensure_bucket, read_credentials

    record = state.get("s3") or {}
    if s3_alive(directory, record):
        progress(f"S3 server already running on {HOST}:{record['port']} (pid {record['pid']})")
        return dict(record, started=False)
    port = int(record["port"]) if record.get("port") and port_free(HOST, int(record["port"])) else None
    server = S3Server(_s3_dir(directory), port)
    progress("starting the S3 server (SeaweedFS)...")
    try:
        server.start()
        ensure_bucket(server.endpoint_url, read_credentials(server.credentials_path), SANDBOX_BUCKET)
    except S3ServerError as exc:
        server.stop()
        raise SandboxError(str(exc)) from None
    progress(f"S3 server listening on {server.endpoint_url} (pid {server.pid})")
    return {
        "port": server.port,
        "pid": server.pid,
        "dir": str(server.data_dir),
        "endpoint": server.endpoint_url,
        "region": REGION,
        "bucket": SANDBOX_BUCKET,
        "credentials_file": str(server.credentials_path),
        "started": True,
    }


def _s3_public(record: dict | None, alive: bool | None = None) -> dict | None:
    if not record:
        return None
    doc = {k: record.get(k) for k in ("endpoint", "port", "pid", "region", "bucket", "credentials_file")}
    if alive is not None:
        doc["alive"] = alive
    return doc


# --------------------------------------------------------------------------
# commands


def _public(state: dict) -> dict:
    """The documented ``up --json`` document."""
    zk = state.get("zookeeper") or {}
    return {
        "uri": state.get("uri"),
        "zookeeper": {"port": zk.get("port"), "pid": zk.get("pid"), "heap_mb": zk.get("heap_mb")},
        "bookies": [
            {
                "bookie_id": b["id"],
                "port": b["port"],
                "http_port": b.get("http_port"),
                "pid": b.get("pid"),
                "dirs": list(b.get("dirs", [])),
            }
            for b in state.get("bookies", [])
            if b.get("pid")
        ],
        "failed": list(state.get("failed", [])),
        "dir": state.get("dir"),
        "autorecovery": bool(state.get("autorecovery", False)),
        "tls": {"ca": state["tls"]["ca"]} if state.get("tls") else None,
        "settings": dict(state.get("settings") or {}),
        "s3": _s3_public(state.get("s3")) if (state.get("s3") or {}).get("pid") else None,
    }


#: the bookies of a new sandbox (``up`` without --bookies)
DEFAULT_BOOKIES = 3


def sandbox_up(
    directory: str | os.PathLike | None = None,
    bookies: int | None = None,
    zk_port: int | None = None,
    *,
    bookie_timeout: float = 60.0,
    progress: Progress = quiet,
    autorecovery: bool | None = None,
    tls: bool | None = None,
    settings: dict[str, str | None] | None = None,
    zk_heap_mb: int | None = None,
    s3: bool | None = None,
) -> dict:
    """Start (or reuse) ZooKeeper, initialise the cluster, run *bookies* bookies
    (None: as many as the sandbox records -- a sandbox of 4 comes back with 4 --,
    3 for a new one).

    With *s3*, also a real S3 server on 127.0.0.1 (SeaweedFS: :mod:`bkctl.sandbox.s3`), its
    bucket :data:`SANDBOX_BUCKET` and an AWS credentials file (``s3`` in the result: endpoint,
    port, pid, region, bucket, credentials_file); remembered like *autorecovery* (None: as the
    sandbox was last started).

    With *autorecovery* every bookie this call starts runs the autorecovery
    daemon (``autoRecoveryDaemonEnabled=true``); None keeps what the sandbox
    was last started with.  Bookies already running keep their setting.
    *tls* likewise: bookies that speak only TLS, with a throw-away CA and
    certificate made in ``<dir>/tls`` (``tls.ca`` in the result). *settings*
    (``--set``, from :func:`parse_settings`) update the bk_server.conf settings
    remembered for every bookie started (a None value forgets a key).
    *zk_heap_mb*: the Java heap of a ZooKeeper this call starts (a production-sized
    cluster needs gigabytes: some 1 KiB a ledger znode); remembered for later starts.

    Every bookie that can start is started: one that does not is reported
    in ``failed`` (``index``, ``bookie_id``, ``error``), left out of
    ``bookies``, and the others go on.  A bookie counts as started once it is
    registered by its own ZooKeeper session (:func:`wait_registered_anew`): a
    bookie restarted after a kill -9 waits for the killed process's session to
    expire first.

    A recorded bookie that was decommissioned (its cookie gone from ZooKeeper)
    is not started again: its slot is dropped (``retired``: index, bookie_id,
    moved_to) and a new bookie counts in its place.

    Returns ``{"uri", "zookeeper": {"port", "pid"}, "bookies": [{"bookie_id", "port",
    "http_port", "pid", "dirs"}], "failed", "retired", "dir"}``.  The state file is updated
    after every process that starts, so ``down`` can clean up after a failure half-way.
    """
    if bookies is not None and bookies < 0:
        raise SandboxError("--bookies must be 0 or more", USAGE)
    d = sandbox_dir(directory)
    with locked(d):
        state = load_state(d) or {}
        recorded = sorted(state.get("bookies", []), key=lambda b: b.get("index", 0))
        if bookies is None:
            bookies = len(recorded) or DEFAULT_BOOKIES
        wanted = recorded[:bookies]
        to_start = [b for b in wanted if not bookie_alive(b)]
        missing = bookies - len(wanted)
        if (to_start or missing > 0) and not bookied_available():
            raise SandboxError(
                f"cannot start {bookies} bookie{'' if bookies == 1 else 's'}: bookied is not available yet "
                "(no `python -m bkctl.bookied`); run `bkctl sandbox up --bookies 0` for ZooKeeper only"
            )

        zk = ensure_zookeeper(d, state, zk_port, progress, zk_heap_mb)
        uri = metadata_uri_for(zk["port"])
        state.update(
            {
                "version": STATE_VERSION,
                "dir": str(d),
                "uri": uri,
                "zookeeper": {"port": zk["port"], "pid": zk["pid"], "dir": str(_zk_dir(d)), "heap_mb": zk["heap_mb"]},
            }
        )
        # bookies beyond the requested count keep running and stay recorded
        for extra in recorded[bookies:]:
            if not bookie_alive(extra):
                extra["pid"] = None
        state["bookies"] = recorded
        if autorecovery is not None:
            state["autorecovery"] = bool(autorecovery)
        autorecovery = bool(state.get("autorecovery", False))
        if tls is not None:
            if tls:
                from .certs import ensure_sandbox_certs

                state["tls"] = ensure_sandbox_certs(d / "tls")
            else:
                state["tls"] = None
        tls_files = state.get("tls")
        if settings:
            remembered = dict(state.get("settings") or {})
            remembered.update(settings)
            state["settings"] = {k: v for k, v in remembered.items() if v is not None}
        extra = state.get("settings") or None
        save_state(d, state)
        if s3 is not None:
            state["s3_enabled"] = bool(s3)
        if state.get("s3_enabled"):
            state["s3"] = {k: v for k, v in ensure_s3(d, state, progress).items() if k != "started"}
            save_state(d, state)
        if init_cluster(uri):
            progress(f"initialised a new cluster at {uri}")
        retired = _retire_decommissioned(d, uri, [b for b in recorded if not bookie_alive(b)], progress)
        if retired:
            gone = {r["index"] for r in retired}
            recorded = [b for b in recorded if b["index"] not in gone]
            state["bookies"] = recorded
            state.setdefault("retired", []).extend(retired)
            save_state(d, state)
            wanted = recorded[:bookies]
            to_start = [b for b in wanted if not bookie_alive(b)]
            missing = bookies - len(wanted)

        failed: list[dict] = []

        def start(index: int, port: int | None, http_port: int | None) -> dict | None:
            try:
                return start_bookie(
                    d,
                    index,
                    uri,
                    port,
                    timeout=bookie_timeout,
                    progress=progress,
                    autorecovery=autorecovery,
                    tls=tls_files,
                    settings=extra,
                    http_port=http_port,
                )
            except SandboxError as exc:  # the next bookies still start (a bad --set stops them all)
                if exc.code == USAGE:
                    raise
                failed.append({"index": index, "bookie_id": f"{HOST}:{port}" if port else None, "error": str(exc)})
                progress(f"bookie {index} did not start: {str(exc).splitlines()[0]}")
                return None

        for record in to_start:
            fresh = start(record["index"], record["port"], record.get("http_port"))
            # one that did not start has no process: not the pid of the one that ran before
            record.update(fresh if fresh is not None else {"pid": None})
            save_state(d, state)
        next_index = max((b.get("index", 0) for b in recorded + state.get("retired", [])), default=-1) + 1
        for i in range(max(0, missing)):
            fresh = start(next_index + i, None, None)
            if fresh is not None:
                state["bookies"].append(fresh)
                save_state(d, state)
        return dict(_public(state), failed=failed, retired=retired)


def _retire_decommissioned(d: Path, uri: str, stopped: list[dict], progress: Progress) -> list[dict]:
    """The recorded bookies, not running, that were decommissioned: no cookie in ZooKeeper while
    their directories hold one (`bkctl decommission` deletes it last).  bookied refuses to start
    such a bookie, so its slot is dropped -- its directory moved aside to ``bookie-N.decommissioned``,
    nothing deleted -- and a new bookie takes its place; returns ``{"index", "bookie_id",
    "moved_to"}`` for each."""
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.zk import ZKMetadataStore

    candidates = [b for b in stopped if any((Path(x) / "current" / "VERSION").is_file() for x in b.get("dirs", []))]
    if not candidates:
        return []
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.GENERAL) as store:
        gone = [b for b in candidates if store.cookies.get(b["id"]) is None]
    retired = []
    for b in gone:
        base = bookie_paths(d, b["index"])["base"]
        moved = base.with_name(base.name + ".decommissioned")
        n = 1
        while moved.exists():
            n += 1
            moved = base.with_name(f"{base.name}.decommissioned.{n}")
        if base.exists():
            base.rename(moved)
        progress(
            f"bookie {b['id']} was decommissioned (no cookie in ZooKeeper): its slot is dropped, its "
            f"directory moved to {moved}"
        )
        retired.append({"index": b["index"], "bookie_id": b["id"], "moved_to": str(moved)})
    return retired


def sandbox_status(directory: str | os.PathLike | None = None, *, check_registration: bool = True) -> dict:
    """Which recorded processes are alive (and which bookies are registered)."""
    d = sandbox_dir(directory)
    state = load_state(d)
    if state is None:
        raise SandboxError(f"no sandbox in {d} (start one with `bkctl sandbox up`)", NOT_FOUND)
    zk = state.get("zookeeper") or {}
    zk_alive = zookeeper_alive(d, zk)
    registered: dict[str, str] = {}
    if zk_alive and check_registration and state.get("uri") and state.get("bookies"):
        try:
            from bkctl.wire import fastpath
            from bkctl.wire.metadata.errors import ZKStoreError
            from bkctl.wire.metadata.registration_state import Registrations
            from bkctl.wire.metadata.zk import ZKMetadataStore

            with ZKMetadataStore(state["uri"], timeout=5.0, twins=fastpath.GENERAL) as store:
                regs = Registrations.read(store.registration)
                registered.update({b: regs.state_of(b).value for b in regs.registered})
        except ZKStoreError:
            pass
    bookie_rows = []
    for b in state.get("bookies", []):
        alive = bookie_alive(b)
        bookie_rows.append(
            {
                "bookie_id": b["id"],
                "port": b["port"],
                "http_port": b.get("http_port"),
                "pid": b.get("pid"),
                "alive": alive,
                "registered": registered.get(b["id"]),
                "dirs": list(b.get("dirs", [])),
            }
        )
    return {
        "dir": str(d),
        "uri": state.get("uri"),
        "zookeeper": {"port": zk.get("port"), "pid": zk.get("pid"), "alive": zk_alive, "heap_mb": zk.get("heap_mb")},
        "bookies": bookie_rows,
        "s3": _s3_public(state.get("s3"), s3_alive(d, state.get("s3"))),
        "running": zk_alive or any(row["alive"] for row in bookie_rows) or s3_alive(d, state.get("s3")),
    }


def sandbox_down(
    directory: str | os.PathLike | None = None, *, purge: bool = False, grace: float = 15.0, progress: Progress = quiet
) -> dict:
    """Stop the sandbox's processes that are still ours: bookies first, then ZooKeeper.

    Returns ``{"dir", "stopped": [{"kind", "pid", ...}], "purged", "warnings"}``.  With
    *purge* the sandbox directory is deleted afterwards.  The bookies are those recorded and every
    other bookied running with one of this sandbox's configurations (:func:`running_bookieds`); a
    state file that cannot be written (a full disk) is a warning, not a reason to stop half-way.
    """
    d = sandbox_dir(directory)
    state = load_state(d)
    if state is None:
        raise SandboxError(f"no sandbox in {d} (nothing to stop)", NOT_FOUND)
    stopped: list[dict[str, Any]] = []
    warnings: list[str] = []

    def save() -> None:  # every process is stopped whether or not the state file can be written
        try:
            save_state(d, state)
        except SandboxError as exc:
            if str(exc) not in warnings:
                warnings.append(str(exc))
                progress(f"warning: {exc}")

    with locked(d):
        # SIGTERM every bookie first: each ends within its shutdownTimeoutMs (ZooKeeper
        # reachable or not), so stopping them all takes that long once, not once per bookie;
        # a bookie this sandbox runs that the state file does not record is stopped too
        records = state.get("bookies", [])
        running = [(int(b["pid"]), b["id"]) for b in records if bookie_alive(b)]
        known = {pid for pid, _id in running}
        by_conf = {str(b.get("conf")): b["id"] for b in records}
        for pid, conf in sorted(running_bookieds(d).items()):
            if pid not in known:
                running.append((pid, by_conf.get(conf, Path(conf).parent.name)))
        for pid, bookie_id in running:
            progress(f"stopping bookie {bookie_id} (pid {pid})...")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for pid, bookie_id in running:
            terminate_pid(pid, grace)  # waits; SIGKILL after the grace
            stopped.append({"kind": "bookie", "bookie_id": bookie_id, "pid": pid})
        for b in records:
            b["pid"] = None
        save()
        s3 = state.get("s3") or {}
        if s3_alive(d, s3):
            from .s3 import stop_recorded_weed

            progress(f"stopping the S3 server (pid {s3['pid']})...")
            if stop_recorded_weed(int(s3["pid"]), _s3_dir(d)):
                stopped.append({"kind": "s3", "port": s3.get("port"), "pid": s3["pid"]})
        if s3:
            s3["pid"] = None
        zk = state.get("zookeeper") or {}
        if zookeeper_alive(d, zk):
            progress(f"stopping ZooKeeper (pid {zk['pid']})...")
            if terminate_pid(int(zk["pid"]), grace):
                stopped.append({"kind": "zookeeper", "port": zk.get("port"), "pid": zk["pid"]})
        if zk:
            zk["pid"] = None
        save()
    purged = False
    if purge and (d / STATE_FILE).is_file():
        shutil.rmtree(d)
        purged = True
    return {"dir": str(d), "stopped": stopped, "purged": purged, "warnings": warnings}


__all__ = [
    "MAIN_CLASS",
    "ensure_zookeeper",
    "init_cluster",
    "pid_alive",
    "sandbox_down",
    "sandbox_status",
    "sandbox_up",
    "zookeeper_alive",
]
