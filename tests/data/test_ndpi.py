"""Hamamatsu NDPI beyond the OpenSlide oracle (tests/data/test_openslide_oracle.py checks the
shared file's facts and pixels): a level's restart intervals are found by reading the strip when
the McuStarts tag (65426) is absent or does not fit the level, with the same pixels; a level
stored as one JPEG without restart markers (written here with tifffile) reads at every scale;
the shared file moved past 4 GiB (NDPI's 64-bit offsets, in a sparse file) reads as before and
as OpenSlide 4 reads it; a z-stack's every focal plane equals its strip decoded by libjpeg."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

tifffile = pytest.importorskip("tifffile", reason="tifffile finds the NDPI tags to patch")

NDPI = "ndpi/test3-DAPI-2-387.ndpi"
MCU_STARTS = 65426


@pytest.fixture(scope="module")
def ndpi(testdata) -> Path:
    path = testdata / NDPI
    if not path.is_file():
        pytest.skip(f"{NDPI} is not in the shared test data")
    return path


def _patched(src: Path, dst: Path, patch) -> Path:
    """A copy of src with patch(buffer, tag) applied to every page's McuStarts tag."""
    data = bytearray(src.read_bytes())
    with tifffile.TiffFile(src) as tif:
        tags = [p.tags[MCU_STARTS] for p in tif.pages if MCU_STARTS in p.tags]
    assert tags, f"{src} has no McuStarts tag"
    for tag in tags:
        patch(data, tag)
    dst.write_bytes(bytes(data))
    return dst


