"""test_zarr_blocks.py — a Zarr chunk that holds all of a tile's channels is cached decoded, as
the store lays it out, and regions are painted from it straight into the caller's rows, RGB or
RGBA (sp_slide_ops.block_of); other layouts, and every read with the tile cache off, go through
whole RGBA tiles. Every layout here is read both ways, into RGB and RGBA, at regions that cross
chunk and level edges: the pixels must be the array's, and the two ways the same."""

import numcodecs
import numpy as np
import pytest
import zarr

import slidepipe

W, H, CHUNK = 200, 150, 64  # edge chunks are partial, rows not a multiple of 16
DEFAULT_CACHE = 256 << 20

# name: (axes, chunk along c (None: no c axis), channels, dtype)
LAYOUTS = {
    "cyx planes, one chunk": ("cyx", 3, 3, np.uint8),  # a block, interleaved by SIMD
    "cyx rgba planes": ("cyx", 4, 4, np.uint8),  # a block for RGBA; RGB composites tiles
    "yxc interleaved": ("yxc", 3, 3, np.uint8),  # a block, sample by sample
    "yx grey uint16": ("yx", None, 1, np.uint16),  # a block, 16-bit samples scaled
    "cyx a chunk a channel": ("cyx", 1, 3, np.uint8),  # three chunks a tile: no block
}


def write(path, axes, c_chunk, dtype, pixels, side=CHUNK):
    """An OME-Zarr v2 group of one level from `pixels` (h, w, c), zstd chunks `side` across."""
    data = {"cyx": pixels.transpose(2, 0, 1), "yxc": pixels, "yx": pixels[..., 0]}[axes]
    chunks = tuple({"c": c_chunk or 1, "y": side, "x": side}[a] for a in axes)
    group = zarr.open_group(str(path), mode="w", zarr_format=2)
    arr = group.create_array(name="0", shape=data.shape, dtype=dtype, chunks=chunks,
                             compressors=numcodecs.Zstd(level=1), fill_value=0,
                             chunk_key_encoding={"name": "v2", "separator": "/"})
    arr[...] = data
    types = {"c": "channel", "y": "space", "x": "space"}
    group.attrs["multiscales"] = [{
        "version": "0.4", "name": "blocks",
        "axes": [{"name": a, "type": types[a]} for a in axes],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0] * len(axes)}]}],
    }]


def expected_rgba(pixels):
    """What a read gives inside the level: 8-bit, grey replicated, opaque unless alpha."""
    v = pixels
    if v.dtype == np.uint16:
        v = ((v.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)
    if v.shape[-1] == 1:
        v = np.repeat(v, 3, axis=-1)
    if v.shape[-1] == 3:
        v = np.concatenate([v, np.full(v.shape[:2] + (1,), 255, np.uint8)], axis=-1)
    return v


def window(rgba, x, y, w, h):
    out = np.zeros((h, w, 4), np.uint8)  # transparent outside the level
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, W), min(y + h, H)
    if x0 < x1 and y0 < y1:
        out[y0 - y:y1 - y, x0 - x:x1 - x] = rgba[y0:y1, x0:x1]
    return out


@pytest.fixture
def cache_restored():
    yield
    slidepipe.set_cache_capacity(DEFAULT_CACHE)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_blocks_and_whole_tiles_read_the_same(tmp_path, name, cache_restored):
    axes, c_chunk, channels, dtype = LAYOUTS[name]
    rng = np.random.default_rng(4)
    top = 65535 if dtype == np.uint16 else 255
    pixels = rng.integers(0, top + 1, (H, W, channels), dtype=np.int64).astype(dtype)
    if channels == 4:
        pixels[..., 3] = rng.choice([0, 128, 255], (H, W))
    path = tmp_path / "s.zarr"
    write(path, axes, c_chunk, dtype, pixels)
    want = expected_rgba(pixels)
    corners = [(-20, -10), (0, 0), (50, 30), (60, 60), (150, 100), (190, 140), (63, 127),
               (int(rng.integers(0, W)), int(rng.integers(0, H)))]
    got = {}
    for cache in (DEFAULT_CACHE, 0):
        slidepipe.set_cache_capacity(0)  # nothing cached from before
        slidepipe.set_cache_capacity(cache)
        with slidepipe.open(path) as s:
            for rgb in (False, True):
                got[cache, rgb] = s.read_regions(corners, 0, (70, 50), rgb=rgb, threads=2)
                hits = slidepipe.cache_stats()["hits"]
                again = s.read_regions(corners, 0, (70, 50), rgb=rgb, threads=1)
                assert np.array_equal(again, got[cache, rgb]), (name, cache, rgb)
                if cache:  # the second read hits the cache (the slide's entries, until closed)
                    stats = slidepipe.cache_stats()
                    assert stats["hits"] > hits and stats["entries"] > 0, stats
    rgba, rgb = got[DEFAULT_CACHE, False], got[DEFAULT_CACHE, True]
    for i, (x, y) in enumerate(corners):
        assert np.array_equal(rgba[i], window(want, x, y, 70, 50)), (name, x, y)
    for as_rgb in (False, True):
        assert np.array_equal(got[DEFAULT_CACHE, as_rgb], got[0, as_rgb]), (name, as_rgb)
    if channels != 4:  # opaque: RGB is RGBA without its alpha inside the level
        inside = rgba[..., 3] == 255
        assert np.array_equal(rgb[inside], rgba[..., :3][inside])


def test_a_cached_chunk_is_fetched_and_decoded_once(tmp_path, cache_restored):
    """Tiles smaller than their chunk (a 2048 chunk is read as 1024 tiles) share one cached
    block: reading all four tiles of a chunk adds one cache entry, not four."""
    rng = np.random.default_rng(9)
    pixels = rng.integers(0, 256, (2048, 2048, 3), dtype=np.uint8)
    path = tmp_path / "big.zarr"
    write(path, "cyx", 3, np.uint8, pixels, side=2048)
    slidepipe.set_cache_capacity(0)
    slidepipe.set_cache_capacity(DEFAULT_CACHE)
    with slidepipe.open(path) as s:
        assert (s.levels[0].tile_width, s.levels[0].tile_height) == (1024, 1024)
        before = slidepipe.cache_stats()
        got = s.read_region((900, 900), 0, (300, 300), rgb=True)  # all four tiles
        assert np.array_equal(got, pixels[900:1200, 900:1200])
        after = slidepipe.cache_stats()
    assert after["entries"] - before["entries"] == 1, (before, after)
    assert after["misses"] - before["misses"] == 1 and after["hits"] - before["hits"] == 3, (
        before, after)
