"""Writers of small Hamamatsu VMS and VMU slides in the scanner's layout, for test_vms.py (there is
no small public sample): real H&E pixels (aperio/CMU-1-Small-Region.svs through OpenSlide).

VMS: a `.vms` key file naming a grid of JPEG files with restart markers (one interval = a tile),
an OptimisationFile giving where each row of intervals starts (40-byte records, the first 8
bytes a little-endian offset; the last row of the last image missing, as Hamamatsu's are), a
map JPEG (a small view of the whole slide, also with restart markers) and a macro JPEG.
VMU: a `.vmu` key file naming an NGR image ("GN", width, height, column width, where the pixels
start; 16-bit little-endian RGB samples of 12 bits, in columns), an NGR map and a macro JPEG.

Run as a script, `python vms_writer.py --seeds DIR` writes the fuzz seeds (fuzz/fuzz_vms.c).
"""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vendor_samples  # noqa: E402


def jpeg_with_restarts(rgb: np.ndarray, interval: int, quality: int = 88) -> bytes:
    """A baseline 4:2:2 JPEG (16 x 8 MCUs) with a restart marker every `interval` MCUs
    (Pillow/libjpeg). Not 4:2:0: OpenSlide 4 decodes a tile with the stream's whole-image
    frame header and only the tile's size set afterwards, so at full scale libjpeg's 4:2:0
    upsampling asks for the next MCU row and the read fails ("found marker 0xd9 instead of
    RST0"); 4:2:2 needs no row below."""
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "JPEG", quality=quality, restart_marker_blocks=interval,
                              subsampling=1)
    return out.getvalue()


def interval_starts(data: bytes) -> list[int]:
    """Where each restart interval's bytes start: after the SOS segment, then after each RSTn."""
    sos = data.index(b"\xff\xda")
    first = sos + 2 + struct.unpack(">H", data[sos + 2: sos + 4])[0]
    out = [first]
    i = first
    while True:
        i = data.find(b"\xff", i)
        if i < 0 or i + 1 >= len(data):
            return out
        if 0xD0 <= data[i + 1] <= 0xD7:
            out.append(i + 2)
        i += 2 if data[i + 1] != 0xFF else 1


def key_file(group: str, keys: list[tuple[str, str]]) -> bytes:
    lines = [f"[{group}]"] + [f"{k}={v}" for k, v in keys]
    return ("\r\n".join(lines) + "\r\n").encode()


# The slide: 2 x 2 JPEGs of 512 x 388, tiles of 8 MCUs (128 x 8). 388 is not a whole number of
# 8-row MCUs: each JPEG's last 4 rows are not shown (the next row of JPEGs starts at 384) and the
# slide ends in a transparent band, as OpenSlide lays them out.
VMS_JPEG_W, VMS_JPEG_H, VMS_INTERVAL = 512, 388, 8


