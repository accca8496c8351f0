"""The training loader: batch formats against numpy, the prefetching Loader against the same work
done at once, DLPack hand-off, ranks, workers and resuming, physical units against a numpy
resampling, context stacks on a slide with a known pattern, and cohorts with broken slides.
(PyTorch's side: test_torch.py.)
"""

import json
import pickle
import time

import numpy as np
import pytest
import tifffile

import slidepipe
from slidepipe.loader import REQUEST_DTYPE, BatchFormat, Loader, read_image, read_patches

SMALL = "aperio/CMU-1-Small-Region.svs"
FORMATS = [BatchFormat(d, layout, mean, std)
           for d in ("uint8", "float16", "float32") for layout in ("NHWC", "NCHW")
           for mean, std in [((0, 0, 0), (1, 1, 1)),
                             ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]]


def numpy_format(rgb, fmt):
    """The documented conversion of uint8 NHWC patches: ((v / 255) - mean) / std in float32."""
    if fmt.dtype == "uint8":
        out = rgb
    else:
        unit = rgb.astype(np.float32) / np.float32(255)
        out = ((unit - np.array(fmt.mean, np.float32)) / np.array(fmt.std, np.float32))
        out = out.astype(fmt.numpy_dtype)
    return np.ascontiguousarray(np.moveaxis(out, -1, -3) if fmt.layout == "NCHW" else out)


def requests(n, seed=1, width=2220, height=2967, size=64, slide=0):
    rng = np.random.default_rng(seed)
    reqs = np.zeros(n, dtype=REQUEST_DTYPE)
    reqs["slide"] = slide
    reqs["x"] = rng.integers(0, width - size, n)
    reqs["y"] = rng.integers(0, height - size, n)
    reqs["seed"] = rng.integers(0, 2**63, n, dtype=np.uint64)
    return reqs


@pytest.fixture(scope="module")
def small(testdata):
    with slidepipe.open(testdata / SMALL) as s:
        yield s


@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_every_format_equals_numpy_of_the_uint8_patches(small, fmt):
    reqs = requests(12)
    rgb, st = read_patches([small], reqs, BatchFormat(), size=64, dihedral=True, hed_sigma=0.1)
    got, st2 = read_patches([small], reqs, fmt, size=64, dihedral=True, hed_sigma=0.1)
    assert not st.any() and not st2.any()
    assert got.dtype == fmt.numpy_dtype and got.shape == fmt.shape(12, 64)
    assert np.array_equal(got, numpy_format(rgb, fmt))


def test_patches_equal_the_steps_done_one_by_one(small):
    reqs = requests(6, seed=2)
    stains = small.stains(512)
    got, _ = read_patches([small], reqs, BatchFormat(), size=64, dihedral=True, hed_sigma=0.2,
                          stains=[stains])
    for i, r in enumerate(reqs):
        want = small.read_region((int(r["x"]), int(r["y"])), 0, (64, 64), rgb=True)
        slidepipe.normalize_stains(want, stains)
        slidepipe.augment(want[None], reqs["seed"][i:i + 1], dihedral=True, hed_sigma=0.2)
        assert np.array_equal(got[i], want)


def all_values_slide(path):
    """256 x 256 pixels holding every 8-bit value in each channel: R = x, G = y, B = 255 - x."""
    x = np.arange(256, dtype=np.uint8)
    image = np.stack([np.broadcast_to(x, (256, 256)), np.broadcast_to(x[:, None], (256, 256)),
                      np.broadcast_to(255 - x, (256, 256))], axis=-1)
    tifffile.imwrite(path, image, tile=(128, 128), photometric="rgb")
    return image


@pytest.mark.parametrize("mean,std", [((0.5, 0.25, 0.0), (0.5, 2.0, 1.0)),
                                      ((0.5, 0.5, 0.5), (1e4, 3e3, 5e4)),       # half subnormals
                                      ((0.0, 0.1, 0.9), (1e-5, 2e-6, 3e-5))])   # beyond 65504
