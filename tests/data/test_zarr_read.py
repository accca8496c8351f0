"""test_zarr_read.py — the OME-Zarr reader (src/formats/zarr.c, zarr_meta.c) against zarr-python.

Every store here is written in pytest's temporary folder by zarr-python itself (3.x, with
numcodecs), so chunk layout, chunk keys, codecs and shard indexes are the reference
implementation's; the OME-NGFF attributes (0.4 in .zattrs for Zarr v2, 0.5 under
attributes.ome in zarr.json for Zarr v3) are written here following the specification. The
cases cover Zarr v2 with both dimension separators, v3 unsharded and sharded (index at the end
and at the start), the codecs zstd, blosc-lz4, gzip and none, the layouts c,y,x with interleaved
(3, 256, 256) and per-channel (1, 256, 256) chunks, y,x,c with (256, 256, 3) chunks, t,c,z,y,x
with single planes, uint8 grey, RGB and RGBA, uint16 (both byte orders) and int16.

Pixels must equal the numpy arrays exactly on every level, for the whole level and for regions
that cross chunk borders and the image's edges. The sample mapping is the TIFF reader's
(docs/formats.md): uint16 v -> round(v / 257), int16 v -> (v + 32768) then the same, grey
replicated to R, G, B, alpha 255 inside the image and (0,0,0,0) outside it. A chunk file that is
absent holds the array's fill value (the Zarr specification's rule, and what zarr-python returns),
so it reads as opaque fill.

Failures must be clean: exit status 1 and a one-line `slidepipe: ...` message naming the cause,
for corrupt chunks and shard indexes, hostile metadata and stores that are not OME-Zarr images.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ShardingCodec, ZstdCodec  # noqa: E402

LEVEL0 = (600, 700)  # height, width: not multiples of the chunk, so edge chunks are partial
N_LEVELS = 3
CHUNK = 256
MPP = 0.25


# ---- writing stores -------------------------------------------------------------------------


def pattern(h: int, w: int, channels: int, dtype, seed: int) -> np.ndarray:
    """(h, w, channels) ramps plus noise over the dtype's range: structure at every border."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    planes = [(xx * 7 + yy * 3 + 40 * c) for c in range(channels)]
    base = np.stack(planes, axis=-1) % 256
    noise = rng.integers(0, 16, (h, w, channels))
    v = (base + noise) % 256
    info = np.iinfo(dtype)
    if info.bits == 16:
        v = v * 257 + rng.integers(-128, 128, v.shape)  # exercise the rounding of 16 to 8 bits
        v = np.clip(v, 0, 65535) + info.min
    elif info.min < 0:
        v = v + info.min
    return v.astype(dtype)


def pyramid(channels: int, dtype, seed: int = 1) -> list[np.ndarray]:
    """Levels as (h, w, c); each half the size of the one above (exact downsamples 2 and 4)."""
    h, w = LEVEL0
    out = []
    for i in range(N_LEVELS):
        out.append(pattern(h >> i, w >> i, channels, dtype, seed + i))
    return out


def to_layout(a: np.ndarray, axes: str) -> np.ndarray:
    """(h, w, c) to the array layout named by axes ("cyx", "yxc", "yx", "tczyx")."""
    if axes == "yxc":
        return a
    if axes == "cyx":
        return np.moveaxis(a, -1, 0)
    if axes == "yx":
        assert a.shape[-1] == 1
        return a[..., 0]
    if axes == "tczyx":
        return np.moveaxis(a, -1, 0)[None, :, None]
    raise ValueError(axes)


def layout_chunks(axes: str, c_chunk: int, channels: int, yx=(CHUNK, CHUNK)):
    if axes == "yxc":
        return (yx[0], yx[1], channels)
    if axes == "cyx":
        return (c_chunk, yx[0], yx[1])
    if axes == "yx":
        return yx
    if axes == "tczyx":
        return (1, c_chunk, 1, yx[0], yx[1])
    raise ValueError(axes)


def axes_meta(axes: str, unit: str | None) -> list[dict]:
    out = []
    for name in axes:
        a = {"name": name}
        if name == "c":
            a["type"] = "channel"
        elif name == "t":
            a["type"] = "time"
        else:
            a["type"] = "space"
            if unit is not None and name in "yx":
                a["unit"] = unit
        out.append(a)
    return out


def multiscales(axes: str, n: int, scale: float, unit: str | None, version: str | None) -> dict:
    datasets = []
    for i in range(n):
        s = [1.0 if name in "ctz" else scale * 2**i for name in axes]
        transforms = [{"type": "scale", "scale": s}]
        datasets.append({"path": str(i), "coordinateTransformations": transforms})
    ms = {"axes": axes_meta(axes, unit), "datasets": datasets, "name": "test-image"}
    if version is not None:
        ms["version"] = version
    return ms


