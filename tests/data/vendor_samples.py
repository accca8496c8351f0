"""Writers of small, realistic vendor TIFF slides for the vendor tests (test_philips.py, ...).

There are no small public sample files of these vendors, so the tests write them: the layout each
vendor's scanner writes (the metadata, the pyramid, the associated images, the vendor's quirks),
with real JPEG tiles made from a real H&E region (the pixels of the shared
aperio/CMU-1-Small-Region.svs, read through OpenSlide). OpenSlide 4 must recognise each file as
that vendor's, or the file proves nothing; the tests check that first.
"""

from __future__ import annotations

import base64
import io
import struct
from pathlib import Path

import numpy as np

H_AND_E = "aperio/CMU-1-Small-Region.svs"


def he_region(testdata: Path, width: int, height: int, x: int = 0, y: int = 0) -> np.ndarray:
    """RGB pixels (height, width, 3) of the real H&E slide's level 0 at (x, y)."""
    import openslide

    with openslide.OpenSlide(str(testdata / H_AND_E)) as slide:
        img = slide.read_region((x, y), 0, (width, height))
    return np.ascontiguousarray(np.asarray(img)[..., :3])


def downsample(rgb: np.ndarray, factor: int) -> np.ndarray:
    """Mean of factor x factor blocks (the image is cut to whole blocks)."""
    h, w = rgb.shape[0] // factor, rgb.shape[1] // factor
    blocks = rgb[: h * factor, : w * factor].reshape(h, factor, w, factor, 3).astype(np.float32)
    return np.round(blocks.mean(axis=(1, 3))).astype(np.uint8)


def pad_to(rgb: np.ndarray, width: int, height: int, value: int = 236) -> np.ndarray:
    """rgb in the top-left of a width x height image filled with `value` (a scanner's padding)."""
    out = np.full((height, width, 3), value, dtype=np.uint8)
    out[: rgb.shape[0], : rgb.shape[1]] = rgb
    return out


# tifffile's photometric="rgb" with compression="jpeg" stores what scanners store: JPEG tiles of
# YCbCr (2x2 subsampled) converted from the RGB given, tagged Photometric YCbCr. (Its
# photometric="ycbcr" would take the given pixels as YCbCr already.)


def jpeg(rgb: np.ndarray, quality: int = 85) -> bytes:
    import imagecodecs

    return bytes(imagecodecs.jpeg8_encode(rgb, level=quality))


def zero_tile_byte_counts(path: Path, page: int, tiles: list[int]) -> None:
    """Make tiles of a page missing, as a sparse scan leaves them: their byte count set to 0."""
    import tifffile

    data = bytearray(path.read_bytes())
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages[page].tags["TileByteCounts"]
        size = {3: 2, 4: 4, 16: 8}[tag.dtype if isinstance(tag.dtype, int) else int(tag.dtype)]
        fmt = tif.byteorder + {2: "H", 4: "I", 8: "Q"}[size]
        base = tag.valueoffset
    for t in tiles:
        struct.pack_into(fmt, data, base + t * size, 0)
    path.write_bytes(bytes(data))


# ---- Philips ------------------------------------------------------------------------------------

PHILIPS_TILE = 256
# Level 0 is 1280 x 768 (5 x 3 tiles); the lower levels keep whole tiles, so level 1 (640 x 384)
# is stored as 768 x 512 and level 2 (320 x 192) as 512 x 256: padding OpenSlide does not show.
PHILIPS_LEVEL0 = (1280, 768)
PHILIPS_MPP_MM = 0.000227273
# Tiles of each page left unwritten (a sparse scan of two areas): page -> tile indices.
PHILIPS_MISSING = {0: [4, 10], 1: [2]}


def _philips_attr(name: str, value: str, group: str = "0x301D", element: str = "0x1000",
                  vr: str = "IString") -> str:
    return (f'<Attribute Name="{name}" Group="{group}" Element="{element}" PMSVR="{vr}">'
            f"{value}</Attribute>")


