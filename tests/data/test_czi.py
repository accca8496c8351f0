"""Zeiss CZI against Zeiss's own reader and writer (pylibCZIrw, libCZI) and OpenSlide 4.

Two kinds of file, both from the pixels of a real H&E region (the shared CMU-1-Small-Region.svs):
- written by pylibCZIrw itself: tiles placed at an offset, uncompressed, zstd0 and zstd1, two
  focal planes, 16-bit Bgr48 with zstd1's hi/lo byte packing. Its subblocks carry Z and T, which
  OpenSlide 4.0.1 refuses ("Unrecognized subblock dimension"), so pylibCZIrw's read is the oracle;
- written by czi_writer.py (pylibCZIrw cannot write pyramid subblocks): a three-level pyramid
  (zstd1, uncompressed, zstd0), a missing tile, a subblock overlapping others with a higher mosaic
  index, a JPEG label and an embedded-CZI preview. pylibCZIrw must read it (the vendor's reader
  vouches for the layout) and OpenSlide 4 must call it "zeiss"; then the levels, properties,
  pixels and associated images must equal OpenSlide's exactly, and pylibCZIrw's own pyramid
  reads (zoom 1/2, 1/4) too. Where subblocks overlap, the higher mosaic index lies on top, as
  libCZI draws them; OpenSlide 4.0.1 puts the lower on top, so that patch is compared with
  pylibCZIrw only. A small pyramid of odd sizes checks the level sizes (rounded down) against
  OpenSlide.
JPEG subblocks (which neither peer decodes) are compared with the stored streams decoded by
imagecodecs. Cut files, malformed directory entries, a spoiled subblock and JPEG XR subblocks fail
with exit 1 and one line naming the file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are an oracle")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs encodes zstd and JPEG")
czi = pytest.importorskip("pylibCZIrw.czi", reason="pylibCZIrw (tests/requirements.txt) is the vendor's peer")

import czi_writer as cw  # noqa: E402  (tests/data, beside this file)
import vendor_checks  # noqa: E402
import vendor_samples  # noqa: E402

W, H = 1000, 760          # level 0 of the pyramid file (each level's subblocks cover it all)
ORIGIN = (-50, 70)        # its subblocks' top-left, in CZI coordinates
TILE = 256
MPP = 0.25
PATCH = (230, 20, 90, 60)  # x, y, width, height on level 0 of the overlapping subblock


def _he(testdata: Path, w: int, h: int) -> np.ndarray:
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    return vendor_samples.he_region(testdata, w, h, 300, 500)


def _bgr(rgb: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgb[..., ::-1])


def _rgba(bgr: np.ndarray) -> np.ndarray:
    out = np.full(bgr.shape[:2] + (4,), 255, np.uint8)
    out[..., :3] = bgr[..., ::-1]
    return out


# ---- files pylibCZIrw writes -----------------------------------------------------------------


@pytest.fixture(scope="module")
def peer(testdata, tmp_path_factory) -> dict:
    """pylibCZIrw's files: {name: path}, and the pixels written ("bgr", "flipped" for Z=1)."""
    folder = tmp_path_factory.mktemp("czi-peer")
    bgr = _bgr(_he(testdata, 600, 420))
    flipped = np.ascontiguousarray(bgr[::-1, ::-1])
    out = {"bgr": bgr, "flipped": flipped}
    for name, options in (("raw", None), ("zstd0", "zstd0:ExplicitLevel=1"),
                          ("zstd1", "zstd1:ExplicitLevel=1;PreProcess=HiLoByteUnpack")):
        path = folder / f"{name}.czi"
        with czi.create_czi(str(path), compression_options=options) as w:
            for y in range(0, 420, TILE):
                for x in range(0, 600, TILE):
                    w.write(bgr[y:y + TILE, x:x + TILE], location=(1000 + x, 2000 + y),
                            plane={"Z": 0})
                    if name == "raw":
                        w.write(flipped[y:y + TILE, x:x + TILE], location=(1000 + x, 2000 + y),
                                plane={"Z": 1})
            w.write_metadata(scale_x=0.499e-6, scale_y=0.499e-6)
        out[name] = path
    return out


