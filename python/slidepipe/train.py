"""Training data from slides: tissue masks, foreground tiles, Macenko stain normalization, seeded
augmentation, and a sampler that turns many slides into reproducible batches of patches.

    import slidepipe, torch
    sampler = slidepipe.PatchSampler(["a.svs", "b.svs"], 224, batch_size=64, min_tissue=0.5,
                                     hed_sigma=0.05, normalize=True, seed=7)
    for patches, tiles in sampler:             # (64, 224, 224, 3) uint8, and where each came from
        x = torch.from_numpy(patches)          # shares the memory: no copy
        x = x.permute(0, 3, 1, 2).float().div_(255)

The pixel work is the C library's (docs/train.md defines each step): the batch is read by its
thread pool, then normalized and augmented in place, with the GIL released. Everything random
comes from (seed, epoch): the same seed gives the same patches in the same order with the same
flips and colours, on any number of threads.
"""

import numpy as np

from . import _core

__all__ = ["TissueMask", "Stains", "normalize_stains", "augment", "PatchSampler", "TILE_DTYPE"]

# One foreground tile: which slide (an index into the sampler's slides; 0 for a single slide),
# its top-left in level-0 pixels, and the fraction of it that is tissue.
TILE_DTYPE = np.dtype([("slide", "<i4"), ("x", "<i8"), ("y", "<i8"), ("tissue", "<f8")])
_C_TILE = np.dtype([("x", "<i8"), ("y", "<i8"), ("tissue", "<f8")])  # sp_tile


class TissueMask:
    """Which pixels of a low-resolution image of the slide are tissue: ``array`` (height, width)
    of 0/1, each pixel covering ``downsample`` x ``downsample`` level-0 pixels."""

    __slots__ = ("array", "downsample", "threshold", "tissue_fraction")

    def __init__(self, array, downsample, threshold, tissue_fraction):
        self.array, self.downsample = array, downsample
        self.threshold, self.tissue_fraction = threshold, tissue_fraction

    def __repr__(self):
        h, w = self.array.shape
        return (f"TissueMask({w}x{h}, downsample {self.downsample:g}, "
                f"tissue {100 * self.tissue_fraction:.1f}%)")


class Stains:
    """H&E stains by Macenko's method: unit optical-density vectors ``h`` and ``e`` over R, G, B
    and each stain's 99th-percentile concentration."""

    __slots__ = ("h", "e", "max_h", "max_e")

    def __init__(self, h, e, max_h, max_e):
        self.h, self.e = tuple(map(float, h)), tuple(map(float, e))
        self.max_h, self.max_e = float(max_h), float(max_e)

    @classmethod
    def reference(cls):
        """The stains that normalization maps to by default."""
        return cls(*_core.stains_reference())

    def _tuple(self):
        return (self.h, self.e, self.max_h, self.max_e)

    def __repr__(self):
        h = ", ".join(f"{v:.4f}" for v in self.h)
        e = ", ".join(f"{v:.4f}" for v in self.e)
        return f"Stains(h=({h}), e=({e}), max_h={self.max_h:.4f}, max_e={self.max_e:.4f})"


def _rgb_array(rgb):
    if (not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.shape[-1:] != (3,)
            or not rgb.flags.c_contiguous or not rgb.flags.writeable):
        raise ValueError("expected a writeable, C-contiguous uint8 array whose last axis is RGB")
    return rgb


def normalize_stains(rgb, source, target=None):
    """Map RGB pixels (any uint8 array ending in 3, C-contiguous) in place from the `source`
    stains to `target` (default: Stains.reference()). Returns the array."""
    target = Stains.reference() if target is None else target
    _core.stains_normalize(_rgb_array(rgb), source._tuple(), target._tuple())
    return rgb


def augment(patches, seeds, *, dihedral=True, hed_sigma=0.0, threads=0):
    """Augment square RGB patches (n, size, size, 3) in place: patch i by seeds[i] alone (one of
    the 8 flips and quarter turns, and an HED jitter of strength hed_sigma; docs/train.md).
    Returns the array."""
    patches = _rgb_array(patches)
    if patches.ndim != 4 or patches.shape[1] != patches.shape[2]:
        raise ValueError("patches must have the shape (n, size, size, 3)")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    if seeds.shape != (patches.shape[0],):
        raise ValueError("one seed per patch")
    _core.augment_patches(patches, patches.shape[0], patches.shape[1], seeds, bool(dihedral),
                          float(hed_sigma), int(threads))
    return patches


def tissue_mask(core_slide, max_side):
    data, width, height, downsample, threshold, fraction = core_slide.tissue_mask(int(max_side))
    array = np.frombuffer(data, dtype=np.uint8).reshape(height, width).copy()
    return TissueMask(array, downsample, threshold, fraction)


