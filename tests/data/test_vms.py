"""Hamamatsu VMS and VMU against OpenSlide 4, on slides written here in Hamamatsu's layout
(tests/data/vms_writer.py: there is no small public sample), from real H&E pixels.

VMS: a 2 x 2 grid of JPEG files with restart markers (4:2:2, each interval a 128 x 8 tile; each
JPEG 388 rows tall, so its last half MCU row is not shown, the next row of JPEGs starts at 384
and the level ends in a transparent band, as in OpenSlide), an optimisation file, a map JPEG whose width equals the
slide's at 1/8 (so the map replaces that DCT-scaled level, as in OpenSlide's table) and a macro.
VMU: an NGR image of 12-bit samples in three 128-pixel columns with a short last row of tiles, an
NGR map and a macro. OpenSlide 4.0.1 must detect both as "hamamatsu"; then the facts, every
property, regions on every level (whole, across tile and JPEG borders, at the edges) and the
macro must equal OpenSlide's exactly. Spoiled copies (a missing JPEG, a name leaving the
folder, counts that do not match the files, a JPEG without restart markers, a short NGR file)
fail with exit 1 and one line naming the slide and what is wrong.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs decodes the macro PNG")
pytest.importorskip("PIL", reason="Pillow writes the JPEGs with restart markers")

import vendor_checks  # noqa: E402  (tests/data, beside this file)
import vendor_samples  # noqa: E402
import vms_writer  # noqa: E402


@pytest.fixture(scope="module")
def slides(testdata, tmp_path_factory):
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    root = tmp_path_factory.mktemp("hamamatsu")
    out = {"vms": vms_writer.write_vms(root / "vms", testdata),
           "vmu": vms_writer.write_vmu(root / "vmu", testdata)}
    for path in out.values():
        got = openslide.OpenSlide.detect_format(str(path))
        assert got == "hamamatsu", f"OpenSlide 4 detects {path.name} as {got!r}, not hamamatsu"
    return out


@pytest.fixture(params=["vms", "vmu"])
def slide(request, slides):
    return slides[request.param]


@pytest.fixture
def oracle(slide):
    with openslide.OpenSlide(str(slide)) as s:
        yield s


def test_facts_equal_openslides(slide, oracle, info):
    got = info(slide)
    assert got["format"] == "hamamatsu"
    want = [(w, h, int(oracle.properties[f"openslide.level[{i}].tile-width"]),
             int(oracle.properties[f"openslide.level[{i}].tile-height"]))
            for i, (w, h) in enumerate(oracle.level_dimensions)]
    assert [(lv["width"], lv["height"], lv["tile_width"], lv["tile_height"])
            for lv in got["levels"]] == want
    # The CLI's JSON writes 15 significant digits where they read back within cJSON's tolerance.
    for lv, ds in zip(got["levels"], oracle.level_downsamples):
        assert math.isclose(lv["downsample"], ds, rel_tol=1e-14), (lv["downsample"], ds)
    # The MPP exactly, from the property (the JSON number has cJSON's 15 digits).
    assert float(got["properties"]["slidepipe.mpp-x"]) == float(oracle.properties["openslide.mpp-x"])
    assert float(got["properties"]["slidepipe.mpp-y"]) == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"])
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"macro"}
    if slide.suffix == ".vms":
        # 1/1, 1/2, 1/4 of the slide, then the map (in place of the slide at 1/8) and its 1/2 ..
        assert len(got["levels"]) == 7 and got["levels"][3]["tile_width"] == 16


def test_properties_equal_openslides(slide, oracle, info):
    """Every hamamatsu.KEY of the key file, byte for byte."""
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in info(slide)["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) >= 10, f"OpenSlide reports only {len(want)} properties"
    vendor_checks.assert_same_properties(want, got)


def test_regions_equal_openslides(slide, oracle, read_region, assert_same_pixels):
    # On a level whose downsample is not a whole number (the VMS map: 8.04...) only regions at
    # the origin: elsewhere slidepipe starts at the level pixel floor(x / ds) where OpenSlide
    # shifts by the fraction (docs/api.md), so the two differ by design.
    whole = {i for i, ds in enumerate(oracle.level_downsamples) if ds == int(ds)}
    regions = [r for r in vendor_checks.edge_regions(oracle) if r[0] in whole or r[1:3] == (0, 0)]
    if slide.suffix == ".vms":
        # Across the JPEGs' borders (x 512, y 384), on the slide and at 1/2 and 1/4, and the
        # band at the bottom that no tile reaches.
        regions += [(0, 480, 360, 80, 60), (1, 500, 370, 40, 60), (2, 492, 364, 16, 12),
                    (0, 0, 760, 1024, 16)]
    vendor_checks.assert_regions_equal(slide, oracle, regions, read_region, assert_same_pixels)
    if slide.suffix == ".vms":
        band = read_region(slide, 0, 0, 768, 1024, 8)
        assert not band.any(), "the rows below the last whole tile are not transparent"


def test_macro_equals_openslides(slide, oracle, run, assert_same_pixels):
    want = np.asarray(oracle.associated_images["macro"], dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="sp-vms-") as tmp:
        out = Path(tmp) / "macro.png"
        proc = run(["associated", slide, "macro", "-o", out])
        assert proc.returncode == 0, proc.stderr
        got = imagecodecs.png_decode(out.read_bytes())
    assert_same_pixels(got, want, "macro")


# ---- malformed slides: exit 1, one line naming the slide ------------------------------------


def _copy(slides, kind: str, tmp_path: Path) -> Path:
    src = slides[kind]
    dst = tmp_path / kind
    shutil.copytree(src.parent, dst)
    return dst / src.name


def _set_key(path: Path, key: str, value: str | None) -> None:
    lines = path.read_text().splitlines()
    lines = [ln for ln in lines if not ln.startswith(key + "=")]
    if value is not None:
        lines.append(f"{key}={value}")
    path.write_text("\r\n".join(lines) + "\r\n")


@pytest.mark.parametrize("spoil, fragment", [
    (lambda p: (p.parent / "slide_x1_y1.jpg").unlink(), "slide_x1_y1.jpg"),
    (lambda p: _set_key(p, "ImageFile(1,1)", "../slide_x1_y1.jpg"), "not in the slide's folder"),
    (lambda p: _set_key(p, "MapFile", "/etc/passwd"), "not in the slide's folder"),
    (lambda p: _set_key(p, "NoJpegColumns", "3"), "names no image for (2, 0)"),
    (lambda p: _set_key(p, "ImageFile(2,0)", "slide.jpg"), "outside the 2x2 grid"),
    (lambda p: _set_key(p, "NoJpegRows", "0"), "NoJpegColumns x NoJpegRows"),
    (lambda p: _set_key(p, "MapFile", None), "names no MapFile"),
    (lambda p: (p.parent / "slide_map.jpg").write_bytes(vendor_samples.jpeg(
        np.full((64, 64, 3), 200, np.uint8))), "has no restart markers"),
    (lambda p: (p.parent / "slide_x1_y0.jpg").write_bytes(
        (p.parent / "slide_x1_y0.jpg").read_bytes()[:5000]), "restart intervals found"),
], ids=["missing-jpeg", "dotdot", "absolute", "more-columns", "outside-grid", "no-rows",
        "no-map", "no-restart-markers", "truncated-jpeg"])
def test_malformed_vms_fails_cleanly(slides, tmp_path, run, spoil, fragment):
    path = _copy(slides, "vms", tmp_path)
    spoil(path)
    vendor_checks.assert_one_line_error(run(["info", path]), path, fragment)


@pytest.mark.parametrize("spoil, fragment", [
    (lambda p: (p.parent / "slide.ngr").write_bytes((p.parent / "slide.ngr").read_bytes()[:-10]),
     "short of its 384x200 pixels"),
    (lambda p: (p.parent / "slide_map.ngr").write_bytes(b"XX" + bytes(62)), "not an NGR file"),
    (lambda p: _set_key(p, "BitsPerPixel", "24"), "BitsPerPixel must be 36"),
    (lambda p: _set_key(p, "ImageFile", "sub/../../slide.ngr"), "not in the slide's folder"),
], ids=["short-ngr", "bad-magic", "bits", "dotdot"])
def test_malformed_vmu_fails_cleanly(slides, tmp_path, run, spoil, fragment):
    path = _copy(slides, "vmu", tmp_path)
    spoil(path)
    vendor_checks.assert_one_line_error(run(["info", path]), path, fragment)


def test_layer_keys_read_as_openslide_reads_them(slides, tmp_path, info, read_region,
                                                 assert_same_pixels):
    """ImageFile(z,x,y) keys for layer 0 place the images, a layer-1 key (naming a file that is
    not there) is skipped: the same slide as with ImageFile(x,y), for OpenSlide and slidepipe."""
    path = _copy(slides, "vms", tmp_path)
    text = path.read_text().replace("ImageFile=", "ImageFile(0,0,0)=")
    for c, r in ((1, 0), (0, 1), (1, 1)):
        text = text.replace(f"ImageFile({c},{r})=", f"ImageFile(0,{c},{r})=")
    path.write_text(text + "ImageFile(1,0,0)=layer1.jpg\r\n")
    with openslide.OpenSlide(str(path)) as os_:
        got = info(path)
        assert [(lv["width"], lv["height"]) for lv in got["levels"]] == list(os_.level_dimensions)
        vendor_checks.assert_regions_equal(path, os_, [(0, 448, 352, 128, 64), (2, 0, 0, 260, 200)],
                                           read_region, assert_same_pixels)
        assert got["properties"]["hamamatsu.ImageFile(1,0,0)"] == "layer1.jpg"
