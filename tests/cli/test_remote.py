"""Remote slides: HTTP(S) URLs and s3:// objects read through real servers on loopback.

nginx (Debian's nginx-light) serves the shared test data; every command that reads a slide must
give over HTTP exactly what it gives for the local file. The same holds for Zarr stores (folders)
under an http:// or s3:// prefix, whose missing chunks (404) read as fill and whose unreadable
ones (403) are errors. A small Python server that misbehaves on
purpose (ignores Range, answers with other bytes, sends too many or too few, stalls, fails and
recovers) checks that no server response is trusted: each is an error with exit code 1 and a clear
message, or a successful retry, never wrong pixels. moto's S3 server (pinned in
tests/requirements.txt), with IAM enforcement on, checks the SigV4 signing: it recomputes every
request's signature and refuses a wrong one.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from loopback import LatencyProxy, free_port, moto_s3, wait_for_port

TESTDATA = Path(os.environ.get("SP_TESTDATA", Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
# Single-file slides of each container: Aperio JPEG and JPEG 2000, generic TIFF (zstd), OME-TIFF.
SLIDES = [
    "aperio/CMU-1-Small-Region.svs",
    "aperio/tcga-cr-7395-01a-01-ts1.svs",
    "generic-tiff/yb10kx5k.zstd.tiff",
    "generic-tiff/boxes.tiff",
]
REGION = ["--level", "0", "--x", "100", "--y", "200", "--width", "700", "--height", "500"]

pytestmark = pytest.mark.skipif(not TESTDATA.is_dir(), reason=f"no shared test data at {TESTDATA}")


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """Base URL of an nginx serving the test data at / and a writable folder at /scratch/."""
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        pytest.fail("nginx is not installed (scripts/bootstrap installs nginx-light)")
    work = tmp_path_factory.mktemp("nginx")
    scratch = work / "scratch"
    scratch.mkdir()
    port = free_port()
    temps = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (work / "nginx.conf").write_text(
        f"""daemon off; master_process off; worker_processes 1;
