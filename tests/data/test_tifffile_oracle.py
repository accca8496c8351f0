"""TIFF variants against tifffile (+ imagecodecs): the shared files OpenSlide does not read
(strip-organised, 16-bit, planar, signed, QPI) and files written here by tifffile for each codec
and layout slidepipe reads (PackBits, WebP, LZW/Deflate/Zstandard with predictor, separate planes,
16-bit and signed samples, YCbCr data units, mixed strip/tile pyramids, missing tiles, BigTIFF in
both byte orders). Expected pixels are tifffile's decoded samples mapped by the rules in
docs/formats.md: 16-bit v -> round(v / 257), signed -> offset to unsigned, grey replicated,
associated alpha made straight after the 8-bit mapping."""
import numpy as np
import pytest
import tifffile

SHARED = [
    "strip-tiff/kidney-48-5.tif",
    "robustness/grey10kx5k.tif",
    "robustness/smalltif.tif",
    "robustness/tiff_tiled_planar_16bit_RGBa.tiff",
    "qptiff/small_vectra.qptiff",
]


def to8(a, dtype):
    """tifffile samples -> slidepipe's 8-bit samples."""
    if dtype == np.uint16:
        return ((a.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    if dtype == np.int16:
        return to8((a.astype(np.int32) + 32768).astype(np.uint16), np.uint16)
    if dtype == np.int8:
        return (a.view(np.uint8) ^ 0x80).astype(np.uint8)
    return a.astype(np.uint8)


def expected_rgba(page):
    """The RGBA slidepipe must return for a tifffile page."""
    a = page.asarray()
    if page.planarconfig == 2 and a.ndim == 3:
        a = np.moveaxis(a, 0, -1)
    a = to8(a, a.dtype)
    if a.ndim == 2:
        a = a[..., None]
    grey = page.photometric in (0, 1)
    if page.photometric == 0:
        a = a.copy()
        a[..., 0] = 255 - a[..., 0]
    colours = 1 if grey else 3
    rgb = np.repeat(a[..., :1], 3, axis=2) if grey else a[..., :3]
    if a.shape[2] > colours and page.extrasamples:
        alpha = a[..., colours : colours + 1].astype(np.uint32)
        if page.extrasamples[0] == 1:  # associated: make straight
            un = (rgb.astype(np.uint32) * 255 + alpha // 2) // np.maximum(alpha, 1)
            rgb = np.where(alpha > 0, np.minimum(un, 255), 0)
    else:
        alpha = np.full(a.shape[:2] + (1,), 255, np.uint32)
    return np.concatenate([rgb.astype(np.uint8), alpha.astype(np.uint8)], axis=2)


def check_level(read_region, assert_same_pixels, path, level, page, downsample):
    expected = expected_rgba(page)
    h, w = expected.shape[:2]
    actual = read_region(path, level, 0, 0, w, h)
    assert_same_pixels(actual, expected, f"{path} level {level}")


@pytest.mark.parametrize("rel", SHARED)
def test_shared_file_level0(rel, testdata, info, read_region, assert_same_pixels):
    path = testdata / rel
    facts = info(path)
    page = tifffile.TiffFile(path).pages[0]
    assert facts["format"] == "generic-tiff"
    assert (facts["levels"][0]["width"], facts["levels"][0]["height"]) == (page.imagewidth, page.imagelength)
    check_level(read_region, assert_same_pixels, path, 0, page, 1.0)


def test_sparse_webp_cog_reads_transparent(testdata, info, read_region):
    """Every tile of sparse.tiff has offset 0 and byte count 0: it opens, and reads transparent."""
    path = testdata / "robustness/sparse.tiff"
    facts = info(path)
    assert [lv["width"] for lv in facts["levels"]] == [20480, 10240, 5120, 2048, 1024, 512]
    assert facts["levels"][0]["compression"] == "webp"
    assert not read_region(path, 0, 5000, 5000, 300, 200).any()
    assert not read_region(path, 5, 0, 0, 512, 512).any()


def make_image(h, w, channels, dtype, seed):
    """A smooth gradient plus noise, so that compression and prediction do real work."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    top = np.iinfo(dtype).max if np.issubdtype(dtype, np.integer) else 1.0
    base = (x * 7 + y * 3)[..., None] + np.arange(channels) * 40
    noise = rng.integers(0, 32, size=(h, w, channels))
    a = (base + noise) % (int(top) + 1 if dtype != np.int8 else 256)
    if dtype == np.int8:
        a = a - 128
    if dtype == np.int16:
        a = (a * 97) % 65536 - 32768
    if dtype == np.uint16:
        a = (a * 97) % 65536
    a = a.astype(dtype)
    return a[..., 0] if channels == 1 else a


VARIANTS = {
    # name: (shape channels, dtype, imwrite keyword arguments)
    "packbits-rgb-strips": (3, np.uint8, dict(compression="packbits", rowsperstrip=7)),
    "lzw-predictor-rgb-tiles": (3, np.uint8, dict(compression="lzw", predictor=True, tile=(64, 64))),
    "deflate-predictor-16bit-grey": (1, np.uint16, dict(compression="zlib", predictor=True, tile=(32, 48))),
    "zstd-16bit-rgb-bigendian": (3, np.uint16, dict(compression="zstd", tile=(64, 64), byteorder=">")),
    "planar-rgb-lzw": (3, np.uint8, dict(compression="lzw", planarconfig="separate", photometric="rgb", tile=(32, 32))),
    "planar-16bit-rgba-strips": (
        4, np.uint16, dict(planarconfig="separate", photometric="rgb", extrasamples=["unassalpha"], rowsperstrip=5)
    ),
    "rgba-associated-alpha": (4, np.uint8, dict(photometric="rgb", extrasamples=["assocalpha"], tile=(32, 32))),
    "grey-alpha": (2, np.uint8, dict(photometric="minisblack", extrasamples=["unassalpha"], planarconfig="contig")),
    "int8-grey": (1, np.int8, dict(compression="zlib")),
    "int16-grey-tiles": (1, np.int16, dict(tile=(16, 16))),
    "miniswhite": (1, np.uint8, dict(photometric="miniswhite", compression="packbits")),
    "bigtiff-bigendian-tiles": (3, np.uint8, dict(bigtiff=True, byteorder=">", tile=(32, 32), compression="zlib")),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_generated_variant(name, tmp_path, info, read_region, assert_same_pixels):
    channels, dtype, kwargs = VARIANTS[name]
    image = make_image(150, 203, channels, dtype, seed=len(name))
    path = tmp_path / f"{name}.tif"
    kw = dict(kwargs)
    if kw.get("planarconfig") == "separate" and image.ndim == 3:
        image = np.moveaxis(image, -1, 0)
    tifffile.imwrite(path, image, **kw)
    page = tifffile.TiffFile(path).pages[0]
    facts = info(path)
    assert (facts["levels"][0]["width"], facts["levels"][0]["height"]) == (203, 150)
    check_level(read_region, assert_same_pixels, path, 0, page, 1.0)


def test_webp_tiles(tmp_path, info, read_region, assert_same_pixels):
    """Lossless WebP tiles, RGB and RGBA, decode to exactly the written pixels."""
    for channels in (3, 4):
        image = make_image(300, 260, channels, np.uint8, seed=channels)
        path = tmp_path / f"webp{channels}.tif"
        kwargs = dict(extrasamples=["unassalpha"]) if channels == 4 else {}
        tifffile.imwrite(path, image, tile=(128, 128), compression="webp", compressionargs={"level": 100, "lossless": True},
                         photometric="rgb", **kwargs)
        assert info(path)["levels"][0]["compression"] == "webp"
        check_level(read_region, assert_same_pixels, path, 0, tifffile.TiffFile(path).pages[0], 1.0)


def test_ycbcr_data_units(tmp_path, read_region):
    """Uncompressed YCbCr with 2x2 chroma subsampling (TIFF 6.0 section 21), written here by hand
    from known Y, Cb, Cr: slidepipe's RGB must equal the JFIF conversion of those samples (within
    1 for rounding) and use each Cb/Cr pair for its 2x2 block."""
    h, w = 6, 10
    rng = np.random.default_rng(5)
    luma = rng.integers(16, 235, size=(h, w)).astype(np.uint8)
    cb = rng.integers(64, 192, size=(h // 2, w // 2)).astype(np.uint8)
    cr = rng.integers(64, 192, size=(h // 2, w // 2)).astype(np.uint8)
    units = []
    for uy in range(h // 2):
        for ux in range(w // 2):
            block = luma[uy * 2 : uy * 2 + 2, ux * 2 : ux * 2 + 2].reshape(-1)
            units.append(np.concatenate([block, [cb[uy, ux], cr[uy, ux]]]))
    data = np.concatenate(units).astype(np.uint8)
    path = tmp_path / "ycbcr.tif"
    # tifffile does not write uncompressed subsampled YCbCr, so the file is assembled here.
    raw = bytearray()
    header = b"II*\x00" + (8).to_bytes(4, "little")
    tags = [
        (256, 3, 1, w), (257, 3, 1, h), (258, 3, 3, None), (259, 3, 1, 1), (262, 3, 1, 6),
        (273, 4, 1, None), (277, 3, 1, 3), (278, 3, 1, h), (279, 4, 1, len(data)), (530, 3, 2, 2 | (2 << 16)),
    ]
    ifd_size = 2 + 12 * len(tags) + 4
    bps_at = 8 + ifd_size
    data_at = bps_at + 6
    raw += header + len(tags).to_bytes(2, "little")
    for tag, typ, count, value in tags:
        if tag == 258:
            value = bps_at
        if tag == 273:
            value = data_at
        raw += tag.to_bytes(2, "little") + typ.to_bytes(2, "little") + count.to_bytes(4, "little")
        raw += value.to_bytes(4, "little")
    raw += (0).to_bytes(4, "little") + bytes([8, 0, 8, 0, 8, 0]) + data.tobytes()
    path.write_bytes(bytes(raw))
    actual = read_region(path, 0, 0, 0, w, h).astype(int)
    cbf = np.repeat(np.repeat(cb, 2, 0), 2, 1).astype(float) - 128
    crf = np.repeat(np.repeat(cr, 2, 0), 2, 1).astype(float) - 128
    y = luma.astype(float)
    expected = np.stack([y + 1.402 * crf, y - 0.344136 * cbf - 0.714136 * crf, y + 1.772 * cbf], -1)
    expected = np.clip(np.round(expected), 0, 255)
    assert np.abs(actual[..., :3] - expected).max() <= 1
    assert (actual[..., 3] == 255).all()


def test_mixed_strip_tile_pyramid_and_missing_tiles(tmp_path, info, read_region, assert_same_pixels):
    """A stripped full-resolution page with tiled reduced-resolution pages; one level-1 tile is
    then made missing (offset and byte count 0) and must read transparent."""
    full = make_image(256, 300, 3, np.uint8, seed=1)
    half = full[::2, ::2].copy()
    path = tmp_path / "mixed.tif"
    with tifffile.TiffWriter(path) as tw:
        tw.write(full, rowsperstrip=16, compression="zlib")
        tw.write(half, tile=(64, 64), subfiletype=1, compression="zlib")
    facts = info(path)
    assert [(lv["width"], lv["height"]) for lv in facts["levels"]] == [(300, 256), (150, 128)]
    assert facts["levels"][0]["tile_height"] == 16 and facts["levels"][1]["tile_width"] == 64
    pages = tifffile.TiffFile(path).pages
    check_level(read_region, assert_same_pixels, path, 0, pages[0], 1.0)
    check_level(read_region, assert_same_pixels, path, 1, pages[1], 2.0)

    # Zero the offset and byte count of level 1's second tile in place.
    blob = bytearray(path.read_bytes())
    page = pages[1]
    for tag_code in (324, 325):
        tag = page.tags[tag_code]
        at = tag.valueoffset + 4  # second LONG of the array
        blob[at : at + 4] = b"\x00\x00\x00\x00"
    broken = tmp_path / "missing.tif"
    broken.write_bytes(bytes(blob))
    region = read_region(broken, 1, 0, 0, 150, 128)
    assert not region[0:64, 64:128].any(), "the missing tile must be transparent"
    assert (region[0:64, 0:64, 3] == 255).all() and (region[64:128, :, 3] == 255).all()