def tissue_tiles(core_slide, mask, level, size, stride, min_tissue):
    array = np.ascontiguousarray(mask.array, dtype=np.uint8)
    height, width = array.shape
    raw = _core.tissue_tiles(core_slide, array, width, height, float(mask.downsample), int(level),
                             int(size), int(stride or 0), float(min_tissue))
    found = np.frombuffer(raw, dtype=_C_TILE)
    tiles = np.zeros(len(found), dtype=TILE_DTYPE)
    for name in ("x", "y", "tissue"):
        tiles[name] = found[name]
    return tiles


class PatchSampler:
    """Random tissue patches from many slides, in batches that repeat exactly for a seed.

    Every slide's grid of `size` x `size` tiles on `level` (one every `stride` pixels, default
    `size`) with at least `min_tissue` tissue (under a mask `mask_side` pixels across) is a
    candidate. Each epoch visits every candidate once, in an order drawn from (seed, epoch), in
    batches of `batch_size` (the last one smaller unless drop_last). A batch is read on `threads`
    threads (0: every core), then, with normalize=True, each patch is stain-normalized from its
    slide's stains (estimated once per slide) to `target` (default Stains.reference()), then
    augmented (`dihedral` flips and turns, HED jitter `hed_sigma`) with a seed drawn for it.

    Iterating yields (patches, tiles): a new (n, size, size, 3) uint8 array and the TILE_DTYPE
    records saying where each patch came from. Each iteration is the next epoch; epoch(e) gives
    any epoch directly. Slides given as paths are opened here and closed by close().
    """

    def __init__(self, slides, size, *, level=0, batch_size=64, min_tissue=0.5, stride=None,
                 seed=0, dihedral=True, hed_sigma=0.0, normalize=False, target=None, threads=0,
                 mask_side=2048, drop_last=False):
        from . import Slide  # the package imports this module first

        if int(size) < 1 or int(batch_size) < 1:
            raise ValueError("size and batch_size must be positive")
        if not 0.0 <= float(hed_sigma) <= 1.0:
            raise ValueError("hed_sigma must lie in [0, 1]")
        self.size, self.level, self.batch_size = int(size), int(level), int(batch_size)
        self.seed, self.dihedral, self.hed_sigma = int(seed), bool(dihedral), float(hed_sigma)
        self.threads, self.drop_last = int(threads), bool(drop_last)
        self._owned = []
        self.slides = []
        for s in slides:
            if not isinstance(s, Slide):
                s = Slide(s)
                self._owned.append(s)
            self.slides.append(s)
        parts = []
        for i, s in enumerate(self.slides):
            t = s.tissue_tiles(self.size, level=self.level, stride=stride, min_tissue=min_tissue,
                               mask=s.tissue_mask(mask_side))
            t["slide"] = i
            parts.append(t)
        self.tiles = np.concatenate(parts) if parts else np.zeros(0, dtype=TILE_DTYPE)
        if len(self.tiles) == 0:
            self.close()
            raise ValueError(f"no {self.size}x{self.size} tile of level {self.level} holds "
                             f"{min_tissue:g} tissue in any of the slides")
        self.target = (target or Stains.reference()) if normalize else None
        self.stains = [s.stains(mask_side) for s in self.slides] if normalize else None
        self._epoch = 0

    def __len__(self):
        n, b = len(self.tiles), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        return self.epoch(epoch)

    def epoch(self, epoch):
        """The batches of epoch `epoch` (a generator)."""
        rng = np.random.default_rng([self.seed, int(epoch)])
        order = rng.permutation(len(self.tiles))
        seeds = rng.integers(0, 2**64 - 1, size=len(order), dtype=np.uint64, endpoint=True)
        for b in range(len(self)):
            part = slice(b * self.batch_size, (b + 1) * self.batch_size)
            tiles = self.tiles[order[part]]
            yield self._batch(tiles, seeds[part]), tiles

    def _batch(self, tiles, seeds):
        from . import read_regions

        requests = [(self.slides[t["slide"]], self.level, int(t["x"]), int(t["y"])) for t in tiles]
        patches = read_regions(requests, (self.size, self.size), rgb=True, threads=self.threads)
        if self.stains is not None:
            for i, t in enumerate(tiles):
                normalize_stains(patches[i], self.stains[t["slide"]], self.target)
        if self.dihedral or self.hed_sigma > 0:
            augment(patches, seeds, dihedral=self.dihedral, hed_sigma=self.hed_sigma,
                    threads=self.threads)
        return patches

    def close(self):
        """Close the slides this sampler opened."""
        for s in self._owned:
            s.close()
        self._owned = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