def test_float16_rounds_every_value_as_numpy_does(tmp_path, mean, std):
    image = all_values_slide(tmp_path / "values.tif")
    fmt = BatchFormat("float16", "NHWC", mean, std)
    with slidepipe.open(tmp_path / "values.tif") as s, np.errstate(over="ignore"):
        got = read_image(s, 1.0, fmt=fmt)
        assert np.array_equal(got.view(np.uint16), numpy_format(image, fmt).view(np.uint16))


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_read_image_equals_the_scaled_read_converted(small, layout):
    fmt = BatchFormat("float32", layout, (0.2, 0.3, 0.4), (0.5, 0.6, 0.7))
    want = small.read_region_scaled((100, 50), 3.3, (600, 800), rgb=True)
    got = read_image(small, 3.3, (100, 50), (600, 800), fmt)
    assert np.array_equal(got, numpy_format(want, fmt))
    whole = read_image(small, 8.0)
    assert whole.shape == (2967 // 8, 2220 // 8, 3)


@pytest.mark.parametrize("threads,prefetch,batch", [(1, 1, 5), (2, 3, 8), (0, 2, 64)])
def test_loader_equals_the_work_done_at_once(small, threads, prefetch, batch):
    reqs = requests(37, seed=3)
    fmt = BatchFormat("float16", "NCHW", (0.5,) * 3, (0.25,) * 3)
    want, _ = read_patches([small], reqs, fmt, size=64, dihedral=True, hed_sigma=0.05)
    with Loader([small], reqs, fmt, size=64, batch_size=batch, dihedral=True, hed_sigma=0.05,
                threads=threads, prefetch=prefetch) as loader:
        batches = list(loader)
    assert [b.first for b in batches] == list(range(0, 37, batch))
    assert sum(b.count for b in batches) == 37
    assert np.array_equal(np.concatenate([b.numpy() for b in batches]), want)


def test_loader_holds_at_most_prefetch_batches(small):
    reqs = requests(80, seed=4)
    fmt = BatchFormat("float32", "NHWC")
    batch_bytes = 8 * 64 * 64 * 3 * 4
    with Loader([small], reqs, fmt, size=64, batch_size=8, prefetch=3, threads=1) as loader:
        first = next(loader)
        deadline = time.monotonic() + 60
        while loader.stats()["batches_made"] < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the loader fills its queue while the consumer holds batch 0
        time.sleep(0.2)
        stats = loader.stats()
        assert stats["batches_made"] == 4  # the one taken and three ready: it stops there
        assert stats["bytes_held"] == stats["bytes_held_peak"] == 3 * batch_bytes
        rest = list(loader)
    assert first.nbytes == batch_bytes and len(rest) == 9


def test_batches_outlive_their_loader_and_share_memory(small):
    reqs = requests(10, seed=5)
    want, _ = read_patches([small], reqs, BatchFormat(), size=64)
    loader = Loader([small], reqs, BatchFormat(), size=64, batch_size=10)
    batch = next(loader)
    loader.close()
    array = np.from_dlpack(batch)
    assert array.ctypes.data == batch.address  # no copy
    del batch
    assert np.array_equal(array, want)  # the array keeps the memory alive
    again = Loader([small], reqs, BatchFormat(), size=64, batch_size=4)
    next(again)
    again.close()  # closing with batches still queued frees them


def test_a_slide_being_loaded_cannot_be_closed(testdata):
    s = slidepipe.open(testdata / SMALL)
    loader = Loader([s], requests(4), BatchFormat(), size=64, batch_size=4)
    with pytest.raises(RuntimeError, match="being read"):
        s.close()
    loader.close()
    s.close()


def test_closing_a_sampler_stops_an_unfinished_epoch(testdata):
    """An epoch left after its first batch, its generator still held (a loop that breaks, a
    benchmark that times part of one): leaving the sampler's `with` stops the epoch's loader
    before closing the slides, where the slide's close used to refuse ("being read")."""
    with slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=4, min_tissue=0.3,
                                mask_side=512, seed=3, threads=2, prefetch=4) as s:
        batches = s.epoch(0)
        patches, _ = next(batches)
        assert patches.shape == (4, 64, 64, 3)
    assert list(batches) == []  # the epoch ended with the sampler
    again = pickle.loads(pickle.dumps(s))  # what is under way is not part of a sampler's state
    assert len(again) == len(s)


def test_bad_requests_name_the_request_and_the_slide(small):
    reqs = requests(3)
    reqs["level"][1] = 5
    with pytest.raises(slidepipe.SlidepipeError, match="request 1: CMU-1-Small-Region.svs has 1 "
                                                       "levels"):
        Loader([small], reqs, BatchFormat(), size=64, batch_size=2)
    reqs["level"][1] = -1
    reqs["downsample"][1] = 0.5
    with pytest.raises(slidepipe.SlidepipeError, match="downsample 0.5"):
        read_patches([small], reqs, BatchFormat(), size=64)
    reqs["slide"][1] = 1
    with pytest.raises(slidepipe.SlidepipeError, match="slide 1 of 1"):
        read_patches([small], reqs, BatchFormat(), size=64)
    with pytest.raises(ValueError):
        BatchFormat("float32", "NCHW", std=(1, 0, 1))
    with pytest.raises(ValueError):
        BatchFormat("int16")


def test_pinned_memory_is_asked_for_and_reported(small):
    with Loader([small], requests(4), BatchFormat(), size=64, batch_size=4,
                pinned=True) as loader:
        batch = next(loader)
        stats = loader.stats()
    gpu, _ = slidepipe._core.cuda_device_count()
    # Page-locked where a CUDA device is present; ordinary memory, and said so, elsewhere.
    assert batch.pinned == stats["pinned"] == (gpu > 0)


