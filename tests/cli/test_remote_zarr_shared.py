"""A remote Zarr store read by many threads at once: the slide's table of files in flight
(src/io/store_prefetch.c) makes one request per chunk however many readers need it, hands a
failed fetch's error (or its retry's bytes) to every reader that waited for it, and opening the
store asks for the group and its likely level arrays in one wave (src/formats/zarr.c).

The server here is a small Python one on loopback that serves a converted store with Range
support, counts the GETs of every path, holds each chunk request a while (so that the readers
meet while it is on its way, and so that slidepipe sends requests ahead), and answers one chunk
with a failure on request.
"""

from __future__ import annotations

import http.server
import os
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

TESTDATA = Path(os.environ.get("SP_TESTDATA", Path(__file__).resolve().parents[2].parent / "shared" / "testdata"))
SLIDE = TESTDATA / "aperio" / "CMU-1-Small-Region.svs"
REGION = dict(location=(200, 300), level=0, size=(600, 500))  # 4 x 3 chunks of 256²
CHUNKS = 12
FIRST = "/s.zarr/0/0/1/0"  # the chunk every reader of REGION waits for first
READERS = 6
HOLD = 0.3  # seconds each chunk request is held

pytestmark = pytest.mark.skipif(not SLIDE.is_file(), reason=f"no shared test data at {SLIDE}")


