"""ICC profiles against OpenSlide 4 and Pillow's ImageCms: the embedded profile slidepipe reports
must be OpenSlide's (same size on every shared file OpenSlide opens, bytes compared in the Python
binding's tests), and `region --icc` must give OpenSlide's read_region converted to sRGB through
ImageCms with the profile's own rendering intent (openslide-python's documented recipe), within 1
on every channel of every visible pixel, on every level.

The shared files that embed a profile (an Aperio JPEG 2000 slide, a generic TIFF, a DICOM pair)
all carry sRGB profiles, under which the conversion changes nothing, so the tests also write
slides with an Adobe-RGB-like profile (icc_profiles.py), where it changes pixels by tens of
levels: a generic TIFF pyramid and an Aperio one with JPEG tiles of a real H&E region, the
shared DICOM series with the profile added to its Optical Path Sequence, and the Philips, Leica
and Ventana files of vendor_samples.py with the profile in their TIFF pages (OpenSlide 4 reads
Ventana's; it reports none for Leica and Philips, where slidepipe differs on Philips, as
docs/formats.md says). Slides without a
profile read as stored with --icc; a spoiled or non-RGB profile fails `--icc` with exit 1 and
one line naming the file, while reads without --icc still work."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are the oracle")
ImageCms = pytest.importorskip("PIL.ImageCms", reason="Pillow's ImageCms converts the oracle's pixels")
tifffile = pytest.importorskip("tifffile", reason="tifffile writes the test slides")
pytest.importorskip("imagecodecs", reason="imagecodecs encodes the JPEG tiles")

from PIL import Image  # noqa: E402

import icc_profiles  # noqa: E402  (tests/data, beside this file)
from conftest import plan_region  # noqa: E402
import vendor_samples  # noqa: E402

SHARED_WITH_PROFILE = [
    "aperio/tcga-cr-7395-01a-01-ts1.svs",
    "generic-tiff/boxes.tiff",
    "dicom/boxes/boxes_0.dcm",
]
NO_PROFILE = "aperio/CMU-1-Small-Region.svs"


def _openslide_profile(path) -> bytes | None:
    with openslide.OpenSlide(str(path)) as slide:
        return openslide.lowlevel.read_icc_profile(slide._osr) if slide.color_profile else None


def _oracle_icc(path, level, x, y, w, h):
    """OpenSlide's read_region, and the same converted to sRGB as openslide-python documents."""
    with openslide.OpenSlide(str(path)) as slide:
        image = slide.read_region((x, y), level, (w, h))
        profile = slide.color_profile
        assert profile is not None, f"OpenSlide finds no ICC profile in {path}"
        transform = ImageCms.buildTransform(profile, ImageCms.createProfile("sRGB"), "RGBA",
                                            "RGBA", ImageCms.getDefaultIntent(profile), 0)
        converted = ImageCms.applyTransform(image, transform)
    return np.asarray(image, dtype=np.uint8), np.asarray(converted, dtype=np.uint8)


def _region_icc(sp, path, level, x, y, w, h, tmp_path) -> np.ndarray:
    out = tmp_path / "icc.rgba"
    sp.ok(["region", path, "--level", level, "--x", x, "--y", y, "--width", w, "--height", h,
           "-o", out, "--icc"])
    return np.fromfile(out, dtype=np.uint8).reshape(h, w, 4)


def _check_within_one(got, want, what):
    visible = want[..., 3] > 0
    assert np.array_equal(got[..., 3], want[..., 3]), f"{what}: alpha differs"
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))[visible]
    assert diff.size == 0 or diff.max() <= 1, (
        f"{what}: max difference {diff.max()} over {int((diff.max(axis=-1) > 1).sum())} pixels")
    # Transparent pixels stay (0,0,0,0), as without --icc.
    assert not got[~visible].any(), f"{what}: transparent pixels are not (0,0,0,0)"


def _levels_regions(path):
    """Per level: a region across tile borders and one across the far corner, placed where
    OpenSlide reads without a fractional shift (conftest.plan_region)."""
    with openslide.OpenSlide(str(path)) as slide:
        out = []
        for level, ((w, h), ds) in enumerate(zip(slide.level_dimensions, slide.level_downsamples)):
            tw = int(slide.properties.get(f"openslide.level[{level}].tile-width", 256))
            th = int(slide.properties.get(f"openslide.level[{level}].tile-height", 256))
            for kind in ("tiles", "edge"):
                r = plan_region(kind, (w, h), (tw, th), ds, exact=True)
                out.append((level, r["x"], r["y"], r["w"], r["h"], ds))
        return out