error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  log_format conn '$connection $request_uri';
  access_log {work}/access.log; access_log {work}/connections.log conn; {temps}
  server {{ listen 127.0.0.1:{port}; root {TESTDATA};
           location /scratch/ {{ alias {scratch}/; }} }}
}}
"""
    )
    proc = subprocess.Popen([exe, "-c", str(work / "nginx.conf"), "-e", str(work / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, "nginx", proc)
        yield {"url": f"http://127.0.0.1:{port}", "port": port, "scratch": scratch,
               "log": work / "access.log", "connections": work / "connections.log"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def same_command_output(run, local_args, remote_args):
    a = run(local_args)
    b = run(remote_args)
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    return a, b


@pytest.mark.parametrize("rel", SLIDES)
def test_info_over_http_equals_local(run, nginx, rel):
    a, b = same_command_output(run, ["info", TESTDATA / rel, "--json"],
                               ["info", f"{nginx['url']}/{rel}", "--json"])
    local, remote = json.loads(a.stdout), json.loads(b.stdout)
    local.pop("path", None)
    remote.pop("path", None)
    assert remote == local


@pytest.mark.parametrize("rel", SLIDES)
def test_region_over_http_equals_local(run, nginx, rel, tmp_path):
    lo, re_ = tmp_path / "local.rgba", tmp_path / "remote.rgba"
    same_command_output(run, ["region", TESTDATA / rel, *REGION, "-o", lo],
                        ["region", f"{nginx['url']}/{rel}", *REGION, "-o", re_])
    local = np.fromfile(lo, np.uint8)
    assert local.size == 700 * 500 * 4 and local.any()
    assert np.array_equal(np.fromfile(re_, np.uint8), local)


@pytest.fixture(scope="module")
def far(nginx):
    """nginx behind a proxy that holds every request 30 ms (tests/loopback.py), as a remote
    store's round trip would: where requests take that long, prefetching pays and is on. The
    proxy counts how many requests it held at the same moment."""
    proxy = LatencyProxy(nginx["port"], 0.030)
    try:
        yield proxy, f"http://127.0.0.1:{proxy.port}"
    finally:
        proxy.close()


def read_far(sp, far, path, region, out, parallel):
    """Read `region` of `path` through the proxy with SLIDEPIPE_HTTP_PARALLEL=parallel; returns
    how many requests were held at once."""
    proxy, base = far
    proxy.most_at_once = 0
    env = dict(os.environ, SLIDEPIPE_HTTP_PARALLEL=parallel)
    proc = subprocess.run([str(sp.binary), "region", f"{base}/{path}", *region, "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    print(f"{path}, SLIDEPIPE_HTTP_PARALLEL={parallel}: {proxy.most_at_once} requests at once")
    return proxy.most_at_once


# Regions whose tiles' bytes lie in several 64 KiB blocks past the head the opening read: tile
# rows 5 to 8 of the Aperio slide, frames of rows 0 to 2 of the DICOM level.
AT_ONCE = {
    "aperio/CMU-1-Small-Region.svs": ["--x", "300", "--y", "1300", "--width", "1200", "--height", "700"],
    "dicom/cmu-1-small-region/level-0-frames-0-30.dcm": ["--x", "300", "--y", "300", "--width", "900",
                                                         "--height", "900"],
}


@pytest.mark.parametrize("rel", AT_ONCE)
@pytest.mark.parametrize("parallel", ["1", "8"])
def test_region_tiles_are_fetched_at_once(sp, far, rel, parallel, tmp_path):
    """A region over many tiles (frames) of a remote slide sends their requests together: the
    proxy holds several at the same moment. With SLIDEPIPE_HTTP_PARALLEL=1 they go one after
    another; the pixels are the same."""
    region = ["--level", "0", *AT_ONCE[rel]]
    out, local = tmp_path / "remote.rgba", tmp_path / "local.rgba"
    most = read_far(sp, far, rel, region, out, parallel)
    assert sp.run(["region", TESTDATA / rel, *region, "-o", local]).returncode == 0
    assert out.read_bytes() == local.read_bytes()
    assert most == 1 if parallel == "1" else most >= 2


@pytest.mark.parametrize("parallel", ["1", "16"])
def test_batched_regions_are_fetched_together(sp, far, parallel):
    """Regions of a batch share round trips: 64² regions that each lie inside one tile need one
    request each, yet a batch read on one thread sends several at once (its regions are announced
    in groups). One after another with SLIDEPIPE_HTTP_PARALLEL=1."""
    proxy, base = far
    proxy.most_at_once = 0
    env = dict(os.environ, SLIDEPIPE_HTTP_PARALLEL=parallel)
    proc = subprocess.run([str(sp.binary), "bench", "read", f"{base}/aperio/CMU-1-Small-Region.svs",
                           "--size", "64", "--aligned", "--count", "40", "--threads", "1", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    print(f"SLIDEPIPE_HTTP_PARALLEL={parallel}: {proxy.most_at_once} requests at once")
    assert proxy.most_at_once == 1 if parallel == "1" else proxy.most_at_once >= 2


def test_large_tiles_fetched_at_once_equal_local(sp, nginx, far, tmp_path):
    """Tiles larger than the source's 64 KiB blocks are prefetched as ranges of their own and
    handed to their reads: an uncompressed tiled TIFF (512² RGB tiles, 768 KiB each)."""
    import tifffile
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (1536, 1536, 3), dtype=np.uint8)
    target = nginx["scratch"] / "raw-tiles.tif"
    tifffile.imwrite(target, image, tile=(512, 512), photometric="rgb")
    region = ["--level", "0", "--x", "300", "--y", "200", "--width", "900", "--height", "1000"]
    lo, re_ = tmp_path / "local.rgba", tmp_path / "remote.rgba"
    assert sp.run(["region", target, *region, "-o", lo]).returncode == 0
    before = len(nginx["log"].read_text().splitlines())
    assert read_far(sp, far, "scratch/raw-tiles.tif", region, re_, "8") >= 2
    remote = np.fromfile(re_, np.uint8).reshape(1000, 900, 4)
    assert np.array_equal(remote[..., :3], image[200:1200, 300:1200])
    assert np.fromfile(lo, np.uint8).tobytes() == remote.tobytes()
    # Each of the 3 x 3 tiles the region touches was requested once: the prefetched ranges were
    # handed to the reads, not fetched again.
    tile_requests = [ln for ln in nginx["log"].read_text().splitlines()[before:]
                     if "/scratch/raw-tiles.tif" in ln and " 206 786432 " in ln]
    assert len(tile_requests) == 9, tile_requests


def test_convert_over_http_gives_the_local_dataset_hash(run, nginx, tmp_path):
    rel = "aperio/CMU-1-Small-Region.svs"
    same_command_output(run, ["convert", TESTDATA / rel, tmp_path / "local.zarr"],
                        ["convert", f"{nginx['url']}/{rel}", tmp_path / "remote.zarr"])
    hashes = [json.loads(run(["info", tmp_path / n, "--json"]).stdout)["dataset_hash"]
              for n in ("local.zarr", "remote.zarr")]
    assert hashes[0] and hashes[0] == hashes[1]


def test_bench_read_over_http(run, nginx):
    proc = run(["bench", "read", f"{nginx['url']}/generic-tiff/yb10kx5k.zstd.tiff", "--count", "40",
                "--threads", "2", "--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["regions_per_s"] > 0


def test_missing_object_is_a_clear_error(run, nginx):
    proc = run(["info", f"{nginx['url']}/aperio/no-such-slide.svs"])
    assert proc.returncode == 1
    assert "HTTP 404 (not found)" in proc.stderr


def test_refused_connection_is_a_clear_error(run):
    proc = run(["info", f"http://127.0.0.1:{free_port()}/slide.svs"])
    assert proc.returncode == 1
    assert proc.stderr.startswith("slidepipe: ") and "connect" in proc.stderr.lower()


def test_object_replaced_during_a_read_is_an_error(run, nginx, sp, tmp_path):
    """nginx answers If-Match with 412 once the file behind the URL is another one."""
    # Uncompressed 256² tiles (192 KiB, larger than a cache block, so each is a request of its
    # own), more of them than the 1 MiB tile cache holds: the reader keeps making requests.
    import tifffile
    src = tmp_path / "changing.tiff"
    rng = np.random.default_rng(9)
    tifffile.imwrite(src, rng.integers(0, 256, (1024, 1024, 3), dtype=np.uint8), tile=(256, 256),
                     photometric="rgb")
    target = nginx["scratch"] / "changing.tiff"
    shutil.copyfile(src, target)
    env = dict(os.environ, SLIDEPIPE_CACHE_MB="1")
    proc = subprocess.Popen([str(sp.binary), "bench", "read", f"{nginx['url']}/scratch/changing.tiff",
                             "--count", "100000000", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while nginx["log"].read_text().count("/scratch/changing.tiff") < 20:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the reader made no requests"
            time.sleep(0.05)
        replacement = nginx["scratch"] / "next.tiff"
        shutil.copyfile(src, replacement)
        os.utime(replacement, (time.time() + 10, time.time() + 10))  # another ETag (mtime-size)
        os.replace(replacement, target)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1, err
    assert "changed while it was being read" in err


# ---- a server that misbehaves on purpose -----------------------------------------------------


# Larger than one request's 64 KiB, so reading a region takes requests after the first.
MISBEHAVING_SLIDE = "aperio/tcga-cr-7395-01a-01-ts1.svs"


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """Serves one file; self.server.mode says how to get it wrong, and self.server.delay how long
    to wait before each answer (a few milliseconds make slidepipe send requests ahead)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.requests += 1
            self.number = srv.requests
            srv.active += 1
            srv.most_at_once = max(srv.most_at_once, srv.active)
        try:
            time.sleep(srv.delay)
            self.answer(srv)
        finally:
            with srv.lock:
                srv.active -= 1

    def answer(self, srv):
        data = srv.data
        rng = self.headers.get("Range", "")
        first, last = (int(v) for v in rng.removeprefix("bytes=").split("-"))
        last = min(last, len(data) - 1)
        mode = srv.mode
        if mode == "flaky" and self.number % 2 == 1:
            return self.reply(503, b"busy")
        if mode == "ignore-range":
            return self.reply(200, data)
        body = data[first:last + 1]
        header_range = f"bytes {first}-{last}/{len(data)}"
        if mode == "other-bytes" and first > 0:
            body = data[first + 1:last + 2]
            header_range = f"bytes {first + 1}-{last + 1}/{len(data)}"
        elif mode == "bad-header" and first > 0:
            header_range = f"bytes {first}-{last}/*"
        elif mode == "too-many" and first > 0:
            body = data[first:last + 1 + 100]
        elif mode == "etag-flip" and self.number > 1:
            return self.reply(206, body, header_range, etag='"two"')
        elif mode == "short" and first > 0:
            self.send_response(206)
            self.send_header("Content-Range", header_range)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return
        elif mode == "stall" and first > 0:
            self.send_response(206)
            self.send_header("Content-Range", header_range)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            srv.release.wait(30)
            self.close_connection = True
            return
        self.reply(206, body, header_range)

    def reply(self, code, body, content_range=None, etag='"one"'):
        self.send_response(code)
        if content_range:
            self.send_header("Content-Range", content_range)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def misbehaving():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    srv.daemon_threads = True
    srv.handle_error = lambda request, address: None  # clients hanging up on purpose
    srv.data = (TESTDATA / MISBEHAVING_SLIDE).read_bytes()
    srv.requests = srv.active = srv.most_at_once = 0
    srv.lock = threading.Lock()
    srv.delay = 0.0
    srv.release = threading.Event()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}/slide.tiff"
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize(
    "mode, message",
    [
        ("ignore-range", "ignored the Range request"),
        ("other-bytes", "is not that range"),
        ("bad-header", "malformed Content-Range"),
        ("too-many", "sent more than"),
        ("etag-flip", "changed while it was being read"),
        ("short", "after retries"),
    ],
)
@pytest.mark.parametrize("delay", [0.0, 0.005], ids=["near", "ahead"])
def test_untrusted_responses_are_errors(run, misbehaving, mode, message, delay, tmp_path):
    """Near, requests go one at a time; 5 ms away they are sent ahead (docs/remote.md), and a bad
    answer sent ahead must end the same way."""
    srv, url = misbehaving
    srv.mode = mode
    srv.delay = delay
    proc = run(["region", url, *REGION, "-o", tmp_path / "out.rgba"])
    assert proc.returncode == 1, f"{mode}: exit {proc.returncode}, {proc.stderr}"
    assert message in proc.stderr, proc.stderr
    assert not (tmp_path / "out.rgba").exists()