class StoreHandler(http.server.BaseHTTPRequestHandler):
    """GET of a file under the server's root, whole or one byte range (206). Counts every GET
    by path, and notes when each path first came and when the first answer went; chunk files (a digit-only name) are held
    `hold` seconds, other files `hold_metadata`; the path in `fail` is answered with
    `fail_status` `fail_left` times first (0: closed without an answer)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        self.answer(srv, self.path.split("?", 1)[0])

    def answer(self, srv, path):
        with srv.lock:
            srv.counts[path] += 1
            srv.arrived.setdefault(path, time.monotonic())
            failing = path == srv.fail and srv.fail_left > 0
            srv.fail_left -= failing
        chunk = path.rsplit("/", 1)[-1].isdigit()
        srv.release.wait(srv.hold if chunk else srv.hold_metadata)
        with srv.lock:
            srv.first_answer = srv.first_answer or time.monotonic()
        if failing:
            if srv.fail_status == 0:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.send_response(srv.fail_status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        file = Path(srv.root, path.lstrip("/"))
        if ".." in path or not file.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = file.read_bytes()
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m is None:
            self.send_response(200)
            body = data
        elif int(m[1]) >= len(data):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
            first = int(m[1])
            last = min(int(m[2]) if m[2] else len(data) - 1, len(data) - 1)
            body = data[first:last + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", f'"{len(data)}-{int(file.stat().st_mtime)}"')
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def binding(slidepipe_bin):
    sys.path.insert(0, str(Path(slidepipe_bin).parent / "python"))
    try:
        import slidepipe
    except ImportError as e:
        pytest.skip(f"the Python binding of this build does not load here: {e}")
    return slidepipe


@pytest.fixture(scope="module")
def store(run, tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    proc = run(["convert", SLIDE, root / "s.zarr", "--chunk", "256"])
    assert proc.returncode == 0, proc.stderr
    return root


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 drops connections opened at once (a 1 s SYN retry)
    daemon_threads = True


@pytest.fixture
def server(store):
    srv = Server(("127.0.0.1", 0), StoreHandler)
    srv.root, srv.lock, srv.counts = store, threading.Lock(), Counter()
    srv.hold, srv.hold_metadata, srv.release = 0.0, 0.0, threading.Event()
    srv.arrived, srv.first_answer = {}, None
    srv.fail, srv.fail_left, srv.fail_status = None, 0, 500
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/s.zarr"
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()


def chunk_counts(srv):
    return {p: n for p, n in srv.counts.items() if p.startswith("/s.zarr/0/") and p[-1].isdigit()}


def read_together(slide, n):
    """The same region read by n threads released at once: each thread's pixels or exception."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def read(i):
        barrier.wait()
        try:
            results[i] = slide.read_region(**REGION)
        except Exception as e:  # noqa: BLE001 — the test looks at what each reader got
            results[i] = e

    threads = [threading.Thread(target=read, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a reader is still waiting"
    return results


def test_threads_needing_the_same_chunks_fetch_each_once(binding, server, store):
    """Six threads read the same region at once: each of its chunks is requested once."""
    with binding.open(str(store / "s.zarr")) as local:
        want = local.read_region(**REGION)
    server.hold = HOLD
    with binding.open(server.url) as slide:
        server.counts.clear()
        results = read_together(slide, READERS)
    for got in results:
        assert isinstance(got, np.ndarray), got
        assert np.array_equal(got, want)
    counts = chunk_counts(server)
    assert len(counts) == CHUNKS, counts
    assert set(counts.values()) == {1}, counts


def test_overlapping_regions_of_one_batch_fetch_each_chunk_once(binding, server, store):
    """Eight overlapping regions of one batch on four threads: each chunk is requested once."""
    corners = [(200 + 40 * i, 300 + 30 * i) for i in range(8)]
    with binding.open(str(store / "s.zarr")) as local:
        want = local.read_regions(corners, 0, (600, 500), threads=4)
    server.hold = HOLD
    with binding.open(server.url) as slide:
        server.counts.clear()
        got = slide.read_regions(corners, 0, (600, 500), threads=4)
    assert np.array_equal(got, want)
    counts = chunk_counts(server)
    assert len(counts) >= CHUNKS and set(counts.values()) == {1}, counts


@pytest.mark.parametrize("status, times, requests, fails", [
    (500, 1, 2, False),  # retried by the fetching reader; every reader gets the retry's pixels
    (0, 1, 2, False),    # the connection closed without an answer: the same
    (403, 99, 1, True),  # not retried: every reader gets the error, none asks again
])
def test_a_failed_fetch_reaches_every_waiting_reader(binding, server, store, status, times,
                                                     requests, fails):
    """The chunk every reader needs first fails: the readers, released together while its
    request is held, all wait for that one fetch and get what it ends with."""
    with binding.open(str(store / "s.zarr")) as local:
        want = local.read_region(**REGION)
    server.hold = HOLD
    with binding.open(server.url) as slide:
        server.counts.clear()
        server.fail, server.fail_left, server.fail_status = FIRST, times, status
        results = read_together(slide, READERS)
    for got in results:
        if fails:
            assert isinstance(got, Exception) and "403" in str(got), got
        else:
            assert isinstance(got, np.ndarray) and np.array_equal(got, want), got
    assert chunk_counts(server)[FIRST] == requests, chunk_counts(server)


# The root's node files, the completion marker, and levels 0-9 and three associated images in
# both formats (src/formats/zarr.c, GUESSED_LEVELS).
OPEN_MOST = 4 + 1 + 2 * (10 + 3)


def test_opening_asks_for_the_group_and_its_levels_at_once(binding, server, store):
    """Every metadata request is held 0.2 s: opening sends for the group and its level and
    associated arrays' metadata in one wave (all had come before the first answer went), asks
    for each file once, at most OPEN_MOST requests, and gives the local open's slide."""
    root = store / "s.zarr"
    with binding.open(str(root)) as local:
        want = (local.properties, [(lv.width, lv.height) for lv in local.levels],
                local.associated_images)
    needed = {f"/s.zarr/{p.relative_to(root)}" for p in root.rglob(".zarray")}
    needed |= {f"/s.zarr/{name}" for name in (".zgroup", ".zattrs", "slidepipe-complete")}
    assert len(needed) >= 3 + 5 + 3, needed  # the group, 5 levels, 3 associated images
    server.hold_metadata = 0.2
    with binding.open(server.url) as slide:
        got = (slide.properties, [(lv.width, lv.height) for lv in slide.levels],
               slide.associated_images)
        counts, arrived, first_answer = dict(server.counts), dict(server.arrived), server.first_answer
    assert got == want
    assert needed <= set(counts), sorted(needed - set(counts))
    assert set(counts.values()) == {1}, counts
    assert len(counts) <= OPEN_MOST, counts
    late = sorted(p for p in needed if arrived[p] > first_answer)
    assert not late, f"asked for after the first answer: {late}"
