"""Planes of OME-TIFF and DICOM against tifffile and pydicom: `info --json` reports as many
focal planes (z), channel planes (c) and time points (t) as the file has, and `region --z Z --c C
--t T` reads exactly the oracle's pixels of that plane, on every level. OME-TIFF: every plane of
the shared int8 3-channel x 5-z-plane file and of files written here with tifffile (a uint8 grey
T=2 x C=2 x Z=3 pyramid with SubIFD levels and deflate tiles; an RGB z-stack, whose three samples
are one channel plane), against tifffile. DICOM: the shared one-instance JPEG level rewritten
with pydicom as 2 focal planes x 2 optical paths (TILED_FULL), every plane against pydicom's
pixel_array frames. Without --z/--c/--t the first plane is read, as before. A plane beyond the
slide's, or any plane but the first of a format without planes, exits 1 with one line naming the
file and the sizes. Grey pages are shown as (v, v, v, 255), int8 as v + 128 (docs/formats.md,
"Pixel rules")."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile", reason="tifffile is the oracle and writes the files")

SHARED = "ome-tiff/multi-channel-z-series.ome.tif"


def _as_rgba(plane: np.ndarray) -> np.ndarray:
    """slidepipe's RGBA for one stored plane: grey replicated, int8 offset, opaque."""
    if plane.dtype == np.int8:
        plane = (plane.astype(np.int16) + 128).astype(np.uint8)
    if plane.ndim == 2:
        plane = np.repeat(plane[..., None], 3, axis=2)
    alpha = np.full(plane.shape[:2] + (1,), 255, dtype=np.uint8)
    return np.concatenate([plane, alpha], axis=2)


def _region(sp, path, level, w, h, plane, tmp_path):
    out = tmp_path / "plane.rgba"
    args = ["region", path, "--level", level, "--x", 0, "--y", 0, "--width", w, "--height", h,
            "-o", out]
    for flag, v in zip(("--z", "--c", "--t"), plane):
        if v is not None:
            args += [flag, v]
    sp.ok(args)
    return np.fromfile(out, dtype=np.uint8).reshape(h, w, 4)


def _planes_of(series):
    """{(z, c, t): [level arrays (y, x[, s])]} from a tifffile series with axes among T, C, Z."""
    levels = [lv.asarray() for lv in series.levels]
    axes = series.axes
    sizes = {a: series.shape[axes.index(a)] if a in axes else 1 for a in "ZCT"}
    if "S" in axes:  # RGB samples are one channel plane
        sizes["C"] = 1
    out = {}
    for z, c, t in itertools.product(range(sizes["Z"]), range(sizes["C"]), range(sizes["T"])):
        index = tuple({"Z": z, "C": c, "T": t}[a] for a in axes if a in "ZCT")
        out[(z, c, t)] = [lv[index] for lv in levels]
    return sizes, out


def _check_file(path, sp, info, tmp_path, assert_same_pixels):
    with tifffile.TiffFile(path) as tif:
        sizes, planes = _planes_of(tif.series[0])
    got = info(path)
    assert got["planes"] == {"z": sizes["Z"], "c": sizes["C"], "t": sizes["T"]}
    assert got["plane"] == {"z": 0, "c": 0, "t": 0}
    assert len(got["levels"]) == len(planes[(0, 0, 0)])
    for (z, c, t), levels in planes.items():
        for level, want in enumerate(levels):
            h, w = want.shape[:2]
            assert (got["levels"][level]["width"], got["levels"][level]["height"]) == (w, h)
            pixels = _region(sp, path, level, w, h, (z, c, t), tmp_path)
            assert_same_pixels(pixels, _as_rgba(want), f"{path.name} Z={z} C={c} T={t} L{level}")
    # No --z/--c/--t: the first plane, as before.
    h, w = planes[(0, 0, 0)][0].shape[:2]
    first = _region(sp, path, 0, w, h, (None, None, None), tmp_path)
    assert_same_pixels(first, _as_rgba(planes[(0, 0, 0)][0]), f"{path.name} default plane")
    return sizes


def test_shared_z_series_every_plane(testdata, sp, info, tmp_path, assert_same_pixels):
    path = testdata / SHARED
    if not path.is_file():
        pytest.skip(f"{SHARED} is not in the shared test data")
    sizes = _check_file(path, sp, info, tmp_path, assert_same_pixels)
    assert (sizes["Z"], sizes["C"]) == (5, 3)


@pytest.fixture(scope="module")
def grey_tcz(tmp_path_factory):
    rng = np.random.default_rng(27)
    data = rng.integers(0, 256, (2, 2, 3, 80, 112), dtype=np.uint8)
    path = tmp_path_factory.mktemp("planes") / "tcz.ome.tif"
    with tifffile.TiffWriter(path, ome=True) as tif:
        tif.write(data, metadata={"axes": "TCZYX"}, tile=(32, 32), subifds=1, compression="zlib")
        tif.write(data[..., ::2, ::2].copy(), subfiletype=1, tile=(16, 16), compression="zlib")
    return path