def philips_xml(levels: list[tuple[int, int, float]], label: bytes | None, macro: bytes | None,
                drop_spacing: int | None = None) -> str:
    """The DPUfsImport DataObject a Philips scanner writes into the first ImageDescription.
    levels: (stored width, stored height, pixel spacing in mm) per level."""
    reps = []
    for i, (w, h, spacing) in enumerate(levels):
        attrs = [
            _philips_attr("PIIM_PIXEL_DATA_REPRESENTATION_NUMBER", str(i), element="0x2001",
                          vr="IUInt16"),
            _philips_attr("PIIM_PIXEL_DATA_REPRESENTATION_COLUMNS", str(w), element="0x2002",
                          vr="IUInt32"),
            _philips_attr("PIIM_PIXEL_DATA_REPRESENTATION_ROWS", str(h), element="0x2003",
                          vr="IUInt32"),
        ]
        if i != drop_spacing:
            attrs.insert(0, _philips_attr("DICOM_PIXEL_SPACING", f'"{spacing:.9g}" "{spacing:.9g}"',
                                          group="0x0028", element="0x0030", vr="IDoubleArray"))
        reps.append('<DataObject ObjectType="PixelDataRepresentation">' + "".join(attrs)
                    + "</DataObject>")
    wsi = (
        '<DataObject ObjectType="DPScannedImage">'
        + _philips_attr("DICOM_DERIVATION_DESCRIPTION",
                        'tiff-useBigTIFF=1-useRgb=0-levels=20,40,10002-processing=0-q85'
                        '-sourceFilename="T17-0042 &amp; co"', group="0x0008", element="0x2111")
        + _philips_attr("DICOM_LOSSY_IMAGE_COMPRESSION_METHOD", '"PHILIPS_DP_1_0"',
                        group="0x0028", element="0x2114", vr="IStringArray")
        + _philips_attr("DICOM_PIXEL_SPACING", f'"{levels[0][2]:.9g}" "{levels[0][2]:.9g}"',
                        group="0x0028", element="0x0030", vr="IDoubleArray")
        + _philips_attr("PIM_DP_IMAGE_COLUMNS", str(levels[0][0]), element="0x1007",
                        vr="IUInt32")
        + _philips_attr("PIM_DP_IMAGE_ROWS", str(levels[0][1]), element="0x1006", vr="IUInt32")
        + _philips_attr("PIM_DP_IMAGE_TYPE", "WSI", element="0x1004")
        + _philips_attr("PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE",
                        "<Array>" + "".join(reps) + "</Array>", group="0x1001",
                        element="0x8B01", vr="IDataObjectArray")
        + _philips_attr("PIM_DP_SOURCE_FILE", "%FILENAME%", element="0x1005")
        + "</DataObject>"
    )
    images = [wsi]
    for kind, data in (("LABELIMAGE", label), ("MACROIMAGE", macro)):
        if data is not None:
            b64 = base64.b64encode(data).decode()
            wrapped = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
            images.append(
                '<DataObject ObjectType="DPScannedImage">'
                + _philips_attr("PIM_DP_IMAGE_DATA", wrapped, element="0x1005", vr="IString")
                + _philips_attr("PIM_DP_IMAGE_TYPE", kind, element="0x1004")
                + "</DataObject>"
            )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<DataObject ObjectType="DPUfsImport">'
        + _philips_attr("DICOM_ACQUISITION_DATETIME", "20170312101112.000000",
                        group="0x0008", element="0x002A")
        + _philips_attr("DICOM_MANUFACTURER", "PHILIPS", group="0x0008", element="0x0070")
        + _philips_attr("DICOM_SOFTWARE_VERSIONS", '"1.6.5505" "20111209_R44"',
                        group="0x0018", element="0x1020", vr="IStringArray")
        + _philips_attr("PIM_DP_UFS_BARCODE", base64.b64encode(b"T17-0042").decode(),
                        element="0x1002")
        + _philips_attr("PIM_DP_UFS_INTERFACE_VERSION", "3.0", element="0x1001")
        + _philips_attr("PIM_DP_SCANNED_IMAGES", "<Array>" + "".join(images) + "</Array>",
                        element="0x1003", vr="IDataObjectArray")
        + "</DataObject>\n"
    )


