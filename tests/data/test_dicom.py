"""test_dicom.py — the DICOM WSI format (src/dicom/dicom.c, src/formats/dicom.c).

Three oracles, all computed in the same run:

- OpenSlide 4.0.1 (openslide-python + openslide-bin, which reads DICOM through libdicom) on every
  DICOM slide of the shared test data, opened as a folder and as one of its files: level count,
  sizes, downsamples, tile sizes, MPP, objective power, associated images, and the pixels of four
  regions on every level and of every associated image. OpenSlide opens a series from one of its
  files only, so a folder is compared with OpenSlide opening a file of that folder.
- pydicom 3: every instance's frames, extracted with pydicom.encaps.generate_frames (encapsulated)
  or pixel_array (native), decoded with libjpeg-turbo (imagecodecs) and laid out on the tile grid,
  must equal slidepipe's whole level: the same frame bytes in the same places.
- Files written here with pydicom (explicit and implicit VR, native RGB/grey/planar, JPEG with a
  Basic Offset Table, an Extended Offset Table, several fragments per frame, TILED_SPARSE with a
  missing tile, a concatenation, JPEG 2000), against OpenSlide where it reads them and against
  the pixels written otherwise; and files that must fail with a one-line message.

One deliberate difference from OpenSlide: for JPEG frames slidepipe lets the stream's own colour
markers (Adobe APP14 transform flag, else JFIF APP0) decide between RGB and YCbCr, and uses the
DICOM PhotometricInterpretation only for streams without them; OpenSlide follows the DICOM tag
alone. The shared cmu-1-small-region series stores JFIF (YCbCr) frames tagged RGB, so OpenSlide
returns raw Y, Cb, Cr values as R, G, B. On such levels the expected pixels are OpenSlide's raw
values put through libjpeg's own YCbCr -> RGB conversion (bit-exact fixed point, reproduced
below), and the test reports how far OpenSlide's raw output is from slidepipe's. docs/testing.md
("DICOM") has the measurements.

Finally the cross-format check: dicom/cmu-1-small-region is aperio/CMU-1-Small-Region.svs
re-encoded by a converter (wsi2dcm); level 0 must match the SVS closely (thresholds justified in
docs/testing.md).
"""

from __future__ import annotations

import functools
import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

# Imported under other names: pytest would collect anything named test* here as a test.
from conftest import openslide_facts, plan_region
from conftest import testdata_dir as shared_testdata_dir
from conftest import testdata_missing_reason as shared_testdata_missing

openslide = pytest.importorskip("openslide", reason="openslide-python + openslide-bin are needed")
pydicom = pytest.importorskip("pydicom", reason="pydicom is needed (tests/requirements.txt)")
imagecodecs = pytest.importorskip("imagecodecs", reason="imagecodecs decodes JPEG and PNG")

from pydicom.dataset import Dataset, FileMetaDataset  # noqa: E402
from pydicom.encaps import encapsulate, encapsulate_extended, generate_frames  # noqa: E402
from pydicom.sequence import Sequence  # noqa: E402

REL_TOL = 1e-6
WSI_SOP = "1.2.840.10008.5.1.4.1.1.77.1.6"

# (id, path given to slidepipe, file given to OpenSlide), relative to the test-data folder.
CASES = [
    ("cmu-folder", "dicom/cmu-1-small-region", "dicom/cmu-1-small-region/level-0-frames-0-30.dcm"),
    (
        "cmu-file",
        "dicom/cmu-1-small-region/level-5-frames-0-1.dcm",
        "dicom/cmu-1-small-region/level-5-frames-0-1.dcm",
    ),
    ("boxes-folder", "dicom/boxes", "dicom/boxes/boxes_0.dcm"),
    ("boxes-thumbnail-file", "dicom/boxes/boxes_1.dcm", "dicom/boxes/boxes_1.dcm"),
    (
        "camelyon",
        "dicom/multi_frame_jpeg_camelyon_challenge_image.dcm",
        "dicom/multi_frame_jpeg_camelyon_challenge_image.dcm",
    ),
]
KINDS = ("whole", "tiles", "edge", "outside")


# ---- parametrisation ---------------------------------------------------------------------------


def _skip(reason):
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="skipped")]