@pytest.mark.parametrize("name", ["raw", "zstd0", "zstd1"])
def test_peer_written_pixels_equal_libczis(peer, name, info, read_region, assert_same_pixels):
    with czi.open_czi(str(peer[name])) as r:
        box = r.total_bounding_rectangle
        want = r.read(plane={"Z": 0, "C": 0, "T": 0})
    assert np.array_equal(want, peer["bgr"]), "pylibCZIrw does not read back what it wrote"
    got = info(peer[name])
    assert got["format"] == "zeiss" and got["mpp_x"] == pytest.approx(0.499, rel=1e-12)
    assert [(lv["width"], lv["height"]) for lv in got["levels"]] == [(box.w, box.h)]
    assert got["planes"]["z"] == (2 if name == "raw" else 1)
    assert_same_pixels(read_region(peer[name], 0, 0, 0, box.w, box.h), _rgba(want), name)
    # Across the tile corner at (256, 256), where four subblocks meet.
    assert_same_pixels(read_region(peer[name], 0, 200, 190, 120, 130),
                       _rgba(want[190:320, 200:320]), f"{name} across subblocks")


def test_planes_equal_libczis(peer, run, tmp_path, assert_same_pixels):
    with czi.open_czi(str(peer["raw"])) as r:
        want = r.read(plane={"Z": 1, "C": 0, "T": 0})
    assert np.array_equal(want, peer["flipped"])
    out = tmp_path / "z1.rgba"
    proc = run(["region", peer["raw"], "--level", "0", "--x", "0", "--y", "0", "--width", 600,
                "--height", 420, "--z", 1, "-o", out])
    assert proc.returncode == 0, proc.stderr
    got = np.fromfile(out, np.uint8).reshape(420, 600, 4)
    assert_same_pixels(got, _rgba(want), "focal plane 1")
    proc = run(["region", peer["raw"], "--level", "0", "--x", "0", "--y", "0", "--width", 8,
                "--height", 8, "--z", 2, "-o", out])
    vendor_checks.assert_one_line_error(proc, peer["raw"], "focal plane (z) 2")


def test_bgr48_keeps_the_high_bytes(tmp_path, read_region):
    """16-bit Bgr48 written by pylibCZIrw with zstd1's hi/lo byte packing: each sample's high
    byte, as OpenSlide reduces Bgr48 (pylibCZIrw 6.1.0 reads most of these pixels back as 0, so
    the written array is the reference)."""
    rng = np.random.default_rng(27)
    samples = rng.integers(0, 65536, (60, 90, 3), dtype=np.uint16)
    path = tmp_path / "bgr48.czi"
    with czi.create_czi(str(path),
                        compression_options="zstd1:ExplicitLevel=1;PreProcess=HiLoByteUnpack") as w:
        w.write(samples[:, :50], location=(0, 0))
        w.write(samples[:, 50:], location=(50, 0))
    with czi.open_czi(str(path)) as r:
        assert r.pixel_types == {0: "Bgr48"}
    got = read_region(path, 0, 0, 0, 90, 60)
    assert np.array_equal(got, _rgba((samples >> 8).astype(np.uint8)))


# ---- the pyramid file ------------------------------------------------------------------------


def _write_pyramid(path: Path, testdata: Path, **changes) -> Path:
    rgb = _he(testdata, W, H)
    levels = [rgb, vendor_samples.downsample(rgb, 2), vendor_samples.downsample(rgb, 4)]
    comp = [cw.ZSTD1, cw.RAW, cw.ZSTD0]
    sbs = []
    for i, lv in enumerate(levels):
        sbs += cw.tiles(_bgr(lv), TILE, *ORIGIN, factor=2 ** i, compression=comp[i],
                        dims={"C": 0, "S": 0, "M": 0})
    del sbs[5]  # level 0's tile (1, 1): a hole
    # A patch drawn over two tiles of level 0 with a higher mosaic index, listed first.
    patch = _bgr(np.ascontiguousarray(rgb[:PATCH[3], :PATCH[2]][::-1]))
    sbs.insert(0, cw.Subblock(ORIGIN[0] + PATCH[0], ORIGIN[1] + PATCH[1], PATCH[2], PATCH[3],
                              patch, dims={"C": 0, "S": 0, "M": 7}))
    label = vendor_samples.he_region(testdata, 120, 90, 0, 0)
    preview_path = path.with_name(path.stem + "-preview.czi")
    cw.write_czi(preview_path, cw.tiles(_bgr(label[::-1].copy()), 200),
                 cw.metadata_xml(120, 90, None, None))
    attachments = [("Label", b"JPG", imagecodecs.jpeg8_encode(label, level=90)),
                   ("SlidePreview", b"CZI", preview_path.read_bytes())]
    for key, value in changes.items():
        if key == "subblocks":
            sbs = value(sbs)
    return cw.write_czi(path, sbs, cw.metadata_xml(W, H, MPP, 20), attachments)


