"""icc_profiles.py — small ICC v2 RGB display profiles written byte by byte for the ICC tests.

Pillow's ImageCms.createProfile makes only sRGB, Lab and XYZ, and no profile other than sRGB
ships with this machine, so the tests write their own non-sRGB profile: a matrix/TRC monitor
profile (ICC.1:2001-04, the layout of every scanner's and monitor's RGB profile) with the
Adobe RGB (1998) primaries adapted to D50 and a pure power-law tone curve. Converting such
pixels to sRGB changes them visibly (greens and reds most), so a test of the conversion can
fail. LittleCMS and Pillow both read what is written here; `rgb_profile` checks that Pillow
does before returning it.
"""

from __future__ import annotations

import io
import struct

# Adobe RGB (1998) colorants, Bradford-adapted to the D50 profile connection space, and D50.
ADOBE_RGB_D50 = {
    "rXYZ": (0.60974, 0.31111, 0.01947),
    "gXYZ": (0.20528, 0.62567, 0.06087),
    "bXYZ": (0.14919, 0.06322, 0.74457),
}
D50 = (0.9642, 1.0, 0.8249)


def _s15(v: float) -> bytes:
    return struct.pack(">i", round(v * 65536))


def _xyz(v) -> bytes:
    return b"XYZ " + bytes(4) + b"".join(_s15(c) for c in v)


def _curve(gamma: float) -> bytes:
    # curveType with one entry: the exponent as u8Fixed8Number.
    return b"curv" + bytes(4) + struct.pack(">IH", 1, round(gamma * 256)) + bytes(2)


def _desc(text: str) -> bytes:
    ascii_ = text.encode("ascii") + b"\0"
    # textDescriptionType: ASCII part, then empty Unicode and ScriptCode parts (67 bytes fixed).
    body = b"desc" + bytes(4) + struct.pack(">I", len(ascii_)) + ascii_
    body += struct.pack(">II", 0, 0) + struct.pack(">HB", 0, 0) + bytes(67)
    return body


def _text(text: str) -> bytes:
    return b"text" + bytes(4) + text.encode("ascii") + b"\0"


def _pad4(b: bytes) -> bytes:
    return b + bytes(-len(b) % 4)


def rgb_profile(description="slidepipe test Adobe RGB (1998)-like", gamma=2.19921875,
                colorants=None, intent=0) -> bytes:
    """An ICC v2 display-class RGB profile (matrix/TRC) as bytes, with header rendering
    intent `intent` (0 perceptual, 1 relative colorimetric, 2 saturation, 3 absolute)."""
    colorants = colorants or ADOBE_RGB_D50
    curve = _curve(gamma)
    tags = [
        (b"desc", _desc(description)),
        (b"cprt", _text("No copyright: written by slidepipe's tests")),
        (b"wtpt", _xyz(D50)),
        (b"rXYZ", _xyz(colorants["rXYZ"])),
        (b"gXYZ", _xyz(colorants["gXYZ"])),
        (b"bXYZ", _xyz(colorants["bXYZ"])),
        (b"rTRC", curve),
        (b"gTRC", curve),
        (b"bTRC", curve),
    ]
    table_len = 4 + 12 * len(tags)
    offset = 128 + table_len
    table = struct.pack(">I", len(tags))
    data = b""
    for sig, body in tags:
        body = _pad4(body)
        table += sig + struct.pack(">II", offset + len(data), len(body))
        data += body
    size = 128 + table_len + len(data)
    header = struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000)
    header += b"mntr" + b"RGB " + b"XYZ "
    header += struct.pack(">6H", 2026, 11, 27, 12, 0, 0)
    header += b"acsp" + b"APPL" + struct.pack(">I", 0) + bytes(4) + bytes(4)
    header += bytes(8) + struct.pack(">I", intent)
    header += b"".join(_s15(c) for c in D50) + b"lcms"
    header += bytes(128 - len(header))
    assert len(header) == 128
    profile = header + table + data
    from PIL import ImageCms  # noqa: PLC0415 - only where a test writes a profile

    ImageCms.ImageCmsProfile(io.BytesIO(profile))  # raises if Pillow's LittleCMS refuses it
    return profile
