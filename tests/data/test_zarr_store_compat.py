"""test_zarr_store_compat.py — the Zarr store writer (src/zarr/) read back by zarr-python 3.

The unit-test binary test_zarr_store, run with SP_ZARR_COMPAT_DIR, leaves one store per codec
(zstd, blosc-lz4, blosc-zstd, gzip, none) and format (Zarr v2, v3, v3 sharded) there: a group
holding "a" (uint8, 3 x 100 x 75, chunks 1 x 32 x 32, shards 1 x 64 x 64, dimensions c, y, x) and
"f" (float32, 50 x 45, chunks 16 x 16, shards 32 x 32, dimensions y, x). Element (i, j[, k]) of
"a" is (i*7 + j*3 + k) & 255 and of "f" that value times 0.5 (the pattern documented in
tests/unit/test_zarr_store.c). Each store must open in zarr-python with the declared shape, dtype,
chunking and codec, and hold exactly the pattern.

The other way round, chunks encoded here by numcodecs (including gzip members with an mtime and
a file name, as Python's gzip module writes them) go to SP_ZARR_DECODE_DIR, and the same binary
must decode each to the bytes i -> (i*7 + (i>>8)*3) & 255.

The binary is $SLIDEPIPE_BUILD_DIR/test_zarr_store (default build/ next to this tree).
"""

import gzip
import io
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SLIDEPIPE_BUILD_DIR", str(ROOT / "build")))
BIN = BUILD / "test_zarr_store"
CODECS = ["zstd", "blosc-lz4", "blosc-zstd", "gzip", "none"]
FORMS = ["v2", "v3", "v3-shard"]


def pattern_a():
    i, j, k = np.meshgrid(np.arange(3), np.arange(100), np.arange(75), indexing="ij")
    return ((i * 7 + j * 3 + k) & 255).astype(np.uint8)


def pattern_f():
    i, j = np.meshgrid(np.arange(50), np.arange(45), indexing="ij")
    return ((i * 7 + j * 3) & 255).astype(np.float32) * np.float32(0.5)


def foreign_bytes(n):
    i = np.arange(n, dtype=np.int64)
    return ((i * 7 + (i >> 8) * 3) & 255).astype(np.uint8).tobytes()


def gzip_with_name(data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="chunk.bin", mode="wb", fileobj=buf, mtime=1700000000) as f:
        f.write(data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not BIN.exists():
        pytest.skip(f"{BIN} not built")
    tmp = tmp_path_factory.mktemp("zarr_compat")
    foreign = tmp / "foreign"
    foreign.mkdir()
    for n in (1, 1000, 40000):
        data = foreign_bytes(n)
        encoded = {
            "zstd": numcodecs.Zstd(level=3).encode(data),
            "blosc-lz4": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE).encode(data),
            "blosc-zstd": numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE).encode(data),
            "gzip": numcodecs.GZip(level=6).encode(data),
            "gzip-fname": gzip_with_name(data),
            "none": data,
        }
        for name, blob in encoded.items():
            (foreign / f"{name}-{n}.bin").write_bytes(bytes(blob))
    stores = tmp / "stores"
    env = dict(os.environ, SP_ZARR_COMPAT_DIR=str(stores), SP_ZARR_DECODE_DIR=str(foreign))
    r = subprocess.run([str(BIN)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return stores, r.stdout


def test_foreign_chunks_decode(run):
    _, out = run
    decoded = [line for line in out.splitlines() if line.startswith("compat: decoded")]
    assert "FAILED" not in out
    assert len(decoded) == 18, out


def expected_codec(codec, arr, fmt):
    """The codec zarr-python sees, as (name, config subset)."""
    if fmt == 2:
        comp = arr.metadata.compressor
        if codec == "none":
            assert comp is None
            return
        cfg = comp.get_config()
        want = {"zstd": "zstd", "gzip": "gzip"}.get(codec, "blosc")
        assert cfg["id"] == want
        if want == "blosc":
            assert cfg["cname"] == codec.split("-")[1]
        return
    names = [type(c).__name__ for c in arr.compressors]
    want = {"zstd": ["ZstdCodec"], "gzip": ["GzipCodec"], "none": []}.get(codec, ["BloscCodec"])
    assert names == want


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("codec", CODECS)
def test_store_reads_in_zarr_python(run, codec, form):
    stores, _ = run
    path = stores / f"{codec}-{form}"
    fmt = 2 if form == "v2" else 3
    group = zarr.open_group(str(path), mode="r", zarr_format=fmt)
    a = group["a"]
    f = group["f"]
    assert a.shape == (3, 100, 75) and a.dtype == np.uint8
    assert f.shape == (50, 45) and f.dtype == np.float32
    assert a.chunks == (1, 32, 32) and f.chunks == (16, 16)
    if form == "v3-shard":
        assert a.shards == (1, 64, 64) and f.shards == (32, 32)
    elif fmt == 3:
        assert a.shards is None
    if fmt == 3:
        assert a.metadata.dimension_names == ("c", "y", "x")
        assert f.metadata.dimension_names == ("y", "x")
    expected_codec(codec, a, fmt)
    np.testing.assert_array_equal(a[:], pattern_a())
    np.testing.assert_array_equal(f[:], pattern_f())
    # a partial read crossing chunk and shard edges
    np.testing.assert_array_equal(a[1:3, 30:99, 60:75], pattern_a()[1:3, 30:99, 60:75])


@pytest.mark.parametrize("form", FORMS)
def test_zarr_python_rewrite_matches(run, tmp_path, form):
    """zarr-python writing the same pixels with the same layout reads back identically, and for
    the uncompressed sharded form produces the very same shard bytes."""
    stores, _ = run
    fmt = 2 if form == "v2" else 3
    src = zarr.open_group(str(stores / f"none-{form}"), mode="r", zarr_format=fmt)["a"]
    kwargs = dict(shape=(3, 100, 75), chunks=(1, 32, 32), dtype="uint8", zarr_format=fmt,
                  fill_value=0, compressors=None)
    if form == "v3-shard":
        kwargs["shards"] = (1, 64, 64)
    if fmt == 2:
        kwargs["chunk_key_encoding"] = {"name": "v2", "separator": "/"}
    dst = zarr.create_array(str(tmp_path / "py"), **kwargs)
    dst[:] = pattern_a()
    np.testing.assert_array_equal(dst[:], src[:])
    if form == "v3-shard":
        ours = (stores / "none-v3-shard" / "a" / "c" / "1" / "1" / "1").read_bytes()
        theirs = (tmp_path / "py" / "c" / "1" / "1" / "1").read_bytes()
        assert ours == theirs
