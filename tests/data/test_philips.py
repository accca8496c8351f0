"""Philips TIFF against OpenSlide 4 on a file written here in Philips' layout (vendor_samples.py):
three JPEG levels padded to whole tiles (sizes and downsamples come from the XML's pixel spacings),
sparse tiles on two levels, a TIFF-directory label that must win over the XML's, and a macro
only as base64 JPEG in the XML. OpenSlide 4.0.1 must call it "philips"; then the facts, every
vendor and TIFF property, the pixels of regions on every level (across tile borders, missing
tiles and the padding) and the associated images must equal OpenSlide's exactly. A file whose XML
and pyramid disagree, or with a spoiled tile, fails with exit 1 and one line naming it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the Philips file")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import vendor_checks  # noqa: E402  (tests/data, beside this file)
import vendor_samples  # noqa: E402


@pytest.fixture(scope="module")
def philips(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, vendor_samples.write_philips,
                                         "slide.tiff", "philips")


@pytest.fixture(scope="module")
def oracle(philips):
    with openslide.OpenSlide(str(philips)) as slide:
        yield slide


def test_facts_equal_openslides(philips, oracle, info):
    got = info(philips)
    assert got["format"] == "philips"
    want_levels = [
        {"width": w, "height": h, "downsample": ds,
         "tile_width": int(oracle.properties[f"openslide.level[{i}].tile-width"]),
         "tile_height": int(oracle.properties[f"openslide.level[{i}].tile-height"])}
        for i, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples))
    ]
    got_levels = [{k: lv[k] for k in want_levels[0]} for lv in got["levels"]]
    assert got_levels == want_levels
    # The padding is not shown: level 1 is stored 768 x 512 but is 640 x 384.
    assert (got_levels[1]["width"], got_levels[1]["height"]) == (640, 384)
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"label", "macro"}


# Numbers slidepipe writes the shortest way that reads back exactly (docs/api.md), where OpenSlide
# prints 17 digits: equal as doubles.
NUMBERS = {"tiff.XResolution", "tiff.YResolution"}


def test_properties_equal_openslides(philips, oracle, info):
    """philips.* (the XML, flattened as OpenSlide flattens it) and tiff.*: byte for byte, but for
    the resolutions, which must be the same double."""
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(philips)["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) > 20, f"OpenSlide reports only {len(want)} properties"
    assert "tiff.ImageDescription" not in got, "the XML is kept out of the properties"
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def test_regions_equal_openslides(philips, oracle, read_region, assert_same_pixels):
    vendor_checks.assert_regions_equal(philips, oracle, vendor_checks.edge_regions(oracle),
                                       read_region, assert_same_pixels)


def test_missing_tiles_are_transparent(philips, read_region):
    """Tile 4 of level 0 (column 4, row 0) was never written: transparent, as in OpenSlide (the
    region test compares it too; this says what it is)."""
    tile = vendor_samples.PHILIPS_TILE
    got = read_region(philips, 0, 4 * tile, 0, tile, tile)
    assert not got.any(), "a missing tile is not (0, 0, 0, 0)"


def test_associated_equal_openslides(philips, oracle, run, assert_same_pixels):
    for name, image in oracle.associated_images.items():
        want = np.asarray(image, dtype=np.uint8)
        with tempfile.TemporaryDirectory(prefix="sp-philips-") as tmp:
            out = Path(tmp) / f"{name}.png"
            proc = run(["associated", philips, name, "-o", out])
            assert proc.returncode == 0, proc.stderr
            got = imagecodecs.png_decode(out.read_bytes())
        assert_same_pixels(got, want, f"associated {name}")


def test_xml_without_a_levels_spacing_fails_cleanly(testdata, tmp_path, run):
    """A level the XML gives no pixel spacing for: the levels cannot be sized (OpenSlide refuses
    the file too)."""
    path = vendor_samples.write_philips(tmp_path / "no-spacing.tiff", testdata, drop_spacing=1)
    with pytest.raises(openslide.OpenSlideError):
        openslide.OpenSlide(str(path))
    vendor_checks.assert_one_line_error(run(["info", path]), path, "pixel spacings")


def test_spoiled_tile_fails_cleanly(philips, tmp_path, run):
    """Level 0's first tile overwritten with zeros (no longer a JPEG stream): the file opens,
    and reading the tile is an error naming the file, not a crash."""
    data = philips.read_bytes()
    with tifffile.TiffFile(philips) as tif:
        page = tif.pages[0]
        offsets, counts = page.dataoffsets, page.databytecounts
    # Spoil level 0's first tile: its bytes are no longer a JPEG stream.
    spoiled = bytearray(data)
    spoiled[offsets[0]:offsets[0] + counts[0]] = b"\x00" * counts[0]
    path = tmp_path / "spoiled-tile.tiff"
    path.write_bytes(bytes(spoiled))
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", "64",
                "--height", "64", "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "")


def test_truncated_file_fails_cleanly(philips, tmp_path, run, info):
    vendor_checks.assert_truncated_fails_cleanly(philips, tmp_path, run, info)