"""test_synth.py — the built-in example slide (`slidepipe synth`) read back by other tools.

The slide must open as a 4-level pyramid in tifffile and in OpenSlide (generic-tiff), look like
H&E (glass, pink tissue, purple nuclei), be byte-for-byte reproducible from its seed, and have
reduced levels that are 2x2 averages of the level above. The command is $SLIDEPIPE_BIN (default
build/slidepipe next to this tree).
"""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
openslide = pytest.importorskip("openslide")

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SLIDEPIPE_BIN", str(ROOT / "build" / "slidepipe"))
SIZE = 2048


def synth(path, size=SIZE, seed=None):
    cmd = [BIN, "synth", str(path), "--size", str(size)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "slide.tif"
    r = synth(path, seed=1)
    assert r.returncode == 0, r.stderr
    return path


def test_tifffile_pyramid(slide_path):
    with tifffile.TiffFile(slide_path) as tif:
        assert not tif.is_bigtiff  # a 2048 slide is far below the 4 GiB of classic TIFF
        pages = tif.pages
        assert [p.shape for p in pages] == [(n, n, 3) for n in (2048, 1024, 512, 256)]
        for i, p in enumerate(pages):
            assert p.is_tiled
            assert (p.tilewidth, p.tilelength) == (256, 256)
            assert p.compression == tifffile.COMPRESSION.JPEG
            assert p.photometric == tifffile.PHOTOMETRIC.YCBCR
            assert p.subsampling == (2, 2)
            assert p.tags["NewSubfileType"].value == (0 if i == 0 else 1)
        desc = pages[0].description
        assert desc == f"slidepipe synthetic H&E slide size={SIZE} seed=1"
        # 0.25 um per pixel: 40000 pixels per centimetre
        assert pages[0].tags["ResolutionUnit"].value == 3
        assert pages[0].tags["XResolution"].value == (40000, 1)
        assert pages[0].asarray().shape == (2048, 2048, 3)


def test_openslide_levels(slide_path):
    with openslide.OpenSlide(str(slide_path)) as s:
        assert s.properties[openslide.PROPERTY_NAME_VENDOR] == "generic-tiff"
        assert s.level_count == 4
        assert s.level_dimensions == ((2048, 2048), (1024, 1024), (512, 512), (256, 256))
        assert s.level_downsamples == pytest.approx((1.0, 2.0, 4.0, 8.0))
        assert float(s.properties[openslide.PROPERTY_NAME_MPP_X]) == pytest.approx(0.25)


def read_rgb(slide, level):
    w, h = slide.level_dimensions[level]
    return np.asarray(slide.read_region((0, 0), level, (w, h)).convert("RGB")).astype(np.float64)


def test_looks_like_he(slide_path):
    with openslide.OpenSlide(str(slide_path)) as s:
        px = read_rgb(s, 0)
    background = (px > 220).all(axis=-1)
    assert 0.2 <= background.mean() <= 0.8
    # Glass is near-white and neutral.
    glass = px[background]
    assert 235 <= glass.mean() <= 250
    # H&E tissue is pink to purple on average: eosin and haematoxylin both absorb green most.
    tissue = px[~background]
    r, g, b = tissue.mean(axis=0)
    assert r > g + 20 and b > g + 20, (r, g, b)
    # Nuclei: dark pixels with blue at least as high as green (purple, not brown or grey).
    dark = tissue[tissue.min(axis=-1) < 120]
    assert len(dark) > 0.005 * len(tissue)
    assert (dark[:, 2] >= dark[:, 1]).mean() > 0.95


def test_same_seed_same_bytes(slide_path, tmp_path):
    again = tmp_path / "again.tif"
    assert synth(again, seed=1).returncode == 0
    assert again.read_bytes() == slide_path.read_bytes()
    other = tmp_path / "other.tif"
    assert synth(other, seed=2).returncode == 0
    assert other.read_bytes() != slide_path.read_bytes()
    # no temporary file is left next to the output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.tif", "other.tif"]


def test_level1_is_2x2_average(slide_path):
    with tifffile.TiffFile(slide_path) as tif:
        l0 = tif.pages[0].asarray().astype(np.float64)
        l1 = tif.pages[1].asarray().astype(np.float64)
    avg = l0.reshape(1024, 2, 1024, 2, 3).mean(axis=(1, 3))
    # Tolerance for JPEG loss: both levels are encoded at quality 90 with 4:2:0 chroma, so they
    # differ from the exact average of each other by a couple of levels on average (the exact
    # relation holds for the pixels before encoding).
    assert np.abs(avg - l1).mean() < 3.0


def test_bad_size_fails_cleanly(tmp_path):
    out = tmp_path / "bad.tif"
    r = synth(out, size=0)
    assert r.returncode in (1, 2)
    assert r.stderr.startswith("slidepipe: ")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
