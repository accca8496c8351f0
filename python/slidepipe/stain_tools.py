"""Reinhard colour normalization, stain augmentation in a slide's own Macenko stain space, and the
cached per-slide estimates (docs/stains.md).

    import slidepipe
    with slidepipe.open("slide.svs") as slide:
        stats = slide.reinhard_stats()              # read once, then from the cache
        stains = slide.stains()
    patch = slidepipe.reinhard_normalize(patch, stats)             # to ReinhardStats.reference()
    batch = slidepipe.augment_stains(batch, stains, seeds, 0.05)   # (n, h, w, 3), in place

Everything works in place on C-contiguous uint8 arrays whose last axis is RGB and returns them.
"""

from __future__ import annotations

import numpy as np

from . import _core
from .train import Stains, _rgb_array

__all__ = ["ReinhardStats", "reinhard_normalize", "augment_stains", "estimate_stains"]


class ReinhardStats:
    """Mean and standard deviation (population) of CIELAB L*, a*, b* (D65, L* in [0, 100], as
    skimage.color.rgb2lab) over a slide's tissue pixels or a set of pixels."""

    __slots__ = ("mean", "std", "pixels")

    def __init__(self, mean, std, pixels=0):
        self.mean, self.std = tuple(map(float, mean)), tuple(map(float, std))
        self.pixels = int(pixels)

    @classmethod
    def reference(cls):
        """The statistics Reinhard normalization maps to by default (docs/stains.md)."""
        return cls(*_core.reinhard_reference())

    @classmethod
    def of(cls, rgb, tissue_only=False):
        """The statistics of an RGB array's pixels (all of them, or those with some channel
        <= 219 when `tissue_only`)."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        if rgb.shape[-1:] != (3,):
            raise ValueError("the last axis must be RGB")
        return cls(*_core.reinhard_stats(rgb.copy(), bool(tissue_only)))

    def _tuple(self):
        return (self.mean, self.std, self.pixels)

    def __eq__(self, other):
        return isinstance(other, ReinhardStats) and self._tuple() == other._tuple()

    def __repr__(self):
        m = ", ".join(f"{v:.4f}" for v in self.mean)
        s = ", ".join(f"{v:.4f}" for v in self.std)
        return f"ReinhardStats(mean=({m}), std=({s}), pixels={self.pixels})"


def reinhard_normalize(rgb, source_stats, target_stats=None):
    """Reinhard-normalize RGB pixels in place from `source_stats` (the slide's ReinhardStats) to
    `target_stats` (default: ReinhardStats.reference()). Returns the array."""
    target_stats = ReinhardStats.reference() if target_stats is None else target_stats
    _core.reinhard_normalize(_rgb_array(rgb), source_stats._tuple(), target_stats._tuple())
    return rgb


def augment_stains(patches, stains, seeds, sigma, threads=0):
    """Stain augmentation of patches (n, ..., 3) in place, patch i from seeds[i] alone, in the
    stain space of `stains` (the slide's Stains): each stain's concentration c becomes
    c * alpha + beta, alpha in [1 - sigma, 1 + sigma], beta in [-sigma, sigma]. The result does not
    depend on `threads` (0: one per core). Returns the array."""
    patches = _rgb_array(patches)
    if patches.ndim < 2:
        raise ValueError("patches must have the shape (n, ..., 3)")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    if seeds.shape != (patches.shape[0],):
        raise ValueError("one seed per patch")
    count = patches.shape[0]
    per_patch = patches.size // 3 // count if count else 0
    _core.stains_augment_patches(patches, count, per_patch, stains._tuple(), seeds, float(sigma),
                                 int(threads))
    return patches


def estimate_stains(core_slide, max_side=2048, cache=True, want_stains=True):
    """(Stains, ReinhardStats, from_cache) of an open slide's core handle (Slide.stains and
    Slide.reinhard_stats use it). With want_stains false the Stains are None, and a slide whose
    stains cannot be estimated still gets its ReinhardStats."""
    s, r, hit = _core.stains_estimate(core_slide, int(max_side), bool(cache), bool(want_stains))
    return (None if s is None else Stains(*s)), ReinhardStats(*r), bool(hit)