@pytest.fixture(scope="module")
def pyramid(testdata, tmp_path_factory) -> Path:
    return vendor_checks.generated_slide(testdata, tmp_path_factory, _write_pyramid, "slide.czi",
                                         "zeiss")


@pytest.fixture(scope="module")
def oracle(pyramid):
    with openslide.OpenSlide(str(pyramid)) as slide:
        yield slide


def test_pyramid_facts_equal_openslides(pyramid, oracle, info):
    got = info(pyramid)
    assert got["format"] == "zeiss"
    assert [(lv["width"], lv["height"], lv["downsample"]) for lv in got["levels"]] == [
        (w, h, ds) for (w, h), ds in zip(oracle.level_dimensions, oracle.level_downsamples)]
    # Level 0: zstd1 tiles and the uncompressed patch.
    assert [lv["compression"] for lv in got["levels"]] == ["mixed", "none", "zstd"]
    assert got["mpp_x"] == float(oracle.properties["openslide.mpp-x"]) == MPP
    assert got["mpp_y"] == float(oracle.properties["openslide.mpp-y"])
    assert got["objective_power"] == float(oracle.properties["openslide.objective-power"]) == 20
    want_assoc = {n: {"width": im.size[0], "height": im.size[1]}
                  for n, im in oracle.associated_images.items()}
    assert got["associated"] == want_assoc and set(want_assoc) == {"label", "macro"}
    # zeiss.*: the metadata sections flattened as OpenSlide flattens them.
    want = {k: v for k, v in oracle.properties.items() if not k.startswith("openslide.")}
    props = {k: v for k, v in got["properties"].items() if not k.startswith("slidepipe.")}
    assert len(want) > 8
    vendor_checks.assert_same_properties(want, props)


def test_pyramid_regions_equal_openslides(pyramid, oracle, read_region, assert_same_pixels):
    """Every level whole, with a margin (the hole of level 0 and the edges transparent), and a
    region of level 0 across the overlapping patch."""
    regions = [(lv, -16 * int(ds), -8 * int(ds), w + 32, h + 24)
               for lv, ((w, h), ds) in enumerate(zip(oracle.level_dimensions,
                                                     oracle.level_downsamples))]
    regions.append((0, 200, 50, 170, 120))
    for level, x, y, w, h in regions:
        want = np.asarray(oracle.read_region((x, y), level, (w, h)), dtype=np.uint8).copy()
        got = read_region(pyramid, level, x, y, w, h)
        if level == 0:  # the patch: OpenSlide 4.0.1 draws it under (test_pyramid_equals_libczis_reads)
            px, py = PATCH[0] - x, PATCH[1] - y
            want[max(py, 0):py + PATCH[3], max(px, 0):px + PATCH[2]] = \
                got[max(py, 0):py + PATCH[3], max(px, 0):px + PATCH[2]]
        assert_same_pixels(got, want, f"level {level} at ({x}, {y}) {w}x{h}")
    hole = read_region(pyramid, 0, TILE + 30, TILE + 30, 64, 64)
    assert not hole.any(), "the missing subblock is not transparent"


