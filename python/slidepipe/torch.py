"""slidepipe for PyTorch: datasets over a PatchSampler for torch.utils.data.DataLoader, and a
loader that yields tensors straight from the library's prefetching batches.

    import slidepipe, slidepipe.torch, torch
    sampler = slidepipe.PatchSampler(paths, 224, mpp=0.5, batch_size=64, normalize=True,
                                     hed_sigma=0.05, dtype="float16", layout="NCHW",
                                     threads=4, prefetch=4, seed=7)
    for x, tiles in slidepipe.torch.PatchLoader(sampler, device="cuda"):
        loss = model(x.float())

PatchLoader is the fast path: the library makes batches ahead on its own threads in this process,
so no worker processes are needed. PatchIterableDataset hands whole batches to a DataLoader
(batch_size=None) whose workers take turns (worker w makes batches w, w + n, ...), so any number
of workers, fork or spawn, yields the same batches in the same order as none. PatchDataset is
map-style, one sample per index, for code that brings its own sampler. Everything pickles.
"""

import numpy as np
import torch
import torch.utils.data as tud

from .loader import read_patches

__all__ = ["PatchLoader", "PatchIterableDataset", "PatchDataset"]


def _tiles_dict(tiles):
    return {name: torch.from_numpy(np.ascontiguousarray(tiles[name])) for name in tiles.dtype.names}


class PatchLoader:
    """Iterate epochs of `sampler` as (tensor, tiles): the tensor shares the batch's memory
    (no copy); with `device` it is moved there (non_blocking when the sampler pins its memory),
    unless the sampler already makes its batches on that device (PatchSampler(device=...)).
    Each iteration is the next epoch; set_epoch and `start` resume a run."""

    def __init__(self, sampler, *, device=None, start_epoch=0, start_step=0):
        self.sampler, self.device = sampler, device
        self.epoch, self.start = int(start_epoch), int(start_step)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch, start=0):
        self.epoch, self.start = int(epoch), int(start)

    def __iter__(self):
        epoch, start = self.epoch, self.start
        self.epoch, self.start = epoch + 1, 0
        for patches, tiles in self.sampler.epoch(epoch, start=start):
            x = patches if isinstance(patches, torch.Tensor) else torch.from_numpy(patches)
            if self.device is not None and x.device != torch.device(self.device):
                x = x.to(self.device, non_blocking=self.sampler.pinned)
            yield x, tiles


class PatchIterableDataset(tud.IterableDataset):
    """Whole batches of one epoch of `sampler`, for DataLoader(dataset, batch_size=None,
    num_workers=n): each worker makes every n-th batch, so the DataLoader's round-robin order is
    the epoch's order. Yields (tensor, tiles) with tiles a dict of tensors (slide, x, y, tissue).
    Give each worker few threads (the sampler's `threads`), as the workers already run in
    parallel."""

    def __init__(self, sampler, *, epoch=0, start=0):
        super().__init__()
        self.sampler, self.epoch_index, self.start = sampler, int(epoch), int(start)

    def set_epoch(self, epoch, start=0):
        self.epoch_index, self.start = int(epoch), int(start)

    def __len__(self):
        return max(0, len(self.sampler) - self.start)

    def __iter__(self):
        info = tud.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for patches, tiles in self.sampler.epoch(self.epoch_index, start=self.start,
                                                 worker=worker, workers=workers):
            yield torch.from_numpy(patches), _tiles_dict(tiles)


class PatchDataset(tud.Dataset):
    """Map-style: item i is candidate i of `sampler` (sampler.tiles[i]), read, normalized and
    augmented as the sampler does it, with a seed drawn from (sampler.seed, epoch, i) alone
    (numpy.random.default_rng([seed, epoch, i])), on one thread. Returns (tensor, index): the
    tensor is one patch (3, size, size) or (size, size, 3) by the sampler's layout, or a stack
    of len(context) patches. set_epoch(e) changes the augmentation."""

    def __init__(self, sampler, *, epoch=0):
        super().__init__()
        self.sampler, self.epoch_index = sampler, int(epoch)

    def set_epoch(self, epoch):
        self.epoch_index = int(epoch)

    def __len__(self):
        return len(self.sampler.tiles)

    def seed_of(self, index):
        rng = np.random.default_rng([self.sampler.seed, self.epoch_index, int(index)])
        return rng.integers(0, 2**64 - 1, dtype=np.uint64, endpoint=True)

    def __getitem__(self, index):
        s = self.sampler
        index = int(index)
        if not 0 <= index < len(s.tiles):
            raise IndexError(index)
        tiles = s.tiles[index:index + 1]
        reqs = s.requests(tiles, np.array([self.seed_of(index)], dtype=np.uint64))
        out, statuses = read_patches(s.slides, reqs, s.format, size=s.size, threads=1,
                                     **s.steps())
        if statuses.any():
            path = s.slides[int(tiles["slide"][0])].path
            raise RuntimeError(f"{path}: the patch at ({int(tiles['x'][0])}, "
                               f"{int(tiles['y'][0])}) could not be read (status "
                               f"{int(statuses.min())})")
        x = torch.from_numpy(out)
        return (x[0] if s.group == 1 else x), index
