"""A real S3 server for the tests: SeaweedFS's ``weed`` (:class:`bkctl.sandbox.s3.S3Server`).

The session fixture ``s3_server`` (tests/conftest.py) starts one per test session, so once per
xdist worker, on ports of the worker's own block (tests/support/ports.py), and stops it by pid
at the end; integration tests only.  The function fixture ``s3_bucket`` gives each test a bucket
of its own (:class:`S3Bucket`), emptied and deleted afterwards.

What a test gets:

* :class:`S3Endpoint`: ``endpoint_url``, ``region``, ``credentials`` (allowed everything),
  ``denied`` (an identity the server refuses everything), ``client()`` (boto3), ``env()`` (the
  standard ``AWS_*`` variables for a bkctl subprocess: keys, region, ``AWS_ENDPOINT_URL_S3``)
  and ``slow_proxy()``.
* :class:`S3Bucket`: ``name``, ``endpoint`` and ``client``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bkctl.sandbox.s3 import DENIED_PROFILE, REGION, S3Credentials, S3Server, s3_client


@dataclass(frozen=True)
class S3Endpoint:
    server: S3Server = field(repr=False)
    endpoint_url: str
    region: str
    credentials: S3Credentials
    denied: S3Credentials

    @classmethod
    def of(cls, server: S3Server) -> S3Endpoint:
        return cls(server, server.endpoint_url, REGION, server.credentials(), server.credentials(DENIED_PROFILE))

    def client(self, credentials: S3Credentials | None = None, endpoint_url: str | None = None) -> Any:
        return s3_client(endpoint_url or self.endpoint_url, credentials or self.credentials)

    def env(self, credentials: S3Credentials | None = None, endpoint_url: str | None = None) -> dict[str, str]:
        """The standard AWS variables a bkctl subprocess reads (to add to its environment)."""
        creds = credentials or self.credentials
        return {
            "AWS_ACCESS_KEY_ID": creds.access_key,
            "AWS_SECRET_ACCESS_KEY": creds.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL_S3": endpoint_url or self.endpoint_url,
            # nothing from the machine's own AWS configuration
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }

    def new_bucket(self, prefix: str = "t") -> S3Bucket:
        name = f"{prefix}-{uuid.uuid4().hex[:16]}"
        client = self.client()
        client.create_bucket(Bucket=name)
        return S3Bucket(name, self, client)

    @contextlib.contextmanager
    def slow_proxy(self, delay: float) -> Iterator[str]:
        """An endpoint URL in front of this server that waits *delay* seconds before passing on each
        connection's first bytes: a server that answers too slowly."""
        with SlowProxy(self.server.port, delay) as proxy:
            yield f"http://127.0.0.1:{proxy.port}"


@dataclass(frozen=True)
class S3Bucket:
    name: str
    endpoint: S3Endpoint = field(repr=False)
    client: Any = field(repr=False)

    def drop(self) -> None:
        """Abort its uploads, delete its objects and the bucket."""
        for upload in self.client.list_multipart_uploads(Bucket=self.name).get("Uploads", []):
            self.client.abort_multipart_upload(Bucket=self.name, Key=upload["Key"], UploadId=upload["UploadId"])
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.name, Delete={"Objects": keys})
        self.client.delete_bucket(Bucket=self.name)


class SlowProxy:
    """A TCP proxy on 127.0.0.1 that holds each client's bytes *delay* seconds before forwarding."""

    def __init__(self, target_port: int, delay: float):
        self.target_port = target_port
        self.delay = delay
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> SlowProxy:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self.target_port)) as upstream:
            time.sleep(self.delay)
            if self._stopped.is_set():
                return
            pump = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            pump.start()
            _pump(client, upstream)
            pump.join()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