def pytest_generate_tests(metafunc):
    """dicom_case (id, path, oracle), dicom_region (case, level, kind), dicom_assoc (case,
    name), dicom_instance (relative path of every shared .dcm)."""
    names = set(metafunc.fixturenames) & {"dicom_case", "dicom_region", "dicom_assoc", "dicom_instance"}
    if not names:
        return
    (name,) = names
    missing = shared_testdata_missing()
    if missing:
        metafunc.parametrize(name, _skip(missing))
        return
    params = []
    if name == "dicom_instance":
        root = shared_testdata_dir()
        for p in sorted((root / "dicom").rglob("*.dcm")):
            rel = p.relative_to(root).as_posix()
            params.append(pytest.param(rel, id=rel))
    for case in CASES:
        cid, path, oracle = case
        facts = openslide_facts(oracle)
        if facts is None:
            params.append(
                pytest.param(case, id=cid, marks=pytest.mark.skip(reason=f"OpenSlide cannot open {oracle}"))
            )
            continue
        if name == "dicom_case":
            params.append(pytest.param(case, id=cid))
        elif name == "dicom_region":
            for level in range(len(facts["levels"])):
                for kind in KINDS:
                    params.append(pytest.param((case, level, kind), id=f"{cid}:L{level}:{kind}"))
        elif name == "dicom_assoc":
            for assoc in sorted(facts["associated"]):
                params.append(pytest.param((case, assoc), id=f"{cid}:{assoc}"))
    metafunc.parametrize(name, params or _skip(f"no parameters for {name}"))


# ---- helpers -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _openslide(path: str):
    return openslide.OpenSlide(path)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0)


# libjpeg's YCbCr -> RGB (jdcolor.c, build_ycc_rgb_table): 16-bit fixed point, rounding folded
# into the tables, then clamped. Bit-exact with libjpeg-turbo's C and SIMD paths.
_SCALE = 16
_HALF = 1 << (_SCALE - 1)


def _fix(x: float) -> int:
    return int(x * (1 << _SCALE) + 0.5)


_X = np.arange(256, dtype=np.int64) - 128
_CR_R = (_fix(1.40200) * _X + _HALF) >> _SCALE
_CB_B = (_fix(1.77200) * _X + _HALF) >> _SCALE
_CR_G = -_fix(0.71414) * _X
_CB_G = -_fix(0.34414) * _X + _HALF


def libjpeg_ycc_to_rgb(ycc: np.ndarray) -> np.ndarray:
    y = ycc[..., 0].astype(np.int64)
    cb, cr = ycc[..., 1], ycc[..., 2]
    r = y + _CR_R[cr]
    g = y + ((_CB_G[cb] + _CR_G[cr]) >> _SCALE)
    b = y + _CB_B[cb]
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def jpeg_marker_space(frame: bytes) -> str | None:
    """What a JPEG stream's own markers say: "RGB" (Adobe transform 0), "YCbCr" (Adobe transform
    1, or JFIF), or None when it has neither."""
    i, jfif, adobe = 2, False, None
    while i + 4 <= len(frame) and frame[i] == 0xFF:
        m = frame[i + 1]
        if m == 0xFF:
            i += 1
            continue
        if m == 0xD8 or m == 0x01 or 0xD0 <= m <= 0xD7:
            i += 2
            continue
        length = frame[i + 2] << 8 | frame[i + 3]
        if m == 0xDA or (0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC)):
            break
        if m == 0xE0 and frame[i + 4 : i + 9] == b"JFIF\0":
            jfif = True
        if m == 0xEE and frame[i + 4 : i + 9] == b"Adobe" and length >= 14:
            adobe = frame[i + 15]
        i += 2 + length
    if adobe == 0:
        return "RGB"
    if adobe == 1 or (adobe is None and jfif):
        return "YCbCr"
    return None


def _frames(ds) -> list[bytes]:
    n = int(getattr(ds, "NumberOfFrames", 1) or 1)
    eot = None
    if "ExtendedOffsetTable" in ds:
        eot = (ds.ExtendedOffsetTable, ds.ExtendedOffsetTableLengths)
    return list(generate_frames(ds.PixelData, number_of_frames=n, extended_offsets=eot))