# ---- the test slides ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adobe_profile() -> bytes:
    return icc_profiles.rgb_profile()


@pytest.fixture(scope="module")
def he_pyramid(testdata):
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    base = vendor_samples.he_region(testdata, 1024, 768, 200, 400)
    return [base, vendor_samples.downsample(base, 2), vendor_samples.downsample(base, 4)]


def _write_tiff(path: Path, levels, profile: bytes, aperio: bool) -> Path:
    with tifffile.TiffWriter(path) as tif:
        for i, rgb in enumerate(levels):
            desc = None
            if aperio:
                desc = (f"Aperio Image Library v12.0.15 \r\n{levels[0].shape[1]}x"
                        f"{levels[0].shape[0]} [0,0 {rgb.shape[1]}x{rgb.shape[0]}] (256x256) "
                        "JPEG Q=85|AppMag = 20|MPP = 0.499")
            tif.write(rgb, tile=(256, 256), compression="jpeg", compressionargs={"level": 85},
                      photometric="rgb", subfiletype=0 if (i == 0 or aperio) else 1,
                      iccprofile=profile, description=desc, metadata=None)
    return path


@pytest.fixture(scope="module")
def adobe_slides(tmp_path_factory, he_pyramid, adobe_profile) -> dict:
    folder = tmp_path_factory.mktemp("icc")
    slides = {
        "generic-tiff": _write_tiff(folder / "generic.tif", he_pyramid, adobe_profile, False),
        "aperio": _write_tiff(folder / "aperio.svs", he_pyramid, adobe_profile, True),
    }
    for vendor, path in slides.items():
        with openslide.OpenSlide(str(path)) as slide:
            got = slide.properties.get("openslide.vendor")
        assert got == vendor, f"OpenSlide 4 reads {path.name} as {got!r}, not {vendor}"
        assert _openslide_profile(path) == adobe_profile
    return slides


@pytest.fixture(scope="module")
def vendor_slides(tmp_path_factory, testdata, adobe_profile) -> dict:
    """The Philips, Leica and Ventana files of vendor_samples.py, every TIFF page written with
    the profile (tifffile's writer given iccprofile= while they are written)."""
    if not (testdata / vendor_samples.H_AND_E).is_file():
        pytest.skip(f"{vendor_samples.H_AND_E} (the H&E pixels) is not in the shared test data")
    folder = tmp_path_factory.mktemp("icc-vendors")
    write = tifffile.TiffWriter.write

    def write_with_profile(self, *args, **kwargs):
        kwargs.setdefault("iccprofile", adobe_profile)
        return write(self, *args, **kwargs)

    slides = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tifffile.TiffWriter, "write", write_with_profile)
        slides["philips"] = vendor_samples.write_philips(folder / "p.tiff", testdata)
        slides["leica"] = vendor_samples.write_leica(folder / "l.scn", testdata)
        slides["ventana"] = vendor_samples.write_bif(folder / "v.bif", testdata)
    for vendor, path in slides.items():
        with openslide.OpenSlide(str(path)) as slide:
            got = slide.properties.get("openslide.vendor")
        assert got == vendor, f"OpenSlide 4 reads {path.name} as {got!r}, not {vendor}"
    return slides


@pytest.fixture(scope="module")
def adobe_dicom(tmp_path_factory, testdata, adobe_profile) -> Path:
    """The shared cmu-1-small-region series with the profile in each instance's Optical Path
    Sequence, and its JFIF frames labelled YBR_FULL_422 (what they are; test_dicom.py explains
    OpenSlide's reading of the original RGB label), so that OpenSlide's pixels are the truth."""
    pydicom = pytest.importorskip("pydicom", reason="pydicom writes the DICOM series")
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    source = testdata / "dicom" / "cmu-1-small-region"
    if not source.is_dir():
        pytest.skip(f"{source} is not in the shared test data")
    folder = tmp_path_factory.mktemp("icc-dicom")
    for f in sorted(source.glob("*.dcm")):
        ds = pydicom.dcmread(f)
        item = Dataset()
        item.OpticalPathIdentifier = "1"
        item.ICCProfile = adobe_profile
        ds.OpticalPathSequence = Sequence([item])
        ds.PhotometricInterpretation = "YBR_FULL_422"
        ds.save_as(folder / f.name)
    path = folder / "level-0-frames-0-30.dcm"
    assert _openslide_profile(path) == adobe_profile
    return path


# ---- the profile itself ------------------------------------------------------------------------