def compressor(codec: str, fmt: int):
    if fmt == 2:
        return {
            "zstd": numcodecs.Zstd(level=3),
            "blosc-lz4": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
            "blosc-zstd": numcodecs.Blosc(
                cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE
            ),
            "gzip": numcodecs.GZip(level=5),
            "none": None,
        }[codec]
    return {
        "zstd": ZstdCodec(level=3),
        "blosc-lz4": BloscCodec(cname="lz4", clevel=5),
        "blosc-zstd": BloscCodec(cname="zstd", clevel=3),
        "gzip": GzipCodec(level=5),
        "none": None,
    }[codec]


def write_store(
    path: Path,
    levels: list[np.ndarray],
    *,
    fmt: int = 2,
    axes: str = "cyx",
    c_chunk: int = 3,
    codec: str = "zstd",
    separator: str = "/",
    shard: int | None = None,
    index_location: str = "end",
    dtype=None,
    fill_value=0,
    unit: str | None = "micrometer",
    scale: float = MPP,
    endian: str = "little",
    extra_attrs: dict | None = None,
    yx=(CHUNK, CHUNK),
) -> Path:
    """Write an OME-Zarr image group with zarr-python: one array per level ("0", "1", ...)."""
    channels = levels[0].shape[-1]
    dtype = dtype or levels[0].dtype
    group = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    for i, data in enumerate(levels):
        arr_data = to_layout(data, axes)
        chunks = layout_chunks(axes, c_chunk, channels, yx)
        kwargs = dict(
            name=str(i),
            shape=arr_data.shape,
            dtype=dtype,
            fill_value=fill_value,
            compressors=compressor(codec, fmt),
        )
        kwargs["chunks"] = chunks
        if fmt == 2:
            kwargs["chunk_key_encoding"] = {"name": "v2", "separator": separator}
        else:
            kwargs["chunk_key_encoding"] = {"name": "default", "separator": separator}
            if endian == "big":
                kwargs["serializer"] = BytesCodec(endian="big")
        if fmt == 3 and shard:
            shards = tuple(shard if name in "yx" else n for name, n in zip(axes, chunks))
            if index_location == "end":
                kwargs["shards"] = shards
            else:
                # create_array has no index_location: give it the sharding codec itself.
                inner = [BytesCodec()]
                if kwargs["compressors"] is not None:
                    inner.append(kwargs["compressors"])
                kwargs["compressors"] = None
                kwargs["chunks"] = shards
                kwargs["serializer"] = ShardingCodec(
                    chunk_shape=chunks, codecs=inner, index_location=index_location
                )
        arr = group.create_array(**kwargs)
        arr[...] = arr_data
    ms = multiscales(axes, len(levels), scale, unit, "0.4" if fmt == 2 else None)
    if fmt == 2:
        group.attrs["multiscales"] = [ms]
    else:
        group.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    for k, v in (extra_attrs or {}).items():
        group.attrs[k] = v
    return path


# ---- expected pixels ------------------------------------------------------------------------


