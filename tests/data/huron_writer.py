"""Writes small, realistic Huron slides for test_huron.py (there are no small public samples).

A Huron TissueScope slide is a tiled BigTIFF laid out as Aperio's: the full-resolution level
first, a stripped thumbnail second, the lower pyramid levels (tiled, same tile size) after it, and
at the end a stripped label (NewSubfileType 1) and macro (NewSubfileType 9). The Make tag starts
with "Huron"; the first ImageDescription holds newline-separated "key = value" lines. The pixels
are a real H&E region (vendor_samples.he_region), JPEG-compressed as YCbCr.
"""

from __future__ import annotations

from pathlib import Path

import vendor_samples

TILE = 256
# Level 0 is 1000 x 760: 4 x 3 tiles, the last column and row only partly inside the image.
LEVEL0 = (1000, 760)
FACTORS = (1, 2, 4)
MPP = 0.4  # microns per pixel at level 0 (a 20x scan)
MAKE = "Huron Digital Pathology"
MODEL = "TissueScope LE120"

# The first ImageDescription as the scanner writes it: padded "key = value" lines; a first line
# without '=' (not a property); CRLF on one line; a value holding '='; a key given twice (the
# later value wins, as in OpenSlide's hash table).
DESCRIPTION = "\n".join([
    "Huron TissueScope whole slide image",
    "Scanner = TissueScope LE120",
    "Serial Number = LE120-0042",
    "Software Version =  4.0.3.1  ",
    "Resolution = 0.4 um\r",
    "Objective = 20x",
    "Scan Date = 2024-03-05 14:21:07",
    "Focus Mode = Z-Stack; Planes=1",
    "\tStain = H&E",
    "Barcode = S24-1234 A1",
    "Scanner = TissueScope LE120 (rev B)",
    "",
])


def rgb_to_ycbcr(rgb):
    """JFIF's RGB -> YCbCr, rounded: the components a 33003 (YCbCr) JPEG 2000 tile holds."""
    import numpy as np

    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb = 128 - 0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 128 + 0.5 * r - 0.418688 * g - 0.081312 * b
    return np.clip(np.round(np.stack([y, cb, cr], axis=-1)), 0, 255).astype(np.uint8)


def write_huron(path: Path, testdata: Path, *, make: str = MAKE,
                description: str | None = DESCRIPTION, first_tiled: bool = True,
                compression=None, ycbcr: bool = False) -> Path:
    """The Huron slide described above. `make`, `description` (None: no ImageDescription),
    `first_tiled` and `compression` (a tifffile name, for the tiled levels) let tests write the
    variants: files that are not Huron's, or not OpenSlide's to read. With `ycbcr` the tiled
    levels hold YCbCr components (for JPEG 2000 tiles relabelled 33003)."""
    import tifffile

    w0, h0 = LEVEL0
    base = vendor_samples.he_region(testdata, w0, h0, 300, 400)
    levels = [base if f == 1 else vendor_samples.downsample(base, f) for f in FACTORS]
    if ycbcr:
        levels = [rgb_to_ycbcr(img) for img in levels]
    thumb = vendor_samples.downsample(base, 8)
    label = vendor_samples.he_region(testdata, 300, 200, 1500, 2200)
    macro = vendor_samples.downsample(vendor_samples.he_region(testdata, 1200, 400, 0, 1600), 2)
    res = (1e4 / MPP, 1e4 / MPP)
    tiled = {"compression": "jpeg", "compressionargs": {"level": 88}}
    if compression is not None:
        tiled = {"compression": compression}
    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        tif.write(levels[0], tile=(TILE, TILE) if first_tiled else None, photometric="rgb",
                  description=description, metadata=None, software="TissueScope 4.0.3",
                  extratags=[(271, "s", 0, make, True), (272, "s", 0, MODEL, True)],
                  resolution=res, resolutionunit="CENTIMETER",
                  rowsperstrip=None if first_tiled else 64, **tiled)
        tif.write(thumb, photometric="rgb", compression="jpeg", rowsperstrip=16, metadata=None,
                  description="thumbnail")
        for img, f in zip(levels[1:], FACTORS[1:]):
            tif.write(img, tile=(TILE, TILE), photometric="rgb", subfiletype=0, metadata=None,
                      resolution=(res[0] / f, res[1] / f), resolutionunit="CENTIMETER", **tiled)
        tif.write(label, photometric="rgb", compression="lzw", subfiletype=1, rowsperstrip=64,
                  metadata=None, description="label")
        tif.write(macro, photometric="rgb", compression="jpeg", subfiletype=9, rowsperstrip=32,
                  metadata=None, description="macro")
    return path
