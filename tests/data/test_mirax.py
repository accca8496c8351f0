"""3DHISTECH MIRAX against OpenSlide 4, on slides this module writes (tests/data/mirax_writer.py:
there is no small public sample): real H&E JPEG images, overlapping camera photos off their
nominal grid, several zoom levels, missing photos, label/macro/thumbnail. Five layouts: the
position layer plain or zlib-compressed (StitchingIntensityLayer), photos cut into 2x2 or
1x1 stored images, camera positions on odd pixels (so that pieces fall between pixels at the
zoom levels, where OpenSlide resamples them), and a plain grid without a position layer or
overlap (the only one for which OpenSlide reports a tile size). OpenSlide must detect each as "mirax"; slidepipe's facts,
properties, every level's pixels (whole and at awkward origins) and associated images must equal
its output exactly. Spoiled copies must fail with exit 1 and one line naming the slide. The
"positions" layout is also written with PNG and with 24-bit BMP images (IMAGE_FORMAT), lossless,
so every level must equal OpenSlide's byte for byte; spoiled bitmap headers fail the read.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs writes the JPEG images")
mirax_writer = pytest.importorskip("mirax_writer", reason="tests/data/mirax_writer.py writes the slides")

LAYOUTS = {
    "positions": mirax_writer.Layout(),
    "compressed-positions": mirax_writer.Layout(compressed_positions=True),
    "one-image-per-photo": mirax_writer.Layout(divisions=1, image_w=256, image_h=192),
    "plain-grid": mirax_writer.Layout(positions=False, overlap_x=0, overlap_y=0, divisions=1,
                                      image_w=256, image_h=192),
    # camera positions on odd pixels, as a scanner leaves them: at every zoom level above 0 most
    # pieces fall between pixels and OpenSlide resamples them (partly transparent edges)
    "off-grid": mirax_writer.Layout(jitter_step=1),
}


@pytest.fixture(scope="module")
def slides(testdata, tmp_path_factory):
    if not (testdata / "aperio" / "CMU-1-Small-Region.svs").is_file():
        pytest.skip("aperio/CMU-1-Small-Region.svs (the H&E pixels) is not in the shared data")
    root = tmp_path_factory.mktemp("mirax")
    return {name: mirax_writer.write_mirax(root / name, testdata, lay) for name, lay in LAYOUTS.items()}


@pytest.fixture(params=sorted(LAYOUTS))
def slide(request, slides):
    return slides[request.param]


def _openslide(path: Path):
    s = openslide.OpenSlide(str(path))
    assert s.properties.get("openslide.vendor") == "mirax", f"OpenSlide does not read {path} as MIRAX"
    return s


def test_facts(slide, sp):
    """format, levels, downsamples, tile sizes, MPP, objective power, associated image sizes."""
    with _openslide(slide) as os_:
        got = sp.info(slide)
        assert got["format"] == "mirax"
        assert [(lv["width"], lv["height"]) for lv in got["levels"]] == list(os_.level_dimensions)
        assert [lv["downsample"] for lv in got["levels"]] == list(os_.level_downsamples)
        for i, lv in enumerate(got["levels"]):
            tw = os_.properties.get(f"openslide.level[{i}].tile-width")
            th = os_.properties.get(f"openslide.level[{i}].tile-height")
            # OpenSlide gives no tile size where pieces overlap or sit off the grid; slidepipe
            # then reads 256x256 tiles (docs/formats.md).
            want = (int(tw), int(th)) if tw else (256, 256)
            assert (lv["tile_width"], lv["tile_height"]) == want, f"level {i}"
        assert got["mpp_x"] == float(os_.properties["openslide.mpp-x"])
        assert got["mpp_y"] == float(os_.properties["openslide.mpp-y"])
        assert got["objective_power"] == float(os_.properties["openslide.objective-power"])
        want_assoc = {n: img.size for n, img in os_.associated_images.items()}
        assert set(want_assoc) == {"label", "macro", "thumbnail"}
        assert {n: (v["width"], v["height"]) for n, v in got["associated"].items()} == want_assoc


def test_off_grid_pieces_are_resampled(slides):
    """The off-grid layout really puts pieces between pixels: OpenSlide's level 1 has partly
    transparent pixels (resampled piece edges over nothing), which the exact comparison in
    test_every_level_whole then holds slidepipe to."""
    with _openslide(slides["off-grid"]) as os_:
        w, h = os_.level_dimensions[1]
        alpha = np.asarray(os_.read_region((0, 0), 1, (w, h)))[..., 3]
    assert ((alpha > 0) & (alpha < 255)).sum() > 100


def test_layout_is_not_a_plain_grid(slides):
    """The overlapping layouts really have pieces off the grid: OpenSlide reports no tile size
    for them (it does only when every piece sits on its cell), and does for the plain grid."""
    for name, path in slides.items():
        with _openslide(path) as os_:
            has_size = "openslide.level[0].tile-width" in os_.properties
        assert has_size == (name == "plain-grid"), name


def test_properties_equal_openslides(slide, sp):
    """Every mirax.SECTION.KEY property, by name and value."""
    with _openslide(slide) as os_:
        want = {k: v for k, v in os_.properties.items() if not k.startswith("openslide.")}
    got = {k: v for k, v in sp.info(slide)["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) > 60, f"OpenSlide reports only {len(want)} properties"
    assert got == want


def test_every_level_whole(slide, sp):
    """Each whole level, pixel for pixel (overlaps, gaps between photos and missing photos
    included: transparent where no piece lies)."""
    with _openslide(slide) as os_:
        for level, (w, h) in enumerate(os_.level_dimensions):
            want = np.asarray(os_.read_region((0, 0), level, (w, h)), dtype=np.uint8)
            got = sp.read_region(slide, level, 0, 0, w, h)
            diff = np.argwhere((want != got).any(axis=2))
            assert diff.size == 0, f"level {level}: {len(diff)} pixels differ, first at {diff[0]}"
            # Missing photos leave gaps; a plain grid's higher levels draw whole stored images,
            # the scanner's fill colour included, so only its level 0 has them.
            if level == 0 or slide.parent.name != "plain-grid":
                assert (want[..., 3] == 0).any(), f"level {level} has no gap (the layout lost them)"


def test_regions_at_awkward_origins(slide, sp):
    """Regions whose origins fall inside overlaps and across the grid of pieces, on every
    level, equal OpenSlide's (the painter must not depend on where a region starts)."""
    rng = np.random.default_rng(27)
    with _openslide(slide) as os_:
        for level, (w, h) in enumerate(os_.level_dimensions):
            ds = int(os_.level_downsamples[level])
            for _ in range(4):
                rw, rh = int(rng.integers(17, max(18, w // 2))), int(rng.integers(13, max(14, h // 2)))
                lx, ly = int(rng.integers(0, w - rw)), int(rng.integers(0, h - rh))
                want = np.asarray(os_.read_region((lx * ds, ly * ds), level, (rw, rh)), dtype=np.uint8)
                got = sp.read_region(slide, level, lx * ds, ly * ds, rw, rh)
                assert np.array_equal(want, got), f"level {level} region ({lx}, {ly}) {rw}x{rh}"


def test_associated_images(slide, run):
    with _openslide(slide) as os_:
        for name, img in os_.associated_images.items():
            want = np.asarray(img, dtype=np.uint8)
            with tempfile.TemporaryDirectory(prefix="sp-mirax-") as tmp:
                out = Path(tmp) / "a.png"
                proc = run(["associated", slide, name, "-o", out])
                assert proc.returncode == 0, proc.stderr
                got = imagecodecs.png_decode(out.read_bytes())
            assert np.array_equal(got, want), name


# ---- malformed slides: exit 1, one line naming the slide ------------------------------------


def _copy(slides, tmp_path: Path) -> tuple[Path, Path]:
    src = slides["positions"]
    dst = tmp_path / "spoiled.mrxs"
    shutil.copy(src, dst)
    shutil.copytree(src.with_suffix(""), tmp_path / "spoiled")
    return dst, tmp_path / "spoiled"


def _fails(run, args, path: Path, fragment: str):
    proc = run(args)
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), proc.stderr
    assert str(path) in lines[0] and fragment in lines[0], lines[0]


def test_truncated_index(slides, tmp_path, run):
    mrxs, folder = _copy(slides, tmp_path)
    index = folder / "Index.dat"
    index.write_bytes(index.read_bytes()[:300])
    _fails(run, ["info", mrxs], mrxs, "Index.dat")


def test_index_of_another_slide(slides, tmp_path, run):
    mrxs, folder = _copy(slides, tmp_path)
    index = folder / "Index.dat"
    data = bytearray(index.read_bytes())
    data[5] ^= 0x01  # the slide identifier after "01.02"
    index.write_bytes(bytes(data))
    _fails(run, ["info", mrxs], mrxs, "slide identifier")


def test_missing_data_file(slides, tmp_path, run):
    mrxs, folder = _copy(slides, tmp_path)
    (folder / "Data0001.dat").unlink()
    _fails(run, ["info", mrxs], mrxs, "Data0001.dat")


def test_slidedat_that_is_not_ini(slides, tmp_path, run):
    mrxs, folder = _copy(slides, tmp_path)
    ini = folder / "Slidedat.ini"
    ini.write_bytes(ini.read_bytes() + b"this line has no equals sign\r\n")
    _fails(run, ["info", mrxs], mrxs, "Slidedat.ini line")


def test_slidedat_naming_a_file_outside_the_folder(slides, tmp_path, run):
    mrxs, folder = _copy(slides, tmp_path)
    ini = folder / "Slidedat.ini"
    ini.write_bytes(ini.read_bytes().replace(b"FILE_1 = Data0001.dat", b"FILE_1 = ../../etc/passwd"))
    _fails(run, ["info", mrxs], mrxs, "not in the slide's folder")


def test_position_layer_of_the_wrong_size(slides, tmp_path, run):
    """The position record's length field in Index.dat one byte short."""
    mrxs, folder = _copy(slides, tmp_path)
    index = folder / "Index.dat"
    data = bytearray(index.read_bytes())
    n_photos = LAYOUTS["positions"].photos_x * LAYOUTS["positions"].photos_y
    want = struct.pack("<i", 9 * n_photos)
    at = data.rfind(want)  # the last record (the position layer) holds offset, length, fileno
    assert at > 0
    struct.pack_into("<i", data, at, 9 * n_photos - 1)
    index.write_bytes(bytes(data))
    _fails(run, ["info", mrxs], mrxs, "position layer")


def test_spoiled_image_fails_the_read(slides, tmp_path, run):
    """A level-0 JPEG overwritten with zeros: the slide opens, the region read fails cleanly."""
    mrxs, folder = _copy(slides, tmp_path)
    data = folder / "Data0000.dat"
    blob = bytearray(data.read_bytes())
    first = blob.find(b"\xff\xd8\xff")
    blob[first:first + 2000] = bytes(2000)
    data.write_bytes(bytes(blob))
    out = tmp_path / "r.rgba"
    _fails(run, ["region", mrxs, "--level", 0, "--x", 0, "--y", 0, "--width", 64, "--height", 64,
                 "-o", out], mrxs, "")


# ---- zoom levels stored as PNG or 24-bit BMP (IMAGE_FORMAT) ---------------------------------

LOSSLESS = {"PNG": "png", "BMP24": "bmp"}


@pytest.fixture(scope="module")
def lossless_slides(testdata, tmp_path_factory):
    """The overlapping "positions" layout with its images stored as PNG and as BMP24."""
    if not (testdata / "aperio" / "CMU-1-Small-Region.svs").is_file():
        pytest.skip("aperio/CMU-1-Small-Region.svs (the H&E pixels) is not in the shared data")
    root = tmp_path_factory.mktemp("mirax-lossless")
    return {f: mirax_writer.write_mirax(root / f, testdata, mirax_writer.Layout(image_format=f))
            for f in LOSSLESS}


@pytest.mark.parametrize("image_format", sorted(LOSSLESS))
def test_lossless_images_equal_openslides(lossless_slides, image_format, sp):
    """PNG and BMP images decode losslessly, so every whole level equals OpenSlide 4's
    read_region byte for byte, and the level reports its images' compression; an awkward region
    across pieces too."""
    slide = lossless_slides[image_format]
    got_info = sp.info(slide)
    assert [lv["compression"] for lv in got_info["levels"]] == [LOSSLESS[image_format]] * 4
    with _openslide(slide) as os_:
        for level, (w, h) in enumerate(os_.level_dimensions):
            want = np.asarray(os_.read_region((0, 0), level, (w, h)), dtype=np.uint8)
            got = sp.read_region(slide, level, 0, 0, w, h)
            diff = np.argwhere((want != got).any(axis=2))
            assert diff.size == 0, f"level {level}: {len(diff)} pixels differ, first at {diff[0]}"
            assert (want[..., 3] == 255).sum() > want[..., 3].size // 2, f"level {level} is empty"
        want = np.asarray(os_.read_region((203, 117), 0, (301, 187)), dtype=np.uint8)
    assert np.array_equal(sp.read_region(slide, 0, 203, 117, 301, 187), want)


def _first_bmp(blob: bytes) -> int:
    at = blob.find(b"BM")
    while at >= 0 and blob[at + 14:at + 18] != struct.pack("<I", 40):
        at = blob.find(b"BM", at + 1)
    assert at >= 0, "no BMP image in the data file"
    return at


@pytest.mark.parametrize("spoil, fragment", [
    (lambda b, at: struct.pack_into("<H", b, at + 28, 32), "32 bits per pixel"),  # 32-bit
    (lambda b, at: struct.pack_into("<I", b, at + 30, 1), "compression 1"),  # RLE8
    (lambda b, at: struct.pack_into("<I", b, at + 10, 1 << 30), "do not fit"),  # pixels past the end
    (lambda b, at: struct.pack_into("<i", b, at + 18, 64), "BMP image is 64x"),  # another width
], ids=["depth", "compression", "offset", "width"])
def test_malformed_bmp_image_fails_the_read(lossless_slides, tmp_path, run, spoil, fragment):
    """A level-0 BMP spoiled in its header: the slide opens, the region read fails with exit 1
    and one line naming the slide and what is wrong with the bitmap."""
    src = lossless_slides["BMP24"]
    mrxs = tmp_path / "spoiled.mrxs"
    shutil.copy(src, mrxs)
    shutil.copytree(src.with_suffix(""), tmp_path / "spoiled")
    data = tmp_path / "spoiled" / "Data0000.dat"  # level 0's images (levels alternate files)
    blob = bytearray(data.read_bytes())
    at = _first_bmp(bytes(blob))
    spoil(blob, at)
    data.write_bytes(bytes(blob))
    out = tmp_path / "r.rgba"
    _fails(run, ["region", mrxs, "--level", 0, "--x", 0, "--y", 0, "--width", 64, "--height", 64,
                 "-o", out], mrxs, fragment)