@pytest.fixture(scope="module")
def rgb_z(tmp_path_factory):
    rng = np.random.default_rng(42)
    data = rng.integers(0, 256, (3, 64, 96, 3), dtype=np.uint8)
    path = tmp_path_factory.mktemp("planes") / "rgbz.ome.tif"
    tifffile.imwrite(path, data, ome=True, metadata={"axes": "ZYXS"}, photometric="rgb",
                     tile=(32, 32))
    return path


def test_tifffile_grey_pyramid_every_plane(grey_tcz, sp, info, tmp_path, assert_same_pixels):
    sizes = _check_file(grey_tcz, sp, info, tmp_path, assert_same_pixels)
    assert (sizes["Z"], sizes["C"], sizes["T"]) == (3, 2, 2)


def test_tifffile_rgb_z_stack(rgb_z, sp, info, tmp_path, assert_same_pixels):
    sizes = _check_file(rgb_z, sp, info, tmp_path, assert_same_pixels)
    assert (sizes["Z"], sizes["C"], sizes["T"]) == (3, 1, 1)


def test_plane_properties(grey_tcz, info):
    props = info(grey_tcz)["properties"]
    assert props["ome.PlaneShown"] == "Z=0 C=0 T=0"
    assert (props["ome.SizeZ"], props["ome.SizeC"], props["ome.SizeT"]) == ("3", "2", "2")


@pytest.mark.parametrize("flag,value", [("--z", 3), ("--c", 2), ("--t", 2)])
def test_plane_beyond_the_slide(grey_tcz, sp, tmp_path, flag, value):
    proc = sp.run(["region", grey_tcz, "--level", 0, "--x", 0, "--y", 0, "--width", 8,
                   "--height", 8, "-o", tmp_path / "x.png", flag, value])
    assert proc.returncode == 1, sp.describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: ") and str(grey_tcz) in lines[0]
    assert f"the slide has {value}" in lines[0]


def test_no_planes_in_other_formats(testdata, sp, tmp_path):
    path = testdata / "generic-tiff" / "boxes.tiff"
    if not path.is_file():
        pytest.skip("generic-tiff/boxes.tiff is not in the shared test data")
    proc = sp.run(["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 8, "--height", 8,
                   "-o", tmp_path / "x.png", "--z", 1])
    assert proc.returncode == 1 and "focal plane (z) 1" in proc.stderr, sp.describe(proc)
    proc = sp.run(["region", path, "--level", 0, "--x", 0, "--y", 0, "--width", 8, "--height", 8,
                   "-o", tmp_path / "x.png", "--z", "-1"])
    assert proc.returncode == 2, sp.describe(proc)  # a usage error


# ---- DICOM: focal planes and optical paths of a TILED_FULL instance ---------------------------

CAMELYON = "dicom/multi_frame_jpeg_camelyon_challenge_image.dcm"


def _camelyon(testdata):
    """pydicom's data set of the shared one-instance JPEG DICOM level and its frames' bytes (the
    test is skipped without pydicom or the file)."""
    pydicom = pytest.importorskip("pydicom", reason="pydicom writes the DICOM files")
    from pydicom.encaps import generate_frames

    source = testdata / CAMELYON
    if not source.is_file():
        pytest.skip(f"{CAMELYON} is not in the shared test data")
    ds = pydicom.dcmread(source)
    return ds, list(generate_frames(ds.PixelData, number_of_frames=int(ds.NumberOfFrames)))


def _optical_paths(ids):
    """An OpticalPathSequence of one item per identifier."""
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    items = []
    for path_id in ids:
        item = Dataset()
        item.OpticalPathIdentifier = path_id
        items.append(item)
    return Sequence(items)


@pytest.fixture(scope="module")
def dicom_planes(testdata, tmp_path_factory):
    """The shared one-instance DICOM level (15 JPEG frames) rewritten with pydicom as 2 focal
    planes x 2 optical paths, TILED_FULL: frames by tile, then focal plane, then optical path
    (PS3.3 C.7.6.17.3); each plane holds the original frames in a different order, so no two
    planes look alike."""
    from pydicom.encaps import encapsulate

    ds, frames = _camelyon(testdata)
    n = len(frames)
    out = []
    for c in range(2):
        for z in range(2):
            k = c * 2 + z
            out += [frames[(i * (2 * k + 1) + k) % n] for i in range(n)]
    ds.PixelData = encapsulate(out)
    ds["PixelData"].is_undefined_length = True
    ds.NumberOfFrames = len(out)
    ds.TotalPixelMatrixFocalPlanes = 2
    ds.NumberOfOpticalPaths = 2
    ds.OpticalPathSequence = _optical_paths(["1", "2"])
    path = tmp_path_factory.mktemp("dicom-planes") / "planes.dcm"
    ds.save_as(path)
    return path


