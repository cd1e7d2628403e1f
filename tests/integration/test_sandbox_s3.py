"""``bkctl sandbox up --s3``: a real S3 server (SeaweedFS) beside ZooKeeper, found and stopped by
pid; and the tests' own ``s3_server`` fixture (tests/support/s3_server.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from botocore.exceptions import ClientError

from bkctl.sandbox import cluster
from bkctl.sandbox import state as sandbox_state
from bkctl.sandbox.s3 import is_weed_process, read_credentials
from bkctl.sandbox.zookeeper import pid_alive
from tests.support.cli import env_for, run_bkctl


@pytest.fixture
def sandbox_dir(tmp_path):
    d = tmp_path / "sbx"
    yield d
    if d.exists() and sandbox_state.load_state(d):
        cluster.sandbox_down(d, grace=5)


def test_up_s3_serves_a_bucket_with_keys_in_a_file_never_printed_and_down_stops_it(sandbox_dir, monkeypatch):
    import boto3

    env = env_for(None)
    up = run_bkctl(env, "sandbox", "up", "--bookies", "0", "--s3", "--dir", str(sandbox_dir), "--json", text=True)
    assert up.returncode == 0, up.stderr
    s3 = json.loads(up.stdout)["s3"]
    assert s3["endpoint"] == f"http://127.0.0.1:{s3['port']}" and s3["bucket"] == "bkctl-sandbox"
    assert is_weed_process(s3["pid"], sandbox_dir / "s3")
    creds_file = s3["credentials_file"]
    assert stat.S_IMODE(os.stat(creds_file).st_mode) == 0o600
    keys = read_credentials(creds_file)

    # what up prints in either form names the file, never a key
    human = run_bkctl(env, "sandbox", "up", "--bookies", "0", "--dir", str(sandbox_dir), text=True)
    assert human.returncode == 0, human.stderr
    status = run_bkctl(env, "sandbox", "status", "--dir", str(sandbox_dir), text=True)
    for out in (up.stdout + up.stderr, human.stdout + human.stderr, status.stdout):
        assert keys.access_key not in out and keys.secret_key not in out
    assert f"AWS_SHARED_CREDENTIALS_FILE='{creds_file}'" in human.stdout
    assert f"pid {s3['pid']}" in status.stdout  # the same server, not a second one

    # a client on the standard chain, pointed at the file, writes and reads the bucket
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", creds_file)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    client = boto3.Session().client("s3", endpoint_url=s3["endpoint"], region_name=s3["region"])
    client.put_object(Bucket="bkctl-sandbox", Key="k", Body=b"offloaded")
    assert client.get_object(Bucket="bkctl-sandbox", Key="k", Range="bytes=3-")["Body"].read() == b"loaded"

    down = run_bkctl(env, "sandbox", "down", "--dir", str(sandbox_dir), "--json", text=True)
    assert down.returncode == 0, down.stderr
    assert {"kind": "s3", "port": s3["port"], "pid": s3["pid"]} in json.loads(down.stdout)["stopped"]
    assert not pid_alive(s3["pid"])

    # up again brings the same server back (remembered), with the same keys and the object kept
    again = json.loads(
        run_bkctl(env, "sandbox", "up", "--bookies", "0", "--dir", str(sandbox_dir), "--json", text=True).stdout
    )["s3"]
    assert again["credentials_file"] == creds_file and read_credentials(creds_file) == keys
    client = boto3.client(
        "s3",
        endpoint_url=again["endpoint"],
        region_name="us-east-1",
        aws_access_key_id=keys.access_key,
        aws_secret_access_key=keys.secret_key,
    )
    assert client.get_object(Bucket="bkctl-sandbox", Key="k")["Body"].read() == b"offloaded"


def test_the_fixture_server_serves_ranges_and_refuses_the_denied_identity(s3_server, s3_bucket):
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="x", Body=bytes(range(256)))
    got = s3_bucket.client.get_object(Bucket=s3_bucket.name, Key="x", Range="bytes=16-31")["Body"].read()
    assert got == bytes(range(16, 32))
    denied = s3_server.client(s3_server.denied)
    with pytest.raises(ClientError) as refused:
        denied.get_object(Bucket=s3_bucket.name, Key="x")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert is_weed_process(s3_server.server.pid, s3_server.server.data_dir)