def to_8bit(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.int8:
        return (a.astype(np.int16) + 128).astype(np.uint8)
    if a.dtype == np.int16:
        a = (a.astype(np.int64) + 32768).astype(np.uint16)
    assert a.dtype == np.uint16, a.dtype
    return ((a.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)


def to_rgba(hwc: np.ndarray) -> np.ndarray:
    """What slidepipe returns for (h, w, c) samples: 8-bit, grey replicated, alpha 255."""
    v = to_8bit(hwc)
    h, w, c = v.shape
    if c == 1:
        v = np.repeat(v, 3, axis=-1)
    if c != 4:
        v = np.concatenate([v, np.full((h, w, 1), 255, np.uint8)], axis=-1)
    return v


def window(rgba: np.ndarray, lx: int, ly: int, w: int, h: int) -> np.ndarray:
    """rgba[ly:ly+h, lx:lx+w] with (0,0,0,0) where the window leaves the image."""
    out = np.zeros((h, w, 4), np.uint8)
    H, W = rgba.shape[:2]
    x0, y0, x1, y1 = max(lx, 0), max(ly, 0), min(lx + w, W), min(ly + h, H)
    if x0 < x1 and y0 < y1:
        out[y0 - ly : y1 - ly, x0 - lx : x1 - lx] = rgba[y0:y1, x0:x1]
    return out


def check_pixels(read_region, assert_same_pixels, path, info, expected_levels, what):
    """Every level whole, plus a window across chunk borders and one across the far edge."""
    assert len(info["levels"]) == len(expected_levels)
    for level, (lv, exp) in enumerate(zip(info["levels"], expected_levels)):
        ds = round(lv["downsample"])
        assert lv["downsample"] == ds
        w, h = lv["width"], lv["height"]
        got = read_region(path, level, 0, 0, w, h)
        assert_same_pixels(got, exp, f"{what} level {level} whole")
        tw, th = lv["tile_width"], lv["tile_height"]
        windows = [
            (min(tw - 37, w // 3), min(th - 23, h // 3), 2 * tw + 50, th + 40),  # borders
            (w - 70, h - 45, 110, 75),  # right and bottom edge, partly outside
        ]
        for lx, ly, ww, hh in windows:
            lx, ly = max(lx, 0), max(ly, 0)
            got = read_region(path, level, lx * ds, ly * ds, ww, hh)
            want = window(exp, lx, ly, ww, hh)
            assert_same_pixels(got, want, f"{what} level {level} at {lx},{ly}")


def fail_message(run, args) -> str:
    """Run a command that must fail with exit 1 and one `slidepipe: ...` line; return it."""
    proc = run(args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, f"{args}: exit {proc.returncode}, stderr {proc.stderr!r}"
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), proc.stderr
    return lines[0]


# ---- the layouts and codecs -----------------------------------------------------------------

CASES = {
    # id: (fmt, axes, c_chunk, codec, separator, shard, index_location, channels, dtype);
    # a big-endian dtype means the bytes codec's endian "big" in v3
    "v2-cyx-c3-zstd-slash": (2, "cyx", 3, "zstd", "/", None, "end", 3, np.uint8),
    "v2-cyx-c1-blosc-lz4-dot": (2, "cyx", 1, "blosc-lz4", ".", None, "end", 3, np.uint8),
    "v2-yxc-gzip-dot": (2, "yxc", 3, "gzip", ".", None, "end", 3, np.uint8),
    "v2-cyx-c3-none-slash": (2, "cyx", 3, "none", "/", None, "end", 3, np.uint8),
    "v2-cyx-c2-blosc-zstd-rgba": (2, "cyx", 2, "blosc-zstd", "/", None, "end", 4, np.uint8),
    "v2-yx-uint16-zstd": (2, "yx", 1, "zstd", "/", None, "end", 1, np.uint16),
    "v2-cyx-uint16be-gzip": (2, "cyx", 1, "gzip", ".", None, "end", 3, np.dtype(">u2")),
    "v2-tczyx-int16-zstd": (2, "tczyx", 1, "zstd", "/", None, "end", 1, np.int16),
    "v3-cyx-c3-zstd": (3, "cyx", 3, "zstd", "/", None, "end", 3, np.uint8),
    "v3-cyx-c1-none-dot": (3, "cyx", 1, "none", ".", None, "end", 3, np.uint8),
    "v3-yxc-blosc-lz4": (3, "yxc", 3, "blosc-lz4", "/", None, "end", 3, np.uint8),
    "v3-cyx-c1-uint16-gzip": (3, "cyx", 1, "gzip", "/", None, "end", 1, np.uint16),
    "v3-cyx-c3-uint16be-zstd": (3, "cyx", 3, "zstd", "/", None, "end", 3, np.dtype(">u2")),
    "v3-yxc-int8-none": (3, "yxc", 3, "none", "/", None, "end", 3, np.int8),
    "v3-sharded-cyx-c1-blosc-lz4": (3, "cyx", 1, "blosc-lz4", "/", 512, "end", 3, np.uint8),
    "v3-sharded-cyx-c3-zstd": (3, "cyx", 3, "zstd", "/", 512, "end", 3, np.uint8),
    "v3-sharded-yxc-gzip": (3, "yxc", 3, "gzip", "/", 512, "end", 3, np.uint8),
    "v3-sharded-start-none": (3, "cyx", 3, "none", "/", 512, "start", 3, np.uint8),
    "v3-sharded-start-zstd-uint16": (3, "cyx", 1, "zstd", "/", 512, "start", 1, np.uint16),
}


def make_case(tmp_path: Path, case: str, **overrides) -> tuple[Path, list[np.ndarray]]:
    fmt, axes, c_chunk, codec, sep, shard, loc, channels, dtype = CASES[case]
    dtype = np.dtype(dtype)
    levels = pyramid(channels, dtype.newbyteorder("="))  # native numbers; the store's order below
    path = tmp_path / f"{case}.zarr"
    big = dtype.byteorder == ">"
    kw = dict(fmt=fmt, axes=axes, c_chunk=c_chunk, codec=codec, separator=sep, shard=shard,
              index_location=loc, dtype=dtype if fmt == 2 else dtype.newbyteorder("="),
              endian="big" if big else "little")
    kw.update(overrides)
    write_store(path, levels, **kw)
    return path, levels


@pytest.mark.parametrize("case", sorted(CASES))
def test_layouts_and_codecs(tmp_path, case, info, read_region, assert_same_pixels):
    path, levels = make_case(tmp_path, case)
    fmt, axes, c_chunk, codec, sep, shard, loc, channels, dtype = CASES[case]
    facts = info(path)
    assert facts["format"] == "ome-zarr"
    h, w = LEVEL0
    assert [(lv["width"], lv["height"]) for lv in facts["levels"]] == [
        (w >> i, h >> i) for i in range(N_LEVELS)
    ]
    assert [lv["downsample"] for lv in facts["levels"]] == [1, 2, 4]
    for lv in facts["levels"]:
        assert (lv["tile_width"], lv["tile_height"]) == (CHUNK, CHUNK)
        assert lv["compression"] == codec
    assert facts["mpp_x"] == MPP and facts["mpp_y"] == MPP
    props = facts["properties"]
    assert props["zarr.format"] == str(fmt)
    assert props["ome.version"] == ("0.4" if fmt == 2 else "0.5")
    assert props["ome.name"] == "test-image"
    assert props["ome.axes"] == ",".join(axes)
    assert props["zarr.data-type"] == np.dtype(dtype).newbyteorder("=").name
    assert props["slidepipe.vendor"] == "ome-zarr"
    check_pixels(read_region, assert_same_pixels, path, facts, [to_rgba(a) for a in levels], case)


@pytest.mark.parametrize("chunk, tile", [(2048, 1024), (1500, 750), (1031, 1031)])
def test_large_chunks_read_as_smaller_tiles(tmp_path, chunk, tile, info, read_region,
                                            assert_same_pixels):
    """A chunk over 1024 pixels is read as equal tiles of at most 1024 where its side divides
    evenly (a prime side stays whole), with the array's pixels at every tile and chunk border.
    (python/tests/test_binding.py reads batches of such a store.)"""
    level = pattern(2300, 2500, 3, np.uint8, 5)
    path = write_store(tmp_path / "big.zarr", [level], yx=(chunk, chunk))
    facts = info(path)
    assert (facts["levels"][0]["tile_width"], facts["levels"][0]["tile_height"]) == (tile, tile)
    check_pixels(read_region, assert_same_pixels, path, facts, [to_rgba(level)], f"chunk {chunk}")
    for x, y in [(tile - 5, chunk - 7), (chunk - 100, 3), (2 * tile - 1, 2 * tile - 1)]:
        got = read_region(path, 0, x, y, 300, 200)
        assert_same_pixels(got, window(to_rgba(level), x, y, 300, 200), f"chunk {chunk} at {x},{y}")


def test_zarr_python_reads_the_same(tmp_path):
    """The reference reader agrees with the arrays written (guards the fixtures themselves)."""
    path, levels = make_case(tmp_path, "v3-sharded-cyx-c1-blosc-lz4")
    got = zarr.open_group(str(path), mode="r")["1"][...]
    assert np.array_equal(got, to_layout(levels[1], "cyx"))


def test_trailing_slash(tmp_path, info, read_region, assert_same_pixels):
    path, levels = make_case(tmp_path, "v2-cyx-c3-zstd-slash")
    facts = info(str(path) + "/")
    assert facts["format"] == "ome-zarr"
    got = read_region(str(path) + "//", 2, 0, 0, 175, 150)
    assert_same_pixels(got, to_rgba(levels[2]), "trailing slash level 2")


# ---- missing chunks and fill values ---------------------------------------------------------


def chunk_files(path: Path, level: int) -> list[Path]:
    root = path / str(level)
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name not in (".zarray", ".zattrs", "zarr.json")
    )


@pytest.mark.parametrize(
    "case,fill",
    [
        ("v2-cyx-c3-zstd-slash", 0),
        ("v2-cyx-c1-blosc-lz4-dot", 200),
        ("v3-cyx-c3-zstd", 0),
        ("v3-sharded-cyx-c1-blosc-lz4", 9),
        ("v2-yx-uint16-zstd", 40000),
    ],
)
def test_missing_chunks_read_as_fill(tmp_path, case, fill, info, read_region, assert_same_pixels):
    path, levels = make_case(tmp_path, case, fill_value=fill)
    fmt, axes, c_chunk, *_ = CASES[case]
    channels = levels[0].shape[-1]
    rng = np.random.default_rng(5)
    expected = []
    for level, data in enumerate(levels):
        files = chunk_files(path, level)
        assert files, f"no chunk files under level {level}"
        if level == 0:
            gone = [files[0], files[-1]]  # the first (top-left) and the last chunk or shard
        else:
            gone = [files[int(rng.integers(len(files)))]]
        layout = to_layout(data, axes).copy()
        arr = zarr.open_array(str(path / str(level)), mode="r")
        for f in gone:
            f.unlink()
        # zarr-python itself says what the array holds now: the fill value where files went.
        now = arr[...]
        assert not np.array_equal(now, layout), "deleting chunk files changed nothing"
        hwc = {"cyx": lambda a: np.moveaxis(a, 0, -1), "yxc": lambda a: a,
               "yx": lambda a: a[..., None]}[axes](now)
        assert hwc.shape[-1] == channels
        expected.append(to_rgba(hwc))
    facts = info(path)
    check_pixels(read_region, assert_same_pixels, path, facts, expected, f"{case} missing")


def test_missing_whole_level_folder_of_chunks(tmp_path, info, read_region, assert_same_pixels):
    """A level whose every chunk file is absent is all fill, not an error."""
    path, levels = make_case(tmp_path, "v3-cyx-c3-zstd")
    shutil.rmtree(path / "2" / "c")
    facts = info(path)
    got = read_region(path, 2, 0, 0, 175, 150)
    assert_same_pixels(got, to_rgba(np.zeros((150, 175, 3), np.uint8)), "all missing")


# ---- metadata: units, layouts of groups, slidepipe attributes -------------------------------


@pytest.mark.parametrize(
    "unit,scale,mpp",
    [("micrometer", 0.5, 0.5), ("millimeter", 0.00025, 0.25), ("nanometer", 250.0, 0.25),
     ("\u00b5m", 0.3, 0.3), (None, 0.5, None), ("pixel", 1.0, None)],
)
def test_mpp_units(tmp_path, unit, scale, mpp, info):
    levels = pyramid(3, np.uint8)[:1]
    path = write_store(tmp_path / "u.zarr", levels, unit=unit, scale=scale)
    facts = info(path)
    if mpp is None:
        assert facts["mpp_x"] is None and facts["mpp_y"] is None
    else:
        assert facts["mpp_x"] == pytest.approx(mpp, rel=1e-12)
        assert facts["mpp_y"] == pytest.approx(mpp, rel=1e-12)


def test_global_scale_multiplies(tmp_path, info):
    levels = pyramid(3, np.uint8)[:1]
    path = write_store(tmp_path / "g.zarr", levels)
    attrs = json.loads((path / ".zattrs").read_text())
    attrs["multiscales"][0]["coordinateTransformations"] = [{"type": "scale", "scale": [1, 2, 4]}]
    (path / ".zattrs").write_text(json.dumps(attrs))
    facts = info(path)
    assert facts["mpp_x"] == MPP * 4 and facts["mpp_y"] == MPP * 2


def test_bioformats2raw_layout(tmp_path, info, read_region, assert_same_pixels):
    root = tmp_path / "b2r.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.attrs["bioformats2raw.layout"] = 3
    levels = pyramid(3, np.uint8)
    write_store(root / "0", levels)
    facts = info(root)
    assert facts["format"] == "ome-zarr" and len(facts["levels"]) == N_LEVELS
    got = read_region(root, 1, 0, 0, 350, 300)
    assert_same_pixels(got, to_rgba(levels[1]), "bioformats2raw series 0 level 1")


@pytest.mark.parametrize("fmt", [2, 3])
def test_slidepipe_attributes(tmp_path, fmt, info, read_region, run, assert_same_pixels):
    """The attributes `slidepipe convert` writes: source properties and associated images."""
    levels = pyramid(3, np.uint8)
    rng = np.random.default_rng(3)
    label = rng.integers(0, 256, (60, 90, 3), dtype=np.uint8)
    macro = rng.integers(0, 256, (40, 100, 4), dtype=np.uint8)
    thumb = rng.integers(0, 256, (30, 35), dtype=np.uint8)
    attrs = {
        "slidepipe": {
            "properties": {
                "aperio.AppMag": "20",
                "slidepipe.objective-power": "20",
                "slidepipe.mpp-x": "9.99",  # the store's own scale wins
                "tiff.ImageDescription": "Aperio Image Library |AppMag = 20",
                "not-a-string": 5,
                "slidepipe.dataset-hash": "cd" * 32,  # the source store's, not this one's
            },
            "associated": {
                "label": {"path": "associated/label", "width": 90, "height": 60},
                "macro": {"path": "associated/macro", "width": 100, "height": 40},
                "thumbnail": {"path": "associated/thumbnail", "width": 35, "height": 30},
                "wrong-size": {"path": "associated/label", "width": 91, "height": 60},
                "escapes": {"path": "../outside", "width": 10, "height": 10},
                "absent": {"path": "associated/nothing", "width": 10, "height": 10},
            },
        }
    }
    path = write_store(tmp_path / "sp.zarr", levels, fmt=fmt, extra_attrs=attrs)
    group = zarr.open_group(str(path), mode="a")
    for name, img in (("label", label), ("macro", macro), ("thumbnail", thumb)):
        chunks = (32, 32, img.shape[2]) if img.ndim == 3 else (16, 16)
        arr = group.create_array(f"associated/{name}", shape=img.shape, chunks=chunks,
                                 dtype=np.uint8, fill_value=0)
        arr[...] = img
    (path / "slidepipe-complete").write_text("ab" * 32 + "\n")
    facts = info(path)
    props = facts["properties"]
    assert props["aperio.AppMag"] == "20"
    assert props["tiff.ImageDescription"] == "Aperio Image Library |AppMag = 20"
    assert "not-a-string" not in props
    assert facts["objective_power"] == 20
    assert facts["mpp_x"] == MPP
    assert props["slidepipe.dataset-hash"] == "ab" * 32
    assert facts.get("dataset_hash", "ab" * 32) == "ab" * 32  # printed by info once it has it
    (path / "slidepipe-complete").unlink()
    assert "slidepipe.dataset-hash" not in info(path)["properties"]
    assert facts["associated"] == {
        "label": {"width": 90, "height": 60},
        "macro": {"width": 100, "height": 40},
        "thumbnail": {"width": 35, "height": 30},
    }
    for name, img in (("label", label), ("macro", macro), ("thumbnail", thumb)):
        out = tmp_path / f"{name}.png"
        run(["associated", path, name, "-o", out])
        assert out.is_file()
        png = read_png_rgba(out)
        hwc = img if img.ndim == 3 else img[..., None]
        assert_same_pixels(png, to_rgba(hwc), f"associated {name}")


def read_png_rgba(path: Path) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        pytest.skip("Pillow is not installed")
    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA"))


def test_no_dataset_hash_without_marker(tmp_path, info):
    path = write_store(tmp_path / "m.zarr", pyramid(3, np.uint8)[:1])
    assert "slidepipe.dataset-hash" not in info(path)["properties"]
    assert "dataset_hash" not in info(path)
    (path / "slidepipe-complete").write_text("not a hash")
    assert "slidepipe.dataset-hash" not in info(path)["properties"]


# ---- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["v2-cyx-c3-zstd-slash", "v3-cyx-c3-zstd", "v3-sharded-yxc-gzip"])
def test_tampered_chunk(tmp_path, case, run, info):
    path, levels = make_case(tmp_path, case)
    victim = chunk_files(path, 0)[0]
    size = victim.stat().st_size
    rng = np.random.default_rng(7)
    garbage = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    if CASES[case][5]:  # sharded: keep the index (and its checksum), spoil the chunks
        index_len = 16 * 4 + 4  # 2 x 2 inner chunks per 512 x 512 shard, + crc32c
        garbage = garbage[: size - index_len] + victim.read_bytes()[size - index_len :]
    victim.write_bytes(garbage)
    assert info(path)["format"] == "ome-zarr"  # opening reads metadata only
    msg = fail_message(run, ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 64,
                             "--height", 64, "-o", tmp_path / "r.rgba"])
    rel = victim.relative_to(path).as_posix()
    assert rel in msg, msg


def test_tampered_shard_index(tmp_path, run):
    path, _ = make_case(tmp_path, "v3-sharded-cyx-c3-zstd")
    victim = chunk_files(path, 0)[0]
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0xFF  # inside the index: the crc32c no longer matches
    victim.write_bytes(bytes(data))
    msg = fail_message(run, ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 16,
                             "--height", 16, "-o", tmp_path / "r.rgba"])
    assert "checksum" in msg and "c/0/0/0" in msg, msg


def crc32c(data: bytes) -> int:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def test_shard_index_out_of_range(tmp_path, run):
    """An index entry pointing past the shard's data, under a valid checksum, is corrupt."""
    path, _ = make_case(tmp_path, "v3-sharded-cyx-c3-zstd")
    victim = chunk_files(path, 0)[0]
    data = bytearray(victim.read_bytes())
    n = 4  # 2 x 2 inner chunks per shard
    body = bytes(data[-(16 * n + 4) : -4])
    assert crc32c(body) == int.from_bytes(data[-4:], "little")  # zarr-python's crc32c = ours
    entries = bytearray(body)
    entries[0:8] = (len(data) - 20).to_bytes(8, "little")  # offset inside the index
    data[-(16 * n + 4) : -4] = entries
    data[-4:] = crc32c(bytes(entries)).to_bytes(4, "little")
    victim.write_bytes(bytes(data))
    msg = fail_message(run, ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 16,
                             "--height", 16, "-o", tmp_path / "r.rgba"])
    assert "outside the shard's data" in msg, msg


