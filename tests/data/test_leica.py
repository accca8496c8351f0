"""Leica SCN against OpenSlide 4 on a file written here in Leica's layout (vendor_samples.py): a
tiled BigTIFF with the <scn> XML, a whole-slide macro image, two scanned regions (two main images)
at three resolutions placed on the glass slide by their nanometre offsets, a fluorescence image
and a second focal plane that OpenSlide skips. OpenSlide 4.0.1 must call it "leica"; then the
facts, every leica.* and tiff.* property, the pixels of regions on every level (over both scanned
regions, across their edges, and over the empty glass between them) and the macro must equal
OpenSlide's exactly. Main images that differ, or a spoiled tile, fail with exit 1 and one line
naming the file."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the Leica file")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import vendor_checks  # noqa: E402  (tests/data, beside this file)
import vendor_samples  # noqa: E402


@pytest.fixture(scope="module")
def leica(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, vendor_samples.write_leica,
                                         "slide.scn", "leica")


@pytest.fixture(scope="module")
def oracle(leica):
    with openslide.OpenSlide(str(leica)) as slide:
        yield slide


def test_facts_equal_openslides(leica, oracle, info):
    got = info(leica)
    assert got["format"] == "leica"
    want = [{"width": w, "height": h, "downsample": ds}
            for (w, h), ds in zip(oracle.level_dimensions, oracle.level_downsamples)]
    assert [{k: lv[k] for k in want[0]} for lv in got["levels"]] == want
    # OpenSlide gives Leica levels no tile size (a level is several directories); slidepipe
    # paints level tiles the size of the first region's TIFF tiles.
    assert "openslide.level[0].tile-width" not in oracle.properties
    assert (got["levels"][0]["tile_width"], got["levels"][0]["tile_height"]) == (256, 256)
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"macro"}


NUMBERS = {"tiff.XResolution", "tiff.YResolution"}  # shortest form vs 17 digits (docs/api.md)


def test_properties_equal_openslides(leica, oracle, info):
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(leica)["properties"].items() if not k.startswith("slidepipe.")}
    assert "leica.barcode" in want and "tiff.ImageDescription" not in got
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def _regions(oracle):
    """Per level: the whole level, each scanned region's top-left corner straddled (glass and
    tissue), the glass between the regions, and the bottom-right corner past the level's edge."""
    out = []
    for level, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples)):
        ds = int(ds)
        out.append((level, 0, 0, w, h))
        for x, y, rw, rh in vendor_samples.LEICA_REGIONS:
            out.append((level, (x // ds - 20) * ds, (y // ds - 10) * ds, 100, 80))
            out.append((level, ((x + rw) // ds - 30) * ds, ((y + rh) // ds - 25) * ds, 70, 60))
        out.append((level, 760, 540, 90, 60))
        out.append((level, (w - 40) * ds, (h - 30) * ds, 64, 48))
    return out


def test_regions_equal_openslides(leica, oracle, read_region, assert_same_pixels):
    vendor_checks.assert_regions_equal(leica, oracle, _regions(oracle), read_region,
                                       assert_same_pixels)


def test_glass_between_regions_is_transparent(leica, read_region):
    got = read_region(leica, 0, 760, 540, 90, 60)
    assert not got.any(), "no region is scanned there: (0, 0, 0, 0)"


def test_macro_equals_openslides(leica, oracle, run, assert_same_pixels):
    want = np.asarray(oracle.associated_images["macro"], dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="sp-leica-") as tmp:
        out = Path(tmp) / "macro.png"
        proc = run(["associated", leica, "macro", "-o", out])
        assert proc.returncode == 0, proc.stderr
        got = imagecodecs.png_decode(out.read_bytes())
    assert_same_pixels(got, want, "associated macro")


def test_dissimilar_main_images_fail_cleanly(testdata, tmp_path, run):
    """Two main images with different objectives cannot make one pyramid (OpenSlide refuses the
    file too)."""
    path = vendor_samples.write_leica(tmp_path / "dissimilar.scn", testdata, dissimilar=True)
    with pytest.raises(openslide.OpenSlideError):
        openslide.OpenSlide(str(path))
    vendor_checks.assert_one_line_error(run(["info", path]), path, "differ")


def test_spoiled_tile_fails_cleanly(leica, tmp_path, run):
    """Region 0's first level-0 tile overwritten with zeros: reading it is an error naming the
    file, not a crash."""
    first = 2  # the macro's two directories come first
    data = bytearray(leica.read_bytes())
    with tifffile.TiffFile(leica) as tif:
        page = tif.pages[first]
        offset, count = page.dataoffsets[0], page.databytecounts[0]
    data[offset:offset + count] = b"\x00" * count
    path = tmp_path / "spoiled-tile.scn"
    path.write_bytes(bytes(data))
    x, y = vendor_samples.LEICA_REGIONS[0][:2]
    proc = run(["region", path, "--level", "0", "--x", x, "--y", y, "--width", "64",
                "--height", "64", "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "")


def test_truncated_file_fails_cleanly(leica, tmp_path, run, info):
    vendor_checks.assert_truncated_fails_cleanly(leica, tmp_path, run, info)


def test_first_namespace_equals_openslide(testdata, tmp_path, info, read_region, assert_same_pixels):
    """The 2010/03/10 schema (barcode as an attribute, kept as it is): facts, properties and a
    whole level equal OpenSlide's."""
    path = vendor_samples.write_leica(tmp_path / "old.scn", testdata, old_namespace=True)
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.properties["openslide.vendor"] == "leica"
        got = info(path)
        assert [(lv["width"], lv["height"]) for lv in got["levels"]] == list(slide.level_dimensions)
        want = {k: v for k, v in slide.properties.items() if k.startswith("leica.")}
        assert want["leica.barcode"] == "LS-2010-0310"
        assert {k: v for k, v in got["properties"].items() if k.startswith("leica.")} == want
        w, h = slide.level_dimensions[1]
        expected = np.asarray(slide.read_region((0, 0), 1, (w, h)), dtype=np.uint8)
    assert_same_pixels(read_region(path, 1, 0, 0, w, h), expected, "level 1 whole")