@functools.lru_cache(maxsize=None)
def series_instances(oracle_rel: str) -> dict:
    """The VOLUME instances of the oracle file's series (its folder), by level size:
    {(w, h): dict(path, ds, mislabelled)} where `mislabelled` means JPEG frames whose markers
    say YCbCr under PhotometricInterpretation RGB (OpenSlide then returns raw YCbCr)."""
    oracle = shared_testdata_dir() / oracle_rel
    series = pydicom.dcmread(oracle, stop_before_pixels=True).SeriesInstanceUID
    out = {}
    for p in sorted(oracle.parent.iterdir()):
        try:
            ds = pydicom.dcmread(p)
        except Exception:
            continue
        if ds.get("SOPClassUID") != WSI_SOP or ds.SeriesInstanceUID != series:
            continue
        if ds.ImageType[2] != "VOLUME":
            continue
        mislabelled = False
        if ds.file_meta.TransferSyntaxUID.is_compressed and ds.PhotometricInterpretation == "RGB":
            mislabelled = jpeg_marker_space(_frames(ds)[0]) == "YCbCr"
        out[(int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows))] = dict(
            path=p, ds=ds, mislabelled=mislabelled
        )
    return out


def _oracle_region(oracle: Path, level, x, y, w, h, mislabelled: bool):
    """OpenSlide's RGBA, and (for mislabelled levels) OpenSlide's raw output too."""
    raw = np.asarray(_openslide(str(oracle)).read_region((x, y), level, (w, h)), dtype=np.uint8)
    if not mislabelled:
        return raw, None
    fixed = raw.copy()
    opaque = raw[..., 3] == 255
    assert np.isin(raw[..., 3], (0, 255)).all(), "partial alpha: cannot undo OpenSlide's colours"
    fixed[..., :3][opaque] = libjpeg_ycc_to_rgb(raw[..., :3][opaque][None])[0]
    return fixed, raw


def _diff_summary(a: np.ndarray, b: np.ndarray) -> str:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return (
        f"max abs diff per channel {d.reshape(-1, d.shape[-1]).max(axis=0).tolist()}, "
        f"mean {d[..., :3].mean():.3f}, {(d.max(-1) > 0).mean():.2%} of pixels differ"
    )


# ---- facts -------------------------------------------------------------------------------------


def test_facts(dicom_case, testdata, info):
    """Format, levels, downsamples, tile sizes, MPP, objective power, associated images."""
    cid, path, oracle = dicom_case
    want = openslide_facts(oracle)
    got = info(testdata / path)
    problems = []
    if got.get("format") != "dicom" or want["vendor"] != "dicom":
        problems.append(f"format {got.get('format')!r}, OpenSlide vendor {want['vendor']!r}")
    levels = got.get("levels") or []
    if len(levels) != len(want["levels"]):
        problems.append(f"level count {len(levels)} != OpenSlide's {len(want['levels'])}")
    for i, (lv, dims, ds, tile) in enumerate(zip(levels, want["levels"], want["downsamples"], want["tiles"])):
        if (lv.get("width"), lv.get("height")) != dims:
            problems.append(f"level {i}: {lv.get('width')}x{lv.get('height')} != {dims}")
        if not _close(float(lv.get("downsample")), ds):
            problems.append(f"level {i}: downsample {lv.get('downsample')!r} != {ds!r}")
        if (lv.get("tile_width"), lv.get("tile_height")) != tile:
            problems.append(f"level {i}: tile {lv.get('tile_width')}x{lv.get('tile_height')} != {tile}")
        if lv.get("compression") != "jpeg":
            problems.append(f"level {i}: compression {lv.get('compression')!r}, the frames are JPEG")
    for key in ("mpp_x", "mpp_y", "objective_power"):
        expect = None if want[key] is None else float(want[key])
        value = got.get(key)
        if expect is None:
            if value is not None:
                problems.append(f"{key} {value!r} but OpenSlide has none")
        elif not isinstance(value, (int, float)) or not _close(float(value), expect):
            problems.append(f"{key} {value!r} != OpenSlide's {expect!r}")
    got_assoc = {n: (v["width"], v["height"]) for n, v in (got.get("associated") or {}).items()}
    if got_assoc != want["associated"]:
        problems.append(f"associated {got_assoc} != OpenSlide's {want['associated']}")
    props = got.get("properties") or {}
    series = pydicom.dcmread(testdata / oracle, stop_before_pixels=True).SeriesInstanceUID
    if props.get("dicom.SeriesInstanceUID") != series:
        problems.append(f"dicom.SeriesInstanceUID {props.get('dicom.SeriesInstanceUID')!r} != {series!r}")
    assert not problems, f"{cid} ({path}):\n  " + "\n  ".join(problems)


