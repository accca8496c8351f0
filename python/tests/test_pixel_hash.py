"""Slide.pixel_hash through the binding: the hash `slidepipe hash` prints and a converted store
records, the same on any number of threads, and computed without holding the GIL."""

import json
import threading
import time

import slidepipe

SMALL = "aperio/CMU-1-Small-Region.svs"
BIG = "generic-tiff/yb10kx5k.zstd.tiff"  # 10000 x 5000, five levels: long enough to overlap


def cli_pixel_hash(cli, path):
    return json.loads(cli("hash", path, "--json").stdout)["pixel_hash"]


def test_pixel_hash_equals_the_command_and_the_store(cli, testdata, tmp_path):
    with slidepipe.open(testdata / SMALL) as s:
        got = s.pixel_hash()
        assert got == cli_pixel_hash(cli, testdata / SMALL)
        assert s.pixel_hash(threads=1) == s.pixel_hash(threads=2) == got
    store = tmp_path / "s.zarr"
    slidepipe.convert(testdata / SMALL, store, chunk=256)
    with slidepipe.open(store) as z:
        recorded = z.properties["slidepipe.pixel-hash"]
        assert z.pixel_hash(threads=3) == recorded == cli_pixel_hash(cli, store)


def test_pixel_hash_releases_the_gil(testdata):
    """While one thread hashes, this one runs: if the call held the GIL, no loop iteration here
    could fall between its start and end."""
    with slidepipe.open(testdata / BIG) as s:
        span, ticks = [], []

        def work():
            t0 = time.perf_counter()
            span.append(s.pixel_hash(threads=1))
            span.extend([t0, time.perf_counter()])

        t = threading.Thread(target=work)
        t.start()
        while t.is_alive():
            ticks.append(time.perf_counter())
        t.join()
        digest, t0, t1 = span
        assert len(digest) == 64
        inside = sum(t0 < x < t1 for x in ticks)
        assert inside > 100, f"{inside} iterations ran during a {t1 - t0:.3f} s hash"
