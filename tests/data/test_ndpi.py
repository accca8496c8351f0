"""Hamamatsu NDPI beyond the OpenSlide oracle (tests/data/test_openslide_oracle.py checks the
shared file's facts and pixels): a level's restart intervals are found by reading the strip when
the McuStarts tag (65426) is absent or does not fit the level, with the same pixels; a level
stored as one JPEG without restart markers (written here with tifffile) reads at every scale."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

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
    import io

    from PIL import Image

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