def test_profile_size_equals_openslides(oracle_slide, testdata, info):
    with openslide.OpenSlide(str(testdata / oracle_slide)) as slide:
        want = openslide.lowlevel.read_icc_profile(slide._osr) if slide.color_profile else None
    got = info(testdata / oracle_slide)["icc_profile_size"]
    assert got == (len(want) if want is not None else None)


def test_dicom_profile_sizes_equal_openslides(testdata, info):
    """Every shared DICOM instance (the oracle folders above leave DICOM to test_dicom.py)."""
    files = sorted((testdata / "dicom").rglob("*.dcm"))
    if not files:
        pytest.skip("no DICOM files in the shared test data")
    for path in files:
        want = _openslide_profile(path)
        got = info(path)["icc_profile_size"]
        assert got == (len(want) if want is not None else None), path


def test_generated_profiles_reported(adobe_slides, adobe_dicom, adobe_profile, info):
    for path in [*adobe_slides.values(), adobe_dicom]:
        assert info(path)["icc_profile_size"] == len(adobe_profile), path


def test_vendor_profiles(vendor_slides, adobe_profile, info):
    """Ventana: OpenSlide 4 reads level 0's profile, and so does slidepipe. Leica: neither
    reports one. Philips: OpenSlide 4.0.1 reports none, slidepipe the profile the level
    directories embed (docs/formats.md, "ICC profiles")."""
    assert _openslide_profile(vendor_slides["ventana"]) == adobe_profile
    assert info(vendor_slides["ventana"])["icc_profile_size"] == len(adobe_profile)
    assert _openslide_profile(vendor_slides["leica"]) is None
    assert info(vendor_slides["leica"])["icc_profile_size"] is None
    assert _openslide_profile(vendor_slides["philips"]) is None
    assert info(vendor_slides["philips"])["icc_profile_size"] == len(adobe_profile)


# ---- converted pixels --------------------------------------------------------------------------


@pytest.mark.parametrize("rel", SHARED_WITH_PROFILE)
def test_icc_region_equals_imagecms_shared(rel, testdata, sp, tmp_path):
    path = testdata / rel
    if not path.is_file():
        pytest.skip(f"{rel} is not in the shared test data")
    for level, x, y, w, h, _ in _levels_regions(path):
        _, want = _oracle_icc(path, level, x, y, w, h)
        got = _region_icc(sp, path, level, x, y, w, h, tmp_path)
        _check_within_one(got, want, f"{rel} level {level} ({x},{y} {w}x{h})")


@pytest.mark.parametrize("vendor", ["generic-tiff", "aperio", "dicom", "ventana"])
def test_icc_region_equals_imagecms_adobe(vendor, request, sp, tmp_path):
    if vendor == "dicom":
        path = request.getfixturevalue("adobe_dicom")
    elif vendor == "ventana":
        path = request.getfixturevalue("vendor_slides")["ventana"]
    else:
        path = request.getfixturevalue("adobe_slides")[vendor]
    biggest_change = 0
    regions = _levels_regions(path)
    if vendor == "dicom":
        regions = regions[:8]  # levels 0-3; the rest are single small frames like level 3's
    for level, x, y, w, h, _ in regions:
        raw, want = _oracle_icc(path, level, x, y, w, h)
        got = _region_icc(sp, path, level, x, y, w, h, tmp_path)
        _check_within_one(got, want, f"{vendor} level {level} ({x},{y} {w}x{h})")
        plain = sp.read_region(path, level, x, y, w, h)
        assert np.array_equal(plain, raw), f"{vendor} level {level}: without --icc, not as stored"
        biggest_change = max(biggest_change, int(np.abs(want.astype(int) - raw).max()))
    # The profile is far from sRGB: a test that passed without converting would fail here.
    assert biggest_change >= 40, f"the transform changed pixels by only {biggest_change}"


def test_icc_thumbnail(adobe_slides, sp, tmp_path):
    """A thumbnail the size of level 2 is that level's pixels, converted."""
    path = adobe_slides["generic-tiff"]
    out = tmp_path / "thumb.png"
    sp.ok(["thumbnail", path, "--max-size", 256, "-o", out, "--icc"])
    got = np.asarray(Image.open(out).convert("RGBA"))
    _, want = _oracle_icc(path, 2, 0, 0, 256, 192)
    _check_within_one(got, want, "thumbnail --icc")


def test_no_profile_reads_as_stored(testdata, sp, tmp_path):
    path = testdata / NO_PROFILE
    if not path.is_file():
        pytest.skip(f"{NO_PROFILE} is not in the shared test data")
    assert _openslide_profile(path) is None
    got = _region_icc(sp, path, 0, 1000, 1200, 200, 150, tmp_path)
    assert np.array_equal(got, sp.read_region(path, 0, 1000, 1200, 200, 150))