def write_philips(path: Path, testdata: Path, *, drop_spacing: int | None = None,
                  tiff_label: bool = True) -> Path:
    """A Philips TIFF: three JPEG levels (YCbCr, 256-pixel tiles, padded to whole tiles), sparse
    tiles on two levels, a label as a stripped TIFF directory "Label" (and a different one in the
    XML, which OpenSlide must not prefer), and the macro only as base64 JPEG in the XML."""
    import tifffile

    w0, h0 = PHILIPS_LEVEL0
    base = he_region(testdata, w0, h0, 200, 300)
    images, levels = [], []
    for k, factor in enumerate((1, 2, 4)):
        img = base if factor == 1 else downsample(base, factor)
        sw = -(-img.shape[1] // PHILIPS_TILE) * PHILIPS_TILE
        sh = -(-img.shape[0] // PHILIPS_TILE) * PHILIPS_TILE
        if k > 0:  # a lower level keeps at least one whole tile of padding
            sw += PHILIPS_TILE if sw == img.shape[1] else 0
            sh += PHILIPS_TILE if sh == img.shape[0] else 0
        images.append(pad_to(img, sw, sh))
        levels.append((sw, sh, PHILIPS_MPP_MM * factor))
    label_rgb = he_region(testdata, 300, 200, 1500, 2000)
    xml_label = jpeg(he_region(testdata, 240, 160, 100, 100))
    macro = jpeg(he_region(testdata, 600, 240, 0, 1200))
    xml = philips_xml(levels, xml_label, macro, drop_spacing)
    with tifffile.TiffWriter(path, bigtiff=False) as tif:
        for k, img in enumerate(images):
            tif.write(img, tile=(PHILIPS_TILE, PHILIPS_TILE), photometric="rgb",
                      compression="jpeg", compressionargs={"level": 85},
                      subfiletype=0 if k == 0 else 1, description=xml if k == 0 else None,
                      software="Philips DP v1.0" if k == 0 else None, metadata=None,
                      resolution=(1e4 / (PHILIPS_MPP_MM * 1e3), 1e4 / (PHILIPS_MPP_MM * 1e3)),
                      resolutionunit="CENTIMETER")
        if tiff_label:
            tif.write(label_rgb, photometric="rgb", compression="lzw", description="Label",
                      metadata=None, rowsperstrip=64)
    for page, tiles in PHILIPS_MISSING.items():
        zero_tile_byte_counts(path, page, tiles)
    return path


# ---- Leica SCN ----------------------------------------------------------------------------------

LEICA_NS = "http://www.leica-microsystems.com/scn/2010/10/01"
LEICA_TILE = 256
LEICA_NM_PER_PIXEL = 500  # level 0: 0.5 um per pixel
# The glass slide in level-0 pixels, and the two scanned regions (main images) on it:
# (x, y, width, height) in level-0 pixels; all multiples of 4 so that offsets stay whole pixels on
# the levels at 1/2 and 1/4.
LEICA_SLIDE = (1600, 1200)
LEICA_REGIONS = [(100, 80, 640, 448), (900, 600, 512, 384)]
LEICA_MACRO = (400, 300)  # the macro's largest dimension (the whole slide at 1/4)


def _leica_dimensions(ifds_sizes, extra: str = "") -> str:
    return "".join(
        f'<dimension sizeX="{w}" sizeY="{h}" r="{k}" ifd="{ifd}"{extra}/>'
        for k, (ifd, (w, h)) in enumerate(ifds_sizes)
    )


def _leica_image(name: str, dims: str, nm: tuple[int, int, int, int], objective: str,
                 illumination: str = "brightfield") -> str:
    x, y, w, h = nm
    return (
        f'<image name="{name}" uuid="urn:uuid:0000-{name}">'
        "<creationDate>2012-03-14T09:26:53.55Z</creationDate>"
        '<device model="Leica SCN400;Leica SCN" version="1.4.0.10470 2011/05/06 13:58:22;'
        '1.4.0.10521"/>'
        f'<pixels sizeX="{w}" sizeY="{h}">{dims}</pixels>'
        f'<view sizeX="{w}" sizeY="{h}" offsetX="{x}" offsetY="{y}" spacingZ="0"/>'
        "<scanSettings>"
        f"<objectiveSettings><objective>{objective}</objective></objectiveSettings>"
        "<illuminationSettings><numericalAperture>0.4</numericalAperture>"
        f"<illuminationSource>{illumination}</illuminationSource></illuminationSettings>"
        "</scanSettings></image>"
    )


LEICA_NS_OLD = "http://www.leica-microsystems.com/scn/2010/03/10"


def write_leica(path: Path, testdata: Path, *, dissimilar: bool = False,
                old_namespace: bool = False) -> Path:
    """A Leica SCN400 slide: a tiled BigTIFF whose first directory (the macro at full size) holds
    the <scn> XML; a whole-slide macro image in two resolutions; two main images (two scanned
    regions) at three resolutions each, JPEG (YCbCr) in 256-pixel tiles with the edge tiles
    padded; a fluorescence image and a second focal plane, which OpenSlide skips. With
    `dissimilar`, the second region claims another objective (OpenSlide refuses such a slide);
    with `old_namespace`, the first (2010/03/10) schema, whose barcode is an attribute."""
    import tifffile

    sw, sh = LEICA_SLIDE
    nm = LEICA_NM_PER_PIXEL
    pages = []  # (rgb, description or None)
    macro = downsample(he_region(testdata, sw, sh, 0, 0), 4)
    pages.append(macro)
    pages.append(downsample(macro, 2))
    regions = []
    for i, (x, y, w, h) in enumerate(LEICA_REGIONS):
        base = he_region(testdata, w, h, 300 + 600 * i, 200 + 500 * i)
        levels = [base, downsample(base, 2), downsample(base, 4)]
        first = len(pages)
        pages.extend(levels)
        regions.append((first, levels, (x * nm, y * nm, w * nm, h * nm)))
    # A second focal plane of region 0 at its smallest size (z=1), stored but not read.
    z1 = len(pages)
    pages.append(regions[0][1][2][::-1].copy())
    images = [
        _leica_image("macro", _leica_dimensions([(0, LEICA_MACRO), (1, (LEICA_MACRO[0] // 2,
                                                                      LEICA_MACRO[1] // 2))]),
                     (0, 0, sw * nm, sh * nm), "1.25"),
    ]
    for i, (first, levels, nmbox) in enumerate(regions):
        dims = _leica_dimensions([(first + k, (lv.shape[1], lv.shape[0]))
                                  for k, lv in enumerate(levels)])
        if i == 0:
            small = levels[2]
            dims += f'<dimension sizeX="{small.shape[1]}" sizeY="{small.shape[0]}" r="2" ' \
                    f'ifd="{z1}" z="1"/>'
        objective = "40" if (dissimilar and i == 1) else "20"
        images.append(_leica_image(f"main{i}", dims, nmbox, objective))
    # A fluorescence image over region 1's directories: not brightfield, not read.
    first, levels, nmbox = regions[1]
    images.append(_leica_image("fluo", _leica_dimensions(
        [(first + k, (lv.shape[1], lv.shape[0])) for k, lv in enumerate(levels)]), nmbox, "20",
        illumination="fluorescence"))
    if old_namespace:
        head = (f'<scn xmlns="{LEICA_NS_OLD}"><collection name="slide-7" barcode="LS-2010-0310" '
                f'sizeX="{sw * nm}" sizeY="{sh * nm}">')
    else:
        head = (f'<scn xmlns="{LEICA_NS}"><collection name="slide-7" uuid="urn:uuid:slide-7" '
                f'sizeX="{sw * nm}" sizeY="{sh * nm}">'
                f"<barcode>{base64.b64encode(b'LS-2012-0314').decode()}</barcode>")
    xml = '<?xml version="1.0" encoding="utf-8"?>' + head + "".join(images) + "</collection></scn>"
    res = 1e4 / (nm / 1000)  # pixels per centimetre at level 0
    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        for k, rgb in enumerate(pages):
            h, w = rgb.shape[:2]
            tw = LEICA_TILE if w > 128 else 128
            th = LEICA_TILE if h > 128 else 128
            tif.write(rgb, tile=(th, tw), photometric="rgb", compression="jpeg",
                      compressionargs={"level": 85}, description=xml if k == 0 else None,
                      software="Leica SCN" if k == 0 else None, metadata=None,
                      resolution=(res, res), resolutionunit="CENTIMETER")
    return path


# ---- Ventana BIF --------------------------------------------------------------------------------

BIF_TILE = 256
BIF_OVERLAP = 16  # pixels each camera frame shares with its neighbour, both ways
# Scanned areas: (first TIFF tile column, row, frames across, down, level-0 x, y top-down); the
# positions and the advance (240) stay whole pixels at 1/2 and 1/4.
BIF_AREAS = [(0, 0, 3, 2, 40, 0), (4, 3, 2, 2, 800, 560)]
BIF_GRID = (6, 5)  # TIFF tiles of level 0, across and down
BIF_MAGS = (40, 20, 10)


def _bif_number(col: int, row: int, across: int, down: int) -> int:
    """The 1-based serpentine tile number of frame (col, row top-down): from the bottom-left,
    right along the bottom row, left along the next, ..."""
    r = down - 1 - row
    c = across - 1 - col if r % 2 else col
    return r * across + c + 1


def _bif_encode_info(areas, heights) -> str:
    advance = BIF_TILE - BIF_OVERLAP
    top = max(y + h for (_, _, _, _, _, y), h in zip(areas, heights))
    origins, infos = [], []
    for i, (sc, sr, across, down, x, y) in enumerate(areas):
        pos_y = top - y - heights[i]  # Pos-Y counts up from below every area
        origins.append(f'<AOI{i} OriginX="{sc * BIF_TILE}" OriginY="{sr * BIF_TILE}"/>')
        joints = []
        for row in range(down):
            for col in range(across):
                here = _bif_number(col, row, across, down)
                conf = 80 + (7 * col + 3 * row) % 20
                if col + 1 < across:
                    joints.append(
                        f'<TileJointInfo FlagJoined="1" Confidence="{conf}" Direction="RIGHT" '
                        f'Tile1="{here}" Tile2="{_bif_number(col + 1, row, across, down)}" '
                        f'OverlapX="{BIF_OVERLAP}" OverlapY="{1 + col % 3}"/>')
                if row + 1 < down:
                    joints.append(
                        f'<TileJointInfo FlagJoined="1" Confidence="{conf}" Direction="UP" '
                        f'Tile1="{_bif_number(col, row + 1, across, down)}" Tile2="{here}" '
                        f'OverlapX="{2 - col % 2}" OverlapY="{BIF_OVERLAP}"/>')
        infos.append(
            f'<ImageInfo AOIScanned="1" AOIIndex="{i}" NumRows="{down}" NumCols="{across}" '
            f'Width="{BIF_TILE}" Height="{BIF_TILE}" Pos-X="{x}.0" Pos-Y="{pos_y}" '
            f'PixelsPerMicronX="4.301" PixelsPerMicronY="4.301">' + "".join(joints)
            + "</ImageInfo>")
    # An area the operator marked but did not scan: skipped.
    origins.append(f'<AOI{len(areas)} OriginX="{5 * BIF_TILE}" OriginY="0"/>')
    infos.append(f'<ImageInfo AOIScanned="0" AOIIndex="{len(areas)}" NumRows="1" NumCols="1" '
                 f'Width="{BIF_TILE}" Height="{BIF_TILE}" Pos-X="9000" Pos-Y="9000"/>')
    return ('<?xml version="1.0" encoding="UTF-8"?><EncodeInfo Ver="2"><SlideInfo>'
            '<Name>slide-9</Name></SlideInfo><AoiOrigin>' + "".join(origins) + "</AoiOrigin>"
            "<SlideStitchInfo>" + "".join(infos) + "</SlideStitchInfo></EncodeInfo>")


def write_bif(path: Path, testdata: Path, *, bad_direction: bool = False,
              metadata_root: bool = False, plain_tiff: bool = False) -> Path:
    """A Ventana DP 200 BIF: a macro ("Label Image", carrying the iScan XMP) and a thumbnail,
    then three JPEG levels (magnifications 40, 20, 10) in 256-pixel tiles. Level 0's tiles are
    camera frames of two scanned areas that overlap their neighbours by 16 pixels (each frame a
    little brighter or darker, as a camera's are, so that which frame shows matters), described
    by the level-0 EncodeInfo XMP with serpentine tile numbers; an unscanned area is listed too.
    The lower levels hold the frames side by side, downsampled. With `bad_direction`, one joint's
    direction is "LEFT", which OpenSlide 4 refuses; with `metadata_root`, the iScan element sits
    in a <Metadata> root (as some scanners write it); with `plain_tiff`, level 0 has no
    EncodeInfo (a Ventana TIFF: each level read as it is stored)."""
    import tifffile

    t, advance = BIF_TILE, BIF_TILE - BIF_OVERLAP
    across_all, down_all = BIF_GRID
    mosaic = np.full((down_all * t, across_all * t, 3), 255, dtype=np.uint8)
    heights = []
    for k, (sc, sr, across, down, x, y) in enumerate(BIF_AREAS):
        w, h = (across - 1) * advance + t, (down - 1) * advance + t
        heights.append(h)
        scene = he_region(testdata, w, h, 250 + 700 * k, 300 + 900 * k).astype(np.int16)
        for row in range(down):
            for col in range(across):
                frame = scene[row * advance:row * advance + t, col * advance:col * advance + t]
                shift = ((col * 5 + row * 3 + k) % 7) - 3  # the frame's own exposure
                frame = np.clip(frame + 2 * shift, 0, 255).astype(np.uint8)
                mosaic[(sr + row) * t:(sr + row + 1) * t, (sc + col) * t:(sc + col + 1) * t] = frame
    iscan = ('<?xml version="1.0" encoding="UTF-8"?><iScan BuildDate="1/1/2020" '
             'BuildVersion="1.1.0.15854" Magnification="40" ScanRes="0.232500" '
             'ScannerModel="VENTANA DP 200" UnitNumber="DP200-0042" SlideAnnotation="" '
             'ShowLabel="1" Z-layers="1"/>').encode()
    if metadata_root:
        iscan = iscan.replace(b"<iScan ", b"<Metadata><iScan ").replace(b"/>", b"/></Metadata>")
    encode = _bif_encode_info(BIF_AREAS, heights)
    if bad_direction:
        encode = encode.replace('Direction="RIGHT"', 'Direction="LEFT"', 1)
    macro = downsample(he_region(testdata, 1200, 400, 0, 0), 4)
    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        tif.write(macro, photometric="rgb", compression="lzw", description="Label Image",
                  metadata=None, extratags=[(700, 1, len(iscan), iscan, True)])
        tif.write(downsample(mosaic, 8), photometric="rgb", compression="lzw",
                  description="Thumbnail", metadata=None)
        for k, mag in enumerate(BIF_MAGS):
            img = mosaic if k == 0 else downsample(mosaic, 2 ** k)
            extra = [(700, 1, len(encode), encode.encode(), True)] if k == 0 and not plain_tiff \
                else []
            tif.write(img, tile=(t, t), photometric="rgb", compression="jpeg",
                      compressionargs={"level": 90}, metadata=None,
                      description=f"level={k} mag={mag} quality=90", extratags=extra)
    return path