def test_pyramid_equals_libczis_reads(pyramid, read_region, assert_same_pixels):
    """pylibCZIrw reads the written file: level 0, and its zoomed reads from the pyramid
    subblocks, equal slidepipe's levels (where pylibCZIrw paints the hole black)."""
    with czi.open_czi(str(pyramid)) as r:
        box = r.total_bounding_rectangle
        assert (box.x, box.y, box.w, box.h) == (*ORIGIN, W, H)
        for level, zoom in ((0, None), (1, 0.5), (2, 0.25)):
            want = r.read(zoom=zoom) if zoom else r.read()
            h, w = want.shape[:2]
            got = read_region(pyramid, level, 0, 0, w, h)
            painted = got[..., 3] == 255
            assert painted.mean() > 0.9
            expect = _rgba(want)
            expect[~painted] = 0
            assert_same_pixels(got, expect, f"level {level} against pylibCZIrw zoom {zoom}")


def test_associated_equal_openslides(pyramid, oracle, run, tmp_path, assert_same_pixels):
    for name, image in oracle.associated_images.items():
        out = tmp_path / f"{name}.png"
        proc = run(["associated", pyramid, name, "-o", out])
        assert proc.returncode == 0, proc.stderr
        assert_same_pixels(imagecodecs.png_decode(out.read_bytes()),
                           np.asarray(image, dtype=np.uint8), f"associated {name}")


def test_odd_sizes_equal_openslides(testdata, tmp_path, read_region, assert_same_pixels, info):
    """301 x 203 pixels with a 2x pyramid level: OpenSlide's level sizes (150 x 101, rounded
    down) and pixels, the edges included."""
    rgb = _he(testdata, 301, 203)
    sbs = cw.tiles(_bgr(rgb), 128, 5, 5) + cw.tiles(_bgr(vendor_samples.downsample(rgb, 2)),
                                                    128, 5, 5, factor=2)
    path = cw.write_czi(tmp_path / "odd.czi", sbs, cw.metadata_xml(301, 203, MPP, None))
    got = info(path)
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.properties["openslide.vendor"] == "zeiss"
        assert [(lv["width"], lv["height"]) for lv in got["levels"]] == \
            list(slide.level_dimensions) == [(301, 203), (150, 101)]
        for level, (w, h) in enumerate(slide.level_dimensions):
            want = np.asarray(slide.read_region((0, 0), level, (w + 4, h + 4)), dtype=np.uint8)
            assert_same_pixels(read_region(path, level, 0, 0, w + 4, h + 4), want,
                               f"odd sizes, level {level}")


def test_jpeg_subblocks_equal_their_streams(testdata, tmp_path, read_region, assert_same_pixels):
    """JPEG subblocks (compression 1: neither pylibCZIrw on Linux nor OpenSlide decodes them):
    each equals its stored stream decoded by imagecodecs (libjpeg-turbo)."""
    rgb = _he(testdata, 400, 300)
    sbs = cw.tiles(_bgr(rgb), TILE, compression=cw.JPEG)
    path = cw.write_czi(tmp_path / "jpeg.czi", sbs, cw.metadata_xml(400, 300, MPP, None))
    want = np.zeros((300, 400, 4), np.uint8)
    for sb in sbs:
        h, w = sb.data.shape[:2]
        want[sb.y:sb.y + h, sb.x:sb.x + w, :3] = imagecodecs.jpeg8_decode(cw._encode(sb))
        want[sb.y:sb.y + h, sb.x:sb.x + w, 3] = 255
    assert_same_pixels(read_region(path, 0, 0, 0, 400, 300), want, "JPEG subblocks")


# ---- malformed files -------------------------------------------------------------------------


def _directory(data: bytes) -> tuple[int, int]:
    """The subblock directory's offset and its entry count."""
    pos = struct.unpack_from("<q", data, 32 + 0x34)[0]
    return pos, struct.unpack_from("<i", data, pos + 32)[0]


