"""gs:// objects read and written through real servers on loopback: gcp-storage-emulator (PyPI,
pinned in tests/requirements.txt) for the XML API's ranged reads and PUTs and the JSON API's
deletes, with STORAGE_EMULATOR_HOST; moto's S3 server with IAM enforcement on for the HMAC keys'
SigV4 signatures (it recomputes every request's signature, so a wrong one is refused); a small
server here that serves ranges only to the right OAuth Bearer token; and, for service-account
key files, a token endpoint here that verifies each JWT's RS256 signature and claims before it
mints a token, with a relay in front of the emulator that lets only that token through. Every
command must give for gs:// exactly what it gives for the local file (a slide file, or an
OME-Zarr store converted to or uploaded under a gs:// prefix, which `verify` checks), and every
failure must be exit code 1 with a message naming the object or the key file.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from loopback import free_port, moto_s3, wait_for_port

TESTDATA = Path(os.environ.get("SP_TESTDATA", Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
SLIDES = ["aperio/CMU-1-Small-Region.svs", "generic-tiff/yb10kx5k.zstd.tiff"]
REGION = ["--level", "0", "--x", "100", "--y", "200", "--width", "700", "--height", "500"]

pytestmark = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no shared test data at {TESTDATA}")

GCS_ENV = ("STORAGE_EMULATOR_HOST", "GS_ACCESS_KEY_ID", "GS_SECRET_ACCESS_KEY",
           "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN",
           "GOOGLE_APPLICATION_CREDENTIALS")


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
    pytest.importorskip("boto3", reason="boto3 comes with moto[server] (tests/requirements.txt)")
    with moto_s3("us-east-1") as (endpoint, key_id, secret, s3):
        s3.create_bucket(Bucket="slides")
        s3.upload_file(str(TESTDATA / SLIDES[0]), "slides", "cohort 1/CMU-1+small.svs")
        yield clean_env(STORAGE_EMULATOR_HOST=endpoint, GS_ACCESS_KEY_ID=key_id,
                        GS_SECRET_ACCESS_KEY=secret)


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


# ---- Zarr stores written to gs:// ------------------------------------------------------------


def dataset_hash(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["dataset_hash"]


def emulator_objects(env, prefix):
    """{name: bytes} of every object under `prefix` in bucket "slides" (JSON API listing, XML API
    downloads, straight from the emulator)."""
    base = "http://" + env["STORAGE_EMULATOR_HOST"]
    query = urllib.parse.urlencode({"prefix": prefix})
    with urllib.request.urlopen(f"{base}/storage/v1/b/slides/o?{query}", timeout=30) as r:
        names = [o["name"] for o in json.load(r).get("items", [])]
    objects = {}
    for name in names:
        with urllib.request.urlopen(f"{base}/slides/{urllib.parse.quote(name)}", timeout=30) as r:
            objects[name] = r.read()
    return objects


def local_files(root, prefix):
    return {prefix + f.relative_to(root).as_posix(): f.read_bytes()
            for f in root.rglob("*") if f.is_file()}


SMALL = "generic-tiff/boxes.tiff"  # 7 files converted: for the runs that check requests, not bytes
# The emulator rewrites its whole object table on every PUT, so fewer, larger chunks keep the
# conversion of SLIDES[0] (30 objects) quick.
CHUNK = ["--chunk", "1024"]


@pytest.fixture(scope="module")
def local_stores(run, tmp_path_factory):
    """The local conversions the gs:// ones must equal: {slide: (store, dataset hash)}."""
    root = tmp_path_factory.mktemp("local")
    stores = {}
    for rel in (SLIDES[0], SMALL):
        store = root / (Path(rel).stem + ".zarr")
        proc = run(["convert", TESTDATA / rel, store, *CHUNK, "--json"])
        stores[rel] = (store, dataset_hash(proc))
    return stores


