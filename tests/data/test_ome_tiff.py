"""test_ome_tiff.py — the OME-TIFF format (src/formats/ome_tiff.c, ome_xml.c) against tifffile.

Two kinds of input:

- the shared `ome-tiff/multi-channel-z-series.ome.tif` (Bio-Formats, big-endian int8, 3 channels x
  5 z-planes = 15 single-channel strip pages, not pyramidal): facts from `info --json`, and the
  pixels of plane Z=0 C=0 T=0 against tifffile's page for that plane;
- OME-TIFFs written here with tifffile in pytest's temporary folder: pyramidal brightfield RGB
  (tiled 256, Deflate or JPEG, 3 SubIFD levels, PhysicalSizeX/Y, macro and label series), a
  multi-channel uint16 pyramid, files with hand-written OME-XML (plane to IFD mapping through
  TiffData, objective magnification, units) and files that must fail cleanly (multi-file
  TiffData, BinaryOnly, malformed XML, sizes that contradict the TIFF).

Every level's pixels must equal tifffile's decoding of that level exactly (tifffile decodes
Deflate with zlib and JPEG with libjpeg-turbo, as slidepipe does; measured: no pixel differs on
any level of either codec). Sample mapping to 8 bits is the decoder's (src/tiff/tiff_decode.c):
signed int8 v becomes v + 128, 16-bit v becomes round(v / 257); grey is replicated to R, G, B
and alpha is 255 inside the image.

OpenSlide 4 has no OME-TIFF format: it opens a tiled OME-TIFF as generic-tiff, one level (the
main-chain page; it does not read SubIFDs), and refuses the strip-organised shared file. So it
serves as a second oracle for level 0 of the generated tiled files only; the pyramid comparison
with it is skipped, and the reason printed.
"""

from __future__ import annotations

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
imagecodecs = pytest.importorskip("imagecodecs")

SHARED = "ome-tiff/multi-channel-z-series.ome.tif"
NS = "http://www.openmicroscopy.org/Schemas/OME/2016-06"
TILE = 256


# ---- helpers --------------------------------------------------------------------------------


def to_rgba(grey_or_rgb: np.ndarray) -> np.ndarray:
    """What slidepipe returns for an 8-bit image: grey replicated, alpha 255."""
    if grey_or_rgb.ndim == 2:
        grey_or_rgb = np.repeat(grey_or_rgb[..., None], 3, axis=-1)
    h, w = grey_or_rgb.shape[:2]
    return np.concatenate([grey_or_rgb, np.full((h, w, 1), 255, np.uint8)], axis=-1)