def test_numa_placement_where_there_are_several_nodes(small):
    import os
    online = open("/sys/devices/system/node/online").read().strip() \
        if os.path.exists("/sys/devices/system/node/online") else "0"
    several = online != "0"
    with Loader([small], requests(4), BatchFormat(), size=64, batch_size=4, numa=0) as loader:
        next(loader)
        # Placed on node 0 where the machine has several nodes; nothing to do on one.
        assert loader.stats()["numa_node"] == (0 if several else -1)
    with pytest.raises(slidepipe.SlidepipeError, match="no NUMA node 99"):
        Loader([small], requests(4), BatchFormat(), size=64, batch_size=4, numa=99)
    with Loader([small], requests(4), BatchFormat(), size=64, batch_size=4, numa=None) as loader:
        next(loader)
        assert loader.stats()["numa_node"] == -1


# ---- the sampler: sharding, workers, resuming, pickling ------------------------------------


@pytest.fixture(scope="module")
def sampler(testdata):
    s = slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=16, min_tissue=0.3,
                               mask_side=512, seed=11, hed_sigma=0.05, threads=2)
    yield s
    s.close()


def samples(batches):
    return [(int(t["slide"]), int(t["x"]), int(t["y"])) for _, tiles in batches for t in tiles]


def test_two_ranks_see_every_sample_once(testdata, sampler):
    kw = dict(batch_size=16, min_tissue=0.3, mask_side=512, seed=11, hed_sigma=0.05)
    ranks = [slidepipe.PatchSampler([testdata / SMALL], 64, rank=r, world_size=2, **kw)
             for r in (0, 1)]
    try:
        seen = [samples(r.epoch(3)) for r in ranks]
        assert not set(seen[0]) & set(seen[1])
        assert sorted(seen[0] + seen[1]) == sorted(samples(sampler.epoch(3)))
        assert len(seen[0]) == len(seen[1]) == len(sampler.tiles) // 2 > 0
        # A sample gets the same pixels on whichever rank takes it.
        whole = {k: p for (b, t) in sampler.epoch(3) for k, p in zip(samples([(b, t)]), b)}
        for patches, tiles in ranks[1].epoch(3):
            for key, patch in zip(samples([(patches, tiles)]), patches):
                assert np.array_equal(patch, whole[key])
    finally:
        for r in ranks:
            r.close()


def test_ranks_come_from_torchrun_or_slurm(testdata, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with slidepipe.PatchSampler([testdata / SMALL], 64, min_tissue=0.3, mask_side=512) as s:
        assert (s.rank, s.world_size) == (1, 3)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    with slidepipe.PatchSampler([testdata / SMALL], 64, min_tissue=0.3, mask_side=512) as s:
        assert (s.rank, s.world_size) == (0, 2)
    with pytest.raises(ValueError, match="rank 2"):
        slidepipe.PatchSampler([testdata / SMALL], 64, rank=2, world_size=2)


def test_resuming_and_workers_give_the_same_sequence(sampler):
    full = list(sampler.epoch(5))
    assert len(full) == len(sampler) > 4
    tail = list(sampler.epoch(5, start=3))
    assert samples(tail) == samples(full[3:])
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(tail, full[3:]))
    parts = [list(sampler.epoch(5, start=1, worker=w, workers=3)) for w in range(3)]
    turns = [parts[i % 3][i // 3] for i in range(len(full) - 1)]
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(turns, full[1:]))
    assert samples(turns) == samples(full[1:])


def test_the_same_batches_on_any_thread_count(testdata, sampler):
    with slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=16, min_tissue=0.3,
                                mask_side=512, seed=11, hed_sigma=0.05, threads=1,
                                prefetch=1) as one:
        for (a, ta), (b, tb) in zip(one.epoch(2), sampler.epoch(2)):
            assert np.array_equal(a, b) and np.array_equal(ta, tb)


def test_slides_and_samplers_pickle_and_reopen_lazily(testdata, sampler):
    s = slidepipe.open(testdata / SMALL, mpp=0.5)
    copy = pickle.loads(pickle.dumps(s))
    assert copy._core_obj is None and copy.mpp == (0.5, 0.5) and copy.format == s.format
    assert np.array_equal(copy.read_region((10, 10), 0, (32, 32)),
                          s.read_region((10, 10), 0, (32, 32)))
    s.close()
    copy.close()
    again = pickle.loads(pickle.dumps(sampler))
    assert all(sl._core_obj is None for sl in again.slides)
    for (a, ta), (b, tb) in zip(again.epoch(1), sampler.epoch(1)):
        assert np.array_equal(a, b) and np.array_equal(ta, tb)
    again.close()


# ---- physical units and context stacks -----------------------------------------------------