def test_convert_to_gs_equals_local_and_resumes(sp, run, emulator, local_stores, tmp_path):
    slide, (local, want) = TESTDATA / SLIDES[0], local_stores[SLIDES[0]]
    uri, prefix = "gs://slides/written/small.zarr", "written/small.zarr/"
    assert dataset_hash(run_env(sp, ["convert", slide, uri, *CHUNK, "--json"], emulator)) == want
    # Every file of the local store is an object with the file's bytes, and nothing else.
    written = emulator_objects(emulator, prefix)
    assert written == local_files(local, prefix)
    proc = run_env(sp, ["convert", slide, uri, *CHUNK], emulator)
    assert proc.returncode == 1 and "already holds a store" in proc.stderr, proc.stderr
    # Chunks lost after the run: verify (reading back from gs://) finds them missing; --resume
    # removes the marker and the manifest and puts the chunks back.
    chunks = sorted(n for n in written if n.startswith(prefix + "0/") and not n.endswith(".zarray"))
    base = "http://" + emulator["STORAGE_EMULATOR_HOST"]
    for name in (chunks[0], chunks[-1]):
        url = f"{base}/storage/v1/b/slides/o/{urllib.parse.quote(name, safe='')}"
        with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=30):
            pass
    proc = run_env(sp, ["verify", uri], emulator)
    assert proc.returncode != 0 and "missing" in proc.stdout + proc.stderr, proc.stdout
    proc = run_env(sp, ["convert", slide, uri, *CHUNK, "--resume", "--json"], emulator)
    assert dataset_hash(proc) == want
    assert emulator_objects(emulator, prefix) == written
    assert dataset_hash(run_env(sp, ["verify", uri, "--json"], emulator)) == want


def test_process_to_gs_equals_local(sp, run, emulator, tmp_path):
    args = ["process", TESTDATA / SMALL]
    want = dataset_hash(run([*args, tmp_path / "grey.zarr", "--op", "grey", "--json"]))
    proc = run_env(sp, [*args, "gs://slides/written/grey.zarr", "--op", "grey", "--json"], emulator)
    assert dataset_hash(proc) == want
    assert emulator_objects(emulator, "written/grey.zarr/") == \
        local_files(tmp_path / "grey.zarr", "written/grey.zarr/")


def test_gs_writes_with_hmac_keys_are_signed(sp, moto_hmac, local_stores):
    """moto recomputes the SigV4 signature of every PUT and (for --resume, through the XML API)
    DELETE; a wrong secret is refused before anything is written."""
    slide, uri, want = TESTDATA / SMALL, "gs://slides/written/hmac.zarr", local_stores[SMALL][1]
    assert dataset_hash(run_env(sp, ["convert", slide, uri, *CHUNK, "--json"], moto_hmac)) == want
    proc = run_env(sp, ["convert", slide, uri, *CHUNK, "--resume", "--json"], moto_hmac)
    assert dataset_hash(proc) == want
    wrong = dict(moto_hmac, GS_SECRET_ACCESS_KEY="not-the-secret")
    proc = run_env(sp, ["convert", slide, "gs://slides/written/denied.zarr"], wrong)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr and "denied.zarr" in proc.stderr, \
        proc.stderr
    # Reading the store back with the wrong secret: the refusal, not "no slide under this prefix".
    proc = run_env(sp, ["info", uri], wrong)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr


def test_gs_write_errors(sp, emulator):
    slide = TESTDATA / SMALL
    proc = run_env(sp, ["convert", slide, "gs://UPPER/x.zarr"], emulator)
    assert proc.returncode == 1 and "expected gs://BUCKET/OBJECT" in proc.stderr, proc.stderr
    proc = run_env(sp, ["convert", slide, "gs://no-such-bucket/x.zarr"], emulator)
    assert proc.returncode == 1 and "gs://no-such-bucket/x.zarr/" in proc.stderr \
        and "HTTP 404" in proc.stderr, proc.stderr


# ---- service-account key files ---------------------------------------------------------------

SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenEndpoint(http.server.BaseHTTPRequestHandler):
    """An OAuth 2 token endpoint for one service account, as Google's answers: a JWT bearer grant
    whose assertion is signed (RS256) by the account's key (server.public_key) and claims
    iss = its email, aud = this endpoint, the read-write scope and an hour's lifetime gets a new
    token "minted-N"; anything else gets 400 invalid_grant with the reason."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def check(self, form):
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        srv = self.server
        if form.get("grant_type") != [JWT_BEARER] or len(form.get("assertion", [])) != 1:
            return "unsupported grant"
        parts = form["assertion"][0].split(".")
        if len(parts) != 3:
            return "Invalid JWT: not three parts"
        try:
            srv.public_key.verify(b64url_decode(parts[2]), f"{parts[0]}.{parts[1]}".encode(),
                                  padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature."
        header, claims = json.loads(b64url_decode(parts[0])), json.loads(b64url_decode(parts[1]))
        if header != {"alg": "RS256", "typ": "JWT"}:
            return f"Invalid JWT header {header}"
        want = {"iss": srv.email, "aud": srv.audience, "scope": SCOPE}
        if {k: claims.get(k) for k in want} != want or set(claims) != {*want, "iat", "exp"}:
            return f"Invalid JWT claims {claims}"
        if claims["exp"] - claims["iat"] != 3600 or abs(claims["iat"] - time.time()) > 300:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a " \
                   "reasonable timeframe."
        return None

    def do_POST(self):  # noqa: N802 (http.server's name)
        srv = self.server
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        reason = self.check(form) if self.path == "/token" else "no such endpoint"
        if reason is None:
            with srv.lock:
                srv.minted += 1
                token = f"minted-{srv.minted}"
                srv.tokens.add(token)
            code, answer = 200, {"access_token": token, "expires_in": srv.expires_in,
                                 "token_type": "Bearer"}
        else:
            code, answer = 400, {"error": "invalid_grant", "error_description": reason}
        body = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class BearerRelay(http.server.BaseHTTPRequestHandler):
    """The emulator (which checks no credentials) behind a door: a request with
    `Authorization: Bearer T`, T a token the endpoint minted, is passed on and its answer passed
    back; any other gets 401. Each request is logged as (method, path, status)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        srv = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        if not (auth.startswith("Bearer ") and auth[7:] in srv.endpoint.tokens):
            srv.log.append((self.command, self.path, 401))
            reply = b'{"error": {"code": 401, "message": "Invalid Credentials"}}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            return
        conn = http.client.HTTPConnection("127.0.0.1", srv.emulator_port, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in ("host", "connection", "content-length", "authorization"):
                    conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        srv.log.append((self.command, self.path, resp.status))
        self.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in ("connection", "content-length", "transfer-encoding", "date",
                                    "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_POST = relay


def serve(handler, **state):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    for name, value in state.items():
        setattr(srv, name, value)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


def rsa_pem():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return key, pem


@pytest.fixture(scope="module")
def service_account(emulator, tmp_path_factory):
    """A service account's key file whose token_uri is the checking endpoint here, and the GCS
    environment that points gs:// at the relay in front of the emulator."""
    pytest.importorskip("cryptography", reason="cryptography comes with moto[server] "
                        "(tests/requirements.txt)")
    key, pem = rsa_pem()
    endpoint = serve(TokenEndpoint, lock=threading.Lock(), minted=0, tokens=set(), expires_in=3599,
                     public_key=key.public_key(), email="reader@project.iam.gserviceaccount.com")
    endpoint.audience = f"http://127.0.0.1:{endpoint.server_address[1]}/token"
    relay = serve(BearerRelay, endpoint=endpoint, log=[],
                  emulator_port=int(emulator["STORAGE_EMULATOR_HOST"].rsplit(":", 1)[1]))
    key_file = tmp_path_factory.mktemp("sa") / "key.json"
    fields = {"type": "service_account", "project_id": "project", "private_key_id": "k1",
              "private_key": pem, "client_email": endpoint.email,
              "token_uri": endpoint.audience}
    key_file.write_text(json.dumps(fields))
    env = clean_env(STORAGE_EMULATOR_HOST=f"127.0.0.1:{relay.server_address[1]}",
                    GOOGLE_APPLICATION_CREDENTIALS=str(key_file))
    try:
        yield {"env": env, "fields": fields, "endpoint": endpoint, "relay": relay}
    finally:
        relay.shutdown()
        endpoint.shutdown()


def test_service_account_key_mints_a_token_for_reads_and_writes(sp, run, service_account,
                                                                 local_stores, tmp_path):
    sa, endpoint, log = service_account, service_account["endpoint"], service_account["relay"].log
    out, ref = tmp_path / "gs.rgba", tmp_path / "local.rgba"
    minted = endpoint.minted
    proc = run_env(sp, ["region", "gs://slides/cohort 1/CMU-1+small.svs", *REGION, "-o", out],
                   sa["env"])
    assert proc.returncode == 0, proc.stderr
    assert run(["region", TESTDATA / SLIDES[0], *REGION, "-o", ref]).returncode == 0
    assert out.read_bytes() == ref.read_bytes()
    # One token for the whole run, however many requests it signed.
    assert endpoint.minted == minted + 1 and len(log) > 1
    # A token that expires at once (a millisecond) is replaced before each request.
    endpoint.expires_in, minted, sent = 0.001, endpoint.minted, len(log)
    try:
        proc = run_env(sp, ["region", "gs://slides/cohort 1/CMU-1+small.svs", *REGION, "-o", out],
                       sa["env"])
    finally:
        endpoint.expires_in = 3599
    assert proc.returncode == 0 and out.read_bytes() == ref.read_bytes(), proc.stderr
    assert endpoint.minted - minted == len(log) - sent > 1

    slide, uri, want = TESTDATA / SMALL, "gs://slides/sa/boxes.zarr", local_stores[SMALL][1]
    minted = endpoint.minted
    assert dataset_hash(run_env(sp, ["convert", slide, uri, *CHUNK, "--json"], sa["env"])) == want
    assert endpoint.minted == minted + 1
    del log[:]
    proc = run_env(sp, ["convert", slide, uri, *CHUNK, "--resume", "--json"], sa["env"])
    assert dataset_hash(proc) == want
    deleted = {(path, status) for method, path, status in log if method == "DELETE"}
    assert deleted == {("/storage/v1/b/slides/o/sa%2Fboxes.zarr%2Fslidepipe-complete", 200),
                       ("/storage/v1/b/slides/o/sa%2Fboxes.zarr%2Fslidepipe-manifest.sha256", 200)}
    assert all(status != 401 for _, _, status in log)
    # The relay does let nothing else through.
    proc = run_env(sp, ["info", "gs://slides/yb.tiff"],
                   {k: v for k, v in sa["env"].items() if k != "GOOGLE_APPLICATION_CREDENTIALS"})
    assert proc.returncode == 1 and "HTTP 401" in proc.stderr, proc.stderr


def test_unusable_service_account_key_files_are_named(sp, service_account, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    fields = service_account["fields"]
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    cases = {
        "missing.json": (None, "cannot read the service-account key file"),
        "not-json.json": ("{not json", "not a service-account key file"),
        "user.json": (json.dumps(dict(fields, type="authorized_user")),
                      'not a service-account key ("type" is "authorized_user"'),
        "no-key.json": (json.dumps({k: v for k, v in fields.items() if k != "private_key"}),
                        'no "private_key" string'),
        "bad-pem.json": (json.dumps(dict(fields, private_key="-----BEGIN PRIVATE KEY-----\nnope\n"
                                         "-----END PRIVATE KEY-----\n")),
                         "private_key is not an unencrypted RSA private key"),
        "ec.json": (json.dumps(dict(fields, private_key=ec_pem)),
                    "private_key is not an unencrypted RSA private key"),
        "ftp.json": (json.dumps(dict(fields, token_uri="ftp://127.0.0.1/token")),
                     "token_uri is not an http(s) URL"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        env = dict(service_account["env"], GOOGLE_APPLICATION_CREDENTIALS=str(path))
        proc = run_env(sp, ["info", "gs://slides/yb.tiff"], env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and str(path) in lines[0] \
            and message in lines[0], (name, proc.stderr)
        assert "PRIVATE KEY" not in proc.stderr and "nope" not in proc.stderr, proc.stderr


def test_token_endpoint_refusal_is_reported(sp, emulator, service_account, tmp_path):
    """A key the endpoint does not know (another RSA key under the same email): its 400 and
    reason are the error, for reads and writes, and nothing is written."""
    _, other_pem = rsa_pem()
    path = tmp_path / "other.json"
    path.write_text(json.dumps(dict(service_account["fields"], private_key=other_pem)))
    env = dict(service_account["env"], GOOGLE_APPLICATION_CREDENTIALS=str(path))
    # An object, a store prefix (whose detection only asks whether files exist) and a write.
    for args in (["info", "gs://slides/yb.tiff"], ["info", "gs://slides/sa/boxes.zarr"],
                 ["convert", TESTDATA / SMALL, "gs://slides/sa/refused.zarr"]):
        proc = run_env(sp, args, env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1, (args, proc.stderr)
        assert str(path) in lines[0] and "HTTP 400" in lines[0] and "invalid_grant" in lines[0] \
            and "Invalid JWT Signature." in lines[0], lines[0]
        assert "PRIVATE KEY" not in proc.stderr and "minted-" not in proc.stderr
    assert not emulator_objects(emulator, "sa/refused.zarr/")
