"""test_batch_blocks.py — a batch of regions of a Zarr store is read block by block
(src/slide/batch_blocks.c): each chunk the batch needs is decoded once and painted into every
region part it holds. The bytes must be those of region-by-region reads (and the array's) for
every chunk layout, RGB and RGBA, on 1, 2 and 8 threads, with chunks smaller and larger than the
tiles, with regions across chunk and level edges mixed in (those take the region path); a chunk
the cache holds is used, the chunks decoded are not added to the cache, and a corrupt chunk fails
exactly the regions that need it, with the error a single read gives, locally and over HTTP."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import slidepipe
from test_zarr_blocks import DEFAULT_CACHE, LAYOUTS, expected_rgba, write

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from loopback import start_nginx  # noqa: E402

W, H = 200, 150


@pytest.fixture
def cache_restored():
    yield
    slidepipe.set_cache_capacity(DEFAULT_CACHE)


def fresh_cache():
    slidepipe.set_cache_capacity(0)
    slidepipe.set_cache_capacity(DEFAULT_CACHE)


def regions(rng, count, w, h, width=W, height=H):
    """Corners of `count` regions of w x h: most inside the level, a few across its edges."""
    inside = [(int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)))
              for _ in range(count)]
    return inside + [(-7, 3), (width - w + 5, height - h + 9)]


def store(tmp_path, name, side=64):
    axes, c_chunk, channels, dtype = LAYOUTS[name]
    rng = np.random.default_rng(11)
    top = 65535 if dtype == np.uint16 else 255
    pixels = rng.integers(0, top + 1, (H, W, channels), dtype=np.int64).astype(dtype)
    if channels == 4:
        pixels[..., 3] = rng.choice([0, 128, 255], (H, W))
    path = tmp_path / "s.zarr"
    write(path, axes, c_chunk, dtype, pixels, side=side)
    return path, expected_rgba(pixels)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("side", [16, 64, 512])
def test_batches_equal_region_by_region_reads(tmp_path, name, side, cache_restored):
    path, want = store(tmp_path, name, side)
    rng = np.random.default_rng(side)
    with slidepipe.open(path) as s:
        for w, h in ((37, 29), (64, 64), (1, 1), (150, 120)):
            corners = regions(rng, 40, w, h)
            for rgb in (False, True):
                fresh_cache()
                one = np.stack([s.read_region(c, 0, (w, h), rgb=rgb) for c in corners])
                for threads in (1, 2, 8):
                    fresh_cache()
                    got = s.read_regions(corners, 0, (w, h), rgb=rgb, threads=threads)
                    assert np.array_equal(got, one), (name, side, w, h, rgb, threads)
                if rgb and want[..., 3].min() < 255:
                    continue  # RGB composites alpha over the background: not the array's
                for i, (x, y) in enumerate(corners[:-2]):
                    ref = want[y:y + h, x:x + w]
                    assert np.array_equal(one[i], ref[..., :3] if rgb else ref), (name, x, y)


def test_cached_chunks_are_used_and_decoded_ones_not_added(tmp_path, cache_restored):
    path, want = store(tmp_path, "cyx planes, one chunk")
    corners = [(5, 5), (40, 20), (70, 70), (130, 90)]  # inside, across chunk edges
    with slidepipe.open(path) as s:
        fresh_cache()
        before = slidepipe.cache_stats()
        got = s.read_regions(corners, 0, (50, 40), rgb=True, threads=2)
        after = slidepipe.cache_stats()
        for i, (x, y) in enumerate(corners):
            assert np.array_equal(got[i], want[y:y + 40, x:x + 50, :3])
        assert after["insertions"] == before["insertions"], (before, after)
        s.read_region((0, 0), 0, (W, H), rgb=True)  # a single read caches every chunk
        cached = slidepipe.cache_stats()
        assert cached["entries"] > 0
        again = s.read_regions(corners, 0, (50, 40), rgb=True, threads=2)
        last = slidepipe.cache_stats()
        assert np.array_equal(again, got)
        assert last["hits"] > cached["hits"] and last["insertions"] == cached["insertions"], (
            cached, last)


def corrupt_chunk(path, name="0/0/1/1"):
    """Break the frame header of chunk (row 1, col 1) of level 0 (a cyx store: c is chunk 0)."""
    with open(os.path.join(path, name), "r+b") as f:
        f.write(b"\xff" * 8)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_corrupt_chunk_fails_exactly_its_regions(tmp_path, threads, cache_restored):
    path, want = store(tmp_path, "cyx planes, one chunk")
    corrupt_chunk(path)
    # chunk (1, 1) covers level pixels [64, 128) x [64, 128)
    corners = [(0, 0), (70, 70), (10, 100), (100, 10), (60, 60), (140, 100)]
    bad = [1, 4]
    fresh_cache()
    with slidepipe.open(path) as s:
        with pytest.raises(slidepipe.BatchError) as batch:
            s.read_regions(corners, 0, (30, 30), rgb=True, threads=threads)
        for i, (x, y) in enumerate(corners):
            if i not in bad:
                assert np.array_equal(batch.value.array[i], want[y:y + 30, x:x + 30, :3])
            else:
                assert not batch.value.array[i].any()  # zeroed, as a failed read is
    assert sorted(batch.value.failures) == bad, batch.value.failures
    with slidepipe.open(path) as s:  # the status a single read gives
        with pytest.raises(slidepipe.SlidepipeError) as single:
            s.read_region(corners[1], 0, (30, 30), rgb=True)
    assert set(batch.value.failures.values()) == {single.value.status}


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_batches_over_http_equal_local_ones(tmp_path, threads, cache_restored):
    root = tmp_path / "served"
    root.mkdir()
    local, want = store(root, "yxc interleaved", side=32)
    rng = np.random.default_rng(3)
    corners = regions(rng, 60, 45, 35)
    fresh_cache()
    with slidepipe.open(local) as s:
        here = s.read_regions(corners, 0, (45, 35), rgb=False, threads=2)
    proc, port = start_nginx(str(root), str(tmp_path))
    try:
        fresh_cache()
        with slidepipe.open(f"http://127.0.0.1:{port}/{local.name}") as s:
            there = s.read_regions(corners, 0, (45, 35), rgb=False, threads=threads)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert np.array_equal(there, here)
