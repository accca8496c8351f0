"""az:// and abfs(s):// blobs read through an Azure Blob Storage server on loopback.

tests/loopback.py's AzureBlobServer serves a temporary folder path-style, as Azurite does
(/ACCOUNT/CONTAINER/BLOB), with ranges and ETags, and lets a request through only when it is
authorised the way Azure checks it: it recomputes every Shared Key signature from the request as
it arrived, with its own Python string to sign written from Microsoft's page (independent of
slidepipe's C signer), and every SAS token's signature (a container SAS it issued; see its
docstring for what that does and does not show). Every command, and the Python binding, must give
for an Azure blob exactly what they give for the local file (a slide file, or a converted
OME-Zarr store under a prefix), `convert` to an Azure prefix must leave exactly the files of a
local conversion, and every failure must be exit code 1 with a message naming the URL and never
the key or the SAS signature.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import binding_env
from loopback import AzureBlobServer, azure_service_sas

TESTDATA = Path(os.environ.get("SP_TESTDATA", Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
SLIDE = "aperio/CMU-1-Small-Region.svs"
REGION = ["--level", "0", "--x", "100", "--y", "200", "--width", "700", "--height", "500"]
ACCOUNT = "slidepipetest"
BLOB = "cohort 1/CMU-1+small.svs"  # a space and a '+': the path is percent-encoded and signed so

pytestmark = pytest.mark.skipif(not (TESTDATA / SLIDE).is_file(),
                                reason=f"no {SLIDE} in the shared test data at {TESTDATA}")

AZURE_ENV = ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_KEY",
             "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN",
             "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SERVICE_ENDPOINT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in AZURE_ENV}
    env.update(extra)
    return env


def run_env(sp, args, env):
    proc = subprocess.run([str(sp.binary), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60)
    # Under a sanitizer build a report also exits 1, which the failure cases expect: look for it.
    assert not any(m in proc.stderr for m in ("Sanitizer", "runtime error:")), proc.stderr
    return proc


@pytest.fixture(scope="module")
def azure(sp, tmp_path_factory):
    """The server over container "slides" (the slide, and a converted OME-Zarr store of it) and
    container "public" (anonymous reads), with the local reference outputs."""
    root = tmp_path_factory.mktemp("azure")
    (root / "slides" / "cohort 1").mkdir(parents=True)
    (root / "slides" / BLOB).symlink_to(TESTDATA / SLIDE)
    (root / "public").mkdir()
    (root / "public" / "a.svs").symlink_to(TESTDATA / SLIDE)
    store = root / "slides" / "stores" / "small.zarr"
    assert run_env(sp, ["convert", TESTDATA / SLIDE, store, "--threads", "1"],
                   dict(os.environ)).returncode == 0
    ref = root / "local.rgba"
    assert run_env(sp, ["region", TESTDATA / SLIDE, *REGION, "-o", ref],
                   dict(os.environ)).returncode == 0
    info = json.loads(run_env(sp, ["info", TESTDATA / SLIDE, "--json"], dict(os.environ)).stdout)
    info.pop("path", None)
    key = os.urandom(64)
    server = AzureBlobServer(root, ACCOUNT, key, public=["public"])
    try:
        yield {"server": server, "key": key, "key_b64": base64.b64encode(key).decode(),
               "region": ref.read_bytes(), "info": info, "out": root / "out.rgba",
               "shared_key_env": clean_env(AZURE_STORAGE_ACCOUNT=ACCOUNT,
                                           AZURE_STORAGE_KEY=base64.b64encode(key).decode(),
                                           AZURE_STORAGE_SERVICE_ENDPOINT=server.endpoint)}
    finally:
        server.close()


def region_of(sp, uri, env, out):
    proc = run_env(sp, ["region", uri, *REGION, "-o", out], env)
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()


def test_az_shared_key_info_and_region_equal_local(sp, azure):
    env, server = azure["shared_key_env"], azure["server"]
    before = server.verified["SharedKey"]
    proc = run_env(sp, ["info", f"az://slides/{BLOB}", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    remote.pop("path", None)
    assert remote == azure["info"]
    assert region_of(sp, f"az://slides/{BLOB}", env, azure["out"]) == azure["region"]
    assert server.verified["SharedKey"] > before  # signed requests the server checked
    signed = [h for _, p, h in server.requests if p.endswith("CMU-1%2Bsmall.svs")]
    assert all(h["Authorization"].startswith(f"SharedKey {ACCOUNT}:") for h in signed)
    assert any("If-Match" in h for h in signed)  # the ETag pin is signed too


def test_az_sas_token_reaches_the_server_whole(sp, azure):
    server = azure["server"]
    sas = azure_service_sas(ACCOUNT, azure["key"], "slides")
    before = server.verified["SAS"]
    env = clean_env(AZURE_STORAGE_SAS_TOKEN="?" + sas,
                    AZURE_STORAGE_SERVICE_ENDPOINT=server.endpoint)
    assert region_of(sp, f"az://slides/{BLOB}", env, azure["out"]) == azure["region"]
    assert server.verified["SAS"] > before
    # A SAS whose signature is not the server's: refused, and the message shows neither.
    forged = sas.replace("sig=", "sig=AA")
    env["AZURE_STORAGE_SAS_TOKEN"] = forged
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"], env)
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 403" in proc.stderr and "AuthenticationFailed" in proc.stderr, proc.stderr
    assert f"az://slides/{BLOB}" in proc.stderr and "sig=" not in proc.stderr


def test_abfs_with_a_connection_string_and_anonymous(sp, azure):
    server = azure["server"]
    conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={azure['key_b64']};"
            f"BlobEndpoint={server.endpoint};")
    env = clean_env(AZURE_STORAGE_CONNECTION_STRING=conn)
    for scheme in ("abfs", "abfss"):
        uri = f"{scheme}://slides@{ACCOUNT}.dfs.core.windows.net/{BLOB}"
        assert region_of(sp, uri, env, azure["out"]) == azure["region"]
    before = server.verified["anonymous"]
    env = clean_env(AZURE_STORAGE_SERVICE_ENDPOINT=server.endpoint)
    assert region_of(sp, "az://public/a.svs", env, azure["out"]) == azure["region"]
    assert server.verified["anonymous"] > before
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"], env)  # a private container, anonymously
    assert proc.returncode == 1 and "HTTP 404" in proc.stderr, proc.stderr


def test_az_zarr_store_reads_like_local(sp, azure):
    env = azure["shared_key_env"]
    assert region_of(sp, "az://slides/stores/small.zarr", env, azure["out"]) == azure["region"]
    proc = run_env(sp, ["verify", "az://slides/stores/small.zarr"], env)
    assert proc.returncode == 0 and "0 problems" in proc.stdout, proc.stdout + proc.stderr


def test_python_binding_reads_az(sp, azure):
    code = ("import sys, slidepipe\n"
            "s = slidepipe.open(sys.argv[1])\n"
            "sys.stdout.buffer.write(s.read_region((100, 200), 0, (700, 500)).tobytes())\n")
    env = binding_env(sp.binary, azure["shared_key_env"])
    proc = subprocess.run([sys.executable, "-c", code, f"az://slides/{BLOB}"], capture_output=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout == azure["region"]


def test_az_failures_are_clear(sp, azure):
    env, key = azure["shared_key_env"], azure["key_b64"]
    wrong = base64.b64encode(os.urandom(64)).decode()
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"], dict(env, AZURE_STORAGE_KEY=wrong))
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 403" in proc.stderr and "AuthenticationFailed" in proc.stderr, proc.stderr
    assert f"az://slides/{BLOB}" in proc.stderr and wrong not in proc.stderr
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"], dict(env, AZURE_STORAGE_KEY="not*base64"))
    assert proc.returncode == 1 and "not base64" in proc.stderr, proc.stderr
    assert "not*base64" not in proc.stderr
    proc = run_env(sp, ["info", "az://slides/no-such.svs"], env)
    assert proc.returncode == 1, proc.stderr
    assert "az://slides/no-such.svs" in proc.stderr and "BlobNotFound" in proc.stderr, proc.stderr
    for uri in ("az://", "az://slides", "az://slides/", "az://UPPER/x.svs", "az://ab/x.svs",
                "az://a--b/x.svs"):
        proc = run_env(sp, ["info", uri], env)
        assert proc.returncode == 1 and "expected az://CONTAINER/BLOB" in proc.stderr, \
            (uri, proc.stderr)
    for uri in ("abfs://slides/x.svs", "abfss://slides@/x.svs", "abfss://slides@acct.example.com/x",
                "abfss://slides@BAD.dfs.core.windows.net/x"):
        proc = run_env(sp, ["info", uri], env)
        assert proc.returncode == 1 and "@ACCOUNT.dfs.core.windows.net/PATH" in proc.stderr, \
            (uri, proc.stderr)
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"], clean_env(AZURE_STORAGE_KEY=key))
    assert proc.returncode == 1 and "AZURE_STORAGE_ACCOUNT" in proc.stderr, proc.stderr
    proc = run_env(sp, ["info", f"abfss://slides@other.dfs.core.windows.net/{BLOB}"], env)
    assert proc.returncode == 1 and "for storage account slidepipetest, not other" in \
        proc.stderr, proc.stderr
    proc = run_env(sp, ["info", f"az://slides/{BLOB}"],
                   clean_env(AZURE_STORAGE_CONNECTION_STRING=f"AccountName={ACCOUNT};"
                                                             f"AccountKey={key};oops"))
    assert proc.returncode == 1 and "CONNECTION_STRING is malformed" in proc.stderr, proc.stderr
    assert key not in proc.stderr
    for endpoint in ("ftp://127.0.0.1/x", f"{azure['server'].endpoint}?sig=s3cret"):
        proc = run_env(sp, ["info", f"az://slides/{BLOB}"],
                       dict(env, AZURE_STORAGE_SERVICE_ENDPOINT=endpoint))
        assert proc.returncode == 1 and "not an http(s)://" in proc.stderr, proc.stderr
        assert "s3cret" not in proc.stderr


def test_convert_to_az_writes_the_local_store(sp, azure, tmp_path):
    """`convert` to an az:// prefix (Put Blob, Shared Key, Content-MD5 checked by the server)
    leaves exactly the local conversion's files, which `verify` then reads back; a SAS without
    write permission and a wrong key write nothing and say why."""
    server, env = azure["server"], azure["shared_key_env"]
    local = tmp_path / "local.zarr"
    assert run_env(sp, ["convert", TESTDATA / SLIDE, local, "--threads", "1"],
                   dict(os.environ)).returncode == 0
    proc = run_env(sp, ["convert", TESTDATA / SLIDE, "az://slides/written/small.zarr",
                        "--threads", "2"], env)
    assert proc.returncode == 0, proc.stderr
    written = Path(server.root) / "slides" / "written" / "small.zarr"
    files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    assert sorted(p.relative_to(written).as_posix() for p in written.rglob("*")
                  if p.is_file()) == files
    assert all((written / f).read_bytes() == (local / f).read_bytes() for f in files)
    assert any(m == "PUT" and "Content-MD5" in h for m, _, h in server.requests)
    proc = run_env(sp, ["verify", "az://slides/written/small.zarr"], env)
    assert proc.returncode == 0 and "0 problems" in proc.stdout, proc.stdout + proc.stderr
    for bad_env, code in (
            (clean_env(AZURE_STORAGE_SAS_TOKEN=azure_service_sas(ACCOUNT, azure["key"], "slides"),
                       AZURE_STORAGE_SERVICE_ENDPOINT=server.endpoint),
             "AuthorizationPermissionMismatch"),
            (dict(env, AZURE_STORAGE_KEY=base64.b64encode(os.urandom(64)).decode()),
             "AuthenticationFailed")):
        proc = run_env(sp, ["convert", TESTDATA / SLIDE, "az://slides/refused.zarr"], bad_env)
        assert proc.returncode == 1 and code in proc.stderr, proc.stderr
        assert "az://slides/refused.zarr" in proc.stderr
    assert not (Path(server.root) / "slides" / "refused.zarr").exists()
    proc = run_env(sp, ["convert", TESTDATA / SLIDE, "az://public/x.zarr"],
                   clean_env(AZURE_STORAGE_SERVICE_ENDPOINT=server.endpoint))
    assert proc.returncode == 1 and "writing to Azure needs" in proc.stderr, proc.stderr