def test_truncated_shard(tmp_path, run):
    path, _ = make_case(tmp_path, "v3-sharded-cyx-c3-zstd")
    victim = chunk_files(path, 0)[0]
    victim.write_bytes(victim.read_bytes()[:10])
    msg = fail_message(run, ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 16,
                             "--height", 16, "-o", tmp_path / "r.rgba"])
    assert "shard" in msg, msg


def test_not_ome_group(tmp_path, run):
    for fmt in (2, 3):
        path = tmp_path / f"plain{fmt}.zarr"
        group = zarr.open_group(str(path), mode="w", zarr_format=fmt)
        group.attrs["hello"] = "world"
        group.create_array("data", shape=(10, 10), chunks=(5, 5), dtype=np.uint8)
        msg = fail_message(run, ["info", path])
        assert "not a recognised slide" in msg and "multiscales" in msg, msg
        msg = fail_message(run, ["info", path / "data"])
        assert "not a recognised slide" in msg and "array" in msg, msg


def test_empty_directory_is_not_a_slide(tmp_path, run):
    (tmp_path / "empty").mkdir()
    fail_message(run, ["info", tmp_path / "empty"])


def edit_json(path: Path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def set_in(doc, keys, value):
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


HOSTILE = {
    # id: (fmt, file under the store, edit, words the message must contain)
    "negative-shape": (2, "0/.zarray", lambda d: set_in(d, ["shape", 1], -600), ["shape"]),
    "chunk-zero": (2, "0/.zarray", lambda d: set_in(d, ["chunks", 2], 0), ["chunks"]),
    "huge-shape": (2, "0/.zarray", lambda d: set_in(d, ["shape", 2], 10**20), ["shape"]),
    "huge-chunk": (2, "0/.zarray", lambda d: set_in(d, ["chunks"], [3, 2**31, 2**31]), ["limit"]),
    "shape-not-list": (2, "0/.zarray", lambda d: set_in(d, ["shape"], "600"), ["shape"]),
    "ndim-mismatch": (2, "0/.zarray", lambda d: set_in(d, ["chunks"], [3, 256]), ["dimensions"]),
    "float32": (2, "0/.zarray", lambda d: set_in(d, ["dtype"], "<f4"), ["floating-point"]),
    "fortran-order": (2, "0/.zarray", lambda d: set_in(d, ["order"], "F"), ["Fortran"]),
    "filters": (2, "0/.zarray", lambda d: set_in(d, ["filters"], [{"id": "delta"}]), ["filters"]),
    "unknown-compressor": (2, "0/.zarray", lambda d: set_in(d, ["compressor"], {"id": "lzma"}),
                           ["lzma"]),
    "bad-separator": (2, "0/.zarray", lambda d: set_in(d, ["dimension_separator"], "-"),
                      ["separator"]),
    "fill-out-of-range": (2, "0/.zarray", lambda d: set_in(d, ["fill_value"], 300), ["fill_value"]),
    "dataset-escapes": (2, ".zattrs",
                        lambda d: set_in(d, ["multiscales", 0, "datasets", 0, "path"], "../0"),
                        ["path"]),
    "dataset-absent": (2, ".zattrs",
                       lambda d: set_in(d, ["multiscales", 0, "datasets", 0, "path"], "nope"),
                       ["nope"]),
    "axes-unknown": (2, ".zattrs",
                     lambda d: set_in(d, ["multiscales", 0, "axes", 0],
                                      {"name": "q", "type": "foo"}),
                     ["axis"]),
    "axes-duplicate": (2, ".zattrs",
                       lambda d: set_in(d, ["multiscales", 0, "axes", 0], {"name": "x"}),
                       ["twice"]),
    "datasets-empty": (2, ".zattrs", lambda d: set_in(d, ["multiscales", 0, "datasets"], []),
                       ["datasets"]),
    "scale-negative": (2, ".zattrs",
                       lambda d: set_in(d, ["multiscales", 0, "datasets", 0,
                                            "coordinateTransformations", 0, "scale", 1], -1),
                       ["scale"]),
    "v3-transpose": (3, "0/zarr.json",
                     lambda d: d["codecs"].insert(0, {"name": "transpose",
                                                      "configuration": {"order": [0, 2, 1]}}),
                     ["transpose"]),
    "v3-two-compressors": (3, "0/zarr.json",
                           lambda d: d["codecs"][0]["configuration"]["codecs"].append(
                               {"name": "gzip"}),
                           ["compressor"]),
    "v3-grid": (3, "0/zarr.json", lambda d: set_in(d, ["chunk_grid", "name"], "rectilinear"),
                ["chunk grid"]),
    "v3-data-type": (3, "0/zarr.json", lambda d: set_in(d, ["data_type"], "float32"),
                     ["floating-point"]),
    "v3-negative-shape": (3, "0/zarr.json", lambda d: set_in(d, ["shape", 0], -3), ["shape"]),
    "v3-node-group": (3, "0/zarr.json", lambda d: set_in(d, ["node_type"], "group"), ["array"]),
    "v3-shard-not-multiple": (3, "0/zarr.json",
                              lambda d: set_in(d, ["codecs", 0, "configuration", "chunk_shape"],
                                               [3, 200, 200]),
                              ["multiple"]),
    "v3-shard-index-codec": (3, "0/zarr.json",
                             lambda d: set_in(d, ["codecs", 0, "configuration", "index_codecs"],
                                              [{"name": "bytes"}, {"name": "zstd"}]),
                             ["index"]),
    "v3-no-ome": (3, "zarr.json", lambda d: set_in(d, ["attributes"], {}),
                  ["not a recognised slide"]),
}


def hostile_store(tmp_path: Path, fmt: int) -> Path:
    levels = pyramid(3, np.uint8)[:2]
    kw = dict(fmt=fmt, shard=512) if fmt == 3 else dict(fmt=2)
    return write_store(tmp_path / f"hostile{fmt}.zarr", levels, **kw)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_metadata(tmp_path, case, run):
    fmt, rel, edit, words = HOSTILE[case]
    path = hostile_store(tmp_path, fmt)
    edit_json(path / rel, edit)
    msg = fail_message(run, ["info", path])
    for word in words:
        assert word in msg, msg


@pytest.mark.parametrize(
    "name,text",
    [("not-json", b"{\"shape\": [1, 2"), ("trailing", b"{} x"), ("array", b"[1, 2, 3]"),
     ("empty", b""), ("nul", b"{\"a\": 1}\x00\x00"), ("deep", b"[" * 5000 + b"]" * 5000)],
)
def test_broken_json(tmp_path, name, text, run):
    for rel in (".zattrs", "0/.zarray"):
        path = hostile_store(tmp_path / rel.replace("/", "_"), 2)
        (path / rel).write_bytes(text)
        fail_message(run, ["info", path])


def test_more_planes_unsupported(tmp_path, run):
    levels = pyramid(1, np.uint8)[:1]
    path = tmp_path / "z.zarr"
    group = zarr.open_group(str(path), mode="w", zarr_format=2)
    arr = group.create_array("0", shape=(1, 1, 3, 600, 700), chunks=(1, 1, 1, 256, 256),
                             dtype=np.uint8)
    arr[0, 0, 0] = levels[0][..., 0]
    ms = multiscales("tczyx", 1, MPP, "micrometer", "0.4")
    group.attrs["multiscales"] = [ms]
    msg = fail_message(run, ["info", path])
    assert "z axis has 3 planes" in msg, msg


@pytest.mark.parametrize("channels", [2, 5])
def test_channel_counts_unsupported(tmp_path, channels, run):
    levels = [pattern(100, 120, channels, np.uint8, 1)]
    path = write_store(tmp_path / "c.zarr", levels)
    msg = fail_message(run, ["info", path])
    assert f"{channels} channels" in msg, msg


def test_plate_unsupported(tmp_path, run):
    path = tmp_path / "plate.zarr"
    group = zarr.open_group(str(path), mode="w", zarr_format=2)
    group.attrs["plate"] = {"columns": [], "rows": [], "wells": []}
    msg = fail_message(run, ["info", path])
    assert "plate" in msg, msg


# ---- a round trip through `slidepipe convert` -------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [[], ["--format", "ome-zarr-0.5", "--shard", "2", "--codec", "blosc-lz4", "--layout", "yxc"]],
    ids=["0.4-default", "0.5-sharded-yxc"],
)
def test_convert_round_trip(tmp_path, options, run, info, read_region, assert_same_pixels):
    """What the converter writes reads back with the source's pixels, properties and hash."""
    probe = run(["convert", "--help"])
    if probe.returncode != 0:
        pytest.skip("this build has no `slidepipe convert`")
    src = tmp_path / "synth.tiff"
    run(["synth", src, "--size", "1500"])
    out = tmp_path / "out.zarr"
    proc = run(["convert", src, out, *options])
    assert proc.returncode == 0, proc.stderr
    source, facts = info(src), info(out)
    assert facts["format"] == "ome-zarr"
    assert facts["levels"][0]["width"] == 1500 and facts["levels"][0]["height"] == 1500
    assert facts["mpp_x"] == source["mpp_x"] and facts["mpp_y"] == source["mpp_y"]
    for key, value in source["properties"].items():
        if not key.startswith("slidepipe."):
            assert facts["properties"].get(key) == value, key
    marker = (out / "slidepipe-complete").read_text()[:64]
    assert facts["properties"]["slidepipe.dataset-hash"] == marker
    a = read_region(src, 0, 300, 200, 900, 700)
    b = read_region(out, 0, 300, 200, 900, 700)
    assert_same_pixels(b, a, "converted level 0")
