"""Ventana BIF against OpenSlide 4 on a file written here in the DP 200's layout
(vendor_samples.py): the iScan XMP on the macro, a thumbnail, three JPEG levels whose level-0
tiles are overlapping camera frames of two scanned areas (each frame exposed a little
differently, so that which frame shows where they overlap is visible), the EncodeInfo XMP with
serpentine tile numbers, weighted joints and an unscanned area. OpenSlide 4.0.1 must call it
"ventana"; then the facts, every ventana.* and tiff.* property, whole levels and smaller regions
(across frame overlaps, area edges and the empty glass) and the associated images must equal
OpenSlide's exactly. A joint in a direction OpenSlide does not know fails cleanly (exit 1, one
line naming the file)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the BIF file")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import vendor_checks  # noqa: E402  (tests/data, beside this file)
import vendor_samples  # noqa: E402


@pytest.fixture(scope="module")
def bif(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, vendor_samples.write_bif,
                                         "slide.bif", "ventana")


@pytest.fixture(scope="module")
def oracle(bif):
    with openslide.OpenSlide(str(bif)) as slide:
        yield slide


def test_facts_equal_openslides(bif, oracle, info):
    got = info(bif)
    assert got["format"] == "ventana"
    want = [{"width": w, "height": h, "downsample": ds}
            for (w, h), ds in zip(oracle.level_dimensions, oracle.level_downsamples)]
    assert [{k: lv[k] for k in want[0]} for lv in got["levels"]] == want
    # OpenSlide gives BIF levels no tile size (frames overlap); slidepipe's level tiles are the
    # frames' size.
    assert "openslide.level[0].tile-width" not in oracle.properties
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"macro", "thumbnail"}


def test_properties_equal_openslides(bif, oracle, info):
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(bif)["properties"].items() if not k.startswith("slidepipe.")}
    assert "ventana.ScanRes" in want and "ventana.SlideAnnotation" not in want
    vendor_checks.assert_same_properties(want, got)


def test_whole_levels_equal_openslides(bif, oracle, read_region, assert_same_pixels):
    for level, (w, h) in enumerate(oracle.level_dimensions):
        want = np.asarray(oracle.read_region((0, 0), level, (w, h)), dtype=np.uint8)
        got = read_region(bif, level, 0, 0, w, h)
        assert_same_pixels(got, want, f"level {level} whole ({w}x{h})")
        assert want[..., 3].any() and not want[..., 3].all(), "frames and glass both present"


def _regions(oracle):
    """Per level: around each frame overlap of the first area's first row and column, each
    area's corners, and the bottom-right edge of the level."""
    advance = vendor_samples.BIF_TILE - vendor_samples.BIF_OVERLAP
    out = []
    for level, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples)):
        ds = int(ds)
        for sc, sr, across, down, x, y in vendor_samples.BIF_AREAS:
            for k in range(1, across):
                out.append((level, (x + k * advance) // ds * ds - 12 * ds, y + 8 * ds, 40, 30))
            for k in range(1, down):
                out.append((level, x + 8 * ds, (y + k * advance) // ds * ds - 10 * ds, 30, 40))
            out.append((level, x - 8 * ds, y, 50, 20))
        out.append((level, (w - 30) * ds, (h - 20) * ds, 50, 40))
    return out


def test_regions_equal_openslides(bif, oracle, read_region, assert_same_pixels):
    vendor_checks.assert_regions_equal(bif, oracle, _regions(oracle), read_region,
                                       assert_same_pixels)


def test_associated_equal_openslides(bif, oracle, run, assert_same_pixels):
    for name, image in oracle.associated_images.items():
        want = np.asarray(image, dtype=np.uint8)
        with tempfile.TemporaryDirectory(prefix="sp-bif-") as tmp:
            out = Path(tmp) / f"{name}.png"
            proc = run(["associated", bif, name, "-o", out])
            assert proc.returncode == 0, proc.stderr
            got = imagecodecs.png_decode(out.read_bytes())
        assert_same_pixels(got, want, f"associated {name}")


def test_unknown_joint_direction_fails_cleanly(testdata, tmp_path, run):
    path = vendor_samples.write_bif(tmp_path / "left.bif", testdata, bad_direction=True)
    with pytest.raises(openslide.OpenSlideError):
        openslide.OpenSlide(str(path))
    proc = run(["info", path])
    vendor_checks.assert_one_line_error(proc, path, "Direction")


def test_zeroed_frames_fail_cleanly(bif, tmp_path, run):
    """Level 0's frames overwritten with zeros (the directories intact): reading them is an
    error naming the file, not a crash."""
    data = bytearray(bif.read_bytes())
    with tifffile.TiffFile(bif) as tif:
        page = next(p for p in tif.pages if str(p.description).startswith("level=0"))
        offsets, counts = page.dataoffsets, page.databytecounts
    start = offsets[0]
    end = max(o + c for o, c in zip(offsets, counts))
    data[start:end] = b"\x00" * (end - start)
    path = tmp_path / "zeroed-frames.bif"
    path.write_bytes(bytes(data))
    x, y = vendor_samples.BIF_AREAS[0][4:6]
    proc = run(["region", path, "--level", "0", "--x", x, "--y", y, "--width", "64",
                "--height", "64", "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path)


def test_truncated_file_fails_cleanly(bif, tmp_path, run, info):
    vendor_checks.assert_truncated_fails_cleanly(bif, tmp_path, run, info)


@pytest.mark.parametrize("variant", ["metadata_root", "plain_tiff"])
def test_variants_equal_openslide(variant, testdata, tmp_path, info, read_region,
                                  assert_same_pixels):
    """iScan inside a <Metadata> root; a Ventana TIFF without EncodeInfo (levels as stored):
    facts, properties and every whole level equal OpenSlide's."""
    path = vendor_samples.write_bif(tmp_path / f"{variant}.bif", testdata, **{variant: True})
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.properties["openslide.vendor"] == "ventana"
        got = info(path)
        assert [(lv["width"], lv["height"], lv["downsample"]) for lv in got["levels"]] == [
            (w, h, ds) for (w, h), ds in zip(slide.level_dimensions, slide.level_downsamples)]
        want = {k: v for k, v in slide.properties.items() if not k.startswith("openslide.")}
        assert {k: v for k, v in got["properties"].items() if not k.startswith("slidepipe.")} == want
        for level, (w, h) in enumerate(slide.level_dimensions):
            expected = np.asarray(slide.read_region((0, 0), level, (w, h)), dtype=np.uint8)
            assert_same_pixels(read_region(path, level, 0, 0, w, h), expected,
                               f"{variant} level {level} whole")