def _pydicom_plane(path, z, c, frame_order=None):
    """Plane (z, c) laid out from pydicom's pixel_array frames, cropped to the total matrix; with
    `frame_order`, tile t is frame frame_order[t] of the file."""
    import pydicom

    ds = pydicom.dcmread(path)
    arr = ds.pixel_array
    width, height = int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows)
    tw, th = int(ds.Columns), int(ds.Rows)
    across, down = -(-width // tw), -(-height // th)
    tiles = across * down
    focal = int(ds.get("TotalPixelMatrixFocalPlanes", 1))
    first = (c * focal + z) * tiles
    image = np.zeros((down * th, across * tw, 3), dtype=np.uint8)
    for t in range(tiles):
        row, col = divmod(t, across)
        frame = frame_order[t] if frame_order is not None else first + t
        image[row * th:(row + 1) * th, col * tw:(col + 1) * tw] = arr[frame]
    return _as_rgba(image[:height, :width])


def test_dicom_every_plane_equals_pydicom(dicom_planes, sp, info, tmp_path, assert_same_pixels):
    got = info(dicom_planes)
    assert got["planes"] == {"z": 2, "c": 2, "t": 1}
    width, height = got["levels"][0]["width"], got["levels"][0]["height"]
    seen = []
    for z in range(2):
        for c in range(2):
            want = _pydicom_plane(dicom_planes, z, c)
            pixels = _region(sp, dicom_planes, 0, width, height, (z, c, None), tmp_path)
            assert_same_pixels(pixels, want, f"DICOM focal plane {z}, optical path {c}")
            assert all(not np.array_equal(pixels, other) for other in seen), "planes alike"
            seen.append(pixels)
    first = _region(sp, dicom_planes, 0, width, height, (None, None, None), tmp_path)
    assert np.array_equal(first, seen[0])


def test_dicom_plane_beyond(dicom_planes, sp, tmp_path):
    proc = sp.run(["region", dicom_planes, "--level", 0, "--x", 0, "--y", 0, "--width", 8,
                   "--height", 8, "-o", tmp_path / "x.png", "--z", 2])
    assert proc.returncode == 1, sp.describe(proc)
    assert "focal plane (z) 2: the slide has 2" in proc.stderr and str(dicom_planes) in proc.stderr


# ---- DICOM: focal planes and optical paths as separate instances -------------------------------

SEPARATE = {"a.dcm": (2.0, "1"), "b.dcm": (-1.0, "1"), "c.dcm": (2.0, "2"), "d.dcm": (-1.0, "2")}


@pytest.fixture(scope="module")
def dicom_plane_instances(testdata, tmp_path_factory):
    """The shared one-instance DICOM level written with pydicom as four instances of one series,
    one a plane: focal planes at Z offset 2.0 and -1.0 mm (in SharedFunctionalGroupsSequence >
    PlanePositionSlideSequence) x optical paths "1" and "2", each instance holding the frames in
    a different order; the file names do not follow the planes' order."""
    from pydicom.dataset import Dataset
    from pydicom.encaps import encapsulate
    from pydicom.sequence import Sequence
    from pydicom.uid import generate_uid

    folder = tmp_path_factory.mktemp("dicom-plane-instances")
    for k, (name, (z, path_id)) in enumerate(SEPARATE.items()):
        ds, frames = _camelyon(testdata)
        n = len(frames)
        ds.PixelData = encapsulate([frames[(i * (2 * k + 1) + k) % n] for i in range(n)])
        ds["PixelData"].is_undefined_length = True
        ds.TotalPixelMatrixFocalPlanes = 1  # one plane an instance
        ds.NumberOfOpticalPaths = 1
        ds.SOPInstanceUID = generate_uid()
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        position = Dataset()
        position.ZOffsetInSlideCoordinateSystem = z
        shared = ds.SharedFunctionalGroupsSequence[0] if "SharedFunctionalGroupsSequence" in ds \
            else Dataset()
        shared.PlanePositionSlideSequence = Sequence([position])
        ds.SharedFunctionalGroupsSequence = Sequence([shared])
        ds.OpticalPathSequence = _optical_paths([path_id])
        ds.save_as(folder / name)
    return folder


def test_dicom_plane_instances_equal_pydicom(dicom_plane_instances, sp, info, tmp_path,
                                            assert_same_pixels):
    got = info(dicom_plane_instances)
    assert got["planes"] == {"z": 2, "c": 2, "t": 1}
    width, height = got["levels"][0]["width"], got["levels"][0]["height"]
    by_plane = {(0 if z < 0 else 1, int(path_id) - 1): name
                for name, (z, path_id) in SEPARATE.items()}
    for (z, c), name in sorted(by_plane.items()):
        want = _pydicom_plane(dicom_plane_instances / name, 0, 0)
        pixels = _region(sp, dicom_plane_instances, 0, width, height, (z, c, None), tmp_path)
        assert_same_pixels(pixels, want, f"DICOM focal plane {z}, optical path {c} ({name})")
    first = _region(sp, dicom_plane_instances, 0, width, height, (None, None, None), tmp_path)
    assert_same_pixels(first, _pydicom_plane(dicom_plane_instances / by_plane[(0, 0)], 0, 0),
                       "default plane: the lowest Z offset, the first optical path")
    proc = sp.run(["region", dicom_plane_instances, "--level", 0, "--x", 0, "--y", 0, "--width", 8,
                   "--height", 8, "-o", tmp_path / "x.png", "--c", 2])
    assert proc.returncode == 1 and "the slide has 2" in proc.stderr, sp.describe(proc)


# ---- DICOM: focal planes and optical paths placed frame by frame (TILED_SPARSE) ----------------

SPARSE_PLANES = [(0.5, "1"), (-0.5, "1"), (0.5, "2"), (-0.5, "2")]  # (Z offset, path), k order


@pytest.fixture(scope="module")
def dicom_sparse_planes(testdata, tmp_path_factory):
    """The shared one-instance DICOM level rewritten with pydicom as one TILED_SPARSE instance of
    2 focal planes x 2 optical paths: each frame placed by its PerFrameFunctionalGroupsSequence
    item (PlanePositionSlideSequence column, row and Z offset; OpticalPathIdentificationSequence),
    the frames of all planes interleaved in the file, each plane holding the original frames in a
    different order. Returns (path, {(z index, c index): [original frame index per tile]})."""
    from pydicom.dataset import Dataset
    from pydicom.encaps import encapsulate
    from pydicom.sequence import Sequence

    ds, frames = _camelyon(testdata)
    n = len(frames)
    across = -(-int(ds.TotalPixelMatrixColumns) // int(ds.Columns))
    out, groups, layout = [], [], {}
    for t in range(n):  # tile by tile, the four planes' frames next to each other
        for k, (z, path_id) in enumerate(SPARSE_PLANES):
            source_frame = (t * (2 * k + 1) + k) % n
            key = (0 if z < 0 else 1, int(path_id) - 1)
            layout.setdefault(key, []).append(source_frame)
            out.append(frames[source_frame])
            position = Dataset()
            position.ColumnPositionInTotalImagePixelMatrix = (t % across) * int(ds.Columns) + 1
            position.RowPositionInTotalImagePixelMatrix = (t // across) * int(ds.Rows) + 1
            position.ZOffsetInSlideCoordinateSystem = z
            optical = Dataset()
            optical.OpticalPathIdentifier = path_id
            group = Dataset()
            group.PlanePositionSlideSequence = Sequence([position])
            group.OpticalPathIdentificationSequence = Sequence([optical])
            groups.append(group)
    ds.PixelData = encapsulate(out)
    ds["PixelData"].is_undefined_length = True
    ds.NumberOfFrames = len(out)
    ds.DimensionOrganizationType = "TILED_SPARSE"
    ds.TotalPixelMatrixFocalPlanes = 2
    ds.NumberOfOpticalPaths = 2
    ds.PerFrameFunctionalGroupsSequence = Sequence(groups)
    ds.OpticalPathSequence = _optical_paths(["1", "2"])
    path = tmp_path_factory.mktemp("dicom-sparse-planes") / "sparse.dcm"
    ds.save_as(path)
    return path, layout


def test_dicom_sparse_planes_equal_pydicom(dicom_sparse_planes, testdata, sp, info, tmp_path,
                                           assert_same_pixels):
    path, layout = dicom_sparse_planes
    got = info(path)
    assert got["planes"] == {"z": 2, "c": 2, "t": 1}
    width, height = got["levels"][0]["width"], got["levels"][0]["height"]
    for (z, c), order in sorted(layout.items()):
        want = _pydicom_plane(testdata / CAMELYON, 0, 0, frame_order=order)
        pixels = _region(sp, path, 0, width, height, (z, c, None), tmp_path)
        assert_same_pixels(pixels, want, f"DICOM TILED_SPARSE focal plane {z}, optical path {c}")
    first = _region(sp, path, 0, width, height, (None, None, None), tmp_path)
    want = _pydicom_plane(testdata / CAMELYON, 0, 0, frame_order=layout[(0, 0)])
    assert_same_pixels(first, want, "default plane: the lowest Z offset, the first optical path")
