"""Photometric augmentation of RGB8 patches: torchvision's ColorJitter (on uint8, step by step),
Gaussian blur and additive Gaussian noise, each applied with a probability, every random number
drawn from the patch's 64-bit seed, so a batch comes out the same on any number of threads
(docs/augment-color.md has the exact definitions and the comparison with torchvision).

    params = Photometric(brightness=0.25, contrast=0.25, saturation=0.25, hue=0.04,
                         noise=(0, 6), blur=(0.1, 1.5), blur_p=0.5)
    augment_photometric(patches, seeds, params, threads=0)   # (n, h, w, 3) uint8, in place
    photometric_draws(seeds[0], params)  # {'order': (2, 0, 3, 1), 'brightness': ..., ...}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core

__all__ = ["Photometric", "augment_photometric", "photometric_draws"]


@dataclass(frozen=True)
class Photometric:
    """What to do to each patch (zero, None or a probability of 0 switches a stage off).

    brightness, contrast, saturation: factors uniform in [max(0, 1 - x), 1 + x];
    hue: a shift uniform in [-hue, hue] (of a full turn, at most 0.5); jitter_p: the
    probability of the whole jitter. noise: (sigma_min, sigma_max) in 8-bit units, or one number
    for both; noise_p its probability. blur: (sigma_min, sigma_max) in pixels, or one number;
    blur_kernel: an odd size, or 0 for 2 * ceil(3 sigma) + 1; blur_p its probability."""

    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0
    noise: float | tuple[float, float] | None = None
    blur: float | tuple[float, float] | None = None
    blur_kernel: int = 0
    jitter_p: float = 1.0
    noise_p: float = 1.0
    blur_p: float = 1.0

    def as_tuple(self) -> tuple:
        """The tuple the C layer takes (its order is sp_photometric_params's)."""

        def span(value):
            if value is None:
                return (0.0, 0.0), False
            lo, hi = (value, value) if np.isscalar(value) else value
            return (float(lo), float(hi)), True

        (nlo, nhi), noise_on = span(self.noise)
        (blo, bhi), blur_on = span(self.blur)
        return (float(self.jitter_p), float(self.brightness), float(self.contrast),
                float(self.saturation), float(self.hue), float(self.blur_p) if blur_on else 0.0,
                blo, bhi, int(self.blur_kernel), float(self.noise_p) if noise_on else 0.0,
                nlo, nhi)


def augment_photometric(patches: np.ndarray, seeds, params: Photometric, threads: int = 0):
    """Augment `patches`, a C-contiguous (n, h, w, 3) uint8 array, in place (patch i with
    seeds[i]) on `threads` threads (0: one per core), the GIL released; returns `patches`.
    The bytes do not depend on the thread count or on how a batch is split."""
    if not isinstance(patches, np.ndarray) or patches.dtype != np.uint8 or patches.ndim != 4 \
            or patches.shape[3] != 3:
        raise ValueError("patches must be a uint8 array of shape (n, h, w, 3)")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    if seeds.shape != (patches.shape[0],):
        raise ValueError("one seed per patch")
    n, h, w, _ = patches.shape
    _core.augment_photometric(patches, n, w, h, seeds, params.as_tuple(), int(threads))
    return patches


def photometric_draws(seed: int, params: Photometric) -> dict:
    """What `seed` draws under `params`: jitter (applied or not), order (the steps in the order
    applied: 0 brightness, 1 contrast, 2 saturation, 3 hue), the four factors, blur, blur_sigma,
    blur_kernel, noise, noise_sigma."""
    return _core.photometric_draw(int(seed) & (2**64 - 1), params.as_tuple())