def to_8bit(a: np.ndarray) -> np.ndarray:
    """The decoder's mapping of samples to 8 bits: signed offset to unsigned, 16-bit rounded."""
    if a.dtype == np.int8:
        return (a.astype(np.int16) + 128).astype(np.uint8)
    if a.dtype == np.uint16:
        return ((a.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)
    assert a.dtype == np.uint8, a.dtype
    return a


def read_level(read_region, path, info, level):
    lv = info["levels"][level]
    return read_region(path, level, 0, 0, lv["width"], lv["height"])


def pattern(h: int, w: int, seed: int) -> np.ndarray:
    """Smooth colour ramps plus noise: compressible, with structure at every tile border."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 255 // w, yy * 255 // h, (xx + 2 * yy) % 256], axis=-1)
    return (base + rng.integers(0, 24, (h, w, 3))).clip(0, 255).astype(np.uint8)


def check_error(run, path, *needles):
    """The command must fail at runtime (exit 1) with one `slidepipe: ...` line naming needles."""
    for args in (["info", path], ["info", path, "--json"]):
        proc = run(args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1, f"{args}: exit {proc.returncode}, stderr {proc.stderr!r}"
        assert len(lines) == 1 and lines[0].startswith("slidepipe: "), proc.stderr
        for needle in needles:
            assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
        assert proc.stdout == ""


def ome_xml(images: str, uuid: str = "urn:uuid:11111111-2222-3333-4444-555555555555",
            extra: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><OME xmlns="{NS}" UUID="{uuid}">'
        f"{extra}{images}</OME>"
    )


def write_with_description(path, pages, description, **options):
    """Write `pages` (2-D or 3-D arrays) in the main chain, the first carrying `description`."""
    with tifffile.TiffWriter(path) as tif:
        for i, page in enumerate(pages):
            rgb = page.ndim == 3
            tif.write(
                page,
                description=description if i == 0 else None,
                metadata=None,
                photometric="rgb" if rgb else "minisblack",
                **options,
            )


# ---- the shared Bio-Formats file ------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(testdata):
    path = testdata / SHARED
    if not path.is_file():
        pytest.skip(f"{SHARED} not in the shared test data")
    return path


def test_shared_info(shared, info):
    facts = info(shared)
    assert facts["format"] == "ome-tiff"
    assert [(lv["width"], lv["height"]) for lv in facts["levels"]] == [(439, 167)]
    props = facts["properties"]
    assert props["slidepipe.vendor"] == "ome-tiff"
    assert props["ome.SizeC"] == "3"
    assert props["ome.SizeZ"] == "5"
    assert props["ome.SizeT"] == "1"
    assert props["ome.DimensionOrder"] == "XYZCT"
    assert props["ome.Type"] == "int8"
    assert props["ome.ImageCount"] == "1"
    assert props["ome.PlaneShown"] == "Z=0 C=0 T=0"
    for i in range(3):
        assert props[f"ome.Channel[{i}].SamplesPerPixel"] == "1"
    # Bio-Formats wrote no physical size, and the resolution tags are 0: no MPP.
    assert facts["mpp_x"] is None and facts["mpp_y"] is None
    assert facts["objective_power"] is None
    assert facts["associated"] == {}
    assert facts["levels"][0]["compression"] == "none"


def test_shared_plane0_pixels(shared, info, read_region, assert_same_pixels):
    with tifffile.TiffFile(shared) as tif:
        assert tif.is_ome and tif.byteorder == ">"
        series = tif.series[0]
        assert series.axes == "CZYX" and series.shape == (3, 5, 167, 439)
        plane = series.asarray()[0, 0]  # C=0, Z=0 (T=0)
        # The OME-XML maps Z=0 C=0 T=0 to IFD 0; tifffile agrees.
        assert np.array_equal(plane, tif.pages[0].asarray())
    assert plane.dtype == np.int8
    actual = read_level(read_region, shared, info(shared), 0)
    assert_same_pixels(actual, to_rgba(to_8bit(plane)), f"{SHARED} plane Z=0 C=0 T=0 (int8 v+128)")


# ---- generated pyramidal brightfield RGB ----------------------------------------------------

RGB_SIZE = (1000, 1300)  # (height, width): partial edge tiles on every level
MPP = (0.25, 0.3)


def write_rgb_pyramid(path, compression):
    data = pattern(*RGB_SIZE, seed=7)
    macro = pattern(120, 300, seed=8)
    label = pattern(90, 100, seed=9)
    options = dict(photometric="rgb", tile=(TILE, TILE), compression=compression)
    levels = [data]
    with tifffile.TiffWriter(path) as tif:
        tif.write(
            data,
            subifds=3,
            metadata={"axes": "YXS", "Name": "brightfield slide", "PhysicalSizeX": MPP[0],
                      "PhysicalSizeY": MPP[1]},
            **options,
        )
        for level in range(1, 4):
            reduced = data[:: 2**level, :: 2**level]
            levels.append(reduced)
            tif.write(reduced, subfiletype=1, **options)
        tif.write(macro, metadata={"Name": "macro image"}, photometric="rgb",
                  compression=compression)
        tif.write(label, metadata={"Name": "Label"}, photometric="rgb", compression=compression)
    return levels, {"macro": macro, "label": label}


@pytest.fixture(scope="module", params=["zlib", "jpeg"])
def rgb_pyramid(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("ome") / f"rgb-{request.param}.ome.tif"
    levels, associated = write_rgb_pyramid(path, request.param)
    return path, levels, associated, request.param


def test_rgb_pyramid_facts(rgb_pyramid, info):
    path, levels, associated, compression = rgb_pyramid
    facts = info(path)
    assert facts["format"] == "ome-tiff"
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome
        written = [lv.shape[:2] for lv in tif.series[0].levels]
    assert len(written) == 4
    got = [(lv["height"], lv["width"]) for lv in facts["levels"]]
    assert got == written == [lv.shape[:2] for lv in levels]
    for lv in facts["levels"]:
        assert (lv["tile_width"], lv["tile_height"]) == (TILE, TILE)
        assert lv["compression"] == {"zlib": "deflate", "jpeg": "jpeg"}[compression]
    h0, w0 = RGB_SIZE
    for lv in facts["levels"]:
        want = (w0 / lv["width"] + h0 / lv["height"]) / 2
        assert lv["downsample"] == pytest.approx(want, rel=1e-6)
    assert facts["mpp_x"] == pytest.approx(MPP[0], rel=1e-6)
    assert facts["mpp_y"] == pytest.approx(MPP[1], rel=1e-6)
    assert facts["objective_power"] is None
    assert facts["associated"] == {
        name: {"width": img.shape[1], "height": img.shape[0]} for name, img in associated.items()
    }
    props = facts["properties"]
    assert props["ome.SizeC"] == "3" and props["ome.SizeZ"] == "1" and props["ome.SizeT"] == "1"
    assert props["ome.Channel[0].SamplesPerPixel"] == "3"
    assert props["ome.ImageCount"] == "3"
    assert props["ome.Type"] == "uint8"
    assert "ome.PlaneShown" not in props  # one RGB plane: nothing hidden


def test_rgb_pyramid_pixels(rgb_pyramid, info, read_region, assert_same_pixels):
    path, _, _, compression = rgb_pyramid
    facts = info(path)
    with tifffile.TiffFile(path) as tif:
        expected = [lv.asarray() for lv in tif.series[0].levels]
    for level, want in enumerate(expected):
        actual = read_level(read_region, path, facts, level)
        assert_same_pixels(actual, to_rgba(want), f"{path.name} level {level} ({compression})")


def test_rgb_pyramid_associated(rgb_pyramid, run, tmp_path, assert_same_pixels):
    path, _, associated, compression = rgb_pyramid
    with tifffile.TiffFile(path) as tif:
        by_name = {s.name: s.asarray() for s in tif.series}
    for name, series_name in (("macro", "macro image"), ("label", "Label")):
        out = tmp_path / f"{name}.png"
        proc = run(["associated", path, name, "-o", out])
        assert proc.returncode == 0, proc.stderr
        actual = imagecodecs.png_decode(out.read_bytes())
        assert actual.shape == associated[name].shape[:2] + (4,)
        assert_same_pixels(actual, to_rgba(by_name[series_name]), f"{name} ({compression})")


def test_rgb_pyramid_openslide_level0(rgb_pyramid, info, read_region, assert_same_pixels):
    """OpenSlide 4 as a second oracle, for what it reads of an OME-TIFF: level 0."""
    openslide = pytest.importorskip("openslide")
    path, levels, _, compression = rgb_pyramid
    try:
        slide = openslide.OpenSlide(str(path))
    except openslide.OpenSlideError as e:
        pytest.skip(f"OpenSlide 4 cannot open the generated OME-TIFF: {e}")
    with slide:
        vendor = slide.properties.get("openslide.vendor")
        dims = slide.level_dimensions
        w, h = dims[0]
        expected = np.asarray(slide.read_region((0, 0), 0, (w, h)))
    assert (h, w) == levels[0].shape[:2]
    actual = read_level(read_region, path, info(path), 0)
    assert_same_pixels(actual, expected, f"{path.name} level 0 vs OpenSlide ({compression})")
    if len(dims) < 4:
        reason = (
            f"OpenSlide 4 has no OME-TIFF format: it opens this file as {vendor!r} with "
            f"{len(dims)} level(s), ignoring the SubIFD pyramid, so levels 1-3 are compared with "
            "tifffile only"
        )
        print(reason)


# ---- generated multi-channel uint16 pyramid -------------------------------------------------


def test_uint16_multichannel_pyramid(tmp_path, info, read_region, assert_same_pixels):
    path = tmp_path / "fluo.ome.tif"
    rng = np.random.default_rng(3)
    h, w = 700, 900
    yy, xx = np.mgrid[0:h, 0:w]
    data = np.stack(
        [(xx * 70 + yy * 3) % 65536, (yy * 90) % 65536, rng.integers(0, 65536, (h, w))]
    ).astype(np.uint16)  # (C, Y, X)
    options = dict(photometric="minisblack", tile=(TILE, TILE), compression="zlib")
    channels = {"Name": ["DAPI", "FITC", "TRITC"]}
    with tifffile.TiffWriter(path) as tif:
        tif.write(
            data,
            subifds=2,
            metadata={"axes": "CYX", "Channel": channels, "PhysicalSizeX": 650,
                      "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 0.65},
            **options,
        )
        for level in (1, 2):
            tif.write(data[:, :: 2**level, :: 2**level], subfiletype=1, **options)
    facts = info(path)
    assert facts["format"] == "ome-tiff"
    with tifffile.TiffFile(path) as tif:
        levels = [lv.asarray()[0] for lv in tif.series[0].levels]  # channel 0 of each level
    assert [(lv["height"], lv["width"]) for lv in facts["levels"]] == [a.shape for a in levels]
    props = facts["properties"]
    assert props["ome.SizeC"] == "3" and props["ome.Type"] == "uint16"
    assert [props[f"ome.Channel[{i}].Name"] for i in range(3)] == channels["Name"]
    assert props["ome.PlaneShown"] == "Z=0 C=0 T=0"
    assert facts["mpp_x"] == pytest.approx(0.65) and facts["mpp_y"] == pytest.approx(0.65)
    for level, want in enumerate(levels):
        actual = read_level(read_region, path, facts, level)
        assert_same_pixels(actual, to_rgba(to_8bit(want)), f"uint16 C=0 level {level}")


# ---- hand-written OME-XML ---------------------------------------------------------------------


def test_tiffdata_maps_plane0(tmp_path, info, read_region, assert_same_pixels):
    """Z=0 C=0 T=0 is the fourth page: TiffData decides, not the page order."""
    path = tmp_path / "mapped.ome.tif"
    rng = np.random.default_rng(5)
    pages = [rng.integers(0, 256, (64, 96), dtype=np.uint8) for _ in range(4)]
    tiffdata = "".join(
        f'<TiffData FirstZ="{z}" FirstC="{c}" IFD="{ifd}" PlaneCount="1"/>'
        for ifd, (z, c) in enumerate([(1, 1), (0, 1), (1, 0), (0, 0)])
    )
    xml = ome_xml(
        f'<Image ID="Image:0" Name="mapped"><ObjectiveSettings ID="Objective:0:0"/>'
        f'<Pixels ID="Pixels:0" DimensionOrder="XYZCT" Type="uint8" SizeX="96" SizeY="64" '
        f'SizeZ="2" SizeC="2" SizeT="1" PhysicalSizeX="5000" PhysicalSizeXUnit="&#xC5;" '
        f'PhysicalSizeY="0.0005" PhysicalSizeYUnit="mm">'
        f'<Channel ID="Channel:0:0" Name="A &amp; B"/><Channel ID="Channel:0:1"/>'
        f"{tiffdata}</Pixels></Image>",
        extra='<Instrument ID="Instrument:0"><Objective ID="Objective:0:0" '
        'NominalMagnification="40"/></Instrument>',
    )
    write_with_description(path, pages, xml, tile=(32, 32), compression="zlib")
    facts = info(path)
    assert facts["format"] == "ome-tiff"
    assert facts["objective_power"] == pytest.approx(40)
    assert facts["mpp_x"] == pytest.approx(0.5) and facts["mpp_y"] == pytest.approx(0.5)
    props = facts["properties"]
    assert props["ome.Channel[0].Name"] == "A & B"
    assert props["ome.PlaneShown"] == "Z=0 C=0 T=0"
    actual = read_level(read_region, path, facts, 0)
    assert_same_pixels(actual, to_rgba(pages[3]), "plane Z=0 C=0 T=0 from IFD 3")


def test_dimension_order_without_tiffdata(tmp_path, info, read_region, assert_same_pixels):
    """No TiffData: planes follow DimensionOrder from IFD 0, and image 1 starts after image 0."""
    path = tmp_path / "order.ome.tif"
    rng = np.random.default_rng(6)
    pages = [rng.integers(0, 256, (40, 50), dtype=np.uint8) for _ in range(3)]
    xml = ome_xml(
        '<Image ID="Image:0"><Pixels DimensionOrder="XYCZT" Type="uint8" SizeX="50" SizeY="40" '
        'SizeZ="1" SizeC="2" SizeT="1"/></Image>'
        '<Image ID="Image:1" Name="slide label"><Pixels DimensionOrder="XYZCT" Type="uint8" '
        'SizeX="50" SizeY="40" SizeZ="1" SizeC="1" SizeT="1"/></Image>'
    )
    write_with_description(path, pages, xml, tile=(16, 16))
    facts = info(path)
    actual = read_level(read_region, path, facts, 0)
    assert_same_pixels(actual, to_rgba(pages[0]), "plane 0 in IFD 0")
    # Image 0 holds 2 planes (IFD 0, 1), so the label's plane 0 is IFD 2.
    assert facts["associated"] == {"label": {"width": 50, "height": 40}}


# ---- files that must fail cleanly -------------------------------------------------------------


def single_page(path, xml, shape=(32, 48)):
    write_with_description(path, [np.zeros(shape, np.uint8)], xml, tile=(16, 16))


def test_multi_file_tiffdata(tmp_path, run):
    path = tmp_path / "part1.ome.tif"
    xml = ome_xml(
        '<Image ID="Image:0"><Pixels DimensionOrder="XYZCT" Type="uint8" SizeX="48" SizeY="32" '
        'SizeZ="2" SizeC="1" SizeT="1">'
        '<TiffData FirstZ="0" IFD="0" PlaneCount="1"><UUID FileName="part1.ome.tif">'
        "urn:uuid:11111111-2222-3333-4444-555555555555</UUID></TiffData>"
        '<TiffData FirstZ="1" IFD="0" PlaneCount="1"><UUID FileName="part2.ome.tif">'
        "urn:uuid:99999999-2222-3333-4444-555555555555</UUID></TiffData>"
        "</Pixels></Image>"
    )
    single_page(path, xml)
    check_error(run, path, "multi-file OME-TIFF", "part2.ome.tif")


def test_binary_only(tmp_path, run):
    path = tmp_path / "binary-only.ome.tif"
    single_page(path, ome_xml('<BinaryOnly MetadataFile="x.companion.ome" UUID="urn:uuid:1"/>'))
    check_error(run, path, "multi-file OME-TIFF", "BinaryOnly")


@pytest.mark.parametrize(
    "xml, needle",
    [
        pytest.param(ome_xml("<Image><Pixels SizeX='48' SizeY='32'>")[:-6], "truncated",
                     id="truncated"),
        pytest.param(ome_xml("<Image><Pixels SizeX='48' SizeY='32'/></Image>").replace(
            "<OME", '<!DOCTYPE OME [<!ENTITY x SYSTEM "file:///etc/passwd">]><OME'),
            "DOCTYPE", id="doctype"),
        pytest.param(ome_xml("<Image><Pixels SizeX='48' SizeY='32' SizeZ='x'/></Image>"),
                     "SizeZ", id="bad-number"),
        pytest.param(ome_xml("<Image><Pixels SizeX='480' SizeY='32'/></Image>"),
                     "480x32", id="size-mismatch"),
        pytest.param(ome_xml("<Image><Pixels SizeX='48' SizeY='32'><TiffData IFD='7'/>"
                             "</Pixels></Image>"), "IFD 7", id="ifd-beyond-file"),
        pytest.param(ome_xml(""), "without an Image", id="no-image"),
        pytest.param(ome_xml("<Image ID='Image:0'/>"), "without Pixels", id="no-pixels"),
        pytest.param(ome_xml("<Image " + "a='1' " * 600 + "/>"), "attributes",
                     id="many-attributes"),
        pytest.param(ome_xml("<a>" * 400 + "</a>" * 400), "deeper", id="deep"),
    ],
)
def test_bad_metadata(tmp_path, run, xml, needle):
    path = tmp_path / "bad.ome.tif"
    single_page(path, xml)
    check_error(run, path, needle)


def test_not_ome(tmp_path, info):
    """XML in the description that is not OME-XML leaves the file to the generic TIFF reader."""
    path = tmp_path / "other.tif"
    single_page(path, '<?xml version="1.0"?><Other xmlns="urn:x"><OMEish/></Other>')
    assert info(path)["format"] == "generic-tiff"
