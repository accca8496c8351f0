"""The binding's planes against tifffile: slidepipe.open(path, plane=(z, c, t)) reads that plane
of the shared OME-TIFF z-series (int8, 3 channels x 5 focal planes) exactly as tifffile stores
it (grey shown as (v + 128) in R, G and B), Slide.planes gives tifffile's sizes, the plane
survives pickling (a DataLoader worker reopens the same plane), and a plane beyond the slide's
raises naming the file."""

import pickle

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile", reason="tifffile is the oracle")

import slidepipe  # noqa: E402

ZSERIES = "ome-tiff/multi-channel-z-series.ome.tif"


@pytest.fixture(scope="module")
def zseries(testdata):
    path = testdata / ZSERIES
    if not path.is_file():
        pytest.skip(f"{ZSERIES} is not in the shared test data")
    return path


def test_every_plane_equals_tifffile(zseries):
    stored = tifffile.imread(zseries)  # (C, Z, Y, X) int8
    channels, focal = stored.shape[:2]
    for c in range(channels):
        for z in range(focal):
            with slidepipe.open(zseries, plane=(z, c, 0)) as s:
                assert s.planes == {"z": focal, "c": channels, "t": 1}
                assert s.plane == (z, c, 0)
                got = s.read_region((0, 0), 0, s.dimensions)
            want = (stored[c, z].astype(np.int16) + 128).astype(np.uint8)
            for k in range(3):
                assert np.array_equal(got[..., k], want), (z, c, k)
            assert (got[..., 3] == 255).all()


def test_plane_pickles_and_default(zseries):
    s = slidepipe.open(zseries, plane=(3, 1, 0))
    again = pickle.loads(pickle.dumps(s))
    assert again.plane == (3, 1, 0)
    assert np.array_equal(again.read_region((0, 0), 0, (64, 64)), s.read_region((0, 0), 0, (64, 64)))
    with slidepipe.open(zseries) as first:
        assert first.plane == (0, 0, 0)
        assert not np.array_equal(first.read_region((0, 0), 0, first.dimensions),
                                  s.read_region((0, 0), 0, s.dimensions))
    s.close()
    again.close()


def test_plane_beyond_raises(zseries):
    with pytest.raises(slidepipe.SlidepipeError) as info:
        slidepipe.open(zseries, plane=(5, 0, 0))
    assert str(zseries) in str(info.value) and "the slide has 5" in str(info.value)
    with pytest.raises(ValueError):
        slidepipe.open(zseries, plane=(1, 2))
