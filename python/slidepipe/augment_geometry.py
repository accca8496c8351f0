"""Seeded geometric augmentation of RGB8 patches in one resampling (docs/augment-geometry.md).

    import numpy as np, slidepipe
    g = slidepipe.Geometry(rotation=(-30, 30), scale=(0.8, 1.25), shear_x=(-10, 10),
                           crop=True, elastic_alpha=(0.5, 0.5), elastic_sigma=8.0)
    patches = np.zeros((16, 224, 224, 3), np.uint8)           # filled by a read
    slidepipe.augment_geometry(patches, np.arange(16, dtype=np.uint64), g, threads=4)

A random resized crop, an affine map (rotation, scale, anisotropic scale, shear, translation)
and an elastic field are composed into one map from each output pixel to a source point, which is
sampled once, bilinearly; outside the patch the border reflects about the edge pixels' centres
(``border="reflect"``, reflect-101) or takes ``fill`` (``border="constant"``). Every range
``(lo, hi)`` is sampled uniformly from the patch's seed on a stream of its own, so a patch's
geometry depends on its seed alone, whatever the thread count or batching.
``Geometry.draw(seed, width, height)`` gives the numbers a seed draws (the forward affine matrix
as kornia's ``warp_affine`` takes it, the crop box as torchvision's ``resized_crop`` takes it)
and ``Geometry.elastic_noise`` the elastic noise planes, so a reference can be driven with the
same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core

__all__ = ["Geometry", "augment_geometry"]

_BORDERS = {"reflect": 0, "constant": 1}


def _pair(v, name):
    if isinstance(v, (int, float)):
        return (float(v), float(v))
    lo, hi = v
    return (float(lo), float(hi))


@dataclass(frozen=True)
class Geometry:
    """Parameters of the geometric augmentation; each range is ``(lo, hi)`` or one number.

    rotation: degrees, counter-clockwise as displayed. scale: isotropic zoom (> 0), scale_x and
    scale_y: extra factors along x and y (> 0). shear_x, shear_y: degrees in (-45, 45).
    translate_x, translate_y: fractions of the width and height in [-1, 1]. crop: the random
    resized crop on, with crop_scale (area fraction) and crop_ratio (width / height, sampled
    log-uniformly) as torchvision's RandomResizedCrop. elastic_alpha: (x, y) scales of the
    elastic field in kornia's normalised units (0 or None: elastic off), elastic_sigma its
    Gaussian's standard deviation in pixels, elastic_kernel its odd size (0: 2 ceil(3 sigma)
    + 1); the defaults (sigma 32, kernel 63) are Kornia's RandomElasticTransform's.
    border: "reflect" or "constant"; fill: the constant's (r, g, b) or one grey value.
    """

    rotation: tuple = (0.0, 0.0)
    scale: tuple = (1.0, 1.0)
    scale_x: tuple = (1.0, 1.0)
    scale_y: tuple = (1.0, 1.0)
    shear_x: tuple = (0.0, 0.0)
    shear_y: tuple = (0.0, 0.0)
    translate_x: tuple = (0.0, 0.0)
    translate_y: tuple = (0.0, 0.0)
    crop: bool = False
    crop_scale: tuple = (0.08, 1.0)
    crop_ratio: tuple = (3 / 4, 4 / 3)
    elastic_alpha: tuple | None = None
    elastic_sigma: float = 32.0
    elastic_kernel: int = 63
    border: str = "reflect"
    fill: tuple = (0, 0, 0)

    def _tuple(self):
        if self.border not in _BORDERS:
            raise ValueError(f"border must be 'reflect' or 'constant', not {self.border!r}")
        fill = (self.fill,) * 3 if isinstance(self.fill, int) else tuple(self.fill)
        elastic = self.elastic_alpha is not None
        alpha = _pair(self.elastic_alpha, "elastic_alpha") if elastic else (0.0, 0.0)
        return (*_pair(self.rotation, "rotation"), *_pair(self.scale, "scale"),
                *_pair(self.scale_x, "scale_x"), *_pair(self.scale_y, "scale_y"),
                *_pair(self.shear_x, "shear_x"), *_pair(self.shear_y, "shear_y"),
                *_pair(self.translate_x, "translate_x"), *_pair(self.translate_y, "translate_y"),
                int(bool(self.crop)), *_pair(self.crop_scale, "crop_scale"),
                *_pair(self.crop_ratio, "crop_ratio"), int(elastic), *alpha,
                float(self.elastic_sigma), int(self.elastic_kernel), _BORDERS[self.border],
                *(int(v) for v in fill))

    def draw(self, seed: int, width: int, height: int) -> dict:
        """The numbers patch `seed` of width x height draws: rotation, scale, scale_x, scale_y,
        shear_x, shear_y (degrees or factors), translate_x, translate_y (pixels), matrix (the
        forward 2x3 affine map, source point to output point, pixel centres at integers) and
        crop (top, left, height, width)."""
        d = _core.geometry_draw(int(width), int(height), int(seed) & (2**64 - 1), self._tuple())
        d["matrix"] = np.array(d["matrix"], dtype=np.float64)
        return d

    def elastic_noise(self, seed: int, width: int, height: int) -> np.ndarray:
        """The elastic noise of patch `seed`: (2, height, width) float64 in [-1, 1), x then y,
        before smoothing (what kornia's elastic_transform2d takes as `noise`)."""
        out = np.empty((2, int(height), int(width)), dtype=np.float64)
        _core.geometry_elastic_noise(int(width), int(height), int(seed) & (2**64 - 1),
                                     self._tuple(), out)
        return out


def augment_geometry(patches: np.ndarray, seeds, params: Geometry, threads: int = 0) -> None:
    """Augment `patches` ((n, h, w, 3) C-contiguous uint8) in place, patch i from seeds[i], on
    `threads` threads (0: one per core), the GIL released. The result does not depend on the
    thread count or on how the patches are split into calls."""
    if not isinstance(patches, np.ndarray) or patches.dtype != np.uint8 or patches.ndim != 4 \
            or patches.shape[3] != 3 or not patches.flags.c_contiguous:
        raise ValueError("patches must be a C-contiguous (n, h, w, 3) uint8 array")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64).reshape(-1)
    n, h, w, _ = patches.shape
    if seeds.shape[0] != n:
        raise ValueError(f"{n} patches but {seeds.shape[0]} seeds")
    _core.augment_geometry(patches, n, w, h, seeds, params._tuple(), int(threads))