def test_truncated_file_fails_cleanly(pyramid, tmp_path, run):
    data = pyramid.read_bytes()
    path = tmp_path / "truncated.czi"
    path.write_bytes(data[: len(data) // 2])
    vendor_checks.assert_one_line_error(run(["info", path]), path, "beyond the end")


# Patches of the first directory entry: (offset in the entry, struct format, value, words).
ENTRY_PATCHES = {
    "position past the end": (6, "<q", 1 << 40, "past the end"),
    "dimension count huge": (28, "<i", 1 << 30, "dimension entries"),
    "stored size huge": (32 + 16, "<i", 0x7FFFFFFF, "size"),
    "X size huge": (32 + 8, "<i", 0x7FFFFFFF, "pixels"),
}


@pytest.mark.parametrize("case", sorted(ENTRY_PATCHES))
def test_malformed_directory_entry_fails_cleanly(pyramid, tmp_path, run, case):
    at, fmt, value, words = ENTRY_PATCHES[case]
    data = bytearray(pyramid.read_bytes())
    pos, _ = _directory(data)
    entry = pos + 32 + 128
    if case == "X size huge":  # stored as large as the logical size: a huge subblock
        struct.pack_into("<i", data, entry + 32 + 16, value)
    struct.pack_into(fmt, data, entry + at, value)
    path = tmp_path / "malformed.czi"
    path.write_bytes(bytes(data))
    vendor_checks.assert_one_line_error(run(["info", path]), path, words)


def test_entry_count_past_the_directory_fails_cleanly(pyramid, tmp_path, run):
    data = bytearray(pyramid.read_bytes())
    pos, count = _directory(data)
    struct.pack_into("<i", data, pos + 32, count * 1000)
    path = tmp_path / "count.czi"
    path.write_bytes(bytes(data))
    vendor_checks.assert_one_line_error(run(["info", path]), path, "entries")


def test_spoiled_subblock_fails_cleanly(testdata, tmp_path, run):
    """A zstd subblock whose stream is zeroed: the file opens, and reading it is an error naming
    the file, not a crash."""
    def spoil(sbs):
        sbs[1].payload = b"\x03\x01\x00" + b"\x00" * 64
        return sbs
    path = _write_pyramid(tmp_path / "spoiled.czi", testdata, subblocks=spoil)
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", 600,
                "--height", 200, "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "Zstandard")


@pytest.fixture(scope="module")
def jxr_built(tmp_path_factory, run):
    """Skips, saying why, when this slidepipe was built without jxrlib (libjxr-dev is optional:
    such a build refuses JPEG XR subblocks, which test_jpeg_xr_refused_without_jxrlib checks)."""
    sbs = cw.tiles(np.zeros((16, 16, 3), np.uint8), 16, compression=cw.JPEGXR)
    path = cw.write_czi(tmp_path_factory.mktemp("czi-jxr") / "probe.czi", sbs,
                        cw.metadata_xml(16, 16, None, None))
    proc = run(["info", path])
    if "built without jxrlib" in proc.stderr:
        print("slidepipe was built without jxrlib (libjxr-dev): JPEG XR decoding not tested")
        pytest.skip("slidepipe was built without jxrlib (libjxr-dev)")
    assert proc.returncode == 0, proc.stderr
    return path


def test_jpeg_xr_refused_without_jxrlib(tmp_path, run, info):
    """With jxrlib the probe opens as a JPEG XR level; without it the open fails with one line
    naming the file."""
    sbs = cw.tiles(np.zeros((16, 16, 3), np.uint8), 16, compression=cw.JPEGXR)
    path = cw.write_czi(tmp_path / "probe.czi", sbs, cw.metadata_xml(16, 16, None, None))
    proc = run(["info", path])
    if proc.returncode != 0:
        vendor_checks.assert_one_line_error(proc, path, "JPEG XR subblocks are not supported")
    else:
        assert info(path)["levels"][0]["compression"] == "jpegxr"


def test_jpeg_xr_equals_libczis(jxr_built, testdata, tmp_path, read_region, assert_same_pixels):
    """JPEG XR subblocks (compression 4, what Zeiss scanners mostly write; OpenSlide 4.0.1
    refuses them), lossy and lossless, Bgr24 and Gray8, decoded through jxrlib: equal to
    pylibCZIrw's reads (libCZI's own JPEG XR decoder)."""
    bgr = _bgr(_he(testdata, 400, 300))
    cases = {"bgr24": cw.tiles(bgr, TILE, compression=cw.JPEGXR, quality=0.8),
             "lossless": cw.tiles(bgr, TILE, compression=cw.JPEGXR),
             "gray8": cw.tiles(np.ascontiguousarray(bgr[..., 1]), TILE, compression=cw.JPEGXR,
                               pixel_type=cw.PIXEL_GRAY8, quality=0.8)}
    for name, sbs in cases.items():
        path = cw.write_czi(tmp_path / f"{name}.czi", sbs, cw.metadata_xml(400, 300, MPP, None))
        with czi.open_czi(str(path)) as r:
            want = r.read()
        if name == "lossless":
            assert np.array_equal(want, bgr)
        want = np.repeat(want, 3, axis=2) if want.shape[2] == 1 else want
        assert_same_pixels(read_region(path, 0, 0, 0, 400, 300), _rgba(want), f"JPEG XR {name}")


def test_spoiled_jpeg_xr_fails_cleanly(jxr_built, tmp_path, run):
    sbs = cw.tiles(np.zeros((64, 64, 3), np.uint8), 64)
    sbs[0].compression, sbs[0].payload = cw.JPEGXR, b"WMPHOTO\0" + b"\0" * 32
    path = cw.write_czi(tmp_path / "jxr.czi", sbs, cw.metadata_xml(64, 64, None, None))
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", 64,
                "--height", 64, "-o", tmp_path / "r.rgba"])
    vendor_checks.assert_one_line_error(proc, path, "JPEG XR")


