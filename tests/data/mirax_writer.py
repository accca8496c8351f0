"""Writes small but realistic 3DHISTECH MIRAX slides for the tests (there is no small public
sample): a `.mrxs` file beside a folder holding `Slidedat.ini`, `Index.dat` and two
`Data*.dat` files, laid out as the scanner lays them out and as OpenSlide 4 reads them.

The scene is a real H&E region (pixels of the shared Aperio CMU-1-Small-Region, read through
OpenSlide). The camera takes photos on a grid whose step is smaller than a photo (so neighbours
overlap) and each photo lands a little off the nominal grid (a jitter, in multiples of 8 pixels
so that every zoom level places it on whole pixels); each photo is cut into
CameraImageDivisionsPerSide^2 stored images. Some photos are missing (no tissue there). Each
higher zoom level halves a 2x2 block of the level below's images into one image, as the scanner
does, whatever photo they came from. The camera positions go into the VIMSLIDE_POSITION_BUFFER
record (9 bytes each: a flag, x, y), or zlib-compressed into a StitchingIntensityLayer record;
label, macro and thumbnail are JPEG records of their own. The zoom levels' images are JPEG,
or PNG or 24-bit BMP (Layout.image_format, Slidedat.ini's IMAGE_FORMAT). Index.dat spreads
level 0's records over two linked pages. Run as a script (`python mirax_writer.py OUT_DIR
[--compressed] [--format JPEG|PNG|BMP24]`) it writes the slide into OUT_DIR.
"""

from __future__ import annotations

import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SLIDE_ID = "3f2a9c1e5b7d4e60a1c2b3d4e5f60718"


@dataclass
class Layout:
    photos_x: int = 5
    photos_y: int = 4
    divisions: int = 2
    image_w: int = 128
    image_h: int = 96
    overlap_x: int = 24  # of a photo, level 0 pixels
    overlap_y: int = 16
    levels: int = 4
    quality: int = 90
    compressed_positions: bool = False
    positions: bool = True  # False: no position record, photos exactly on the nominal grid
    data_files: int = 2  # records alternate between Data0000.dat and Data0001.dat
    missing: tuple = ((4, 3), (0, 3))  # photos not taken (no tissue)
    jitter_seed: int = 7
    jitter_step: int = 8  # 8: every place is a whole pixel up to concatenation 8; 1: as scanners do
    image_format: str = "JPEG"  # how the zoom levels' images are stored: JPEG, PNG or BMP24
    extra_general: dict = field(default_factory=dict)


def _h_and_e(width: int, height: int, testdata: Path) -> np.ndarray:
    """A real H&E region (RGB uint8, height x width) from the shared Aperio slide."""
    import openslide

    with openslide.OpenSlide(str(testdata / "aperio" / "CMU-1-Small-Region.svs")) as s:
        w0, h0 = s.dimensions
        assert width <= w0 and height <= h0, (width, height, w0, h0)
        # the lower right holds epidermis and dermis: tissue all over the scene
        img = s.read_region((max(0, w0 - width - 100), max(0, h0 - height - 150)), 0, (width, height))
    return np.asarray(img.convert("RGB"), dtype=np.uint8)


def _jpeg(rgb: np.ndarray, quality: int) -> bytes:
    import imagecodecs

    return bytes(imagecodecs.jpeg8_encode(np.ascontiguousarray(rgb), level=quality))


def _png(rgb: np.ndarray) -> bytes:
    import imagecodecs

    return bytes(imagecodecs.png_encode(np.ascontiguousarray(rgb)))


def _bmp(rgb: np.ndarray) -> bytes:
    """A 24-bit bottom-up Windows bitmap (BITMAPINFOHEADER, BI_RGB), as MIRAX's BMP24 images."""
    h, w = rgb.shape[:2]
    row = (w * 3 + 3) & ~3
    pixels = np.zeros((h, row), dtype=np.uint8)
    pixels[:, :w * 3] = np.ascontiguousarray(rgb[::-1, :, ::-1]).reshape(h, w * 3)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, row * h, 3780, 3780, 0, 0)
    head = struct.pack("<2sIHHI", b"BM", 14 + 40 + row * h, 0, 0, 14 + 40)
    return head + info + pixels.tobytes()


