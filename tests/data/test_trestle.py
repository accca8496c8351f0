"""Trestle (MedScan) against OpenSlide 4 on files written here in Trestle's layout
(trestle_writer.py): three JPEG levels of a real H&E region whose 256-pixel tiles overlap their
neighbours by 64, 32 and 16 pixels ("OverlapsXY= 64 64 32 32 16 16"), each tile exposed a little
differently so that which tile shows where tiles overlap is visible, level 0's last tile column
wholly stored (the level reaches past the last tile's advance), MPP in XResolution, and the macro
in the sibling .Full JPEG. OpenSlide 4.0.1 must call the file "trestle"; then the facts, every
trestle.* and tiff.* property, the background colour, regions on every level (across tile
borders, overlaps and the edges) and the macro must equal OpenSlide's exactly. Descriptions with
OpenSlide's quirks (duplicate keys, empty items, spaces) give the same properties and level sizes;
a malformed overlap list or an overlap not smaller than the tile fails cleanly (exit 1, one line
naming the file), and a tiled TIFF from MedScan without a description is not taken for Trestle."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the Trestle file")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import trestle_writer  # noqa: E402  (tests/data, beside this file)
import vendor_checks  # noqa: E402


@pytest.fixture(scope="module")
def trestle(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, trestle_writer.write_sample,
                                         "slide.tif", "trestle")


@pytest.fixture(scope="module")
def oracle(trestle):
    with openslide.OpenSlide(str(trestle)) as slide:
        yield slide


def flat_slide(path: Path, description: str, overlaps, software: str = "MedScan 1.0.0.0") -> Path:
    """A small two-level Trestle file of smooth colours in 32-pixel tiles (for the metadata
    cases: fast to write and to read)."""
    yy, xx = np.mgrid[0:100, 0:130]
    level0 = np.stack([xx * 2, yy * 2, xx + yy], axis=-1).astype(np.uint8)
    return trestle_writer.write_trestle(path, [level0, level0[::2, ::2].copy()], overlaps,
                                        tile=32, description=description, macro=None,
                                        software=software)


def test_detected_by_openslide(trestle):
    assert openslide.OpenSlide.detect_format(str(trestle)) == "trestle"


def test_facts_equal_openslides(trestle, oracle, info):
    got = info(trestle)
    assert got["format"] == "trestle"
    want = [{"width": w, "height": h, "downsample": ds}
            for (w, h), ds in zip(oracle.level_dimensions, oracle.level_downsamples)]
    assert [{k: lv[k] for k in want[0]} for lv in got["levels"]] == want
    assert [(lv["width"], lv["height"]) for lv in want] == [(1600, 1152), (800, 576), (400, 288)]
    # OpenSlide reports no tile size where tiles overlap; slidepipe's level tiles are one tile
    # advance (the tile less its overlap).
    assert "openslide.level[0].tile-width" not in oracle.properties
    assert [(lv["tile_width"], lv["tile_height"]) for lv in got["levels"]] == [
        (192, 192), (224, 224), (240, 240)]
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    assert got["properties"]["slidepipe.background-color"] == \
        oracle.properties["openslide.background-color"] == "E7E3DF"
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"macro"}


# Numbers slidepipe writes the shortest way that reads back exactly, where OpenSlide prints 17
# digits ("0.46489999999999998"): equal as doubles.
NUMBERS = {"tiff.XResolution", "tiff.YResolution"}


def test_properties_equal_openslides(trestle, oracle, info):
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(trestle)["properties"].items() if not k.startswith("slidepipe.")}
    assert {"trestle.OverlapsXY", "trestle.White Balance", "tiff.Software"} <= set(want)
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def overlap_regions(oracle) -> list:
    """On every level: a region from inside the first overlap (only the later tile shows there,
    whatever the region), one around the corner where four tiles overlap, and the last tile
    column (on level 0 wholly stored: the level goes past its advance)."""
    out = []
    for level, (w, h) in enumerate(oracle.level_dimensions):
        ds = int(oracle.level_downsamples[level])
        advance = trestle_writer.TILE - trestle_writer.OVERLAPS[level][0]
        out.append((level, (advance + 5) * ds, 3 * ds, 90, 70))
        out.append((level, (advance - 20) * ds, (advance - 20) * ds, 100, 100))
        out.append((level, (w - advance - 30) * ds, (h - 120) * ds, advance + 60, 140))
    return out


def test_regions_equal_openslides(trestle, oracle, read_region, assert_same_pixels):
    regions = vendor_checks.edge_regions(oracle) + overlap_regions(oracle)
    vendor_checks.assert_regions_equal(trestle, oracle, regions, read_region, assert_same_pixels)


def test_later_tile_shows_where_tiles_overlap(trestle, oracle):
    """Where tiles (0, 0) and (1, 0) of level 0 overlap, OpenSlide shows tile (1, 0): its
    pixels match that tile as stored and differ clearly from tile (0, 0), which is exposed
    darker (so the region comparisons above would catch the other choice)."""
    with tifffile.TiffFile(trestle) as tif:
        stored = tif.pages[0].asarray()
    advance = trestle_writer.TILE - trestle_writer.OVERLAPS[0][0]
    seen = np.asarray(oracle.read_region((advance, 0), 0, (64, advance)))[..., :3].astype(int)
    left = stored[0:advance, advance:256].astype(int)
    right = stored[0:advance, 256:256 + 64].astype(int)
    assert np.abs(seen - right).mean() < 1.0
    assert np.abs(seen - left).mean() > 5.0


def test_macro_equals_openslides(trestle, oracle, run, assert_same_pixels):
    want = np.asarray(oracle.associated_images["macro"], dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="sp-trestle-") as tmp:
        out = Path(tmp) / "macro.png"
        proc = run(["associated", trestle, "macro", "-o", out])
        assert proc.returncode == 0, proc.stderr
        got = imagecodecs.png_decode(out.read_bytes())
    assert_same_pixels(got, want, "associated macro")


def test_missing_or_broken_macro_is_left_out(trestle, tmp_path, info):
    """No .Full file, or one that is not a JPEG: OpenSlide opens the slide without a macro, and
    so does slidepipe."""
    slide = tmp_path / "nomacro.tif"
    slide.write_bytes(trestle.read_bytes())
    for full in (None, b"not a jpeg"):
        if full is not None:
            slide.with_suffix(".Full").write_bytes(full)
        with openslide.OpenSlide(str(slide)) as oracle:
            assert dict(oracle.associated_images) == {}
        assert info(slide)["associated"] == {}


# Descriptions as OpenSlide reads them: keys and values trimmed, a later duplicate wins, '=' in
# a value kept, empty items skipped, "+020" an integer objective power, "0x"-prefixed colours,
# two spaces in OverlapsXY an overlap of 0 (shifting the pairs), an odd last overlap ignored.
QUIRKS = [
    "Background Color= 0xe7e3df ; White Balance = FFF8F0;;Objective Power= 40 ;"
    "Objective Power=+020;Note=a=b;OverlapsXY= 8 8 4 4 ",
    "Background Color=zz;Objective Power=20.5;JPEG Quality=;OverlapsXY= 8 8  4 4",
    "Background Color=-1;Objective Power=20;OverlapsXY= 8 0 4",
    "White Balance=FFFFFF;Objective Power=10",
]


@pytest.mark.parametrize("case", range(len(QUIRKS)))
def test_description_quirks_read_as_openslide_reads_them(case, tmp_path, info, read_region,
                                                         assert_same_pixels):
    path = flat_slide(tmp_path / f"quirk{case}.tif", QUIRKS[case], [(8, 8), (4, 4)])
    with openslide.OpenSlide(str(path)) as oracle:
        assert oracle.properties["openslide.vendor"] == "trestle"
        got = info(path)
        assert [(lv["width"], lv["height"]) for lv in got["levels"]] == list(oracle.level_dimensions)
        want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
        props = got["properties"]
        vendor_checks.assert_same_properties(
            want, {k: v for k, v in props.items() if not k.startswith("slidepipe.")}, NUMBERS)
        assert props.get("slidepipe.objective-power") == \
            oracle.properties.get("openslide.objective-power")
        assert props.get("slidepipe.background-color") == \
            oracle.properties.get("openslide.background-color")
        for level, (w, h) in enumerate(oracle.level_dimensions):
            want_px = np.asarray(oracle.read_region((0, 0), level, (w + 8, h + 8)), dtype=np.uint8)
            assert_same_pixels(read_region(path, level, 0, 0, w + 8, h + 8), want_px,
                               f"{QUIRKS[case]!r} level {level}")


@pytest.mark.parametrize("overlaps, words", [
    ("OverlapsXY= 8 eight 4 4", "OverlapsXY"),      # OpenSlide reads "eight" as 0
    ("OverlapsXY= -8 8 4 4", "OverlapsXY"),         # OpenSlide leaves gaps between tiles
    ("OverlapsXY= 32 8 4 4", "no tile advance"),    # OpenSlide opens it, then fails to read
    ("OverlapsXY= 8 8 4 40", "no tile advance"),    # overlap past the tile
])
def test_malformed_overlaps_fail_cleanly(overlaps, words, tmp_path, run):
    path = flat_slide(tmp_path / "bad.tif", f"Objective Power=20;{overlaps}", [(8, 8), (4, 4)])
    vendor_checks.assert_one_line_error(run(["info", path]), path, words)


def test_medscan_tiff_without_description_is_not_trestle(tmp_path, info):
    """Detection needs the description (OpenSlide's rule): a MedScan TIFF without one is left to
    the generic TIFF reader, by both."""
    path = tmp_path / "plain.tif"
    yy, xx = np.mgrid[0:64, 0:64]
    tifffile.imwrite(path, np.stack([xx, yy, xx], -1).astype(np.uint8), tile=(32, 32),
                     photometric="rgb", software="MedScan 1.0", metadata=None)
    assert openslide.OpenSlide.detect_format(str(path)) == "generic-tiff"
    assert info(path)["format"] == "generic-tiff"


def test_dct_scaled_thumbnail_matches_the_level(trestle, oracle, run):
    """A thumbnail at downsample 8 reads level 2 (downsample 4) at 1/2 through libjpeg's DCT
    scaling, each cell cut from its half-size tile: it must agree with OpenSlide's level 2 halved
    by averaging (DCT scaling is not an average, so only closely; a cell cut in the wrong place
    is off by tens of levels)."""
    with tempfile.TemporaryDirectory(prefix="sp-trestle-") as tmp:
        out = Path(tmp) / "thumb.png"
        proc = run(["thumbnail", trestle, "--max-size", "200", "-o", out])
        assert proc.returncode == 0, proc.stderr
        got = imagecodecs.png_decode(out.read_bytes())
    level2 = np.asarray(oracle.read_region((0, 0), 2, (400, 288)))[..., :3].astype(float)
    halved = level2.reshape(144, 2, 200, 2, 3).mean(axis=(1, 3))
    assert got.shape[:2] == (144, 200)
    assert got[..., 3].min() == 255
    assert np.abs(got[..., :3].astype(float) - halved).mean() < 1.5


def test_missing_tile_is_transparent(trestle, tmp_path, read_region):
    """A tile whose byte count is 0: slidepipe shows its cell transparent (the later tile hides
    the earlier one's overlap there too); OpenSlide 4.0.1 fails the read instead."""
    import vendor_samples

    path = tmp_path / "missing.tif"
    path.write_bytes(trestle.read_bytes())
    vendor_samples.zero_tile_byte_counts(path, 0, [1])  # level 0, tile (1, 0)
    with openslide.OpenSlide(str(path)) as oracle:
        with pytest.raises(openslide.OpenSlideError):
            oracle.read_region((0, 0), 0, (400, 200))
    got = read_region(path, 0, 0, 0, 400, 200)
    advance = trestle_writer.TILE - trestle_writer.OVERLAPS[0][0]
    assert not got[:advance, advance:2 * advance].any()
    assert got[:advance, :advance, 3].min() == 255 and got[:advance, 2 * advance:, 3].min() == 255
