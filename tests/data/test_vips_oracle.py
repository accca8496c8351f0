"""slidepipe against libvips (the `vips` command line, Debian libvips-tools 8.14) on real slides.

A second, independent oracle for the pixels that tests/data/test_openslide_oracle.py checks
against OpenSlide 4: libvips reads generic TIFF through libtiff (tiffload, one pyramid page per
level) and Aperio SVS through Debian's OpenSlide 3.4.1 (openslideload) or libtiff (tiffload page 0).
libvips works in level pixels, so regions here may start anywhere on a level, including the
non-integer-downsample levels where the OpenSlide comparison has to start at 0 (docs/testing.md).
Only the part of a region inside the level is compared: vips cannot crop outside an image. There
the colour must be equal exactly and slidepipe's alpha must be 255; outside it must be (0,0,0,0).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile", reason="tifffile reads the TIFFs vips writes")

VIPS = shutil.which("vips")
VIPSHEADER = shutil.which("vipsheader")
pytestmark = pytest.mark.skipif(
    VIPS is None or VIPSHEADER is None,
    reason="libvips command line (`vips`, `vipsheader`; Debian libvips-tools) not installed",
)


def _vips(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run([VIPS, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"vips {' '.join(args)} failed: {proc.stderr[-1000:]}"
    return proc


@functools.lru_cache(maxsize=None)
def _loader_of(source: str) -> str:
    proc = subprocess.run(
        [VIPSHEADER, "-f", "vips-loader", source], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"vipsheader {source}: {proc.stderr[-500:]}"
    return proc.stdout.strip()


@functools.lru_cache(maxsize=None)
def _page_for_level(path: str, width: int, height: int) -> int:
    """The TIFF page holding a pyramid level: the first page with the level's dimensions."""
    with tifffile.TiffFile(path) as tif:
        for i, page in enumerate(tif.pages):
            if (page.imagewidth, page.imagelength) == (width, height):
                return i
    raise AssertionError(f"no page of {width}x{height} in {path}")


@functools.lru_cache(maxsize=None)
def _tiffload_copy(path: str, page: int, tmpdir: str) -> str:
    """A whole page loaded by tiffload and kept as a .v file. Used only for Aperio files, where
    naming a page on the command line would pick openslideload instead of tiffload."""
    out = str(Path(tmpdir) / f"{Path(path).stem}-page{page}.v")
    _vips("tiffload", path, out, "--page", str(page))
    return out


def _vips_crop(source: str, x: int, y: int, w: int, h: int) -> np.ndarray:
    """vips crop of a level image, via an uncompressed TIFF; uint8 (h, w, bands)."""
    with tempfile.TemporaryDirectory(prefix="sp-vips-") as tmp:
        out = Path(tmp) / "crop.tif"
        _vips("crop", source, str(out), str(x), str(y), str(w), str(h))
        arr = tifffile.imread(out)
    if arr.ndim == 2:
        arr = arr[..., None]
    assert arr.dtype == np.uint8 and arr.shape[:2] == (h, w), f"vips crop gave {arr.shape} {arr.dtype}"
    return arr


@pytest.fixture(scope="module")
def vips_tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("vips-pages"))


def test_region_vs_vips(vips_case, testdata, read_region, slide_facts, geometry, assert_same_pixels, vips_tmp):
    rel, level, kind, loader = vips_case
    path = testdata / rel
    facts = slide_facts(rel)
    ds = facts["downsamples"][level]
    lw, lh = facts["levels"][level]
    r = geometry.plan_region(kind, (lw, lh), facts["tiles"][level], ds, exact=False)
    where = (
        f"{rel} level {level} {kind} vs vips {loader}: level origin ({r['lx']}, {r['ly']}) "
        f"size {r['w']}x{r['h']}, level-0 ({r['x']}, {r['y']})"
    )

    if loader == "openslideload":
        source = f"{path}[level={level}]"
        expect_loader = "openslideload"
    elif rel.startswith("aperio/"):
        source = _tiffload_copy(str(path), 0, vips_tmp)
        expect_loader = None  # a .v copy made by tiffload above
    else:
        page = _page_for_level(str(path), lw, lh)
        source = f"{path}[page={page}]"
        expect_loader = "tiffload"
    if expect_loader is not None:
        assert _loader_of(source) == expect_loader, f"vips picked {_loader_of(source)} for {source}"

    iw, ih = min(r["w"], lw - r["lx"]), min(r["h"], lh - r["ly"])
    assert iw > 0 and ih > 0, f"{where}: region misses the level"
    expected = _vips_crop(source, r["lx"], r["ly"], iw, ih)
    actual = read_region(path, level, r["x"], r["y"], r["w"], r["h"])

    inner = actual[:ih, :iw]
    outer_mask = np.ones((r["h"], r["w"]), dtype=bool)
    outer_mask[:ih, :iw] = False
    outer = actual[outer_mask]
    if outer.size:
        bad = np.any(outer != 0, axis=-1)
        assert not bad.any(), (
            f"{where}: {int(bad.sum())} pixels outside the image are not (0,0,0,0), "
            f"e.g. {outer[bad][0].tolist()}"
        )

    bands = expected.shape[-1]
    if bands == 4:  # openslideload: straight RGBA
        assert_same_pixels(inner, expected, where)
        return
    alpha = inner[..., 3]
    assert (alpha == 255).all(), (
        f"{where}: alpha inside the image must be 255; {int((alpha != 255).sum())} pixels are not "
        f"(min {int(alpha.min())})"
    )
    if bands == 1:  # greyscale: slidepipe's R, G and B all equal the grey value
        expected = np.repeat(expected, 3, axis=-1)
    assert expected.shape[-1] == 3, f"vips gave {bands} bands"
    assert_same_pixels(inner[..., :3], expected, where + " (RGB)")
