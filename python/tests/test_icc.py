"""The binding's ICC profile calls against OpenSlide and Pillow's ImageCms: Slide.icc_profile is
the profile OpenSlide 4 returns, byte for byte, on the shared files; with apply_icc=True every
kind of level read (a region, RGB, a scaled region at a level's downsample, a batch, many threads
at once on one slide, a slide unpickled in another process's way) equals OpenSlide's pixels
converted to sRGB through ImageCms within 1, on a slide written here with an Adobe-RGB-like
profile (tests/data/icc_profiles.py) where the conversion moves pixels by tens of levels; a
profile LittleCMS cannot read makes apply_icc=True raise, naming the file."""

import pickle
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
ImageCms = pytest.importorskip("PIL.ImageCms", reason="Pillow's ImageCms converts the oracle's pixels")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the test slide")
pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

import slidepipe  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "data"))
import icc_profiles  # noqa: E402
import vendor_samples  # noqa: E402

SHARED = ["aperio/tcga-cr-7395-01a-01-ts1.svs", "generic-tiff/boxes.tiff",
          "dicom/boxes/boxes_0.dcm", "aperio/CMU-1-Small-Region.svs"]


def _write(path, testdata, profile):
    base = vendor_samples.he_region(testdata, 768, 512, 900, 800)
    with tifffile.TiffWriter(path) as tif:
        for i, rgb in enumerate([base, vendor_samples.downsample(base, 2)]):
            tif.write(rgb, tile=(256, 256), compression="jpeg", compressionargs={"level": 85},
                      photometric="rgb", subfiletype=1 if i else 0, iccprofile=profile,
                      metadata=None)
    return path


@pytest.fixture(scope="module")
def adobe(testdata, tmp_path_factory):
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    return _write(tmp_path_factory.mktemp("icc") / "adobe.tif", testdata,
                  icc_profiles.rgb_profile())


def _converted(path, level, loc, size):
    with openslide.OpenSlide(str(path)) as slide:
        profile = slide.color_profile
        transform = ImageCms.buildTransform(profile, ImageCms.createProfile("sRGB"), "RGBA",
                                            "RGBA", ImageCms.getDefaultIntent(profile), 0)
        raw = slide.read_region(loc, level, size)
        return np.asarray(raw), np.asarray(ImageCms.applyTransform(raw, transform))


def _within_one(got, want):
    d = np.abs(got.astype(np.int16) - want[..., : got.shape[-1]].astype(np.int16))
    assert d.max() <= 1, f"max difference {d.max()}"


@pytest.mark.parametrize("rel", SHARED)
def test_profile_bytes_equal_openslides(rel, testdata):
    path = testdata / rel
    if not path.exists():
        pytest.skip(f"{rel} is not in the shared test data")
    with openslide.OpenSlide(str(path)) as o:
        want = openslide.lowlevel.read_icc_profile(o._osr) if o.color_profile else None
    with slidepipe.open(path) as s:
        assert s.icc_profile == want


def test_apply_icc_reads(adobe):
    raw, want = _converted(adobe, 0, (100, 50), (400, 300))
    assert np.abs(raw.astype(int) - want).max() >= 20, "the profile should move pixels"
    with slidepipe.open(adobe, apply_icc=True) as s, slidepipe.open(adobe) as plain:
        assert s.icc_profile == plain.icc_profile
        assert np.array_equal(plain.read_region((100, 50), 0, (400, 300)), raw)
        _within_one(s.read_region((100, 50), 0, (400, 300)), want)
        _within_one(s.read_region((100, 50), 0, (400, 300), rgb=True), want)
        batch = s.read_regions([(100, 50), (100, 50)], 0, (400, 300))
        _within_one(batch[0], want)
        _within_one(batch[1], want)
        # A scaled read at level 1's own downsample reads that level's pixels.
        _, want1 = _converted(adobe, 1, (0, 0), (384, 256))
        _within_one(s.read_region_scaled((0, 0), 2.0, (384, 256)), want1)


def test_apply_icc_threads_and_pickle(adobe):
    _, want = _converted(adobe, 0, (0, 0), (768, 512))
    s = slidepipe.open(adobe, apply_icc=True)
    spots = [(x, y) for x in range(0, 768 - 64, 64) for y in range(0, 512 - 64, 64)]
    with ThreadPoolExecutor(4) as pool:
        tiles = list(pool.map(lambda p: s.read_region(p, 0, (64, 64)), spots))
    for (x, y), tile in zip(spots, tiles):
        _within_one(tile, want[y : y + 64, x : x + 64])
    again = pickle.loads(pickle.dumps(s))
    assert again.apply_icc
    _within_one(again.read_region((0, 0), 0, (768, 512)), want)
    s.close()
    again.close()


def test_bad_profile_raises(testdata, tmp_path):
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} is not in the shared test data")
    path = _write(tmp_path / "bad.tif", testdata, b"\0\0\1\0" + b"spoiled " * 40)
    with pytest.raises(Exception) as info:
        slidepipe.open(path, apply_icc=True)
    assert str(path) in str(info.value) and "ICC profile" in str(info.value)
    with slidepipe.open(path) as s:  # without the conversion it reads as stored
        assert s.read_region((0, 0), 0, (16, 16)).shape == (16, 16, 4)