def test_stalled_server_times_out(sp, misbehaving, tmp_path):
    srv, url = misbehaving
    srv.mode = "stall"
    env = dict(os.environ, SLIDEPIPE_HTTP_TIMEOUT="1")
    t0 = time.monotonic()
    proc = subprocess.run([str(sp.binary), "region", url, *REGION, "-o", str(tmp_path / "out.rgba")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "after retries" in proc.stderr and "too slow" in proc.stderr.lower(), proc.stderr
    print(f"stalled server: error after {time.monotonic() - t0:.1f} s")


# 30 ms away, requests sent ahead overlap at the server even when the sanitized build on a busy
# machine starts them several milliseconds apart (at 5 ms a loaded ASan run once saw none overlap).
@pytest.mark.parametrize("delay", [0.0, 0.03], ids=["near", "ahead"])
def test_transient_failures_are_retried(run, misbehaving, delay, tmp_path):
    srv, url = misbehaving
    srv.mode = "flaky"  # a 503 before every success
    srv.delay = delay
    out = tmp_path / "out.rgba"
    proc = run(["region", url, *REGION, "-o", out])
    assert proc.returncode == 0, proc.stderr
    local = tmp_path / "local.rgba"
    assert run(["region", TESTDATA / MISBEHAVING_SLIDE, *REGION, "-o", local]).returncode == 0
    assert out.read_bytes() == local.read_bytes()
    assert srv.requests >= 4
    if delay > 0:
        assert srv.most_at_once > 1, "30 ms away, no requests were sent ahead"


# ---- Zarr stores under a URL prefix ------------------------------------------------------------

STORE_SLIDE = "aperio/CMU-1-Small-Region.svs"
STORE_OPTIONS = {"v2": [], "v3": ["--format", "ome-zarr-0.5"],
                 "v3-sharded": ["--format", "ome-zarr-0.5", "--chunk", "256", "--shard", "4"]}
# Across chunk and shard borders of every layout above.
STORE_REGION = ["--level", "0", "--x", "200", "--y", "300", "--width", "900", "--height", "700"]


@pytest.fixture(scope="module")
def stores(run, nginx):
    """The test slide converted into each layout of STORE_OPTIONS, in nginx's scratch folder."""
    for name, options in STORE_OPTIONS.items():
        proc = run(["convert", TESTDATA / STORE_SLIDE, nginx["scratch"] / f"{name}.zarr", *options])
        assert proc.returncode == 0, proc.stderr
    return nginx["scratch"]


def region_bytes(run, slide, out, region=STORE_REGION):
    proc = run(["region", slide, *region, "-o", out])
    assert proc.returncode == 0, proc.stderr
    return np.fromfile(out, np.uint8)


@pytest.mark.parametrize("name", STORE_OPTIONS)
@pytest.mark.parametrize("suffix", ["", "/"])
def test_zarr_store_over_http_equals_local(run, nginx, stores, name, suffix, tmp_path):
    url = f"{nginx['url']}/scratch/{name}.zarr{suffix}"
    a, b = same_command_output(run, ["info", stores / f"{name}.zarr", "--json"], ["info", url, "--json"])
    local, remote = json.loads(a.stdout), json.loads(b.stdout)
    assert remote == local and remote["format"] == "ome-zarr" and len(remote["dataset_hash"]) == 64
    want = region_bytes(run, TESTDATA / STORE_SLIDE, tmp_path / "source.rgba")
    assert want.any()
    assert np.array_equal(region_bytes(run, url, tmp_path / "remote.rgba"), want)
    assert np.array_equal(region_bytes(run, stores / f"{name}.zarr", tmp_path / "local.rgba"), want)


def test_zarr_store_over_http_reuses_connections(sp, nginx, stores, tmp_path):
    log = nginx["connections"]
    before = len(log.read_text().splitlines())
    out = tmp_path / "r.rgba"
    env = dict(os.environ, SLIDEPIPE_HTTP_PARALLEL="1")  # requests one after another
    proc = subprocess.run([str(sp.binary), "region", f"{nginx['url']}/scratch/v2.zarr", *STORE_REGION,
                           "-o", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines()[before:]
    chunks = [ln for ln in lines if "/scratch/v2.zarr/0/" in ln]
    connections = {ln.split()[0] for ln in lines}
    # One process, one thread reading: every request after the first rides on a kept connection.
    assert len(chunks) >= 6, lines
    assert len(connections) <= 2, lines


@pytest.mark.parametrize("name", ["v2", "v3-sharded"])
@pytest.mark.parametrize("parallel", ["1", "8"])
def test_zarr_chunks_are_fetched_at_once(sp, far, stores, name, parallel, tmp_path):
    """A region over several chunks of a remote store fetches them together: whole chunk files of
    a v2 store, the inner chunks' ranges of a sharded v3 one; one after another with
    SLIDEPIPE_HTTP_PARALLEL=1. The pixels are the source's either way."""
    out = tmp_path / "remote.rgba"
    most = read_far(sp, far, f"scratch/{name}.zarr", STORE_REGION, out, parallel)
    want = region_bytes(sp.run, TESTDATA / STORE_SLIDE, tmp_path / "source.rgba")
    assert np.array_equal(np.fromfile(out, np.uint8), want)
    assert most == 1 if parallel == "1" else most >= 2


@pytest.mark.parametrize("name", ["v2", "v3"])
def test_remote_store_opens_in_few_round_trips(sp, far, stores, name):
    """Opening a remote store sends for its node files (zarr.json, .zgroup, .zarray, .zattrs)
    at once while detecting it, and the opening reads them from there: each is requested once,
    and several were held by the 30 ms proxy at the same moment."""
    proxy, base = far
    proxy.targets.clear()
    proxy.most_at_once = 0
    proc = sp.run(["info", f"{base}/scratch/{name}.zarr", "--json"])
    assert proc.returncode == 0, proc.stderr
    root = [t.rsplit("/", 1)[1] for t in proxy.targets if t.count("/") == 3]
    assert sorted(root) == sorted(["zarr.json", ".zgroup", ".zarray", ".zattrs",
                                   "slidepipe-complete"]), proxy.targets
    assert proxy.most_at_once >= 3, f"{proxy.most_at_once} requests at once: {proxy.targets}"


@pytest.mark.parametrize("via", ["near", "ahead"])
def test_missing_remote_chunk_reads_as_fill_and_refused_one_is_an_error(request, run, nginx, stores,
                                                                          via, tmp_path):
    """Directly from nginx, and through the 30 ms proxy, where chunk files are requested ahead
    (a missing or refused one must read the same as when read one at a time)."""
    store = nginx["scratch"] / f"holes-{via}.zarr"
    shutil.copytree(stores / "v2.zarr", store)
    base = nginx["url"] if via == "near" else request.getfixturevalue("far")[1]
    url = f"{base}/scratch/{store.name}"
    whole = ["--level", "0", "--x", "0", "--y", "0", "--width", "2220", "--height", "2967"]
    (store / "0" / "0" / "1" / "0").unlink()  # the chunk (all 3 channels) at y 512-1023, x 0-511
    local = region_bytes(run, store, tmp_path / "local.rgba", whole).reshape(2967, 2220, 4)
    remote = region_bytes(run, url, tmp_path / "remote.rgba", whole).reshape(2967, 2220, 4)
    assert np.array_equal(remote, local)
    assert (local[512:1024, :512, :3] == 0).all() and (local[512:1024, :512, 3] == 255).all()
    assert local[:512, :512, :3].any() and local[512:1024, 512:1024, :3].any()
    # A folder where a chunk file should be: nginx redirects to "0/" and then refuses (HTTP 403),
    # which must not read as a missing chunk; on disk it is an error too.
    (store / "0" / "0" / "0" / "0").unlink()
    (store / "0" / "0" / "0" / "0").mkdir()
    proc = run(["region", url, *whole, "-o", tmp_path / "denied.rgba"])
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr
    proc = run(["region", store, *whole, "-o", tmp_path / "denied.rgba"])
    assert proc.returncode == 1 and "0/0/0/0" in proc.stderr, proc.stderr


def test_verify_over_http_finds_missing_and_changed_chunks(run, nginx, stores):
    store = nginx["scratch"] / "verify.zarr"
    shutil.copytree(stores / "v3-sharded.zarr", store)
    url = f"{nginx['url']}/scratch/verify.zarr"
    local = json.loads(run(["verify", store, "--json"]).stdout)
    proc = run(["verify", url, "--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == local and local["intact"] and len(local["dataset_hash"]) == 64
    shards = sorted(p for p in (store / "0").rglob("*") if p.is_file() and p.name != "zarr.json")
    shards[0].unlink()
    data = bytearray(shards[1].read_bytes())
    data[len(data) // 2] ^= 1
    shards[1].write_bytes(bytes(data))
    proc = run(["verify", url, "--json"])
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    got = {(p["path"], p["problem"]) for p in report["problems"]}
    rel = [p.relative_to(store).as_posix() for p in shards[:2]]
    # The pixels read back over HTTP no longer give the recorded pixel hash either.
    pixels = {p for p in got if p[0] == "pixel_hash"}
    assert len(pixels) == 1 and pixels <= {("pixel_hash", "changed"), ("pixel_hash", "unreadable")}
    assert got - pixels == {(rel[0], "missing"), (rel[1], "changed")}, got
    assert json.loads(run(["verify", store, "--json"]).stdout)["problems"] == report["problems"]
    (store / "slidepipe-complete").unlink()
    proc = run(["verify", url])
    assert proc.returncode == 1 and "incomplete conversion" in proc.stderr, proc.stderr


def test_remote_prefix_without_a_store_is_a_clear_error(run, nginx):
    (nginx["scratch"] / "empty.zarr").mkdir(exist_ok=True)
    proc = run(["info", f"{nginx['url']}/scratch/empty.zarr/"])
    assert proc.returncode == 1
    assert "no slide under this prefix" in proc.stderr, proc.stderr
    proc = run(["info", f"{nginx['url']}/scratch/no-such-thing"])
    assert proc.returncode == 1 and "HTTP 404 (not found)" in proc.stderr, proc.stderr



# ---- S3, signed -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server with signature checks on, a bucket holding two slides, and credentials."""
    pytest.importorskip("boto3", reason="boto3 comes with moto[server] (tests/requirements.txt)")
    with moto_s3("eu-west-1") as (endpoint, key_id, secret, client):
        client.create_bucket(Bucket="slides",
                             CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        client.upload_file(str(TESTDATA / "aperio/CMU-1-Small-Region.svs"), "slides",
                           "cohort 1/CMU-1+small.svs")
        client.upload_file(str(TESTDATA / "generic-tiff/yb10kx5k.zstd.tiff"), "slides", "yb.tiff")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=secret,
                   AWS_ENDPOINT_URL=endpoint, AWS_REGION="eu-west-1")
        yield env


def run_env(sp, args, env):
    return subprocess.run([str(sp.binary), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("key, rel", [("cohort 1/CMU-1+small.svs", "aperio/CMU-1-Small-Region.svs"),
                                      ("yb.tiff", "generic-tiff/yb10kx5k.zstd.tiff")])
def test_s3_region_equals_local(sp, run, s3, key, rel, tmp_path):
    out = tmp_path / "s3.rgba"
    proc = run_env(sp, ["region", f"s3://slides/{key}", *REGION, "-o", out], s3)
    assert proc.returncode == 0, proc.stderr
    local = tmp_path / "local.rgba"
    assert run(["region", TESTDATA / rel, *REGION, "-o", local]).returncode == 0
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(local.read_bytes()).digest()


def test_s3_wrong_secret_is_refused(sp, s3):
    env = dict(s3, AWS_SECRET_ACCESS_KEY="not-the-secret")
    proc = run_env(sp, ["info", "s3://slides/yb.tiff"], env)
    assert proc.returncode == 1
    assert "HTTP 403 (access denied: SignatureDoesNotMatch)" in proc.stderr, proc.stderr


def test_s3_unsigned_request_to_a_private_bucket_is_refused(sp, s3):
    env = {k: v for k, v in s3.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    proc = run_env(sp, ["info", "s3://slides/yb.tiff"], env)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr


def test_s3_missing_key_and_bad_uris(sp, s3):
    proc = run_env(sp, ["info", "s3://slides/no-such.svs"], s3)
    assert proc.returncode == 1 and "HTTP 404" in proc.stderr, proc.stderr
    for uri in ("s3://", "s3://slides", "s3://slides/", "s3://UPPER/x.svs", "s3://ab/x.svs"):
        proc = run_env(sp, ["info", uri], s3)
        assert proc.returncode == 1 and "expected s3://BUCKET/KEY" in proc.stderr, (uri, proc.stderr)
    env = dict(s3, AWS_ENDPOINT_URL="ftp://127.0.0.1:1")
    proc = run_env(sp, ["info", "s3://slides/yb.tiff"], env)
    assert proc.returncode == 1 and "S3 endpoint" in proc.stderr, proc.stderr


def test_s3_zarr_store_equals_local(sp, run, s3, stores, tmp_path):
    import boto3

    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="eu-west-1",
                          aws_access_key_id=s3["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"])
    root = stores / "v3-sharded.zarr"
    for f in root.rglob("*"):
        if f.is_file():
            client.upload_file(str(f), "slides", f"stores/cmu/{f.relative_to(root).as_posix()}")
    want = region_bytes(run, root, tmp_path / "local.rgba")
    local_info = json.loads(run(["info", root, "--json"]).stdout)
    for uri in ("s3://slides/stores/cmu", "s3://slides/stores/cmu/"):
        out = tmp_path / "s3.rgba"
        proc = run_env(sp, ["region", uri, *STORE_REGION, "-o", out], s3)
        assert proc.returncode == 0, (uri, proc.stderr)
        assert np.array_equal(np.fromfile(out, np.uint8), want), uri
        proc = run_env(sp, ["info", uri, "--json"], s3)
        assert proc.returncode == 0, (uri, proc.stderr)
        assert json.loads(proc.stdout)["dataset_hash"] == local_info["dataset_hash"]
        proc = run_env(sp, ["verify", uri, "--json"], s3)
        assert proc.returncode == 0, (uri, proc.stderr)
        assert json.loads(proc.stdout)["dataset_hash"] == local_info["dataset_hash"]


# ---- Zarr stores written to S3 --------------------------------------------------------------


def s3_client(s3):
    import boto3

    return boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="eu-west-1",
                        aws_access_key_id=s3["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"])


def s3_keys(client, prefix):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket="slides", Prefix=prefix)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def dataset_hash(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["dataset_hash"]


@pytest.mark.parametrize("name, options", [("v2", []), ("v3-sharded", STORE_OPTIONS["v3-sharded"])])
def test_convert_to_s3_equals_local(sp, run, s3, name, options, tmp_path):
    uri = f"s3://slides/written/{name}.zarr"
    a = run(["convert", TESTDATA / STORE_SLIDE, tmp_path / "local.zarr", *options, "--json"])
    b = run_env(sp, ["convert", TESTDATA / STORE_SLIDE, uri, *options, "--json"], s3)
    local, remote = dataset_hash(a), dataset_hash(b)
    assert remote == local and json.loads(b.stdout)["levels"] == json.loads(a.stdout)["levels"] >= 4
    # Every file of the local store is an object, and nothing else (no temporary names).
    root = tmp_path / "local.zarr"
    files = {f.relative_to(root).as_posix() for f in root.rglob("*") if f.is_file()}
    assert s3_keys(s3_client(s3), f"written/{name}.zarr/") == {f"written/{name}.zarr/{f}" for f in files}
    assert dataset_hash(run_env(sp, ["verify", uri, "--json"], s3)) == local
    out = tmp_path / "s3.rgba"
    assert run_env(sp, ["region", uri, *STORE_REGION, "-o", out], s3).returncode == 0
    assert np.array_equal(np.fromfile(out, np.uint8), region_bytes(run, root, tmp_path / "l.rgba"))


def test_s3_store_is_not_overwritten_and_resume_completes_it(sp, run, s3, tmp_path):
    uri = "s3://slides/written/resumed.zarr"
    want = dataset_hash(run_env(sp, ["convert", TESTDATA / STORE_SLIDE, uri, "--json"], s3))
    proc = run_env(sp, ["convert", TESTDATA / STORE_SLIDE, uri], s3)
    assert proc.returncode == 1 and "already holds a store" in proc.stderr, proc.stderr
    # What an interrupted run leaves: no marker, no manifest, some chunks not yet written.
    client = s3_client(s3)
    chunks = sorted(k for k in s3_keys(client, "written/resumed.zarr/0/") if not k.endswith(".zarray"))
    gone = ["written/resumed.zarr/slidepipe-complete", "written/resumed.zarr/slidepipe-manifest.sha256",
            chunks[0], chunks[-1]]
    for key in gone:
        client.delete_object(Bucket="slides", Key=key)
    proc = run_env(sp, ["verify", uri], s3)
    assert proc.returncode == 1 and "incomplete conversion" in proc.stderr, proc.stderr
    assert dataset_hash(run_env(sp, ["convert", TESTDATA / STORE_SLIDE, uri, "--resume", "--json"], s3)) == want
    assert set(gone) <= s3_keys(client, "written/resumed.zarr/")
    assert dataset_hash(run_env(sp, ["verify", uri, "--json"], s3)) == want


def test_convert_to_s3_killed_and_resumed_gives_the_same_dataset_hash(sp, run, s3, tmp_path):
    """SIGKILL while the chunks are being PUT, then --resume: the uninterrupted run's hash."""
    rel, opts = "generic-tiff/yb10kx5k.zstd.tiff", ["--chunk", "256", "--threads", "1", "--json"]
    want = dataset_hash(run(["convert", TESTDATA / rel, tmp_path / "local.zarr", *opts]))
    uri, client = "s3://slides/written/killed.zarr", s3_client(s3)
    proc = subprocess.Popen([str(sp.binary), "convert", str(TESTDATA / rel), uri, *opts], env=s3,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(s3_keys(client, "written/killed.zarr/")) < 40 and proc.poll() is None:
            assert time.monotonic() < deadline, "no chunks written within 60 s"
            time.sleep(0.05)
        if proc.poll() is not None:
            pytest.fail("the conversion finished before it could be killed")
        proc.kill()
    finally:
        proc.wait(timeout=30)
    keys = s3_keys(client, "written/killed.zarr/")
    assert "written/killed.zarr/slidepipe-complete" not in keys
    assert dataset_hash(run_env(sp, ["convert", TESTDATA / rel, uri, "--resume", *opts], s3)) == want
    assert dataset_hash(run_env(sp, ["verify", uri, "--json"], s3)) == want


def test_process_to_s3_equals_local(sp, run, s3, tmp_path):
    args = ["process", TESTDATA / STORE_SLIDE]
    local = dataset_hash(run([*args, tmp_path / "grey.zarr", "--op", "grey", "--json"]))
    remote = dataset_hash(run_env(sp, [*args, "s3://slides/written/grey.zarr", "--op", "grey", "--json"], s3))
    assert remote == local


def test_write_errors_to_remote_stores(sp, run, s3, nginx):
    env = dict(s3, AWS_SECRET_ACCESS_KEY="not-the-secret")
    proc = run_env(sp, ["convert", TESTDATA / STORE_SLIDE, "s3://slides/written/denied.zarr"], env)
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr
    assert not s3_keys(s3_client(s3), "written/denied.zarr/")
    proc = run(["convert", TESTDATA / STORE_SLIDE, f"{nginx['url']}/scratch/out.zarr"])
    assert proc.returncode == 1 and "read-only" in proc.stderr, proc.stderr


def test_cohort_to_s3_equals_local(sp, run, s3, tmp_path):
    slides = [TESTDATA / STORE_SLIDE, TESTDATA / "generic-tiff/boxes.tiff"]
    local = json.loads(run(["convert", *slides, "--out-dir", tmp_path, "--json"]).stdout)
    proc = run_env(sp, ["convert", *slides, "--out-dir", "s3://slides/cohort", "--json"], s3)
    assert proc.returncode == 0, proc.stderr
    remote = json.loads(proc.stdout)
    assert [s["out"] for s in remote["slides"]] == ["s3://slides/cohort/CMU-1-Small-Region.zarr",
                                                    "s3://slides/cohort/boxes.zarr"]
    assert [s["dataset_hash"] for s in remote["slides"]] == [s["dataset_hash"] for s in local["slides"]]
    assert [s["levels"] for s in remote["slides"]] == [s["levels"] for s in local["slides"]]


# ---- the Nth S3 request of a conversion fails ------------------------------------------------


class FailingS3Proxy(http.server.BaseHTTPRequestHandler):
    """Passes every request to moto unchanged (the Host header too, so the signature still
    holds), except request number self.server.fail_at, which it answers itself with HTTP 403 and
    S3's AccessDenied: an answer slidepipe does not retry, so the conversion must stop there."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        import http.client

        srv = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with srv.lock:
            srv.requests += 1
            fail = srv.requests == srv.fail_at
        if fail:
            srv.failed_request = f"{self.command} {self.path}"
            reply = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code></Error>"
            self.send_response(403)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            return
        conn = http.client.HTTPConnection("127.0.0.1", srv.moto_port, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in ("connection", "content-length"):
                    conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        self.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in ("connection", "content-length", "transfer-encoding", "date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_HEAD = do_POST = relay


def test_convert_to_s3_with_each_request_failing_in_turn(sp, run, s3, tmp_path):
    """The issue's S3 fault sweep: for N = 1, 2, ... the Nth request a conversion sends to S3 is
    refused, until a run sends fewer than N. Each failed run must exit 1 with one clear line and
    leave no completion marker (nothing torn: a store that says it is complete is); --resume,
    without faults, must then finish it with the uninterrupted run's dataset hash. (Without
    --json: with it the command reads the finished store back to count its levels, requests that
    are no part of the conversion.)"""
    rel = "generic-tiff/boxes.tiff"
    want = dataset_hash(run(["convert", TESTDATA / rel, tmp_path / "local.zarr", "--json"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FailingS3Proxy)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.moto_port = int(s3["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    faulty = dict(s3, AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_address[1]}")
    client = s3_client(s3)

    def marker(n):
        keys = s3_keys(client, f"faults/{n}.zarr/")
        if f"faults/{n}.zarr/slidepipe-complete" not in keys:
            return None
        body = client.get_object(Bucket="slides", Key=f"faults/{n}.zarr/slidepipe-complete")["Body"]
        return body.read().decode().strip()

    failed = clean = torn = resumed = 0
    try:
        for n in range(1, 1000):
            server.requests, server.fail_at, server.failed_request = 0, n, None
            uri = f"s3://slides/faults/{n}.zarr"
            proc = run_env(sp, ["convert", TESTDATA / rel, uri], faulty)
            if server.requests < n:  # this run never reached request n: the sweep is over
                assert proc.returncode == 0 and marker(n) == want, proc.stderr
                break
            failed += 1
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 1, f"request {n} ({server.failed_request}): exit {proc.returncode}"
            assert len(lines) == 1 and lines[0].startswith("slidepipe: ") and "403" in lines[0], (n, proc.stderr)
            clean += 1
            torn += marker(n) is not None
            again = run_env(sp, ["convert", TESTDATA / rel, uri, "--resume"], s3)
            assert again.returncode == 0 and marker(n) == want, f"request {n}: {again.stderr}"
            resumed += 1
    finally:
        server.shutdown()
        server.server_close()
    print(f"faults: S3 conversion of {rel}: {failed} requests failed, {clean} clean errors, "
          f"{torn} torn, {resumed} completed by --resume")
    assert failed >= 8 and clean == failed == resumed and torn == 0
