"""gs:// objects read through real servers on loopback: gcp-storage-emulator (PyPI, pinned in
tests/requirements.txt) for the XML API's ranged reads, with STORAGE_EMULATOR_HOST; moto's S3
server with IAM enforcement on for the HMAC keys' SigV4 signatures (it recomputes every
request's signature, so a wrong one is refused); and a small server here that serves ranges only
to the right OAuth Bearer token. Every command must give for gs:// exactly what it gives for the
local file (a slide file, or a converted OME-Zarr store under a gs:// prefix, which `verify`
checks), and every failure must be exit code 1 with a message naming the object.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from loopback import free_port, wait_for_port

TESTDATA = Path(os.environ.get("SP_TESTDATA", Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
SLIDES = ["aperio/CMU-1-Small-Region.svs", "generic-tiff/yb10kx5k.zstd.tiff"]
REGION = ["--level", "0", "--x", "100", "--y", "200", "--width", "700", "--height", "500"]

pytestmark = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no shared test data at {TESTDATA}")

GCS_ENV = ("STORAGE_EMULATOR_HOST", "GS_ACCESS_KEY_ID", "GS_SECRET_ACCESS_KEY",
           "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in GCS_ENV}
    env.update(extra)
    return env


def run_env(sp, args, env):
    return subprocess.run([str(sp.binary), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """gcp-storage-emulator in memory on loopback, bucket "slides" holding two slides."""
    exe = Path(sys.executable).parent / "gcp-storage-emulator"
    if not exe.exists():
        exe = shutil.which("gcp-storage-emulator")
        if exe is None:
            pytest.fail(f"no gcp-storage-emulator beside {sys.executable} (tests/requirements.txt "
                        "pins it)")
    port = free_port()
    proc = subprocess.Popen([str(exe), "start", "--host", "127.0.0.1", "--port", str(port),
                             "--default-bucket", "slides", "--in-memory", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp_path_factory.mktemp("gcs"))
    try:
        wait_for_port(port, "gcp-storage-emulator", proc)
        base = f"http://127.0.0.1:{port}"
        for name, rel in (("cohort 1/CMU-1+small.svs", SLIDES[0]), ("yb.tiff", SLIDES[1])):
            url = f"{base}/slides/{urllib.parse.quote(name)}"
            req = urllib.request.Request(url, data=(TESTDATA / rel).read_bytes(), method="PUT")
            with urllib.request.urlopen(req, timeout=60) as r:
                assert r.status == 200
        yield clean_env(STORAGE_EMULATOR_HOST=f"127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("key, rel", [("cohort 1/CMU-1+small.svs", SLIDES[0]),
                                      ("yb.tiff", SLIDES[1])])
def test_gs_info_and_region_equal_local(sp, run, emulator, key, rel, tmp_path):
    proc = run_env(sp, ["info", f"gs://slides/{key}", "--json"], emulator)
    assert proc.returncode == 0, proc.stderr
    local = run(["info", TESTDATA / rel, "--json"])
    remote, here = json.loads(proc.stdout), json.loads(local.stdout)
    remote.pop("path", None)
    here.pop("path", None)
    assert remote == here
    out, ref = tmp_path / "gs.rgba", tmp_path / "local.rgba"
    proc = run_env(sp, ["region", f"gs://slides/{key}", *REGION, "-o", out], emulator)
    assert proc.returncode == 0, proc.stderr
    assert run(["region", TESTDATA / rel, *REGION, "-o", ref]).returncode == 0
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(ref.read_bytes()).digest()


def test_gs_missing_object_and_bad_uris(sp, emulator):
    proc = run_env(sp, ["info", "gs://slides/no-such.svs"], emulator)
    assert proc.returncode == 1 and "no-such.svs" in proc.stderr, proc.stderr
    for uri in ("gs://", "gs://slides", "gs://slides/", "gs://UPPER/x.svs", "gs://ab/x.svs"):
        proc = run_env(sp, ["info", uri], emulator)
        assert proc.returncode == 1 and "expected gs://BUCKET/OBJECT" in proc.stderr, \
            (uri, proc.stderr)
    proc = run_env(sp, ["info", "gs://slides/yb.tiff"],
                   dict(emulator, STORAGE_EMULATOR_HOST="http://127.0.0.1:1/path"))
    assert proc.returncode == 1 and "STORAGE_EMULATOR_HOST" in proc.stderr, proc.stderr
    proc = run_env(sp, ["info", "gs://slides/yb.tiff"], dict(emulator, GS_ACCESS_KEY_ID="k"))
    assert proc.returncode == 1 and "GS_SECRET_ACCESS_KEY" in proc.stderr, proc.stderr


def test_gs_zarr_store_reads_and_verifies_like_local(sp, run, emulator, tmp_path):
    store = tmp_path / "small.zarr"
    assert run(["convert", TESTDATA / SLIDES[0], store, "--threads", "1"]).returncode == 0
    base = "http://" + emulator["STORAGE_EMULATOR_HOST"]
    for f in sorted(p for p in store.rglob("*") if p.is_file()):
        name = "stores/small.zarr/" + f.relative_to(store).as_posix()
        req = urllib.request.Request(f"{base}/slides/{name}", data=f.read_bytes(), method="PUT")
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200
    out, ref = tmp_path / "gs.rgba", tmp_path / "local.rgba"
    proc = run_env(sp, ["region", "gs://slides/stores/small.zarr", *REGION, "-o", out], emulator)
    assert proc.returncode == 0, proc.stderr
    assert run(["region", TESTDATA / SLIDES[0], *REGION, "-o", ref]).returncode == 0
    assert out.read_bytes() == ref.read_bytes()
    proc = run_env(sp, ["verify", "gs://slides/stores/small.zarr"], emulator)
    local = run(["verify", store])
    assert proc.returncode == 0 and "0 problems" in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.split("dataset_hash")[1].split()[0] == \
        local.stdout.split("dataset_hash")[1].split()[0]


@pytest.fixture(scope="module")
def moto_hmac():
    """moto's S3 server checking SigV4, a bucket with one slide, and the GCS environment that
    points gs:// at it with HMAC keys (the XML API's interoperable signing)."""
    boto3 = pytest.importorskip("boto3", reason="boto3 comes with moto[server] "
                                "(tests/requirements.txt)")
    moto_server = Path(sys.executable).parent / "moto_server"
    if not moto_server.exists():
        pytest.fail(f"no moto_server beside {sys.executable} (tests/requirements.txt pins "
                    "moto[server])")
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
    proc = subprocess.Popen([str(moto_server), "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, "moto_server", proc)
        endpoint = f"http://127.0.0.1:{port}"
        anon = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="none",
                    aws_secret_access_key="none")
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="reader")
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=key["AccessKeyId"],
                          aws_secret_access_key=key["SecretAccessKey"])
        s3.create_bucket(Bucket="slides")
        s3.upload_file(str(TESTDATA / SLIDES[0]), "slides", "cohort 1/CMU-1+small.svs")
        yield clean_env(STORAGE_EMULATOR_HOST=endpoint, GS_ACCESS_KEY_ID=key["AccessKeyId"],
                        GS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_gs_hmac_keys_sign_requests_a_checking_server_accepts(sp, run, moto_hmac, tmp_path):
    out, ref = tmp_path / "gs.rgba", tmp_path / "local.rgba"
    proc = run_env(sp, ["region", "gs://slides/cohort 1/CMU-1+small.svs", *REGION, "-o", out],
                   moto_hmac)
    assert proc.returncode == 0, proc.stderr
    assert run(["region", TESTDATA / SLIDES[0], *REGION, "-o", ref]).returncode == 0
    assert out.read_bytes() == ref.read_bytes()
    wrong = dict(moto_hmac, GS_SECRET_ACCESS_KEY="not-the-secret")
    proc = run_env(sp, ["info", "gs://slides/cohort 1/CMU-1+small.svs"], wrong)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr
    unsigned = {k: v for k, v in moto_hmac.items() if not k.startswith("GS_")}
    proc = run_env(sp, ["info", "gs://slides/cohort 1/CMU-1+small.svs"], unsigned)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr


class BearerOnly(http.server.BaseHTTPRequestHandler):
    """Serves one file's byte ranges at /slides/a.svs to 'Authorization: Bearer good-token'
    alone (401 otherwise)."""

    data = b""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.headers.get("Authorization") != "Bearer good-token":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path != "/slides/a.svs":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first, last = self.headers.get("Range", "bytes=0-").removeprefix("bytes=").split("-")
        first = int(first)
        last = min(int(last) if last else len(self.data) - 1, len(self.data) - 1)
        body = self.data[first:last + 1]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(self.data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        self.wfile.write(body)


def test_gs_oauth_token_is_sent_as_bearer(sp, run, tmp_path):
    BearerOnly.data = (TESTDATA / SLIDES[0]).read_bytes()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BearerOnly)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        host = f"127.0.0.1:{srv.server_address[1]}"
        out, ref = tmp_path / "gs.rgba", tmp_path / "local.rgba"
        for name in ("GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN"):
            env = clean_env(STORAGE_EMULATOR_HOST=host, **{name: "good-token"})
            proc = run_env(sp, ["region", "gs://slides/a.svs", *REGION, "-o", out], env)
            assert proc.returncode == 0, proc.stderr
        assert run(["region", TESTDATA / SLIDES[0], *REGION, "-o", ref]).returncode == 0
        assert out.read_bytes() == ref.read_bytes()
        env = clean_env(STORAGE_EMULATOR_HOST=host, GOOGLE_OAUTH_ACCESS_TOKEN="stale")
        proc = run_env(sp, ["info", "gs://slides/a.svs"], env)
        assert proc.returncode == 1 and "HTTP 401" in proc.stderr, proc.stderr
    finally:
        srv.shutdown()
