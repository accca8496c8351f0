"""Writer of small Sakura SVSlide slides (`.svslide`) for test_sakura.py and the fuzz seeds.

An SVSlide is an SQLite database written by the scanner's object-relational mapper (XPO): a
config table names the "unique" table of named blobs (the magic "SVGigaPixelImage", a version,
a binary Header with the tile size and image size, and the tiles), and three tables hold the
slide's metadata and its label, macro and thumbnail JPEGs. Each tile is stored three times, one
greyscale JPEG per colour channel, under the id "T;X|Y;DOWNSAMPLE;CHANNEL;FOCALPLANE" (X, Y the
tile's top-left in level-0 pixels), each beside an MD5 under the same id plus "#". Levels halve,
each padded to whole tiles; this writer uses the pixels of a real H&E slide (the shared
aperio/CMU-1-Small-Region.svs, read through OpenSlide) and Pillow's JPEG encoder.

The error tests spoil a copy with SQL (test_sakura.py). Run as a script, it writes the small
seeds of the fuzz target: `sakura_writer.py TESTDATA OUT_DIR` (fuzz/corpus/sakura).
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
import struct
from pathlib import Path

import numpy as np

SAKURA_TILE = 256
SAKURA_SIZE = (1003, 761)  # level 0; neither a multiple of the tile nor of the downsamples
SAKURA_DOWNSAMPLES = (1, 2, 4)
SAKURA_MM_PER_PIXEL = 0.000499
SAKURA_TABLE = "SVGigaPixelImage_8d2f4c1e"
PADDING = 236  # what the scanner stores beyond the image in edge tiles


def tile_id(x: int, y: int, downsample: int, channel: int, plane: int = 0) -> str:
    return f"T;{x}|{y};{downsample};{channel};{plane}"


def grey_jpeg(channel: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(channel), mode="L").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def rgb_jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb), mode="RGB").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def header_blob(tile: int, width: int, height: int, planes: int = 1) -> bytes:
    """The 54-byte Header: tile size, image size, then fields whose meaning is unknown (the
    values seen in scanners' files)."""
    return struct.pack("<IIIIIII", tile, width, height, 8, planes, 3, 1) + struct.pack(
        "<H", 256) + struct.pack("<IIIII", 1, 2, 3, 4, 5)


def _level_pixels(base: np.ndarray, downsample: int) -> np.ndarray:
    if downsample == 1:
        return base
    h, w = base.shape[0] // downsample, base.shape[1] // downsample
    blocks = base[: h * downsample, : w * downsample].reshape(h, downsample, w, downsample, 3)
    return np.round(blocks.astype(np.float32).mean(axis=(1, 3))).astype(np.uint8)


def write_sakura(path: Path, testdata: Path, *, size: tuple[int, int] = SAKURA_SIZE,
                 tile: int = SAKURA_TILE, downsamples=SAKURA_DOWNSAMPLES, quality: int = 90,
                 associated_scale: int = 1, page_size: int = 4096) -> Path:
    """Write the slide at `path` (replacing any file there) and return the path."""
    import vendor_samples

    width, height = size
    base = vendor_samples.he_region(testdata, width, height, 600, 900)
    path = Path(path)
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    t = SAKURA_TABLE
    db.execute(f"PRAGMA page_size = {int(page_size)}")
    db.executescript(f"""
        CREATE TABLE DataManagerSQLiteConfigXPO (OID INTEGER PRIMARY KEY, TableName TEXT,
            OptimisticLockField INTEGER);
        CREATE TABLE "{t}" (id TEXT PRIMARY KEY, size INTEGER, data BLOB);
        CREATE TABLE SVSlideDataXPO (OID INTEGER PRIMARY KEY, m_labelScan INTEGER,
            m_overviewScan INTEGER, SlideId TEXT, Date TEXT, Description TEXT, Creator TEXT,
            DiagnosisCode TEXT, HRScanCount INTEGER, Keywords TEXT, TotalDataSizeBytes INTEGER);
        CREATE TABLE SVHRScanDataXPO (OID INTEGER PRIMARY KEY, ParentSlide INTEGER, ScanId TEXT,
            Date TEXT, Description TEXT, Name TEXT, PosOnSlideMm BLOB, ResolutionMmPerPix REAL,
            NominalLensMagnification REAL, ThumbnailImage BLOB, TotalDataSizeBytes INTEGER,
            FocussingMethod INTEGER, FocusStack BLOB);
        CREATE TABLE SVScannedImageDataXPO (OID INTEGER PRIMARY KEY, Id TEXT, PosOnSlideMm BLOB,
            ScanCenterPosMm BLOB, ResolutionMmPerPix REAL, Image BLOB, ThumbnailImage BLOB);
        CREATE TABLE tile (TILEID TEXT, PYRAMIDLEVEL INTEGER, COLUMNINDEX INTEGER,
            ROWINDEX INTEGER, COLORINDEX INTEGER);
    """)
    db.execute("INSERT INTO DataManagerSQLiteConfigXPO VALUES (1, ?, 0)", (t,))
    blobs = [("++MagicBytes", b"SVGigaPixelImage"), ("++VersionBytes", b"1.0.0")]
    blobs.append(("Header", header_blob(tile, width, height)))
    tiles = []
    for ds in downsamples:
        pixels = _level_pixels(base, ds)
        lh, lw = pixels.shape[:2]
        across, down = -(-lw // tile), -(-lh // tile)
        padded = np.full((down * tile, across * tile, 3), PADDING, np.uint8)
        padded[:lh, :lw] = pixels
        for row in range(down):
            for col in range(across):
                part = padded[row * tile:(row + 1) * tile, col * tile:(col + 1) * tile]
                x, y = col * tile * ds, row * tile * ds
                for c in range(3):
                    tid = tile_id(x, y, ds, c)
                    data = grey_jpeg(part[..., c], quality)
                    blobs.append((tid, data))
                    blobs.append((tid + "#", hashlib.md5(data).digest()))
                    tiles.append((tid, ds, x, y, c))
    total = sum(len(d) for k, d in blobs if not k.startswith("++"))
    blobs.append(("TOTAL_SIZE", b""))
    db.executemany(f'INSERT INTO "{t}" VALUES (?, ?, ?)',
                   [(k, total if k == "TOTAL_SIZE" else len(d), d) for k, d in blobs])
    db.executemany("INSERT INTO tile VALUES (?, ?, ?, ?, ?)", tiles)
    a = associated_scale
    label = rgb_jpeg(_level_pixels(vendor_samples.he_region(testdata, 300, 220, 1500, 2000), a),
                     quality)
    macro = rgb_jpeg(_level_pixels(vendor_samples.he_region(testdata, 1600, 640, 0, 1200), 4 * a),
                     quality)
    thumb = rgb_jpeg(_level_pixels(base, min(8 * a, max(1, min(width, height) // 8))), quality)
    pos = struct.pack("<dd", 12.5, 30.25)
    db.execute("INSERT INTO SVScannedImageDataXPO VALUES (7, ?, ?, ?, ?, ?, ?)",
               ("5b0e53a2-1111-4c3d-9e0f-0a1b2c3d4e5f", pos, pos, 0.02, label, thumb))
    db.execute("INSERT INTO SVScannedImageDataXPO VALUES (8, ?, ?, ?, ?, ?, ?)",
               ("5b0e53a2-2222-4c3d-9e0f-0a1b2c3d4e5f", pos, pos, 0.04, macro, thumb))
    db.execute("INSERT INTO SVSlideDataXPO VALUES (1, ?, 8, ?, ?, ?, ?, '0', 1, ?, ?)",
               (7, "0f6a1c9e-3b7d-4e21-8a55-6c0d2e9f4b13",
                "2021-05-10T12:34:56", "H&E, lung", "slidepipe tests", "tumour; lung", total))
    db.execute("INSERT INTO SVHRScanDataXPO VALUES (1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
               ("a41f7d02-9c3e-4b6a-b1d8-2e5f7c9a0b64", "2021-05-10T12:40:00", "scan 1", "HR1",
                pos, SAKURA_MM_PER_PIXEL, 20.0, thumb, total, bytes(8)))
    db.commit()
    db.close()
    return path


def write_seeds(testdata: Path, out: Path) -> None:
    """The fuzz seeds: tiny slides (16-pixel tiles, two or three levels, small pages)."""
    out.mkdir(parents=True, exist_ok=True)
    write_sakura(out / "seed-two-levels", testdata, size=(40, 30), tile=16, downsamples=(1, 2),
                 quality=40, associated_scale=10, page_size=512)
    write_sakura(out / "seed-three-levels", testdata, size=(70, 33), tile=32,
                 downsamples=(1, 2, 4), quality=30, associated_scale=10, page_size=512)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    write_seeds(Path(sys.argv[1]), Path(sys.argv[2]))
