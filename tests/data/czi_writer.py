"""A small writer of Zeiss CZI files for the tests (test_czi.py), for what Zeiss's own writer
pylibCZIrw cannot write: pyramid subblocks (stored smaller than their logical size), chosen
dimension entries, and label/preview attachments.

It writes the segments as the CZI specification lays them out: every segment a 32-byte header
(an ASCII id of 16 bytes, the allocated and the used size as little-endian int64) and its data,
segments at multiples of 32 bytes. ZISRAWFILE first (version 1.0, the positions of the
directory, the metadata and the attachment directory), then the ZISRAWSUBBLOCK segments (their
header part at least 256 bytes: sizes, a copy of the directory entry, fill), the ZISRAWMETADATA
(the XML), attachments (ZISRAWATTACH) and their directory (ZISRAWATTDIR), and the ZISRAWDIRECTORY
with one DirectoryEntryDV per subblock. pylibCZIrw (libCZI) reads these files back in the tests,
so the vendor's reader vouches for the layout.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PIXEL_GRAY8, PIXEL_BGR24, PIXEL_BGRA32 = 0, 3, 9
RAW, JPEG, JPEGXR, ZSTD0, ZSTD1 = 0, 1, 4, 5, 6
BYTES_PER_PIXEL = {PIXEL_GRAY8: 1, PIXEL_BGR24: 3, PIXEL_BGRA32: 4}
JXR_RGB24 = bytes.fromhex("24c3dd6f034efe4bb1853d77768dc90d")  # GUID_PKPixelFormat24bppRGB as stored


@dataclass
class Subblock:
    """Pixels `data` (stored height, stored width[, samples], uint8, BGR order as CZI stores
    them) covering width x height pixels of level 0 at (x, y); `dims` the other dimension
    starts (e.g. {"C": 0, "Z": 1}); `payload` replaces the encoded pixels when set."""

    x: int
    y: int
    width: int
    height: int
    data: np.ndarray
    compression: int = RAW
    pixel_type: int = PIXEL_BGR24
    dims: dict = field(default_factory=dict)
    payload: bytes | None = None
    quality: float = 1.0  # JPEG XR: 1.0 is lossless


def _segment(ident: bytes, data: bytes, allocated: int | None = None) -> bytes:
    used = len(data)
    alloc = max(used, allocated or 0)
    alloc = (alloc + 31) // 32 * 32
    return ident.ljust(16, b"\0") + struct.pack("<qq", alloc, used) + data.ljust(alloc, b"\0")


def _encode(sb: Subblock) -> bytes:
    if sb.payload is not None:
        return sb.payload
    raw = np.ascontiguousarray(sb.data, dtype=np.uint8).tobytes()
    if sb.compression == RAW:
        return raw
    import imagecodecs

    if sb.compression == ZSTD0:
        return imagecodecs.zstd_encode(raw, level=3)
    if sb.compression == ZSTD1:
        # A three-byte header: its size, chunk 1 (hi/lo byte packing) with the flag off.
        return b"\x03\x01\x00" + imagecodecs.zstd_encode(raw, level=3)
    if sb.compression == JPEGXR:
        if sb.data.ndim == 2:
            return imagecodecs.jpegxr_encode(sb.data, level=sb.quality)
        # imagecodecs writes RGB pixels as the 24bppRGB format; CZI (libCZI) wants 24bppBGR, the
        # same coded image handed out in B, G, R order: only the format GUID's last byte differs.
        stream = bytearray(imagecodecs.jpegxr_encode(np.ascontiguousarray(sb.data[..., ::-1]),
                                                     level=sb.quality))
        at = stream.find(JXR_RGB24)
        stream[at + 15] = JXR_RGB24[15] - 1
        return bytes(stream)
    if sb.compression == JPEG:
        rgb = np.ascontiguousarray(sb.data[..., ::-1])
        return imagecodecs.jpeg8_encode(rgb, level=95)
    raise ValueError(f"cannot encode compression {sb.compression}")


def _entry(sb: Subblock, position: int) -> bytes:
    stored_h, stored_w = sb.data.shape[:2]
    dims = [(b"X", sb.x, sb.width, stored_w), (b"Y", sb.y, sb.height, stored_h)]
    dims += [(k.encode(), v, 1, 1) for k, v in sb.dims.items()]
    pyramid = 0 if (stored_w, stored_h) == (sb.width, sb.height) else 2
    out = struct.pack("<2siqiiB5si", b"DV", sb.pixel_type, position, 0, sb.compression, pyramid,
                      b"\0" * 5, len(dims))
    for name, start, size, stored in dims:
        out += struct.pack("<4siifi", name.ljust(4, b"\0"), start, size, 0.0, stored)
    return out


def metadata_xml(width: int, height: int, mpp: float | None, objective: float | None) -> str:
    """The ImageDocument a scanner writes, reduced to what readers look at: the image size,
    the scaling (metres per pixel) and the objective (an Objective in the instrument, which the
    image's ObjectiveSettings name)."""
    scaling = ""
    if mpp is not None:
        scaling = ("<Scaling><Items>"
                   f'<Distance Id="X"><Value>{mpp * 1e-6!r}</Value><DefaultUnitFormat>µm'
                   "</DefaultUnitFormat></Distance>"
                   f'<Distance Id="Y"><Value>{mpp * 1e-6!r}</Value></Distance>'
                   "</Items></Scaling>")
    instrument = ""
    if objective is not None:
        instrument = ('<Instrument><Objectives><Objective Id="Objective:1" Name="Plan-Apochromat">'
                      f"<NominalMagnification>{objective:g}</NominalMagnification>"
                      "</Objective></Objectives></Instrument>")
    return ("<ImageDocument><Metadata><Information>"
            f"<Image><SizeX>{width}</SizeX><SizeY>{height}</SizeY><PixelType>Bgr24</PixelType>"
            + ('<ObjectiveSettings><ObjectiveRef Id="Objective:1"/></ObjectiveSettings>'
               if objective is not None else "")
            + f"</Image>{instrument}</Information>{scaling}</Metadata></ImageDocument>")


def write_czi(path: Path, subblocks: list[Subblock], xml: str = "",
              attachments: list[tuple[str, bytes, bytes]] = ()) -> Path:
    """Write the file; `attachments` are (name, content file type such as b"JPG", data)."""
    guid = uuid.uuid4().bytes
    out = bytearray(_segment(b"ZISRAWFILE", b"", 512))  # rewritten at the end
    entries = []
    for sb in subblocks:
        position = len(out)
        payload = _encode(sb)
        entry = _entry(sb, position)
        head = struct.pack("<iiq", 0, 0, len(payload)) + entry
        head = head.ljust(256, b"\0")
        out += _segment(b"ZISRAWSUBBLOCK", head + payload)
        entries.append(entry)
    metadata_pos = 0
    if xml:
        metadata_pos = len(out)
        text = xml.encode()
        out += _segment(b"ZISRAWMETADATA", struct.pack("<ii", len(text), 0).ljust(256, b"\0") + text)
    att_entries = []
    for name, kind, data in attachments:
        position = len(out)
        entry = struct.pack("<2s10sqi16s8s80s", b"A1", b"", position, 0, uuid.uuid4().bytes,
                            kind, name.encode())
        head = struct.pack("<i12s", len(data), b"") + entry + b"\0" * 112
        out += _segment(b"ZISRAWATTACH", head + data)
        att_entries.append(entry)
    # Always a directory, empty or not (OpenSlide 4 refuses a file without one).
    att_dir_pos = len(out)
    out += _segment(b"ZISRAWATTDIR",
                    struct.pack("<i", len(att_entries)).ljust(256, b"\0") + b"".join(att_entries))
    dir_pos = len(out)
    out += _segment(b"ZISRAWDIRECTORY",
                    struct.pack("<i", len(entries)).ljust(128, b"\0") + b"".join(entries))
    header = struct.pack("<iiii16s16siqqiq", 1, 0, 0, 0, guid, guid, 0, dir_pos, metadata_pos, 0,
                         att_dir_pos)
    out[:512 + 32] = _segment(b"ZISRAWFILE", header, 512)
    Path(path).write_bytes(bytes(out))
    return Path(path)


def tiles(bgr: np.ndarray, tile: int, x0: int = 0, y0: int = 0, factor: int = 1,
          **kwargs) -> list[Subblock]:
    """Cut a level's pixels `bgr` (already downsampled by `factor`) into tile x tile subblocks
    placed in level-0 coordinates from (x0, y0)."""
    out = []
    h, w = bgr.shape[:2]
    for y in range(0, h, tile):
        for x in range(0, w, tile):
            part = bgr[y:y + tile, x:x + tile]
            out.append(Subblock(x0 + x * factor, y0 + y * factor, part.shape[1] * factor,
                                part.shape[0] * factor, part, **kwargs))
    return out


def write_seeds(folder: Path) -> list[Path]:
    """Small CZI files for the fuzz target's corpus (fuzz/fuzz_czi.c), written when the fuzz run
    starts (scripts/fuzz-smoke): a two-level pyramid of raw subblocks with an embedded preview,
    zstd0, zstd1 and JPEG XR subblocks when imagecodecs is there, two focal planes, Gray8
    pixels. Synthetic pixels, so that no test data is needed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(27)
    bgr = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    half = np.ascontiguousarray(bgr[::2, ::2])
    xml = metadata_xml(64, 48, 0.5, 20)
    preview = folder / "seed-preview.czi"
    write_czi(preview, tiles(half, 32), metadata_xml(32, 24, None, None))
    out = [write_czi(folder / "seed-pyramid-raw.czi",
                     tiles(bgr, 32, 10, 20) + tiles(half, 32, 10, 20, factor=2), xml,
                     [("SlidePreview", b"CZI", preview.read_bytes())]), preview]
    try:
        import imagecodecs  # noqa: F401
        out.append(write_czi(folder / "seed-zstd.czi", tiles(bgr, 32, compression=ZSTD0)
                             + tiles(half, 32, factor=2, compression=ZSTD1), xml))
        out.append(write_czi(folder / "seed-jpegxr.czi",
                             tiles(bgr, 32, compression=JPEGXR, quality=0.8), xml))
    except ImportError:
        pass
    out.append(write_czi(folder / "seed-planes.czi",
                         tiles(bgr, 32, dims={"Z": 0, "C": 0})
                         + tiles(bgr[::-1].copy(), 32, dims={"Z": 1, "C": 0}), xml))
    out.append(write_czi(folder / "seed-gray8.czi",
                         tiles(np.ascontiguousarray(bgr[..., 1]), 32, pixel_type=PIXEL_GRAY8), xml))
    return out


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--seeds":
        sys.exit("usage: czi_writer.py --seeds FOLDER")
    write_seeds(Path(sys.argv[2]))