def _encode(rgb: np.ndarray, image_format: str, quality: int) -> bytes:
    if image_format == "PNG":
        return _png(rgb)
    if image_format == "BMP24":
        return _bmp(rgb)
    assert image_format == "JPEG", image_format
    return _jpeg(rgb, quality)


def _halve(img: np.ndarray) -> np.ndarray:
    h, w = img.shape[0] // 2 * 2, img.shape[1] // 2 * 2
    a = img[:h, :w].astype(np.uint16)
    return ((a[0::2, 0::2] + a[1::2, 0::2] + a[0::2, 1::2] + a[1::2, 1::2] + 2) // 4).astype(np.uint8)


def write_mirax(out_dir: Path, testdata: Path, layout: Layout | None = None, name: str = "slide") -> Path:
    """Write OUT_DIR/NAME.mrxs and OUT_DIR/NAME/; returns the .mrxs path."""
    L = layout or Layout()
    d = L.divisions
    photo_w, photo_h = L.image_w * d, L.image_h * d
    step_x, step_y = photo_w - L.overlap_x, photo_h - L.overlap_y
    images_x, images_y = L.photos_x * d, L.photos_y * d
    rng = np.random.default_rng(L.jitter_seed)

    # Camera positions (level 0 pixels), multiples of 8; the first photo sits at (0, 0).
    positions = {}
    for py in range(L.photos_y):
        for px in range(L.photos_x):
            if (px, py) in L.missing:
                continue
            jx, jy = (0, 0) if (px, py) == (0, 0) else (int(v) * L.jitter_step for v in rng.integers(-1, 2, 2))
            if px == 1 and py == 0:
                jx = -8  # at least one photo each side of its nominal place
            if px == 0 and py == 1:
                jy = -8
            if px == 2 and py == 1:
                jx, jy = 8, 8
            if L.jitter_step != 8:  # places that are not multiples of 8 (nor of 2)
                jx, jy = jx + (px * 3 + py) % 7 - 3, jy + (py * 5 + px) % 7 - 3
            if not L.positions:
                jx = jy = 0
            positions[(px, py)] = (px * step_x + max(jx, 0 if px == 0 else -8),
                                   py * step_y + max(jy, 0 if py == 0 else -8))

    scene_w = max(x for x, _ in positions.values()) + photo_w + 8
    scene_h = max(y for _, y in positions.values()) + photo_h + 8
    scene = _h_and_e(scene_w, scene_h, testdata)
    fill = np.array([255, 255, 255], dtype=np.uint8)

    # Level 0: each photo cut into d x d images.
    level_images = [{}]
    for (px, py), (x, y) in positions.items():
        photo = scene[y:y + photo_h, x:x + photo_w]
        for sy in range(d):
            for sx in range(d):
                img = photo[sy * L.image_h:(sy + 1) * L.image_h, sx * L.image_w:(sx + 1) * L.image_w]
                level_images[0][(px * d + sx, py * d + sy)] = img
    # Higher levels: a 2x2 block of the level below's images, halved.
    for lv in range(1, L.levels):
        below, here, span = level_images[lv - 1], {}, 1 << lv
        for y in range(0, images_y, span):
            for x in range(0, images_x, span):
                half = span // 2
                parts = [below.get((x + dx * half, y + dy * half)) for dy in (0, 1) for dx in (0, 1)]
                if all(p is None for p in parts):
                    continue
                big = np.empty((2 * L.image_h, 2 * L.image_w, 3), dtype=np.uint8)
                for i, p in enumerate(parts):
                    oy, ox = (i // 2) * L.image_h, (i % 2) * L.image_w
                    big[oy:oy + L.image_h, ox:ox + L.image_w] = fill if p is None else p
                here[(x, y)] = _halve(big)
        level_images.append(here)

    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    header = b"01.02" + SLIDE_ID.encode()
    data = [bytearray(header + b"\0" * (3 + 4 * i)) for i in range(L.data_files)]

    def put(fileno: int, blob: bytes) -> tuple[int, int, int]:
        off = len(data[fileno])
        data[fileno] += blob
        return off, len(blob), fileno

    hier = []  # per level: [(image_index, offset, length, fileno)]
    for lv, images in enumerate(level_images):
        records = []
        for (x, y) in sorted(images, key=lambda k: (k[1], k[0])):
            off, ln, fno = put(lv % L.data_files, _encode(images[(x, y)], L.image_format, L.quality))
            records.append((y * images_x + x, off, ln, fno))
        hier.append(records)

    # Position buffer: one 9-byte record per photo (flag, x, y).
    pos = bytearray()
    for py in range(L.photos_y):
        for px in range(L.photos_x):
            x, y = positions.get((px, py), (0, 0))
            pos += struct.pack("<Bii", 1 if (px, py) in positions else 0, x, y)
    pos_blob = zlib.compress(bytes(pos)) if L.compressed_positions else bytes(pos)

    macro = _halve(_halve(scene))
    label = np.full((96, 160, 3), 235, dtype=np.uint8)
    sub = _halve(scene[:112, :256])
    label[20:20 + sub.shape[0], 16:16 + sub.shape[1]] = sub
    thumb = _halve(_halve(_halve(scene)))
    nonhier = [  # in Slidedat's NONHIER order
        put(1 % L.data_files, _jpeg(macro, 85)),
        put(1 % L.data_files, _jpeg(label, 85)),
        put(1 % L.data_files, _jpeg(thumb, 85)),
    ] + ([put(0, pos_blob)] if L.positions else [])
    for i, blob in enumerate(data):
        (folder / f"Data{i:04d}.dat").write_bytes(bytes(blob))

    # Index.dat
    idx = bytearray(header)
    hier_root = len(idx)
    idx += b"\0" * 8  # hier root pointer, nonhier root pointer

    def i32(v: int) -> bytes:
        return struct.pack("<i", v)

    def here() -> int:
        return len(idx)

    hier_table = here()
    idx += b"\0" * (4 * len(hier))
    for lv, records in enumerate(hier):
        head = here()
        struct.pack_into("<i", idx, hier_table + 4 * lv, head)
        idx += i32(0) + i32(head + 8)
        pages = [records[: len(records) // 2], records[len(records) // 2:]] if lv == 0 else [records]
        for p, page in enumerate(pages):
            start = here()
            idx += i32(len(page)) + i32(0)
            for rec in page:
                idx += b"".join(i32(v) for v in rec)
            if p + 1 < len(pages):
                struct.pack_into("<i", idx, start + 4, here())
    nonhier_table = here()
    idx += b"\0" * (4 * len(nonhier))
    for r, (off, ln, fno) in enumerate(nonhier):
        head = here()
        struct.pack_into("<i", idx, nonhier_table + 4 * r, head)
        idx += i32(0) + i32(head + 8)
        idx += i32(1) + i32(0) + i32(0) + i32(0) + i32(off) + i32(ln) + i32(fno)
    struct.pack_into("<ii", idx, hier_root, hier_table, nonhier_table)
    (folder / "Index.dat").write_bytes(bytes(idx))

    # Slidedat.ini
    pos_name = "StitchingIntensityLayer" if L.compressed_positions else "VIMSLIDE_POSITION_BUFFER"
    g = {
        "SLIDE_VERSION": "01.03",
        "SLIDE_ID": SLIDE_ID,
        "SLIDE_NAME": name,
        "SLIDE_CREATIONDATETIME": "20261127123456",
        "IMAGENUMBER_X": images_x,
        "IMAGENUMBER_Y": images_y,
        "OBJECTIVE_MAGNIFICATION": 20,
        "OBJECTIVE_NAME": "Plan-Apochromat",
        "CAMERA_TYPE": "CIS_VCC_F52U25CL",
        "CameraImageDivisionsPerSide": d,
        "VIMSLIDE_SLIDE_NAME": "H&E test",
        **L.extra_general,
    }
    lines = ["[GENERAL]"] + [f"{k} = {v}" for k, v in g.items()]
    lines += ["", "[HIERARCHICAL]", "HIER_COUNT = 1", f"NONHIER_COUNT = {2 if L.positions else 1}",
              "INDEXFILE = Index.dat",
              "HIER_0_NAME = Slide zoom level", f"HIER_0_COUNT = {L.levels}"]
    for lv in range(L.levels):
        lines += [f"HIER_0_VAL_{lv} = ZoomLevel_{lv}", f"HIER_0_VAL_{lv}_SECTION = LAYER_0_LEVEL_{lv}_SECTION"]
    lines += ["NONHIER_0_NAME = Scan data layer", "NONHIER_0_COUNT = 3",
              "NONHIER_0_VAL_0 = ScanDataLayer_SlideThumbnail",
              "NONHIER_0_VAL_0_SECTION = NONHIERLAYER_0_LEVEL_0_SECTION",
              "NONHIER_0_VAL_1 = ScanDataLayer_SlideBarcode",
              "NONHIER_0_VAL_1_SECTION = NONHIERLAYER_0_LEVEL_1_SECTION",
              "NONHIER_0_VAL_2 = ScanDataLayer_SlidePreview",
              "NONHIER_0_VAL_2_SECTION = NONHIERLAYER_0_LEVEL_2_SECTION"]
    if L.positions:
        lines += [f"NONHIER_1_NAME = {pos_name}", "NONHIER_1_COUNT = 1", "NONHIER_1_VAL_0 = default",
                  "NONHIER_1_VAL_0_SECTION = NONHIERLAYER_1_LEVEL_0_SECTION"]
    lines += ["", "[DATAFILE]", f"FILE_COUNT = {L.data_files}"]
    lines += [f"FILE_{i} = Data{i:04d}.dat" for i in range(L.data_files)]
    for lv in range(L.levels):
        s = 1 << lv
        lines += ["", f"[LAYER_0_LEVEL_{lv}_SECTION]",
                  f"OVERLAP_X = {L.overlap_x // s}", f"OVERLAP_Y = {L.overlap_y // s}",
                  f"MICROMETER_PER_PIXEL_X = {0.2428 * s:.4f}", f"MICROMETER_PER_PIXEL_Y = {0.2431 * s:.4f}",
                  f"IMAGE_FORMAT = {L.image_format}", "IMAGE_FILL_COLOR_BGR = 16777215",
                  f"DIGITIZER_WIDTH = {L.image_w}", f"DIGITIZER_HEIGHT = {L.image_h}",
                  f"IMAGE_CONCAT_FACTOR = {0 if lv == 0 else 1}"]
    lines += ["", "[NONHIERLAYER_0_LEVEL_0_SECTION]", "THUMBNAIL_IMAGE_TYPE = JPEG",
              "", "[NONHIERLAYER_0_LEVEL_1_SECTION]", "BARCODE_IMAGE_TYPE = JPEG",
              "", "[NONHIERLAYER_0_LEVEL_2_SECTION]", "PREVIEW_IMAGE_TYPE = JPEG"]
    if L.positions:
        lines += ["", "[NONHIERLAYER_1_LEVEL_0_SECTION]", "VIMSLIDE_POSITION_DATA_FORMAT_VERSION = 257"]
    (folder / "Slidedat.ini").write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))

    mrxs = out_dir / f"{name}.mrxs"
    mrxs.write_bytes(_jpeg(thumb, 80))
    return mrxs


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    out = Path(sys.argv[1])
    flags = sys.argv[2:]
    fmt = flags[flags.index("--format") + 1] if "--format" in flags else "JPEG"
    lay = Layout(compressed_positions="--compressed" in flags, image_format=fmt)
    print(write_mirax(out, here.parent.parent.parent / "shared" / "testdata", lay))