def smooth_slide(path, side=2048, seed=0):
    """A slide of smooth colour noise (no mpp recorded), and its pixels."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (side // 32 + 1, side // 32 + 1, 3)).astype(np.float64)
    idx = np.arange(side) / 32.0
    i0 = idx.astype(int)
    f = (idx - i0)[:, None]
    rows = coarse[i0] * (1 - f[..., None]) + coarse[i0 + 1] * f[..., None]
    image = rows[:, i0] * (1 - f[None, :, :]) + rows[:, i0 + 1] * f[None, :, :]
    image = np.clip(image + rng.normal(0, 6, image.shape), 0, 255).astype(np.uint8)
    tifffile.imwrite(path, image, tile=(256, 256), photometric="rgb")
    return image


def area_weights(start, factor, count, limit):
    """(count, limit) weights: output i averages source [start + i f, start + (i + 1) f)."""
    w = np.zeros((count, limit))
    for i in range(count):
        a, b = start + i * factor, start + (i + 1) * factor
        for k in range(int(np.floor(a)), int(np.ceil(b))):
            w[i, k] = (min(b, k + 1) - max(a, k)) / factor
    return w


@pytest.mark.parametrize("mpp", [1.0, 0.75, 1.3])
def test_mpp_reads_equal_an_area_resampling_of_level_0(tmp_path, mpp):
    image = smooth_slide(tmp_path / "smooth.tif").astype(np.float64)
    with slidepipe.PatchSampler([slidepipe.open(tmp_path / "smooth.tif", mpp=0.5)], 48,
                                mpp=mpp, min_tissue=0, dihedral=False, batch_size=8,
                                mask_side=256) as s:
        d = mpp / 0.5
        assert s.downsamples == [pytest.approx(d)]
        patches, tiles = next(iter(s))
        span = int(np.ceil(48 * d)) + 1
        for patch, t in zip(patches, tiles):
            x, y = int(t["x"]), int(t["y"])
            window = image[y:y + span, x:x + span]
            wy = area_weights(0, d, 48, window.shape[0])
            wx = area_weights(0, d, 48, window.shape[1])
            want = np.einsum("iy,yxc,jx->ijc", wy, window, wx, optimize=True)
            # docs/train.md: the area average, rounded; at most one level of rounding apart.
            assert np.abs(patch - want).max() <= 1.0


def test_context_stacks_are_centred_on_the_same_point(tmp_path):
    side, centre, radius = 2048, 64 + 128 * 8, 40.0
    yy, xx = np.mgrid[0:side, 0:side] + 0.5
    disc = (xx - centre) ** 2 + (yy - centre) ** 2 <= radius ** 2
    image = np.where(disc[..., None], 0, 255).astype(np.uint8).repeat(3, axis=-1)
    tifffile.imwrite(tmp_path / "disc.tif", image, tile=(256, 256), photometric="rgb")
    with slidepipe.PatchSampler([slidepipe.open(tmp_path / "disc.tif", mpp=0.5)], 64, mpp=1.0,
                                context=(1.0, 2.0, 4.0), min_tissue=0, dihedral=False,
                                batch_size=1000, mask_side=256) as s:
        patches, tiles = next(iter(s))
        assert patches.shape == (len(s.tiles), 3, 64, 64, 3)
        i = int(np.flatnonzero((tiles["x"] == centre - 64) & (tiles["y"] == centre - 64))[0])
        for k, scale in enumerate((2.0, 4.0, 8.0)):
            dark = 255.0 - patches[i, k, :, :, 0]
            cy, cx = (np.indices(dark.shape) + 0.5).reshape(2, -1) @ dark.ravel() / dark.sum()
            assert abs(cx - 32) < 0.05 and abs(cy - 32) < 0.05, (k, cx, cy)
            # the disc's area shrinks with the scale: radius 40 level-0 pixels
            assert dark.sum() / 255 == pytest.approx(np.pi * (radius / scale) ** 2, rel=0.05)


def test_a_slide_without_mpp_is_named(tmp_path):
    smooth_slide(tmp_path / "nompp.tif")
    with pytest.raises(ValueError, match="nompp.tif does not record its microns per pixel"):
        slidepipe.PatchSampler([tmp_path / "nompp.tif"], 32, mpp=0.5, min_tissue=0)
    with pytest.raises(ValueError, match="upsampling"):
        slidepipe.PatchSampler([slidepipe.open(tmp_path / "nompp.tif", mpp=1.0)], 32, mpp=0.5,
                               min_tissue=0)


# ---- a cohort never dies of one slide ------------------------------------------------------


def spoil_tile_0(path):
    """Zero the first JPEG tile of a slide in place: reads over it fail from now on."""
    with tifffile.TiffFile(path) as t:
        offset, count = t.pages[0].dataoffsets[0], t.pages[0].databytecounts[0]
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(count))


def test_a_cohort_with_broken_slides_finishes_with_skip(testdata, tmp_path):
    (tmp_path / "not-a-slide.svs").write_bytes(b"hello")
    image = smooth_slide(tmp_path / "smooth.tif", side=1024)
    tifffile.imwrite(tmp_path / "spoiled.tif", image, tile=(256, 256), photometric="rgb",
                     compression="jpeg")
    tifffile.imwrite(tmp_path / "unreadable.tif", image, tile=(256, 256), photometric="rgb",
                     compression="jpeg")
    spoil_tile_0(tmp_path / "unreadable.tif")
    cohort = [testdata / SMALL, tmp_path / "not-a-slide.svs", tmp_path / "spoiled.tif",
              tmp_path / "unreadable.tif"]
    with pytest.raises(slidepipe.SlidepipeError, match="not-a-slide.svs"):
        slidepipe.PatchSampler(cohort, 64, min_tissue=0, mask_side=256)
    capacity = slidepipe.cache_stats()["capacity_bytes"]
    slidepipe.set_cache_capacity(0)  # so that tiles decoded for the mask are read again
    try:
        with slidepipe.PatchSampler(cohort, 64, min_tissue=0, mask_side=256, batch_size=32,
                                    on_error="skip") as s:
            # A slide that does not open, and one whose mask cannot be read, are left out.
            assert [p for p, _ in s.skipped] == [str(tmp_path / "not-a-slide.svs"),
                                                 str(tmp_path / "unreadable.tif")]
            assert len(s.slides) == 2
            spoil_tile_0(tmp_path / "spoiled.tif")  # and this one breaks during the run
            seen = sum(len(p) for p, _ in s)
            assert s.failures and all(f[0].endswith("spoiled.tif") for f in s.failures)
            # The patch over tile 0 fails; from then on the slide's error is sticky (the
            # library's rule), so its later patches drop out too, and the others' do not.
            assert any(x < 256 and y < 256 for _, x, y, _ in s.failures)
            assert seen + len(s.failures) == len(s.tiles)
        with slidepipe.PatchSampler([tmp_path / "smooth.tif"], 64, min_tissue=0,
                                    mask_side=256) as s:
            tifffile.imwrite(tmp_path / "smooth.tif", image, tile=(256, 256),
                             photometric="rgb", compression="jpeg")
            spoil_tile_0(tmp_path / "smooth.tif")
            with pytest.raises(slidepipe.SlidepipeError, match="smooth.tif: the patch at"):
                list(s)
    finally:
        slidepipe.set_cache_capacity(capacity)


# ---- labels from annotations ---------------------------------------------------------------


def rectangles_slide(tmp_path):
    """A white 1024² slide with a dark 'tumor' rectangle and a grey 'stroma' one, and a QuPath
    GeoJSON of the same two rectangles (edges off the 64-pixel tile grid)."""
    image = np.full((1024, 1024, 3), 255, np.uint8)
    tumor, stroma = (130, 150, 470, 420), (600, 610, 990, 1000)  # x0, y0, x1, y1
    image[tumor[1]:tumor[3], tumor[0]:tumor[2]] = 40
    image[stroma[1]:stroma[3], stroma[0]:stroma[2]] = 160
    tifffile.imwrite(tmp_path / "rects.tif", image, tile=(256, 256), photometric="rgb")

    def feature(r, name):
        x0, y0, x1, y1 = r
        ring = [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]
        return {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [ring]},
                "properties": {"objectType": "annotation", "classification": {"name": name}}}

    geojson = {"type": "FeatureCollection",
               "features": [feature(tumor, "Tumor"), feature(stroma, "Stroma")]}
    import json
    (tmp_path / "rects.geojson").write_text(json.dumps(geojson))
    return tumor, stroma


def test_tiles_get_the_class_at_their_centre_and_can_be_filtered(tmp_path):
    tumor, stroma = rectangles_slide(tmp_path)
    slide = slidepipe.open(tmp_path / "rects.tif", mpp=0.5)
    with slidepipe.PatchSampler([slide], 64, min_tissue=0, mask_side=1024,
                                annotations=[tmp_path / "rects.geojson"]) as s:
        assert s.classes == ["background", "Tumor", "Stroma"]
        cx, cy = s.tiles["x"] + 32, s.tiles["y"] + 32
        inside = [(r[0] <= cx) & (cx < r[2]) & (r[1] <= cy) & (cy < r[3]) for r in (tumor, stroma)]
        want = np.where(inside[0], 1, np.where(inside[1], 2, 0))
        assert np.array_equal(s.tiles["label"], want) and (want == 1).sum() > 10
    with slidepipe.PatchSampler([slide], 64, min_tissue=0, mask_side=1024, classes=["Stroma"],
                                annotations=[tmp_path / "rects.geojson"]) as s:
        assert len(s.tiles) == (want == 2).sum() and set(s.tiles["label"]) == {2}
    with pytest.raises(ValueError, match="Necrosis"):
        slidepipe.PatchSampler([slide], 64, min_tissue=0, classes=["Necrosis"],
                               annotations=[tmp_path / "rects.geojson"])
    slide.close()


@pytest.mark.parametrize("mpp,context", [(0.5, None), (1.0, (1.0, 2.0))])
def test_masks_line_up_with_their_flipped_patches(tmp_path, mpp, context):
    rectangles_slide(tmp_path)
    with slidepipe.PatchSampler([slidepipe.open(tmp_path / "rects.tif", mpp=0.5)], 64,
                                mpp=mpp, context=context, min_tissue=0, mask_side=256,
                                annotations=[tmp_path / "rects.geojson"], masks=True,
                                batch_size=40, seed=9, dihedral=True) as s:
        flips = set()
        for patches, tiles, masks in s:
            assert masks.shape == patches.shape[:-1]
            flips |= {slidepipe.train.dihedral_index(int(seed)) for seed in s.plan(0)[1]}
            # The slide's dark pixels are the tumour, its grey ones the stroma: where an
            # averaged pixel is all one or the other, the mask must say so.
            dark, grey, white = patches[..., 0] == 40, patches[..., 0] == 160, \
                patches[..., 0] == 255
            assert np.all(masks[dark] == 1) and np.all(masks[grey] == 2)
            assert np.all(masks[white] == 0)
            assert dark.sum() > 1000
        assert len(flips) == 8


# ---- run manifests -------------------------------------------------------------------------


def test_a_manifest_repeats_the_batches_and_names_a_changed_input(tmp_path):
    image = smooth_slide(tmp_path / "a.tif", side=1024)
    rectangles_slide(tmp_path)
    slides = [slidepipe.open(tmp_path / "a.tif", mpp=0.5), tmp_path / "rects.tif"]
    with slidepipe.PatchSampler(slides, 64, min_tissue=0, mask_side=256, batch_size=24,
                                annotations=[None, tmp_path / "rects.geojson"], seed=4,
                                hed_sigma=0.1, dtype="float16", layout="NCHW") as s:
        run_hash = s.write_manifest(tmp_path / "run.json")
        want = list(s.epoch(2))
        # Renaming a slide keeps its pixel hash and the run hash.
        renamed = s.manifest()
        renamed["slides"][0]["path"] = "elsewhere.tif"
        assert slidepipe.manifest._run_hash(renamed) == run_hash
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["run_hash"] == run_hash and len(manifest["slides"]) == 2
    with slidepipe.PatchSampler.from_manifest(tmp_path / "run.json", threads=1) as again:
        got = list(again.epoch(2))
        assert again.classes == ["background", "Tumor", "Stroma"]
    assert len(got) == len(want)
    assert all(np.array_equal(a, b) and np.array_equal(ta, tb)
               for (a, ta), (b, tb) in zip(got, want))
    # One pixel of one slide changed: the manifest names that slide.
    image[500, 500] ^= 1
    tifffile.imwrite(tmp_path / "a.tif", image, tile=(256, 256), photometric="rgb")
    with pytest.raises(ValueError, match="a.tif: its pixels changed"):
        slidepipe.PatchSampler.from_manifest(tmp_path / "run.json")
    image[500, 500] ^= 1
    tifffile.imwrite(tmp_path / "a.tif", image, tile=(256, 256), photometric="rgb")
    (tmp_path / "rects.geojson").write_text((tmp_path / "rects.geojson").read_text() + " ")
    with pytest.raises(ValueError, match="rects.geojson: the annotations changed"):
        slidepipe.PatchSampler.from_manifest(tmp_path / "run.json")
    manifest["settings"]["seed"] = 5
    with pytest.raises(ValueError, match="run hash does not match"):
        slidepipe.PatchSampler.from_manifest(manifest)


# ---- the whole augmentation pipeline in the loader -----------------------------------------

GEOMETRY = slidepipe.Geometry(rotation=(-30, 30), scale=(0.8, 1.2), shear_x=(-5, 5), crop=True,
                              crop_scale=(0.5, 1.0), elastic_alpha=(1, 1), elastic_sigma=8,
                              elastic_kernel=0)
PHOTOMETRIC = slidepipe.Photometric(brightness=0.2, contrast=0.2, saturation=0.2, hue=0.05,
                                    noise=(1, 5), noise_p=0.5, blur=(0.5, 1.0), blur_p=0.5)


def test_the_loader_pipeline_equals_its_steps_one_by_one(small):
    reqs = requests(10, seed=8)
    stains = small.stains(512)
    fmt = BatchFormat("float16", "NCHW", (0.5,) * 3, (0.25,) * 3)
    kw = dict(size=64, dihedral=True, hed_sigma=0.05, stains=[stains], geometry=GEOMETRY,
              photometric=PHOTOMETRIC)
    got, st = read_patches([small], reqs, fmt, threads=2, **kw)
    assert not st.any()
    # read, normalize, geometry, flips and HED jitter, photometric, format: docs/train.md
    want, _ = read_patches([small], reqs, BatchFormat(), size=64, stains=[stains])
    slidepipe.augment_geometry(want, reqs["seed"], GEOMETRY)
    slidepipe.augment(want, reqs["seed"], dihedral=True, hed_sigma=0.05)
    slidepipe.augment_photometric(want, reqs["seed"], PHOTOMETRIC)
    assert np.array_equal(got, numpy_format(want, fmt))
    with Loader([small], reqs, fmt, batch_size=3, threads=1, prefetch=2, **kw) as loader:
        assert np.array_equal(np.concatenate([b.numpy() for b in loader]), got)
    with pytest.raises(slidepipe.SlidepipeError, match="geometry or photometric"):
        Loader([small], reqs, fmt, batch_size=3, size=64,
               geometry=slidepipe.Geometry(scale=(-1, 1)))


def test_a_sampler_with_every_augmentation_repeats_from_its_manifest(testdata, tmp_path):
    kw = dict(batch_size=16, min_tissue=0.3, mask_side=512, seed=3, hed_sigma=0.05,
              geometry=GEOMETRY, photometric=PHOTOMETRIC, dtype="float16", layout="NCHW")
    with slidepipe.PatchSampler([testdata / SMALL], 64, threads=2, **kw) as s:
        s.write_manifest(tmp_path / "run.json")
        want = list(s.epoch(1))
    with slidepipe.PatchSampler.from_manifest(tmp_path / "run.json", threads=1,
                                              prefetch=1) as again:
        got = list(again.epoch(1))
        assert again.geometry == GEOMETRY and again.photometric == PHOTOMETRIC
    assert len(got) == len(want) > 2
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(got, want))


@pytest.mark.parametrize("normalize", ["macenko", "reinhard", None])
def test_normalizers_and_stain_augmentation_in_the_loader(small, normalize):
    reqs = requests(6, seed=9)
    stains, stats = small.stains(512), small.reinhard_stats(512)
    got, st = read_patches([small], reqs, BatchFormat(), size=64, normalize=normalize,
                           stains=[stains], reinhard=[stats], stain_sigma=0.1, dihedral=True)
    assert not st.any()
    want, _ = read_patches([small], reqs, BatchFormat(), size=64)
    if normalize == "macenko":
        slidepipe.normalize_stains(want, stains)
    elif normalize == "reinhard":
        slidepipe.reinhard_normalize(want, stats)
    slidepipe.augment(want, reqs["seed"], dihedral=True)
    # augmented in the target's stains once Macenko-normalized, else in the slide's own
    space = slidepipe.Stains.reference() if normalize == "macenko" else stains
    slidepipe.augment_stains(want, space, reqs["seed"], 0.1)
    assert np.array_equal(got, want)


# The steps a CUDA loader runs on the GPU (cuda_batch.h), and whether its bytes must equal the
# CPU's: the Reinhard and stain-augmentation kernels call the GPU's pow and exp, which are not
# correctly rounded, so a value may differ by one level there (test_cuda_stains bounds it too).
GPU_STEPS = {
    "macenko-geometry-hed-photometric": (dict(normalize="macenko", geometry=GEOMETRY,
                                              dihedral=True, hed_sigma=0.05,
                                              photometric=PHOTOMETRIC), True),
    "reinhard-stain_sigma": (dict(normalize="reinhard", stain_sigma=0.1), False),
    "macenko-stain_sigma": (dict(normalize="macenko", stain_sigma=0.1, dihedral=True), False),
    "stain_sigma-in-the-slides-stains": (dict(stain_sigma=0.1), False),
}


def gpu_or_skip():
    devices, why = slidepipe._core.cuda_device_count()
    if devices == 0:
        pytest.skip(f"no CUDA device here ({why}): the GPU steps are checked where one is")


# every dtype and layout (floats with the ImageNet mean/std) with the exact steps; the others in
# uint8, where a level is a level
GPU_FORMATS = [FORMATS[i] for i in (0, 2, 5, 7, 9, 11)]
GPU_CASES = [(name, fmt) for name, (_, exact) in GPU_STEPS.items()
             for fmt in (GPU_FORMATS if exact else GPU_FORMATS[:1])]


@pytest.mark.parametrize("name,fmt", GPU_CASES, ids=lambda v: v if isinstance(v, str) else repr(v))
def test_a_cuda_loader_makes_the_cpus_batches_on_the_gpu(small, name, fmt, monkeypatch):
    gpu_or_skip()
    torch = pytest.importorskip("torch", reason="PyTorch is pinned in tests/requirements.txt")
    # the CPU's JPEG decode, so that only the steps are compared (nvJPEG's: the next test)
    monkeypatch.setenv("SLIDEPIPE_NVJPEG", "0")
    steps, exact = GPU_STEPS[name]
    # two slides with different stains, so each patch's own stains must be taken
    reqs = requests(10, seed=12)
    reqs["slide"] = np.arange(10) % 2
    slides = [small, small]
    steps = dict(steps, stains=[small.stains(512), slidepipe.Stains.reference()],
                 reinhard=[small.reinhard_stats(512), slidepipe.ReinhardStats.reference()])
    want, st = read_patches(slides, reqs, fmt, size=64, **steps)
    assert not st.any()
    with Loader(slides, reqs, fmt, size=64, batch_size=4, device="cuda", **steps) as loader:
        batches = list(loader)
    got = torch.cat([torch.from_dlpack(b) for b in batches]).cpu().numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if exact:
        assert np.array_equal(got, want)
    else:
        diff = np.abs(got.astype(int) - want.astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01, (diff.max(), (diff > 0).mean())


def test_a_cuda_loader_reads_jpeg_patches_on_the_gpu(small):
    gpu_or_skip()
    torch = pytest.importorskip("torch", reason="PyTorch is pinned in tests/requirements.txt")
    reqs = requests(24, seed=13)
    reqs["level"][::3] = -1  # a scaled read among them: read on the CPU, then sent up
    reqs["downsample"][::3] = 1.5
    want, st = read_patches([small], reqs, BatchFormat(), size=64)
    assert not st.any()
    with Loader([small], reqs, BatchFormat(), size=64, batch_size=8, device="cuda") as loader:
        got = torch.cat([torch.from_dlpack(b) for b in loader]).cpu().numpy()
        stats = loader.stats()
    if not slidepipe._core.cuda_nvjpeg_found()[0]:
        assert stats["patches_read_on_device"] == 0
        assert np.array_equal(got, want)
        pytest.skip("nvJPEG is not found here: every patch was read on the CPU")
    # nvJPEG's inverse DCT is not libjpeg-turbo's: docs/gpu.md's bound, one level
    assert stats["patches_read_on_device"] == 16 and stats["patches_failed"] == 0
    diff = np.abs(got.astype(int) - want.astype(int))
    print(f"nvJPEG patches against the CPU's: max {diff.max()}, mean {diff.mean():.5f}")
    assert diff.max() <= 1 and diff.mean() <= 0.01
    assert np.array_equal(got[::3], want[::3])  # the CPU-read ones exactly


def test_a_reinhard_sampler_equals_reads_normalized_one_by_one(testdata):
    with slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=8, min_tissue=0.3,
                                mask_side=512, normalize="reinhard", dihedral=False) as s:
        patches, tiles = next(iter(s))
        stats = s.slides[0].reinhard_stats(512)
        for patch, t in zip(patches, tiles):
            want = s.slides[0].read_region((int(t["x"]), int(t["y"])), 0, (64, 64), rgb=True)
            assert np.array_equal(patch, slidepipe.reinhard_normalize(want, stats))


def test_qc_leaves_out_pen_blur_and_fold_tiles(cli, tmp_path):
    slide = tmp_path / "artifacts.tif"
    cli("synth", slide, "--size", 4096, "--seed", 2, "--artifacts")
    truth = json.loads((tmp_path / "artifacts.tif.artifacts.json").read_text())
    boxes = [(a["x"], a["y"], a["x"] + a["width"], a["y"] + a["height"])
             for a in truth["artifacts"]]
    kw = dict(min_tissue=0.5, mask_side=1024)
    with slidepipe.PatchSampler([slide], 256, **kw) as every, \
            slidepipe.PatchSampler([slide], 256, qc=True, **kw) as clean:
        assert len(clean.tiles) < len(every.tiles) and len(clean.tile_qc) == len(clean.tiles)
        assert np.all(clean.tile_qc["pen"] <= slidepipe.QC_THRESHOLDS["max_pen"])
        assert np.all(clean.tile_qc["blur"] >= slidepipe.QC_THRESHOLDS["min_blur"])

        def covered(t):  # tiles an artefact covers by at least a half
            return any(max(0, min(x1, t["x"] + 256) - max(x0, t["x"])) *
                       max(0, min(y1, t["y"] + 256) - max(y0, t["y"])) >= 256 * 256 / 2
                       for x0, y0, x1, y1 in boxes)
        assert any(covered(t) for t in every.tiles)
        assert not any(covered(t) for t in clean.tiles)
    with pytest.raises(ValueError, match="qc limits"):
        slidepipe.PatchSampler([slide], 256, qc={"max_ink": 0.1}, **kw)