def test_folder_and_file_agree(testdata, info):
    """A series opened through its folder or through any of its files is the same slide."""
    for folder in ("dicom/cmu-1-small-region", "dicom/boxes"):
        want = info(testdata / folder)
        for f in sorted((testdata / folder).glob("*.dcm")):
            got = info(f)
            for key in ("levels", "associated", "mpp_x", "mpp_y", "objective_power", "properties"):
                assert got[key] == want[key], f"{f.name} vs {folder}: {key} differs"


# ---- pixels ------------------------------------------------------------------------------------


def test_region(dicom_region, testdata, read_region, assert_same_pixels):
    """A region on one level equals OpenSlide's read_region (colour-corrected on mislabelled
    levels, see the module docstring)."""
    (cid, path, oracle), level, kind = dicom_region
    facts = openslide_facts(oracle)
    lw, lh = facts["levels"][level]
    ds = facts["downsamples"][level]
    r = plan_region(kind, (lw, lh), facts["tiles"][level], ds, exact=True)
    where = (
        f"{cid} level {level} {kind}: level origin ({r['lx']}, {r['ly']}) size {r['w']}x{r['h']}, "
        f"level-0 ({r['x']}, {r['y']}), downsample {ds!r}"
    )
    inst = series_instances(oracle)[(lw, lh)]
    expected, raw = _oracle_region(testdata / oracle, level, r["x"], r["y"], r["w"], r["h"], inst["mislabelled"])
    actual = read_region(testdata / path, level, r["x"], r["y"], r["w"], r["h"])
    if raw is not None and kind == "whole" and not np.array_equal(actual, raw):
        warnings.warn(
            f"{where}: JFIF frames tagged RGB; OpenSlide's raw (unconverted YCbCr) output differs "
            f"from slidepipe: {_diff_summary(actual, raw)}; compared with it converted instead"
        )
    inside = np.zeros((r["h"], r["w"]), dtype=bool)
    inside[: max(0, lh - r["ly"]), : max(0, lw - r["lx"])] = True
    assert not actual[~inside].any(), f"{where}: pixels outside the level are not (0,0,0,0)"
    assert_same_pixels(actual, expected, where + (" (OpenSlide colour-corrected)" if raw is not None else ""))


def test_associated(dicom_assoc, testdata, run, assert_same_pixels):
    """`slidepipe associated` equals OpenSlide's associated image exactly (RGBA PNG)."""
    (cid, path, oracle), name = dicom_assoc
    expected = np.asarray(_openslide(str(testdata / oracle)).associated_images[name], dtype=np.uint8)
    with tempfile.TemporaryDirectory(prefix="sp-dicom-assoc-") as tmp:
        out = Path(tmp) / "a.png"
        proc = run(["associated", testdata / path, name, "-o", out])
        assert proc.returncode == 0, proc.stderr
        actual = imagecodecs.png_decode(out.read_bytes())
    assert_same_pixels(actual, expected, f"{cid} associated {name!r}")


def _decode_frame(frame: bytes, ts: str, photometric: str) -> np.ndarray:
    """A frame as RGB uint8, decoded the way the stream says (libjpeg-turbo via imagecodecs)."""
    if ts in ("1.2.840.10008.1.2.4.50", "1.2.840.10008.1.2.4.51"):
        space = jpeg_marker_space(frame) or ("YCbCr" if photometric.startswith("YBR") else "RGB")
        img = imagecodecs.jpeg8_decode(frame, colorspace=space, outcolorspace="RGB")
    else:
        img = imagecodecs.jpeg2k_decode(frame)
    return img if img.ndim == 3 else np.repeat(img[..., None], 3, -1)


ASSOCIATED_NAMES = {"LABEL": "label", "OVERVIEW": "macro", "THUMBNAIL": "thumbnail"}


