"""slidepipe.dask on a real dask.distributed LocalCluster (two worker processes): a level read
chunk by chunk on the workers equals OpenSlide's whole-level read (level 0) and the library's
own whole-level read (a level whose downsample is not whole); the chunks follow the tile grid;
map_overlap over it equals the same filter over the whole image; a converted OME-Zarr read the
same way equals zarr-python's array and the slide. Skipped, saying so, when dask or distributed is
not installed, and in the ASan run (below).
"""

import os

import numpy as np
import pytest

import slidepipe

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install "
                         "'dask[array]', tests/requirements.txt pins it)")
distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed "
                                  "(pip install distributed, tests/requirements.txt pins it)")
import slidepipe.dask as spdask  # noqa: E402

# The sanitizer run of this suite (scripts/run-tests preloads the ASan runtime) leaves the
# Dask cluster out: it costs a minute or more there, and the reads it drives are the loader's and
# the slide's, which that run covers through test_loader.py and test_binding.py; the release run
# covers Dask itself.
if "asan" in os.environ.get("LD_PRELOAD", ""):
    pytest.skip("Dask cluster tests run in the release run only (the ASan run covers the reads "
                "they drive through test_loader.py and test_binding.py)", allow_module_level=True)

SMALL = "aperio/CMU-1-Small-Region.svs"
PYRAMID = "aperio/tcga-cr-7395-01a-01-ts1.svs"


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def test_level_zero_equals_openslide_chunked_on_tiles(testdata, client):
    openslide = pytest.importorskip("openslide", reason="openslide-python is not installed")
    path = testdata / SMALL
    arr = spdask.from_slide(path, 0)
    lv = slidepipe.open(path).levels[0]
    assert arr.shape == (lv.height, lv.width, 3) and arr.dtype == np.uint8
    assert arr.chunks[0][0] == lv.tile_height and arr.chunks[1][0] == lv.tile_width
    assert arr.numblocks[0] * arr.numblocks[1] > 100
    got = client.compute(arr).result()
    with openslide.OpenSlide(str(path)) as osr:
        ref = np.asarray(osr.read_region((0, 0), 0, (lv.width, lv.height)))
    assert (ref[..., 3] == 255).all()
    assert np.array_equal(got, ref[..., :3])
    # Every chunk was read by a worker process, not here.
    assert len(client.scheduler_info()["workers"]) == 2


def test_a_level_with_an_uneven_downsample_and_rgba(testdata, client):
    path = testdata / PYRAMID
    with slidepipe.open(path) as s:
        lv = s.levels[1]
        assert lv.downsample != int(lv.downsample)
        ref = s.read_region((0, 0), 1, (lv.width, lv.height))
    arr = spdask.from_slide(path, 1, rgb=False)
    assert arr.shape == (lv.height, lv.width, 4)
    assert np.array_equal(client.compute(arr).result(), ref)
    # A window of it reads only the chunks under it, and the same pixels.
    window = arr[300:700, 1000:1333]
    assert np.array_equal(client.compute(window).result(), ref[300:700, 1000:1333])


def test_map_overlap_equals_the_filter_over_the_whole_level(testdata, client):
    ndimage = pytest.importorskip("scipy.ndimage", reason="scipy is not installed")
    arr = spdask.from_slide(testdata / SMALL, 0)

    def maxfilter(block):
        return ndimage.maximum_filter(block, size=(7, 7, 1), mode="reflect")

    tiled = arr.map_overlap(maxfilter, depth=(3, 3, 0), boundary="reflect", dtype=np.uint8)
    whole = maxfilter(client.compute(arr).result())
    assert np.array_equal(client.compute(tiled).result(), whole)


def test_a_converted_ome_zarr_reads_the_same(testdata, client, tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr-python is not installed")
    out = tmp_path / "small.zarr"
    slidepipe.convert(testdata / SMALL, out, chunk=512, threads=1)
    arr = spdask.from_slide(out, 0)
    assert arr.chunks[0][0] == 512 and arr.chunks[1][0] == 512
    got = client.compute(arr).result()
    ref = np.asarray(zarr.open_group(str(out), mode="r")["0"])  # (c, y, x)
    assert np.array_equal(got, np.moveaxis(ref, 0, -1))
    assert np.array_equal(got, client.compute(spdask.from_slide(testdata / SMALL, 0)).result())


def test_a_file_that_is_no_slide_fails_naming_it(testdata, tmp_path):
    bad = tmp_path / "not-a-slide.svs"
    bad.write_bytes(b"II*\x00" + b"\xff" * 60)
    with pytest.raises(slidepipe.SlidepipeError, match="not-a-slide"):
        spdask.from_slide(bad, 0)
    with pytest.raises(ValueError, match="levels"):
        spdask.from_slide(testdata / SMALL, 5)