def test_jpeg_xr_that_crashes_jxrlib_fails_cleanly(jxr_built, tmp_path, run):
    """The fuzz target's first find: two bytes changed in a JPEG XR stream make jxrlib read
    wild memory (SIGSEGV in DecodeSignificantRun). The decode runs in a child process, so the
    read ends in exit 1 and one line, not a crash."""
    bgr = np.random.default_rng(27).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    sbs = cw.tiles(bgr, 32, compression=cw.JPEGXR, quality=0.8)  # as the fuzz seed
    stream = bytearray(cw._encode(sbs[1]))
    stream[479], stream[1609] = 39, 40
    sbs[1].payload = bytes(stream)
    path = cw.write_czi(tmp_path / "crash.czi", sbs, cw.metadata_xml(64, 48, None, None))
    proc = run(["region", path, "--level", "0", "--x", "0", "--y", "0", "--width", 64,
                "--height", 48, "-o", tmp_path / "r.rgba"])
    # The child dies by its signal quietly (no sanitizer report, also under ASan).
    vendor_checks.assert_one_line_error(proc, path, "JPEG XR: the decoder failed")
    print("jxrlib on the mutated stream:", proc.stderr.strip())


def test_jpeg_xr_with_children_reaped_by_the_host(jxr_built, testdata, tmp_path, sp):
    """A host that ignores SIGCHLD (inherited across exec) leaves the decoding child to the
    kernel, so waitpid finds none: the child's own mark then says whether it got through."""
    import signal
    import subprocess

    bgr = _bgr(_he(testdata, 300, 200))
    good = cw.write_czi(tmp_path / "good.czi", cw.tiles(bgr, TILE, compression=cw.JPEGXR),
                        cw.metadata_xml(300, 200, None, None))
    out = tmp_path / "r.rgba"
    args = ["region", good, "--level", 0, "--x", 0, "--y", 0, "--width", 300, "--height", 200,
            "-o", out]
    proc = subprocess.run([str(sp.binary), *map(str, args)], capture_output=True, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.fromfile(out, np.uint8).reshape(200, 300, 4), _rgba(bgr))


def test_jpeg_xr_of_16_bit_pixels_is_refused(jxr_built, tmp_path, run):
    sbs = cw.tiles(np.zeros((64, 64, 3), np.uint8), 64)
    sbs[0].compression, sbs[0].pixel_type, sbs[0].payload = cw.JPEGXR, 4, b"\0" * 64
    path = cw.write_czi(tmp_path / "jxr48.czi", sbs, cw.metadata_xml(64, 64, None, None))
    vendor_checks.assert_one_line_error(run(["info", path]), path,
                                        "JPEG XR subblocks of pixel type Bgr48 are not supported")