def test_frames_vs_pydicom(dicom_instance, testdata, read_region, info, run):
    """Every instance: the frames pydicom extracts, decoded and laid out on the tile grid
    (TILED_FULL: frame = row * across + col), equal slidepipe's whole level (or associated
    image) exactly. Any wrong frame offset, length, fragment grouping or placement would change
    the pixels."""
    rel = dicom_instance
    ds = pydicom.dcmread(testdata / rel)
    w, h = int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows)
    tw, th = int(ds.Columns), int(ds.Rows)
    across, down = -(-w // tw), -(-h // th)
    assert ds.DimensionOrganizationType == "TILED_FULL"
    n = int(getattr(ds, "NumberOfFrames", 1))
    assert n == across * down, f"{rel}: {n} frames for {across}x{down} tiles"
    ts = str(ds.file_meta.TransferSyntaxUID)
    canvas = np.zeros((down * th, across * tw, 3), np.uint8)
    if ds.file_meta.TransferSyntaxUID.is_compressed:
        frames = _frames(ds)
        assert len(frames) == n
        tiles = [_decode_frame(f, ts, ds.PhotometricInterpretation) for f in frames]
    else:
        arr = ds.pixel_array
        tiles = list(arr.reshape((n,) + arr.shape[-3:]))
    for i, t in enumerate(tiles):
        r, c = divmod(i, across)
        t = t[:th, :tw]
        canvas[r * th : r * th + t.shape[0], c * tw : c * tw + t.shape[1]] = t
    expected = canvas[:h, :w]
    flavor = ds.ImageType[2]
    if flavor == "VOLUME":
        levels = info(testdata / rel)["levels"]
        level = [(lv["width"], lv["height"]) for lv in levels].index((w, h))
        actual = read_region(testdata / rel, level, 0, 0, w, h)
    else:
        with tempfile.TemporaryDirectory(prefix="sp-dicom-assoc-") as tmp:
            out = Path(tmp) / "a.png"
            proc = run(["associated", testdata / rel, ASSOCIATED_NAMES[flavor], "-o", out])
            assert proc.returncode == 0, proc.stderr
            actual = imagecodecs.png_decode(out.read_bytes())
        level = ASSOCIATED_NAMES[flavor]
    assert (actual[..., 3] == 255).all(), f"{rel}: transparent pixels inside the level"
    d = np.abs(actual[..., :3].astype(int) - expected)
    assert not d.any(), (
        f"{rel} level {level} ({w}x{h}) vs pydicom frames: max diff {d.max()}, "
        f"{(d.max(-1) > 0).mean():.2%} of pixels differ"
    )


# ---- cross-format: the same scan as SVS and as DICOM -------------------------------------------

SVS = "aperio/CMU-1-Small-Region.svs"
CMU_DICOM = "dicom/cmu-1-small-region"
# docs/testing.md, "DICOM": measured mean 3.437, PSNR 31.76 dB, bias <= 0.45 per channel.
SVS_MAX_MEAN = 4.5
SVS_MIN_PSNR = 30.0
SVS_MAX_BIAS = 1.0


def test_cmu_dicom_vs_svs(testdata, read_region):
    """dicom/cmu-1-small-region is CMU-1-Small-Region.svs re-encoded (decoded and JPEG-compressed
    again in 500x500 frames with YCbCr 4:2:0): same level-0 size, near-identical pixels, aligned
    to the pixel (no shift by one fits better)."""
    w, h = 2220, 2967
    info_svs = openslide_facts(SVS)
    assert info_svs is not None and info_svs["levels"][0] == (w, h)
    a = read_region(testdata / CMU_DICOM, 0, 0, 0, w, h)
    b = read_region(testdata / SVS, 0, 0, 0, w, h)
    assert (a[..., 3] == 255).all() and (b[..., 3] == 255).all()
    a = a[..., :3].astype(np.float64)
    b = b[..., :3].astype(np.float64)
    d = a - b
    mean = float(np.abs(d).mean())
    mse = float((d**2).mean())
    psnr = 10 * math.log10(255**2 / mse)
    bias = d.mean(axis=(0, 1))
    shifts = {}
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            shifts[(dx, dy)] = float(
                np.abs(a[1 + dy : h - 1 + dy, 1 + dx : w - 1 + dx] - b[1 : h - 1, 1 : w - 1]).mean()
            )
    report = (
        f"DICOM vs SVS level 0 ({w}x{h}): mean abs diff {mean:.3f}, max {np.abs(d).max():.0f}, "
        f"PSNR {psnr:.2f} dB, signed mean per channel {np.round(bias, 3).tolist()}, "
        f"mean abs diff for 1-pixel shifts {dict((k, round(v, 2)) for k, v in shifts.items())}"
    )
    print(report)
    assert mean < SVS_MAX_MEAN, report
    assert psnr > SVS_MIN_PSNR, report
    assert np.abs(bias).max() < SVS_MAX_BIAS, report
    assert min(shifts, key=shifts.get) == (0, 0), report


# ---- files written here ------------------------------------------------------------------------

EXPLICIT = pydicom.uid.ExplicitVRLittleEndian
IMPLICIT = pydicom.uid.ImplicitVRLittleEndian
JPEG = pydicom.uid.JPEGBaseline8Bit
J2K_LOSSLESS = pydicom.uid.JPEG2000Lossless
HTJ2K_LOSSLESS = "1.2.840.10008.1.2.4.201"
W, H, TW, TH = 40, 30, 16, 16  # 3 x 2 tiles, partial at the right and bottom
ACROSS, DOWN = 3, 2


def _pattern(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([x * 6, y * 8, (x * 3 + y * 5) % 256], -1) + rng.integers(0, 30, (H, W, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def _tiles(img: np.ndarray) -> list[np.ndarray]:
    out = []
    for r in range(DOWN):
        for c in range(ACROSS):
            t = np.zeros((TH, TW) + img.shape[2:], np.uint8)
            part = img[r * TH : (r + 1) * TH, c * TW : (c + 1) * TW]
            t[: part.shape[0], : part.shape[1]] = part
            out.append(t)
    return out


def _dataset(ts, series, photometric="RGB", samples=3, frames=ACROSS * DOWN, org="TILED_FULL", flavor="VOLUME"):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = WSI_SOP
    meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
    meta.TransferSyntaxUID = ts
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = WSI_SOP
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.ImageType = ["DERIVED", "PRIMARY", flavor, "NONE"]
    ds.Modality = "SM"
    ds.SeriesInstanceUID = series
    ds.StudyInstanceUID = "1.2.826.0.1.3680043.10.543.100"
    ds.DimensionOrganizationType = org
    ds.SamplesPerPixel = samples
    ds.PhotometricInterpretation = photometric
    ds.PlanarConfiguration = 0
    ds.NumberOfFrames = frames
    ds.Rows, ds.Columns = TH, TW
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.TotalPixelMatrixColumns, ds.TotalPixelMatrixRows = W, H
    ds.TotalPixelMatrixFocalPlanes = 1
    op = Dataset()
    op.OpticalPathIdentifier = "1"
    op.ObjectiveLensPower = "40"
    ds.OpticalPathSequence = Sequence([op])
    pm = Dataset()
    pm.PixelSpacing = ["0.00025", "0.0005"]
    shared = Dataset()
    shared.PixelMeasuresSequence = Sequence([pm])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    return ds


def _jpeg(tile: np.ndarray, space: str) -> bytes:
    if tile.ndim == 2:
        return imagecodecs.jpeg8_encode(tile, level=90)
    sub = "420" if space == "YCbCr" else "444"
    return imagecodecs.jpeg8_encode(tile, level=90, colorspace="RGB", outcolorspace=space, subsampling=sub)


def _positions(ds, tiles: list[int]):
    items = []
    for t in tiles:
        r, c = divmod(t, ACROSS)
        pp = Dataset()
        pp.ColumnPositionInTotalImagePixelMatrix = c * TW + 1
        pp.RowPositionInTotalImagePixelMatrix = r * TH + 1
        item = Dataset()
        item.PlanePositionSlideSequence = Sequence([pp])
        items.append(item)
    ds.PerFrameFunctionalGroupsSequence = Sequence(items)


def _write(ds, path: Path):
    pydicom.dcmwrite(path, ds, enforce_file_format=True, implicit_vr=ds.file_meta.TransferSyntaxUID == IMPLICIT)


def _make(variant: str, folder: Path) -> tuple[Path, np.ndarray, bool]:
    """Write one synthetic slide; returns (path, expected RGBA of level 0 or None when the
    expected pixels are OpenSlide's, OpenSlide reads it)."""
    series = pydicom.uid.generate_uid()
    img = _pattern(len(variant))
    rgba = np.concatenate([img, np.full((H, W, 1), 255, np.uint8)], -1)
    path = folder / f"{variant}.dcm"
    tiles = _tiles(img)
    if variant in ("native-explicit", "native-implicit", "native-planar"):
        ds = _dataset(EXPLICIT if variant != "native-implicit" else IMPLICIT, series)
        if variant == "native-planar":
            ds.PlanarConfiguration = 1
            tiles = [t.transpose(2, 0, 1).copy() for t in tiles]
        ds.PixelData = b"".join(t.tobytes() for t in tiles)
        _write(ds, path)
        return path, rgba, variant == "native-explicit"
    if variant == "native-grey":
        grey = img[..., 1]
        ds = _dataset(EXPLICIT, series, photometric="MONOCHROME2", samples=1)
        ds.PixelData = b"".join(t.tobytes() for t in _tiles(grey))
        _write(ds, path)
        return path, np.dstack([grey, grey, grey, np.full((H, W), 255, np.uint8)]), False
    if variant.startswith("jpeg") or variant == "sparse-missing-tile":
        space = "RGB" if "rgb" in variant else "YCbCr"
        ds = _dataset(JPEG, series, photometric="RGB" if space == "RGB" else "YBR_FULL_422")
        frames = [_jpeg(t, space) for t in tiles]
        if variant == "jpeg-mislabelled":  # JFIF (YCbCr) frames tagged RGB, as wsi2dcm writes
            ds.PhotometricInterpretation = "RGB"
        if variant == "jpeg-eot":
            ds.PixelData, ds.ExtendedOffsetTable, ds.ExtendedOffsetTableLengths = encapsulate_extended(frames)
        elif variant == "jpeg-fragments":
            ds.PixelData = encapsulate(frames, fragments_per_frame=3, has_bot=True)
        elif variant == "sparse-missing-tile":
            order = [4, 0, 2, 1, 5]  # tile 3 (column 0, row 1) has no frame
            ds.DimensionOrganizationType = "TILED_SPARSE"
            ds.NumberOfFrames = len(order)
            _positions(ds, order)
            ds.PixelData = encapsulate([frames[t] for t in order], has_bot=False)
        else:
            ds.PixelData = encapsulate(frames, has_bot=variant != "jpeg-ycbcr-nobot")
        ds["PixelData"].VR = "OB"
        _write(ds, path)
        return path, None, True
    if variant == "jpeg2000":
        ds = _dataset(J2K_LOSSLESS, series, photometric="YBR_RCT")
        frames = [imagecodecs.jpeg2k_encode(t, level=0, codecformat="J2K", mct=True) for t in tiles]
        ds.PixelData = encapsulate(frames, has_bot=True)
        ds["PixelData"].VR = "OB"
        _write(ds, path)
        return path, rgba, True
    if variant == "htj2k":  # High-Throughput JPEG 2000, lossless; OpenSlide 4.0.1 has no HTJ2K
        ds = _dataset(HTJ2K_LOSSLESS, series, photometric="RGB")
        frames = [imagecodecs.htj2k_encode(t, level=0) for t in tiles]
        ds.PixelData = encapsulate(frames, has_bot=True)
        ds["PixelData"].VR = "OB"
        _write(ds, path)
        return path, rgba, False
    if variant == "concatenation":
        uid = pydicom.uid.generate_uid()
        for part, (first, count) in enumerate(((0, 4), (4, 2))):
            ds = _dataset(JPEG, series, photometric="YBR_FULL_422", frames=count)
            ds.ConcatenationUID = uid
            ds.SOPInstanceUIDOfConcatenationSource = pydicom.uid.generate_uid()
            ds.InConcatenationNumber = part + 1
            ds.InConcatenationTotalNumber = 2
            ds.ConcatenationFrameOffsetNumber = first
            ds.PixelData = encapsulate([_jpeg(t, "YCbCr") for t in tiles[first : first + count]], has_bot=True)
            ds["PixelData"].VR = "OB"
            _write(ds, folder / f"{variant}-{part + 1}.dcm")
        return folder / f"{variant}-1.dcm", None, True
    raise ValueError(variant)


SYNTHETIC = [
    "native-explicit",
    "native-implicit",
    "native-planar",
    "native-grey",
    "jpeg-ycbcr-bot",
    "jpeg-ycbcr-nobot",
    "jpeg-rgb-adobe",
    "jpeg-mislabelled",
    "jpeg-eot",
    "jpeg-fragments",
    "sparse-missing-tile",
    "concatenation",
    "jpeg2000",
    "htj2k",
]


@pytest.mark.parametrize("variant", SYNTHETIC)
def test_synthetic(variant, tmp_path, info, read_region, assert_same_pixels):
    """Slides written with pydicom: facts, and every pixel of level 0 (plus a margin outside)
    against OpenSlide or the pixels written (native, grey, JPEG 2000 lossless)."""
    folder = tmp_path / variant
    folder.mkdir()
    path, expected, openslide_reads = _make(variant, folder)
    got = info(path)
    assert [(lv["width"], lv["height"], lv["tile_width"], lv["tile_height"]) for lv in got["levels"]] == [(W, H, TW, TH)]
    assert _close(got["mpp_x"], 0.5) and _close(got["mpp_y"], 0.25), (got["mpp_x"], got["mpp_y"])
    assert got["objective_power"] == 40
    actual = read_region(path, 0, 0, 0, W + 8, H + 6)
    assert not actual[H:].any() and not actual[:, W:].any(), "pixels outside the level are not zero"
    if openslide_reads:
        raw = np.asarray(openslide.OpenSlide(str(path)).read_region((0, 0), 0, (W + 8, H + 6)), dtype=np.uint8)
        oracle = raw.copy()
        if variant == "jpeg-mislabelled":
            opaque = raw[..., 3] == 255
            oracle[..., :3][opaque] = libjpeg_ycc_to_rgb(raw[..., :3][opaque][None])[0]
            assert not np.array_equal(actual, raw), "the mislabelled frames decoded as OpenSlide's raw YCbCr"
        assert_same_pixels(actual, oracle, f"{variant} vs OpenSlide")
        if variant == "sparse-missing-tile":
            assert not actual[TH : 2 * TH, 0:TW].any(), "the tile without a frame is not transparent"
            assert actual[0:TH, 0:TW, 3].all()
    if expected is not None:
        assert_same_pixels(actual[:H, :W], expected, f"{variant} vs the pixels written")


def _patched(src: Path, dst: Path, old: bytes, new: bytes):
    data = src.read_bytes()
    assert data.count(old) >= 1 and len(old) == len(new)
    dst.write_bytes(data.replace(old, new, 1))


@pytest.mark.parametrize(
    "case",
    ["big-endian", "deflated", "jpeg-lossless", "16-bit", "no-volume", "truncated", "fragment-overrun"],
)
def test_refused(case, tmp_path, run):
    """Variants slidepipe does not read fail with exit 1 and one line naming the reason."""
    src, _, _ = _make("jpeg-ycbcr-bot", tmp_path)
    bad = tmp_path / f"bad-{case}.dcm"
    words = {
        "big-endian": "big endian",
        "deflated": "deflated",
        "jpeg-lossless": "JPEG lossless",
        "16-bit": "16-bit",
        "no-volume": "no VOLUME",
        "truncated": ("truncated", "past the end"),
        "fragment-overrun": "past the end",
    }
    if case == "big-endian":
        _patched(src, bad, b"1.2.840.10008.1.2.4.50", b"1.2.840.10008.1.2.2\0\0\0")
    elif case == "deflated":
        _patched(src, bad, b"1.2.840.10008.1.2.4.50", b"1.2.840.10008.1.2.1.99")
    elif case == "jpeg-lossless":
        _patched(src, bad, b"1.2.840.10008.1.2.4.50", b"1.2.840.10008.1.2.4.57")
    elif case == "16-bit":
        ds = pydicom.dcmread(src)
        ds.BitsAllocated = 16
        _write(ds, bad)
    elif case == "no-volume":
        ds = pydicom.dcmread(src)
        ds.ImageType = ["DERIVED", "PRIMARY", "LABEL", "NONE"]
        _write(ds, bad)
    elif case == "truncated":
        bad.write_bytes(src.read_bytes()[:-700])
    elif case == "fragment-overrun":
        data = bytearray(src.read_bytes())
        # the last fragment item's length: 8 bytes before its value, which ends 8 bytes before
        # the sequence delimiter at the end of the file
        last = data.rfind(b"\xfe\xff\x00\xe0")
        data[last + 4 : last + 8] = (0x7FFFFFF0).to_bytes(4, "little")
        bad.write_bytes(bytes(data))
    src.unlink()
    proc = run(["region", bad, "--level", "0", "--x", "0", "--y", "0", "--width", "64", "--height", "64", "-o", tmp_path / "r.rgba"])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, f"exit {proc.returncode}, stderr {proc.stderr!r}"
    want = words[case] if isinstance(words[case], tuple) else (words[case],)
    assert any(w in lines[0] for w in want), f"{case}: message {lines[0]!r} does not say {want}"