def _regions(info):
    """Regions on every level: the top-left corner, the middle, the bottom-right edge."""
    out = []
    for level, lv in enumerate(info["levels"]):
        w, h = lv["width"], lv["height"]
        ds = lv["downsample"]
        for lx, ly in ((0, 0), (w // 2 - 50, h // 2 - 37), (w - 60, h - 20)):
            out.append((level, int(lx * ds), int(ly * ds), 100, 75))
    return out


def _same_as_original(original: Path, patched: Path, sp):
    want, got = sp.info(original), sp.info(patched)
    assert got["levels"] == want["levels"], f"{patched.name}: levels differ from the original's"
    for level, x, y, w, h in _regions(want):
        a = sp.read_region(original, level, x, y, w, h)
        b = sp.read_region(patched, level, x, y, w, h)
        assert np.array_equal(a, b), f"{patched.name}: level {level} at ({x}, {y}) differs"


def test_restart_markers_found_without_mcu_starts(ndpi, tmp_path, sp):
    """With the tag renamed (65426 -> 65427, which the file does not use), the intervals come
    from a scan of each strip and read the same pixels."""

    def rename(data, tag):
        struct.pack_into("<H", data, tag.offset, MCU_STARTS + 1)

    _same_as_original(ndpi, _patched(ndpi, tmp_path / "no-mcu-starts.ndpi", rename), sp)


def test_mcu_starts_that_do_not_fit_are_not_used(ndpi, tmp_path, sp):
    """An McuStarts whose first offset is not where the header ends (or whose offsets do not
    increase) is ignored in favour of the scan: the same pixels again."""

    def spoil(data, tag):
        (first,) = struct.unpack_from("<I", data, tag.valueoffset)
        struct.pack_into("<I", data, tag.valueoffset, first + 7)

    _same_as_original(ndpi, _patched(ndpi, tmp_path / "bad-mcu-starts.ndpi", spoil), sp)


def test_level_without_its_restart_markers_fails_cleanly(ndpi, tmp_path, run):
    """With the tag gone and level 0's restart markers overwritten, the level cannot be cut into
    its intervals: exit 1 and one line naming the file and the count found."""
    data = bytearray(ndpi.read_bytes())
    with tifffile.TiffFile(ndpi) as tif:
        page = tif.pages[0]
        start, length = page.tags[273].value, page.tags[279].value
        start = start[0] if isinstance(start, tuple) else start
        length = length[0] if isinstance(length, tuple) else length
        for p in tif.pages:
            if MCU_STARTS in p.tags:
                struct.pack_into("<H", data, p.tags[MCU_STARTS].offset, MCU_STARTS + 1)
    strip = bytes(data[start:start + length])
    for k in range(8):  # FF Dk -> FF 00 (a stuffed byte): no marker left
        strip = strip.replace(bytes([0xFF, 0xD0 + k]), b"\xff\x00")
    data[start:start + length] = strip
    path = tmp_path / "no-restart-markers.ndpi"
    path.write_bytes(bytes(data))
    proc = run(["info", path])
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), proc.stderr
    assert str(path) in lines[0] and "restart intervals found" in lines[0], lines[0]


def test_properties_equal_openslides(ndpi, sp):
    """Every vendor and TIFF property OpenSlide 4 reports, by name and value, byte for byte (the
    oracle test checks the facts; this checks the hamamatsu.* and tiff.* keys)."""
    openslide = pytest.importorskip("openslide", reason="openslide-python is the oracle")
    with openslide.OpenSlide(str(ndpi)) as slide:
        want = {k: v for k, v in slide.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in sp.info(ndpi)["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) > 50, f"OpenSlide reports only {len(want)} properties"
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differ = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    assert not (missing or extra or differ), f"missing {missing}, extra {extra}, differing {differ}"


# ---- levels stored as one JPEG without restart markers ---------------------------------------


def _ndpi_without_markers(path: Path, height: int, width: int, samples: int) -> Path:
    """A one-level NDPI whose strip is one JPEG without restart markers (tifffile writes it)."""
    rng = np.random.default_rng(3)
    img = (np.add.outer(np.arange(height), np.arange(width))[..., None] * 3
           + rng.integers(0, 20, (height, width, samples))).astype(np.uint8)
    tags = [(65420, "I", 1, 1, True), (65421, "f", 1, 20.0, True), (65422, "i", 1, 0, True),
            (65423, "i", 1, 0, True), (65424, "i", 1, 0, True)]
    tifffile.imwrite(path, img[..., 0] if samples == 1 else img, compression="jpeg",
                     rowsperstrip=height, photometric="minisblack" if samples == 1 else "rgb",
                     extratags=tags, metadata=None)
    return path


@pytest.mark.parametrize("height, width, samples", [(15, 7, 1), (67, 1001, 3)],
                         ids=["grey-7x15", "rgb-1001x67"])
def test_level_without_markers_reads_at_every_scale(height, width, samples, tmp_path, sp):
    """A level stored without restart markers is one tile, and its 1/2, 1/4, 1/8 views are one
    tile of the rounded-up size, each equal to libjpeg's DCT-scaled decode of the strip (Pillow's
    draft mode). Found by fuzz/fuzz_ndpi.c: a 7x15 image made a tile of width 0 at 1/8
    (a division by zero, SIGFPE), and an odd width made the scaled levels one tile too many
    (their last column failed to read)."""
    path = _ndpi_without_markers(tmp_path / "plain.ndpi", height, width, samples)
    levels = sp.info(path)["levels"]
    assert len(levels) == 4
    strip = path.read_bytes()
    strip = strip[strip.find(b"\xff\xd8\xff"):]
    for i, (lv, scale) in enumerate(zip(levels, (1, 2, 4, 8))):
        w, h = -(-width // scale), -(-height // scale)
        assert (lv["width"], lv["height"], lv["tile_width"], lv["tile_height"]) == (w, h, w, h)
        got = sp.read_region(path, i, 0, 0, w, h)
        assert (got[..., 3] == 255).all()
        # Pillow picks the largest DCT scale whose size covers the one asked for; it cannot
        # reach 1/8 of an image under 8 pixels wide, so that one level is checked by size only.
        img = Image.open(io.BytesIO(strip))
        img.draft(img.mode, (max(1, width // scale), max(1, height // scale)))
        if img.size == (w, h):
            assert np.array_equal(got[..., :3], np.asarray(img.convert("RGB"))), f"1/{scale}"
        else:
            assert (width, scale) == (7, 8), (img.size, scale)


# ---- files past 4 GiB: NDPI's 64-bit offsets ---------------------------------------------------

TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8}


def _directories(data: bytes):
    """[(tag, type, count, value bytes)] of each directory of an NDPI under 4 GiB."""
    dirs, off = [], struct.unpack_from("<I", data, 4)[0]
    while off:
        n = struct.unpack_from("<H", data, off)[0]
        entries = []
        for i in range(n):
            tag, typ, count, field = struct.unpack_from("<HHI4s", data, off + 2 + 12 * i)
            size = TYPE_SIZES[typ] * count
            at = struct.unpack("<I", field)[0]
            entries.append((tag, typ, count, field[:size] if size <= 4 else data[at:at + size]))
        dirs.append(entries)
        off = struct.unpack_from("<I", data, off + 2 + 12 * n)[0]  # the low half: under 4 GiB
    return dirs


def _past_4gib(src: Path, dst: Path, corrupt_high=None) -> Path:
    """src rewritten as NDPI lays out a file past 4 GiB: a hole of 4 GiB after the header (a
    sparse file: it takes no disk), then for each directory its strip, its out-of-line values and
    the directory itself, every offset 64-bit: the header's and each next-directory offset are 8
    bytes, and after each directory come the high halves of its entries' value fields. Every
    offset past the hole has a high half of 1. `corrupt_high` (a tag) gets a high half of 9."""
    data = src.read_bytes()
    pos = 16 + (1 << 32)
    with open(dst, "wb") as out:
        out.write(b"II*\0" + bytes(12))
        link = 4  # where the offset of the next directory goes
        for entries in _directories(data):
            fields = []
            for tag, typ, count, value in entries:
                if tag == 273:  # StripOffsets, one strip: moved past the hole
                    strip_len = next(struct.unpack("<I", v)[0] for t, _, _, v in entries if t == 279)
                    start = struct.unpack("<I", value)[0]
                    out.seek(pos)
                    out.write(data[start:start + strip_len])
                    wide = pos
                    pos += strip_len
                elif len(value) <= 4:
                    wide = struct.unpack("<I", value.ljust(4, b"\0"))[0]
                else:
                    out.seek(pos)
                    out.write(value)
                    wide = pos
                    pos += len(value) + len(value) % 2
                high = 9 if tag == corrupt_high else wide >> 32
                fields.append((tag, typ, count, wide & 0xFFFFFFFF, high))
            at = pos
            out.seek(link)
            out.write(struct.pack("<Q", at))
            out.seek(at)
            out.write(struct.pack("<H", len(fields)))
            for tag, typ, count, low, _ in fields:
                out.write(struct.pack("<HHII", tag, typ, count, low))
            link = out.tell()
            out.write(bytes(8))
            out.write(b"".join(struct.pack("<I", f[4]) for f in fields))
            pos = out.tell()
    return dst


def test_past_4gib_equals_the_original_and_openslide(ndpi, tmp_path, sp):
    """The shared NDPI moved past 4 GiB reads as the original does (every level's regions), and
    as OpenSlide 4 reads the moved file; its facts and properties are OpenSlide's too."""
    openslide = pytest.importorskip("openslide", reason="openslide-python is the oracle")
    big = _past_4gib(ndpi, tmp_path / "big.ndpi")
    assert big.stat().st_size > 1 << 32
    _same_as_original(ndpi, big, sp)
    info = sp.info(big)
    with openslide.OpenSlide(str(big)) as slide:
        assert openslide.OpenSlide.detect_format(str(big)) == "hamamatsu"
        assert [(lv["width"], lv["height"]) for lv in info["levels"]] == list(slide.level_dimensions)
        props = {k: v for k, v in slide.properties.items() if not k.startswith("openslide.")}
        assert {k: info["properties"][k] for k in props} == props
        for level, x, y, w, h in _regions(info):
            want = np.asarray(slide.read_region((x, y), level, (w, h)))
            got = sp.read_region(big, level, x, y, w, h)
            assert np.array_equal(got, want), f"level {level} at ({x}, {y}) differs from OpenSlide"


def test_past_4gib_with_a_wrong_high_half_fails_cleanly(ndpi, tmp_path, run):
    big = _past_4gib(ndpi, tmp_path / "bad.ndpi", corrupt_high=273)
    proc = run(["info", big])
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and str(big) in lines[0] and "outside the file" in lines[0], lines


# ---- focal planes ------------------------------------------------------------------------------

Z_OFFSETS = (-1500, 0, 1500)  # nm, in file order; planes are numbered 0 (Z 0), -1500, 1500


@pytest.fixture(scope="module")
def z_stack(tmp_path_factory):
    """An NDPI of three focal planes, each two levels (one JPEG strip each, written by tifffile),
    every plane's pixels different; a macro image after them. Returns (path, {z offset: [level
    arrays]}) with each level's strip as libjpeg decodes it."""
    path = tmp_path_factory.mktemp("ndpi-z") / "z.ndpi"
    rng = np.random.default_rng(5)
    with tifffile.TiffWriter(path) as w:
        for z in Z_OFFSETS:
            base = rng.integers(0, 256, (96, 160, 3)).astype(np.uint8)
            for scale in (1, 2):
                tags = [(65420, "I", 1, 1, True), (65421, "f", 1, 20.0, True),
                        (65422, "i", 1, 0, True), (65423, "i", 1, 0, True),
                        (65424, "i", 1, z, True)]
                w.write(base[::scale, ::scale].copy(), compression="jpeg", photometric="rgb",
                        rowsperstrip=96 // scale, extratags=tags, metadata=None)
        tags = [(65420, "I", 1, 1, True), (65421, "f", 1, -1.0, True)]
        w.write(np.full((40, 64, 3), 200, np.uint8), compression="jpeg", photometric="rgb",
                rowsperstrip=40, extratags=tags, metadata=None)
    # tifffile takes a file with the NDPI tags for a 64-bit NDPI and cannot read this one back:
    # each strip is decoded by libjpeg through Pillow instead.
    data = path.read_bytes()
    pages = []
    for entries in _directories(data)[:6]:
        value = {tag: struct.unpack("<I", v)[0] for tag, _, _, v in entries if tag in (273, 279)}
        strip = data[value[273]:value[273] + value[279]]
        pages.append(np.asarray(Image.open(io.BytesIO(strip)).convert("RGB")))
    return path, {z: pages[2 * i:2 * i + 2] for i, z in enumerate(Z_OFFSETS)}


def _plane_region(sp, path, level, w, h, z, tmp_path):
    out = tmp_path / "plane.rgba"
    args = ["region", path, "--level", level, "--x", 0, "--y", 0, "--width", w, "--height", h,
            "-o", out]
    sp.ok(args + (["--z", z] if z is not None else []))
    return np.fromfile(out, dtype=np.uint8).reshape(h, w, 4)


def test_every_focal_plane_equals_tifffile(z_stack, sp, tmp_path):
    path, planes = z_stack
    info = sp.info(path)
    assert info["planes"] == {"z": 3, "c": 1, "t": 1} and info["plane"]["z"] == 0
    assert [(lv["width"], lv["height"]) for lv in info["levels"][:2]] == [(160, 96), (80, 48)]
    for index, z in enumerate((0, -1500, 1500)):
        for level, want in enumerate(planes[z]):
            h, w = want.shape[:2]
            got = _plane_region(sp, path, level, w, h, index, tmp_path)
            assert np.array_equal(got[..., :3], want), f"plane {index} (Z {z} nm) level {level}"
            assert (got[..., 3] == 255).all()
    default = _plane_region(sp, path, 0, 160, 96, None, tmp_path)
    assert np.array_equal(default[..., :3], planes[0][0])


def test_default_focal_plane_is_openslides(z_stack, sp):
    """OpenSlide 4 shows the plane at Z offset 0 only: slidepipe's default plane is that one."""
    openslide = pytest.importorskip("openslide", reason="openslide-python is the oracle")
    path, _ = z_stack
    with openslide.OpenSlide(str(path)) as slide:
        want = np.asarray(slide.read_region((0, 0), 0, (160, 96)))
        assert sp.info(path)["levels"][0]["width"] == slide.dimensions[0]
    assert np.array_equal(sp.read_region(path, 0, 0, 0, 160, 96), want)


def test_focal_plane_beyond_the_stack(z_stack, sp, tmp_path):
    path, _ = z_stack
    proc = sp.run(["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 8, "--height", 8,
                   "-o", tmp_path / "x.png", "--z", 3])
    assert proc.returncode == 1, sp.describe(proc)
    assert str(path) in proc.stderr and "the slide has 3" in proc.stderr, proc.stderr
