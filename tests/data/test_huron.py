"""Huron (TissueScope) TIFF against OpenSlide 4 on a file written here in Huron's layout
(huron_writer.py): three tiled JPEG levels of a real H&E region with partial edge tiles, a stripped
thumbnail second, a label and a macro at the end, the Make "Huron Digital Pathology" and a
newline-separated "key = value" ImageDescription. OpenSlide 4.0.1 must call it "huron"; then the
facts, every huron.* and tiff.* property, regions on every level (across tile borders and past the
edges) and the three associated images must equal OpenSlide's exactly. Files that are not Huron's
(a lower-case make, a stripped first image, an Aperio description) are not taken as Huron; a file
without its ImageDescription, a spoiled tile or a cut file fail with exit 1 and one line naming
it. JPEG 2000 tiles (Aperio's codes 33003 and 33005), which OpenSlide 4.0.1 refuses in a Huron
file, read as OpenSlide reads the same tiles in an Aperio file."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the Huron file")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import huron_writer  # noqa: E402  (tests/data, beside this file)
import vendor_checks  # noqa: E402


@pytest.fixture(scope="module")
def huron(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, huron_writer.write_huron,
                                         "slide.tif", "huron")


@pytest.fixture(scope="module")
def oracle(huron):
    with openslide.OpenSlide(str(huron)) as slide:
        yield slide


def test_facts_equal_openslides(huron, oracle, info):
    assert openslide.OpenSlide.detect_format(str(huron)) == "huron"
    got = info(huron)
    assert got["format"] == "huron"
    want_levels = [
        {"width": w, "height": h, "downsample": ds,
         "tile_width": int(oracle.properties[f"openslide.level[{i}].tile-width"]),
         "tile_height": int(oracle.properties[f"openslide.level[{i}].tile-height"])}
        for i, ((w, h), ds) in enumerate(zip(oracle.level_dimensions, oracle.level_downsamples))
    ]
    got_levels = [{k: lv[k] for k in want_levels[0]} for lv in got["levels"]]
    assert got_levels == want_levels and len(got_levels) == 3
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"])
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    # OpenSlide 4 sets no objective power for Huron (the description's "Objective" is kept as is).
    assert "openslide.objective-power" not in oracle.properties
    assert got["objective_power"] is None
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"thumbnail", "label", "macro"}


# Numbers slidepipe writes the shortest way that reads back exactly, where OpenSlide may print 17
# digits: equal as doubles.
NUMBERS = {"tiff.XResolution", "tiff.YResolution"}


def properties_of(path: Path, info) -> tuple[dict, dict]:
    """(OpenSlide's, slidepipe's) properties, each without its own generated ones."""
    with openslide.OpenSlide(str(path)) as slide:
        want = {k: v for k, v in slide.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(path)["properties"].items() if not k.startswith("slidepipe.")}
    return want, got


def test_properties_equal_openslides(huron, info):
    """huron.* (the description's lines) and tiff.*: byte for byte, but for the resolutions,
    which must be the same double; the description itself is not a property (as in OpenSlide)."""
    want, got = properties_of(huron, info)
    assert "tiff.ImageDescription" not in got
    assert want["huron.Scanner"] == "TissueScope LE120 (rev B)", "the later of a repeated key"
    assert want["huron.Software Version"] == "4.0.3.1" and "huron.Stain" in want
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def test_odd_description_lines_read_as_openslide(testdata, tmp_path, info):
    """Lines OpenSlide splits its own way: no key, an empty value, a second '=', a blank key
    line, form feeds (stripped) and vertical tabs (kept: not a GLib blank), no newline at the
    end."""
    desc = "a = \x0bv\x0c\x0b \nb\x0b= 1\n=orphan\nc=\nd = x = y\n  \n\x0ce\x0c=\x0cf\x0c\nlast=1"
    path = huron_writer.write_huron(tmp_path / "odd.tif", testdata, description=desc)
    want, got = properties_of(path, info)
    assert want["huron."] == "orphan" and want["huron.a"] == "\x0bv\x0c\x0b"
    vendor_checks.assert_same_properties(want, got, NUMBERS)


def test_regions_equal_openslides(huron, oracle, read_region, assert_same_pixels):
    vendor_checks.assert_regions_equal(huron, oracle, vendor_checks.edge_regions(oracle),
                                       read_region, assert_same_pixels)


def test_associated_equal_openslides(huron, oracle, run, assert_same_pixels):
    for name, image in oracle.associated_images.items():
        want = np.asarray(image, dtype=np.uint8)
        with tempfile.TemporaryDirectory(prefix="sp-huron-") as tmp:
            out = Path(tmp) / f"{name}.png"
            proc = run(["associated", huron, name, "-o", out])
            assert proc.returncode == 0, proc.stderr
            got = imagecodecs.png_decode(out.read_bytes())
        assert_same_pixels(got, want, f"associated {name}")


@pytest.mark.parametrize("variant, want", [
    ({"make": "huron digital pathology"}, "generic-tiff"),  # the prefix is case-sensitive
    ({"description": "Aperio Image Library v12\nx|AppMag = 20|MPP = 0.5"}, "aperio"),
])
def test_not_huron_as_openslide(testdata, tmp_path, info, variant, want):
    """A Make that does not start "Huron", or an Aperio description (Aperio is tried first):
    the same format as OpenSlide 4 names."""
    path = huron_writer.write_huron(tmp_path / "other.tif", testdata, **variant)
    assert openslide.OpenSlide.detect_format(str(path)) == want
    assert info(path)["format"] == want


def test_stripped_first_image_is_not_huron(testdata, tmp_path, info):
    """Huron's first image is tiled: with strips the file is no Huron slide (OpenSlide 4 opens
    it as nothing; slidepipe as a generic TIFF, which reads strips)."""
    path = huron_writer.write_huron(tmp_path / "strips.tif", testdata, first_tiled=False)
    assert openslide.OpenSlide.detect_format(str(path)) is None
    assert info(path)["format"] == "generic-tiff"


def test_missing_description_fails_cleanly(testdata, tmp_path, run):
    """No ImageDescription in the first directory: OpenSlide refuses the file, and so does
    slidepipe, with exit 1 and one line naming it."""
    path = huron_writer.write_huron(tmp_path / "no-description.tif", testdata, description=None)
    with pytest.raises(openslide.OpenSlideError, match="ImageDescription"):
        openslide.OpenSlide(str(path))
    vendor_checks.assert_one_line_error(run(["info", path]), path, "ImageDescription")


def test_description_of_too_many_pairs_fails_cleanly(testdata, tmp_path, run):
    """Over 4096 "key = value" lines (real descriptions hold a few dozen): refused with exit 1
    naming the file, a bound OpenSlide does not have (it opens the file)."""
    desc = "".join(f"key{i} = {i}\n" for i in range(4097))
    path = huron_writer.write_huron(tmp_path / "many-pairs.tif", testdata, description=desc)
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.properties["huron.key4096"] == "4096"
    vendor_checks.assert_one_line_error(run(["info", path]), path, "more than 4096")


def test_spoiled_tile_fails_cleanly(huron, tmp_path, run):
    """Level 0's first tile overwritten with zeros (no longer a JPEG stream): the file opens,
    and reading the tile is an error naming the file, not a crash."""
    data = bytearray(huron.read_bytes())
    with tifffile.TiffFile(huron) as tif:
        offset, count = tif.pages[0].dataoffsets[0], tif.pages[0].databytecounts[0]
    data[offset:offset + count] = b"\x00" * count
    path = tmp_path / "spoiled-tile.tif"
    path.write_bytes(bytes(data))
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", "64",
                "--height", "64", "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "")


def test_truncated_file_fails_cleanly(huron, tmp_path, run, info):
    vendor_checks.assert_truncated_fails_cleanly(huron, tmp_path, run, info)


APERIO_J2K = ("Aperio Image Library v12.0.15\n1000x760 [0,0 1000x760] (256x256) J2K/KDU Q=70"
              "|AppMag = 20|MPP = 0.4")


def relabel_tiles(path: Path, code: int) -> None:
    """Set the Compression tag of every tiled directory to `code` (tifffile writes JPEG 2000 as
    34712; Huron and Aperio tag the same codestreams 33003 or 33005)."""
    data = bytearray(path.read_bytes())
    with tifffile.TiffFile(path) as tif:
        for page in tif.pages:
            if page.is_tiled:
                tag = page.tags["Compression"]
                struct.pack_into(tif.byteorder + "H", data, tag.valueoffset, code)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("code", [33003, 33005])
def test_jpeg2000_tiles_equal_openslides_aperio_reading(testdata, tmp_path, info, read_region,
                                                        assert_same_pixels, code):
    """JPEG 2000 tiles as Huron writes them, Aperio's codes: 33003 holds YCbCr, 33005 RGB.
    OpenSlide 4.0.1 refuses such a Huron file ("Unsupported TIFF compression"), but reads the
    same tiles in an Aperio file: the Huron file's regions on every level (across tiles, past
    the edges) must equal OpenSlide's of its Aperio twin (same pixels, same lossless tiles,
    only the description differs)."""
    ycbcr = code == 33003
    path = huron_writer.write_huron(tmp_path / "j2k.tif", testdata, compression="jpeg2000",
                                    ycbcr=ycbcr)
    twin = huron_writer.write_huron(tmp_path / "j2k-aperio.svs", testdata,
                                    compression="jpeg2000", ycbcr=ycbcr, description=APERIO_J2K)
    relabel_tiles(path, code)
    relabel_tiles(twin, code)
    with pytest.raises(openslide.OpenSlideError, match=str(code)):
        openslide.OpenSlide(str(path))
    got = info(path)
    assert got["format"] == "huron"
    assert [lv["compression"] for lv in got["levels"]] == ["jpeg2000"] * 3
    with openslide.OpenSlide(str(twin)) as oracle:
        assert oracle.properties["openslide.vendor"] == "aperio"
        sizes = [(lv["width"], lv["height"]) for lv in got["levels"]]
        assert sizes == list(oracle.level_dimensions)
        vendor_checks.assert_regions_equal(path, oracle, vendor_checks.edge_regions(oracle),
                                           read_region, assert_same_pixels)