def write_vms(folder: Path, testdata: Path, cols: int = 2, rows: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    he = vendor_samples.he_region(testdata, VMS_JPEG_W * cols, VMS_JPEG_H * rows, 200, 300)
    names, opt = [], b""
    jpegs = []
    for r in range(rows):
        for c in range(cols):
            part = he[r * VMS_JPEG_H:(r + 1) * VMS_JPEG_H, c * VMS_JPEG_W:(c + 1) * VMS_JPEG_W]
            data = jpeg_with_restarts(np.ascontiguousarray(part), VMS_INTERVAL)
            name = "slide.jpg" if (c, r) == (0, 0) else f"slide_x{c}_y{r}.jpg"
            (folder / name).write_bytes(data)
            names.append(((c, r), name))
            jpegs.append(data)
    per_row = VMS_JPEG_W // (16 * VMS_INTERVAL)
    rows_of_tiles = VMS_JPEG_H // 8
    for i, data in enumerate(jpegs):
        starts = interval_starts(data)
        last = i == len(jpegs) - 1
        for row in range(rows_of_tiles - (1 if last else 0)):
            opt += struct.pack("<q", starts[row * per_row]) + bytes(32)
    (folder / "slide.opt").write_bytes(opt)
    # The map: the whole slide at 1/8, 128 x 96 (its width equals the slide's at 1/8, so
    # OpenSlide shows the map there), one MCU per interval.
    small = vendor_samples.downsample(he, 8)[:96, :128]
    (folder / "slide_map.jpg").write_bytes(jpeg_with_restarts(np.ascontiguousarray(small), 1))
    macro = vendor_samples.downsample(vendor_samples.he_region(testdata, 1200, 400, 0, 0), 4)
    (folder / "slide_macro.jpg").write_bytes(vendor_samples.jpeg(macro))
    keys = [("NoLayers", "1"), ("NoJpegColumns", str(cols)), ("NoJpegRows", str(rows))]
    keys += [("ImageFile" if (c, r) == (0, 0) else f"ImageFile({c},{r})", n) for (c, r), n in names]
    keys += [
        ("MapFile", "slide_map.jpg"), ("OptimisationFile", "slide.opt"),
        ("MacroImage", "slide_macro.jpg"), ("PhysicalWidth", "460800"),
        ("PhysicalHeight", "352800"), ("PhysicalMacroWidth", "76000000"),
        ("PhysicalMacroHeight", "26000000"), ("XOffsetFromSlideCentre", "-1234567"),
        ("YOffsetFromSlideCentre", "890123"), ("SourceLens", "20"),
        ("AuthCode", "0123456789"), ("Reference", "slidepipe test VMS"),
    ]
    path = folder / "slide.vms"
    path.write_bytes(key_file("Virtual Microscope Specimen", keys))
    return path


def ngr(rgb: np.ndarray, column_width: int, rng: np.random.Generator, start: int = 64) -> bytes:
    """An NGR file: 12-bit samples (the 8-bit value's bits, then 4 random low bits) in columns."""
    h, w, _ = rgb.shape
    assert w % column_width == 0
    samples = (rgb.astype(np.uint16) << 4) | rng.integers(0, 16, rgb.shape, dtype=np.uint16)
    header = bytearray(start)
    header[0:2] = b"GN"
    struct.pack_into("<iii", header, 4, w, h, column_width)
    struct.pack_into("<i", header, 24, start)
    cols = [samples[:, x:x + column_width].astype("<u2").tobytes()
            for x in range(0, w, column_width)]
    return bytes(header) + b"".join(cols)


def write_vmu(folder: Path, testdata: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(27)
    he = vendor_samples.he_region(testdata, 384, 200, 900, 1200)  # 200: a short last tile row
    (folder / "slide.ngr").write_bytes(ngr(he, 128, rng))
    (folder / "slide_map.ngr").write_bytes(ngr(vendor_samples.downsample(he, 4), 96, rng))
    macro = vendor_samples.downsample(vendor_samples.he_region(testdata, 900, 300, 0, 0), 3)
    (folder / "slide_macro.jpg").write_bytes(vendor_samples.jpeg(macro))
    keys = [
        ("ImageFile", "slide.ngr"), ("MapFile", "slide_map.ngr"),
        ("MacroImage", "slide_macro.jpg"), ("BitsPerPixel", "36"), ("PixelOrder", "RGB"),
        ("PhysicalWidth", "172800"), ("PhysicalHeight", "90000"), ("SourceLens", "40"),
        ("XOffsetFromSlideCentre", "2000"), ("YOffsetFromSlideCentre", "-3000"),
    ]
    path = folder / "slide.vmu"
    path.write_bytes(key_file("Uncompressed Virtual Microscope Specimen", keys))
    return path


def fuzz_seeds(folder: Path) -> None:
    """Tiny VMS and VMU slides as fuzz/fuzz_vms.c takes them: the key file, then files 1, 2, 3
    (image, map, macro), each after "\0FILE\0". Made from a smooth gradient, not the H&E
    slide, so that the seeds need no test data."""
    y, x = np.mgrid[0:16, 0:64]
    rgb = np.stack([x * 4, y * 16, (x + y) * 3], axis=-1).astype(np.uint8)
    marker = b"\0FILE\0"
    vms_keys = key_file("Virtual Microscope Specimen", [
        ("NoJpegColumns", "2"), ("NoJpegRows", "1"), ("ImageFile", "1"), ("ImageFile(1,0)", "1"),
        ("MapFile", "2"), ("MacroImage", "3"), ("PhysicalWidth", "57600"),
        ("PhysicalHeight", "7200"), ("SourceLens", "20")])
    vms = marker.join([vms_keys, jpeg_with_restarts(rgb, 2),
                       jpeg_with_restarts(np.ascontiguousarray(rgb[:8, :32]), 1),
                       vendor_samples.jpeg(np.ascontiguousarray(rgb[:, :16]))])
    rng = np.random.default_rng(1)
    vmu_keys = key_file("Uncompressed Virtual Microscope Specimen", [
        ("ImageFile", "1"), ("MapFile", "2"), ("MacroImage", "3"), ("BitsPerPixel", "36"),
        ("PixelOrder", "RGB"), ("PhysicalWidth", "28800"), ("SourceLens", "40")])
    vmu = marker.join([vmu_keys, ngr(np.ascontiguousarray(rgb[:, :32]), 16, rng, start=32),
                       ngr(np.ascontiguousarray(rgb[:8, :16]), 16, rng, start=32),
                       vendor_samples.jpeg(np.ascontiguousarray(rgb[:, :16]))])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed-vms").write_bytes(vms)
    (folder / "seed-vmu").write_bytes(vmu)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--seeds":
        sys.exit("usage: vms_writer.py --seeds DIR")
    fuzz_seeds(Path(sys.argv[2]))
