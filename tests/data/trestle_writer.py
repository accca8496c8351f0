"""Writer of small, realistic Trestle (MedScan) slides for tests/data/test_trestle.py and the
fuzz seed (fuzz/corpus/tiff/seed-trestle).

A Trestle slide is a tiled TIFF whose Software tag starts "MedScan" and whose first
ImageDescription is a list of "key=value" pairs separated by ';' (Background Color, White
Balance, Objective Power, JPEG Quality, OverlapsXY). Every directory is a level, and each level's
tiles overlap their right and lower neighbours by that level's pair of OverlapsXY (" 64 64 32 32
16 16": note the leading space): tile (c, r) shows the level from (c * (tile - overlap_x),
r * (tile - overlap_y)) on, so the TIFF image is wider than the level by (tiles - 1) overlaps.
XResolution and YResolution hold the microns per pixel. The macro is a JPEG in the sibling file
with the extension replaced by ".Full".

The pixels are a real H&E region (the shared aperio/CMU-1-Small-Region.svs, read through
OpenSlide), downsampled for the lower levels; each tile is a little brighter or darker than its
neighbours (a camera frame's own exposure), so that which tile shows where tiles overlap is
visible in the pixels.

Run as a script, `trestle_writer.py --seed OUT` writes the small fuzz seed (flat colours, no
shared data needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

TILE = 256
OVERLAPS = [(64, 64), (32, 32), (16, 16)]  # per level: x, y
LEVEL0 = (1600, 1152)  # level 0's width: the TIFF's last tile column is full (8 x 256 = 2048)
MPP = 0.4649
DESCRIPTION = ("Background Color=E7E3DF;White Balance=FFF8F0;Objective Power=20;"
               "JPEG Quality=80;OverlapsXY= 64 64 32 32 16 16")


def stored_size(level: int, tile: int, overlap: int) -> tuple[int, int]:
    """The TIFF width (or height) and tile count that show `level` pixels when tiles of `tile`
    overlap by `overlap`: the fewest tiles n with (n - 1) * tile < level + (n - 1) * overlap <=
    n * tile."""
    n = 1
    while True:
        stored = level + (n - 1) * overlap
        if (n - 1) * tile < stored <= n * tile:
            return stored, n
        n += 1
        assert n < 10_000, (level, tile, overlap)


def overlapped(level: np.ndarray, tile: int, ox: int, oy: int, exposure: bool) -> np.ndarray:
    """The TIFF image of a level whose tiles overlap by (ox, oy): tile (c, r) holds the level's
    pixels from (c * (tile - ox), r * (tile - oy)), each tile with its own exposure."""
    h, w = level.shape[:2]
    sw, across = stored_size(w, tile, ox)
    sh, down = stored_size(h, tile, oy)
    out = np.zeros((down * tile, across * tile, 3), dtype=np.uint8)
    ax, ay = tile - ox, tile - oy
    for r in range(down):
        for c in range(across):
            part = level[r * ay:r * ay + tile, c * ax:c * ax + tile].astype(np.int16)
            shift = ((c * 5 + r * 3) % 7) - 3 if exposure else 0
            part = np.clip(part + 2 * shift, 0, 255).astype(np.uint8)
            out[r * tile:r * tile + part.shape[0], c * tile:c * tile + part.shape[1]] = part
    return out[:sh, :sw]


def write_trestle(path: Path, levels: list[np.ndarray], overlaps, *, description: str,
                  macro: bytes | None, tile: int = TILE, mpp: float = MPP,
                  software: str = "MedScan 1.0.0.0", exposure: bool = True,
                  quality: int = 80) -> Path:
    """A Trestle TIFF of `levels` (RGB arrays, largest first) with tiles overlapping by
    `overlaps` (one (x, y) per level), and its macro `macro` (JPEG bytes) beside it."""
    import tifffile

    with tifffile.TiffWriter(path, bigtiff=False) as tif:
        for k, level in enumerate(levels):
            ox, oy = overlaps[k] if k < len(overlaps) else (0, 0)
            tif.write(overlapped(level, tile, ox, oy, exposure), tile=(tile, tile),
                      photometric="rgb", compression="jpeg", compressionargs={"level": quality},
                      description=description if k == 0 else None,
                      software=software if k == 0 else None, metadata=None,
                      resolution=(mpp, mpp), resolutionunit="NONE")
    if macro is not None:
        path.with_suffix(".Full").write_bytes(macro)
    return path


def write_sample(path: Path, testdata: Path, *, description: str = DESCRIPTION,
                 overlaps=OVERLAPS, macro: bool = True) -> Path:
    """The test slide: three levels (1600 x 1152, 800 x 576, 400 x 288) of the real H&E region in
    256-pixel JPEG tiles overlapping by 64, 32 and 16 pixels, and a macro of the glass."""
    import imagecodecs
    import vendor_samples

    w0, h0 = LEVEL0
    base = vendor_samples.he_region(testdata, w0, h0, 300, 500)
    levels = [base, vendor_samples.downsample(base, 2), vendor_samples.downsample(base, 4)]
    jpeg = None
    if macro:
        glass = vendor_samples.downsample(vendor_samples.he_region(testdata, 2000, 1400, 0, 0), 4)
        jpeg = bytes(imagecodecs.jpeg8_encode(glass, level=90))
    return write_trestle(path, levels, overlaps, description=description, macro=jpeg)


def write_seed(path: Path) -> Path:
    """A tiny Trestle file for the fuzzer: two levels of 32-pixel JPEG tiles overlapping by 8
    and 4 pixels, in flat colours."""
    yy, xx = np.mgrid[0:72, 0:88]
    level0 = np.stack([xx * 2, yy * 3, (xx + yy)], axis=-1).astype(np.uint8)
    level1 = level0[::2, ::2].copy()
    return write_trestle(path, [level0, level1], [(8, 8), (4, 4)], tile=32, macro=None,
                         quality=50, description=("Background Color=FFFFFF;Objective Power=10;"
                                                  "JPEG Quality=50;OverlapsXY= 8 8 4 4"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--seed":
        sys.exit("usage: trestle_writer.py --seed OUT")
    write_seed(Path(sys.argv[2]))