# ---- profiles that cannot be used ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["spoiled", "truncated", "lab"])
def test_bad_profile_fails_cleanly(kind, he_pyramid, adobe_profile, sp, tmp_path):
    if kind == "spoiled":
        profile = b"\0\0\2\0" + b"not an ICC profile " * 30
    elif kind == "truncated":
        profile = adobe_profile[:200]
    else:
        profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()
    path = _write_tiff(tmp_path / f"{kind}.tif", he_pyramid[2:], profile, False)
    args = ["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 64, "--height", 64]
    proc = sp.run([*args, "-o", tmp_path / "out.png", "--icc"])
    assert proc.returncode == 1, sp.describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: ") and str(path) in lines[0], lines
    assert "ICC profile" in lines[0]
    if kind == "lab":
        assert "not RGB" in lines[0]
    assert not (tmp_path / "out.png").exists()
    sp.ok([*args, "-o", tmp_path / "plain.png"])  # without --icc the slide reads as stored


# ---- convert --icc -------------------------------------------------------------------------------


def _store_level0(store: Path) -> np.ndarray:
    """Level 0 of an OME-Zarr 0.4 store (c, y, x) read by zarr-python, as (y, x, c)."""
    zarr = pytest.importorskip("zarr", reason="zarr-python reads the converted store")
    return np.moveaxis(np.asarray(zarr.open_group(str(store), mode="r")["0"][:]), 0, -1)


def _attrs(store: Path) -> dict:
    import json

    return json.loads((store / ".zattrs").read_text())["slidepipe"]


def test_convert_icc_writes_converted_pixels(adobe_slides, adobe_profile, sp, tmp_path):
    """`convert --icc` writes level 0 as `region --icc` reads it (the same transform, so exactly),
    records the transform and the profile's SHA-256 in the group attributes, and its dataset hash
    differs from the plain conversion's; without --icc the store holds the stored pixels and no
    ICC record."""
    import hashlib

    path = adobe_slides["generic-tiff"]
    w, h = 1024, 768
    plain, icc = tmp_path / "plain.zarr", tmp_path / "icc.zarr"
    hash_plain = sp.ok(["convert", path, plain]).stdout.split()[-1]
    hash_icc = sp.ok(["convert", path, icc, "--icc"]).stdout.split()[-1]
    assert hash_icc != hash_plain
    want_icc = _region_icc(sp, path, 0, 0, 0, w, h, tmp_path)[..., :3]
    want_plain = sp.read_region(path, 0, 0, 0, w, h)[..., :3]
    assert np.abs(want_icc.astype(int) - want_plain).max() >= 40, "the profile changed little"
    assert np.array_equal(_store_level0(icc), want_icc)
    assert np.array_equal(_store_level0(plain), want_plain)
    assert _attrs(icc)["icc"] == {"transform": "embedded profile to sRGB",
                                  "profile_size": len(adobe_profile),
                                  "profile_sha256": hashlib.sha256(adobe_profile).hexdigest()}
    assert "icc" not in _attrs(plain)
    # --resume refuses to finish a plain conversion with --icc (the options file records it)
    proc = sp.run(["convert", path, plain, "--icc", "--resume"])
    assert proc.returncode == 1 and "other options" in proc.stderr, sp.describe(proc)


def test_convert_icc_without_profile_is_plain(testdata, sp, tmp_path):
    """A slide without a profile converts as stored with --icc: the same dataset hash."""
    path = testdata / NO_PROFILE
    if not path.is_file():
        pytest.skip(f"{NO_PROFILE} is not in the shared test data")
    a = sp.ok(["convert", path, tmp_path / "a.zarr", "--levels", 1]).stdout
    b = sp.ok(["convert", path, tmp_path / "b.zarr", "--levels", 1, "--icc"]).stdout
    assert a == b and a.startswith("dataset_hash ")


def test_convert_icc_bad_profile_fails(he_pyramid, sp, tmp_path):
    """A profile LittleCMS cannot read: convert --icc is exit 1, one line naming the slide, no
    store written."""
    path = _write_tiff(tmp_path / "spoiled.tif", he_pyramid[2:], b"\0\0\2\0" + b"no ICC " * 80,
                       False)
    out = tmp_path / "out.zarr"
    proc = sp.run(["convert", path, out, "--icc"])
    assert proc.returncode == 1, sp.describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: ") and str(path) in lines[0], lines
    assert "ICC profile" in lines[0]
    assert not out.exists()
