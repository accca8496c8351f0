"""PyTorch's side of the loader, with real PyTorch: DLPack hand-off without copies, every layout
and dtype as torch computes it, DataLoader workers (fork and spawn) giving the same batches as
none, the map-style dataset, and PatchLoader.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is pinned in tests/requirements.txt")

import slidepipe  # noqa: E402
import slidepipe.torch as sptorch  # noqa: E402
from slidepipe.loader import REQUEST_DTYPE, BatchFormat, Loader, read_patches  # noqa: E402

SMALL = "aperio/CMU-1-Small-Region.svs"


@pytest.fixture(scope="module")
def sampler(testdata):
    s = slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=8, min_tissue=0.3,
                               mask_side=512, seed=5, hed_sigma=0.05, normalize=True,
                               dtype="float16", layout="NCHW", mean=(0.5, 0.5, 0.5),
                               std=(0.2, 0.2, 0.2), threads=1)
    yield s
    s.close()


def test_dlpack_hands_the_same_memory_to_torch(testdata):
    with slidepipe.open(testdata / SMALL) as s:
        reqs = np.zeros(6, dtype=REQUEST_DTYPE)
        reqs["x"] = np.arange(6) * 100
        fmt = BatchFormat("float32", "NCHW")
        with Loader([s], reqs, fmt, size=32, batch_size=6) as loader:
            batch = next(loader)
        tensor = torch.from_dlpack(batch)
        assert tensor.data_ptr() == batch.address
        assert tensor.shape == (6, 3, 32, 32) and tensor.dtype == torch.float32
        array = np.from_dlpack(batch)
        assert array.ctypes.data == batch.address
        del batch, array
        want, _ = read_patches([s], reqs, fmt, size=32)
        assert torch.equal(tensor, torch.from_numpy(want))  # the tensor keeps the memory


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_formats_equal_torchvision_style_normalisation(testdata, dtype, layout):
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    with slidepipe.open(testdata / SMALL) as s:
        reqs = np.zeros(4, dtype=REQUEST_DTYPE)
        reqs["x"], reqs["y"] = [0, 500, 1000, 1500], [100, 900, 1700, 2500]
        rgb, _ = read_patches([s], reqs, BatchFormat(), size=48)
        got, _ = read_patches([s], reqs, BatchFormat(dtype, layout, mean, std), size=48)
    # ToTensor then Normalize, as torch computes them in float32.
    x = torch.from_numpy(rgb).permute(0, 3, 1, 2)
    if dtype != "uint8":
        x = x.float().div(255)
        x = x.sub(torch.tensor(mean).view(1, 3, 1, 1)).div(torch.tensor(std).view(1, 3, 1, 1))
        x = x.to(getattr(torch, dtype))
    if layout == "NHWC":
        x = x.permute(0, 2, 3, 1)
    assert torch.equal(torch.from_numpy(got), x.contiguous())


def batches_of(loader):
    return [(x.clone(), {k: v.clone() for k, v in t.items()}) for x, t in loader]


@pytest.mark.parametrize("workers,context", [(2, "fork"), (2, "spawn"), (3, "fork")])
def test_dataloader_workers_give_the_same_batches_as_none(sampler, workers, context):
    ds = sptorch.PatchIterableDataset(sampler, epoch=2)
    want = batches_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0))
    assert len(want) == len(sampler) > 3
    got = batches_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers,
                                                 multiprocessing_context=context))
    assert len(got) == len(want)
    for (a, ta), (b, tb) in zip(got, want):
        assert torch.equal(a, b)
        assert all(torch.equal(ta[k], tb[k]) for k in ("slide", "x", "y"))
    ds.set_epoch(2, start=3)  # resume at (epoch, step)
    tail = batches_of(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(tail, want[3:]))
    assert len(tail) == len(want) - 3


def test_map_style_dataset_in_workers(sampler):
    ds = sptorch.PatchDataset(sampler, epoch=1)
    one = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=0)
    two = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=2)
    for (a, ia), (b, ib) in zip(one, two):
        assert torch.equal(a, b) and torch.equal(ia, ib)
    x, i = ds[3]
    assert x.shape == (3, 64, 64) and x.dtype == torch.float16 and i == 3
    t = sampler.tiles[3]
    seed = np.array([ds.seed_of(3)], dtype=np.uint64)
    want, _ = read_patches(sampler.slides, sampler.requests(sampler.tiles[3:4], seed),
                           sampler.format, size=64, dihedral=True, hed_sigma=0.05,
                           stains=sampler.stains, target=sampler.target)
    assert torch.equal(x, torch.from_numpy(want[0])) and t["slide"] == 0
    ds.set_epoch(2)
    assert not torch.equal(ds[3][0], x)  # another epoch, another augmentation
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_patch_loader_yields_the_sampler_batches_as_tensors(sampler):
    loader = sptorch.PatchLoader(sampler, start_epoch=4)
    got = [(x.clone(), t) for x, t in loader]
    want = list(sampler.epoch(4))
    assert len(got) == len(want) == len(loader)
    for (x, tx), (p, tp) in zip(got, want):
        assert torch.equal(x, torch.from_numpy(p)) and np.array_equal(tx, tp)
    assert loader.epoch == 5
    assert not any(x.is_pinned() for x, _ in got)  # pinned was not asked for


def test_pinned_batches_are_pinned_where_a_gpu_is(testdata):
    if torch.cuda.is_available():
        # as in a training loop, torch's CUDA is up before batches come (its is_pinned asks its
        # own CUDA state)
        torch.zeros(1, device="cuda")
    with slidepipe.PatchSampler([testdata / SMALL], 64, batch_size=4, min_tissue=0.3,
                                mask_side=512, pinned=True) as s:
        x, _ = next(iter(sptorch.PatchLoader(s)))
        # CUDA hosts get page-locked memory torch recognises; elsewhere ordinary memory.
        assert x.is_pinned() == torch.cuda.is_available()


def test_batches_made_in_gpu_memory(testdata):
    with slidepipe.open(testdata / SMALL) as s:
        reqs = np.zeros(6, dtype=REQUEST_DTYPE)
        reqs["x"], reqs["seed"] = np.arange(6) * 100, np.arange(6)
        fmt = BatchFormat("float16", "NCHW", (0.5,) * 3, (0.2,) * 3)
        want, _ = read_patches([s], reqs, fmt, size=32, dihedral=True, hed_sigma=0.1)
        devices, why = slidepipe._core.cuda_device_count()
        if devices == 0:
            # No GPU: asking for one is a clear refusal, not a silent host batch.
            with pytest.raises(slidepipe.SlidepipeError, match="no CUDA device 0"):
                Loader([s], reqs, fmt, size=32, batch_size=3, device="cuda")
            pytest.skip(f"no CUDA device here ({why}): the GPU batch itself is checked where "
                        "one is present")
        with Loader([s], reqs, fmt, size=32, batch_size=3, device="cuda", dihedral=True,
                    hed_sigma=0.1) as loader:
            batches = list(loader)
        x = torch.cat([torch.from_dlpack(b) for b in batches])
        assert x.is_cuda and torch.equal(x.cpu(), torch.from_numpy(want))
