"""slidepipe for Python: whole-slide images read straight into numpy arrays.

    import slidepipe
    with slidepipe.open("slide.svs") as slide:
        tile = slide.read_region((1000, 2000), 0, (256, 256))          # (256, 256, 4) uint8
        batch = slide.read_regions([(0, 0), (256, 0)], 0, (224, 224), rgb=True, threads=4)

Coordinates follow OpenSlide: a location is (x, y) in level-0 pixels, a size (width, height) in
pixels of the level read. Pixels are straight RGBA (or RGB composited over the background) in
arrays of shape (height, width, channels) that this package allocates, or in a C-contiguous
uint8 array the caller passes as ``out`` (a preallocated batch, a pinned buffer): nothing is
copied after the library writes. Reads release the GIL, so threads read in parallel; the
library's tile cache is shared by every slide and thread (set_cache_capacity, cache_stats).

Errors are SlidepipeError with ``.code`` (the C API's status) and ``.status`` (its name);
read_regions raises BatchError naming each region that failed, after reading all the others.
Training data (tissue masks, foreground tiles, stain normalization, seeded augmentation and
PatchSampler, which batches patches of many slides for PyTorch) is in slidepipe.train.
This is the public C API (include/slidepipe.h) and nothing more; docs/python.md has more.
"""

import os
import threading

import numpy as np

try:
    from . import _core
except ImportError as _error:
    # Built for another interpreter, or a shared library missing: say which (not Python's
    # "partially initialized module ... circular import").
    from ._import_check import explain as _explain
    raise _explain(_error, __path__) from _error
from . import loader, manifest, stain_tools, stores, train
from .loader import BatchFormat, read_image, read_patches  # noqa: F401
from .stores import VerifyResult, convert, process, verify  # noqa: F401
from .labels import Annotations  # noqa: F401
from .augment_color import Photometric, augment_photometric, photometric_draws  # noqa: F401
from .qc import QC_DTYPE, QC_THRESHOLDS, qc_filter, tile_qc  # noqa: F401
from .augment_geometry import Geometry, augment_geometry  # noqa: F401
from .stain_tools import ReinhardStats, augment_stains, reinhard_normalize  # noqa: F401
from .train import (TILE_DTYPE, PatchSampler, Stains, TissueMask, augment,  # noqa: F401
                    normalize_stains)

__all__ = ["open", "Slide", "Level", "read_regions", "set_cache_capacity", "cache_stats",
           "SlidepipeError", "BatchError", "__version__", "BatchFormat", "read_image", "read_patches",
           "Annotations", *stores.__all__, *train.__all__, "ReinhardStats", "reinhard_normalize",
           "augment_stains"]

__version__ = _core.version
SlidepipeError = _core.Error


class BatchError(SlidepipeError):
    """Some regions of a batch failed. ``failures`` maps each failed request's index to its
    status name; ``array`` holds every region, the failed ones zeroed."""

    def __init__(self, failures, array, code):
        first = min(failures)
        super().__init__(f"{len(failures)} of {len(array)} regions failed "
                         f"(the first, request {first}: {failures[first]})")
        self.failures = failures
        self.array = array
        self.code = code  # the first failure's status code, .status its name
        self.status = failures[first]


class Level:
    """One pyramid level: its size, downsample, storage tile size and compression."""

    __slots__ = ("width", "height", "downsample", "tile_width", "tile_height", "compression")

    def __init__(self, width, height, downsample, tile_width, tile_height, compression):
        self.width, self.height, self.downsample = width, height, downsample
        self.tile_width, self.tile_height, self.compression = tile_width, tile_height, compression

    @property
    def dimensions(self):
        return (self.width, self.height)

    def __repr__(self):
        return (f"Level({self.width}x{self.height}, downsample {self.downsample:g}, "
                f"tiles {self.tile_width}x{self.tile_height} {self.compression})")


def _output(out, shape):
    """A new uint8 array of `shape`, or `out` checked to be one the library can write into."""
    if out is None:
        return np.empty(shape, dtype=np.uint8)
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.shape != tuple(shape):
        raise ValueError(f"out must be a uint8 numpy array of shape {tuple(shape)}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writeable")
    return out


def _size(size):
    width, height = (int(v) for v in size)
    if width <= 0 or height <= 0:
        raise ValueError(f"bad size {width} x {height}")
    return width, height


class Slide:
    """An open whole-slide image. Safe to read from many threads at once; close it (or use
    ``with``) when done. ``mpp`` overrides the slide's microns per pixel (for slides that do not
    record it). A Slide pickles as its path and options and reopens lazily where it is unpickled
    (a DataLoader worker, a Ray task), on its first read. With ``apply_icc=True`` every level
    read (regions, scaled regions, batches) is converted from the slide's embedded ICC profile
    to sRGB (a slide without one is read as stored); it is fixed for the Slide, not per call,
    because the handle is shared by the threads reading it. ``plane=(z, c, t)`` opens that focal
    plane, channel plane and time point (OME-TIFF, DICOM; docs/formats.md, "Planes") instead of
    the first; ``planes`` says how many there are."""

    def __init__(self, path, *, mpp=None, apply_icc=False, plane=None):
        self.path = os.fspath(path)
        self._mpp_override = _mpp_pair(mpp)
        self.apply_icc = bool(apply_icc)
        self._plane = tuple(int(v) for v in plane) if plane is not None else (0, 0, 0)
        if len(self._plane) != 3:
            raise ValueError(f"plane is (z, c, t), not {plane!r}")
        self._core_obj = _core.Slide(self.path, apply_icc=self.apply_icc, plane=self._plane)
        self._closed = False
        self.format = self._core_obj.format()
        self.levels = tuple(Level(*t) for t in self._core_obj.levels())
        self._properties = None

    @property
    def _core(self):
        """The C handle, opened now if this Slide was unpickled and has not read yet."""
        core = self._core_obj
        if core is None:
            with _REOPEN:
                if self._core_obj is None:
                    self._core_obj = _core.Slide(self.path, apply_icc=self.apply_icc,
                                                 plane=self._plane)
                core = self._core_obj
        return core

    def __reduce__(self):
        return (_unpickle_slide, (self.path, self._mpp_override, self.format,
                                  tuple(_level_tuple(lv) for lv in self.levels), self.apply_icc,
                                  self._plane))

    def close(self):
        """Close the slide; further reads raise ValueError. Closing twice is harmless."""
        if self._core_obj is None:  # never reopened since unpickling
            self._core_obj = _core.Slide.__new__(_core.Slide)
        self._core_obj.close()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"slidepipe.Slide({self.path!r}, format={self.format!r}, levels={len(self.levels)})"

    # ---- what the slide is (OpenSlide's names where it has them) ----

    @property
    def level_count(self):
        return len(self.levels)

    @property
    def dimensions(self):
        return self.levels[0].dimensions

    @property
    def level_dimensions(self):
        return tuple(lv.dimensions for lv in self.levels)

    @property
    def level_downsamples(self):
        return tuple(lv.downsample for lv in self.levels)

    @property
    def properties(self):
        """{name: value}: the format's own keys and slidepipe.mpp-x, -y, objective-power, vendor."""
        if self._properties is None:
            self._properties = self._core.properties()
        return dict(self._properties)

    @property
    def mpp(self):
        """Microns per pixel at level 0 as (x, y): the override given to open(), else the
        slide's own, else None when the slide does not say."""
        if self._mpp_override is not None:
            return self._mpp_override
        p = self.properties
        if "slidepipe.mpp-x" in p and "slidepipe.mpp-y" in p:
            return (float(p["slidepipe.mpp-x"]), float(p["slidepipe.mpp-y"]))
        return None

    @property
    def planes(self):
        """{"z": focal planes, "c": channel planes, "t": time points} (1 each for most formats)."""
        counts, _ = self._core.planes()
        return dict(zip("zct", counts))

    @property
    def plane(self):
        """The plane this Slide shows, (z, c, t)."""
        return self._plane

    @property
    def icc_profile(self):
        """The ICC profile embedded in the slide, as stored (bytes), or None."""
        return self._core.icc_profile()

    @property
    def associated_images(self):
        """{name: (width, height)} of the label, macro, thumbnail... (read_associated reads one)."""
        return self._core.associated()

    def get_best_level_for_downsample(self, downsample):
        return self._core.best_level_for_downsample(float(downsample))

    # ---- pixels ----

    def read_region(self, location, level, size, *, rgb=False, out=None):
        """Pixels of `level` whose top-left is level-0 pixel `location`, `size` pixels of the
        level: an array (height, width, 4) of straight RGBA, or (height, width, 3) with rgb=True.
        Pixels outside the slide are transparent (RGB: the background colour)."""
        width, height = _size(size)
        arr = _output(out, (height, width, 3 if rgb else 4))
        x, y = location
        self._core.read_region(arr, int(level), int(x), int(y), width, height, bool(rgb))
        return arr

    def read_region_scaled(self, location, downsample, size, *, rgb=False, out=None):
        """`size` output pixels at any downsample >= 1 of level 0 (the library picks the level
        and decodes JPEG tiles at 1/2, 1/4, 1/8 where it can; docs/reading.md)."""
        width, height = _size(size)
        arr = _output(out, (height, width, 3 if rgb else 4))
        x, y = location
        self._core.read_region_scaled(arr, float(downsample), int(x), int(y), width, height,
                                      bool(rgb))
        return arr

    def read_regions(self, locations, level, size, *, rgb=False, threads=0, out=None):
        """Many regions of one level and size into one array (n, height, width, channels), read
        by `threads` threads (0: every core). See the module's read_regions."""
        level = int(level)
        return read_regions([(self, level, x, y) for x, y in locations], size, rgb=rgb,
                            threads=threads, out=out)

    def read_associated(self, name, *, rgb=False):
        """The associated image `name` whole, as (height, width, 4) or (height, width, 3)."""
        images = self.associated_images
        if name not in images:
            raise KeyError(name)
        width, height = images[name]
        arr = np.empty((height, width, 3 if rgb else 4), dtype=np.uint8)
        self._core.read_associated(name, arr, bool(rgb))
        return arr

    # ---- training (slidepipe.train; docs/train.md) ----

    def tissue_mask(self, max_side=2048):
        """The slide's TissueMask, computed on its image `max_side` pixels across."""
        return train.tissue_mask(self._core, max_side)

    def tissue_tiles(self, size, *, level=0, stride=None, min_tissue=0.5, mask=None):
        """The `size` x `size` tiles of `level`'s grid (one every `stride` pixels, default
        `size`) with at least `min_tissue` tissue under `mask` (default: tissue_mask()), as a
        TILE_DTYPE array in row-major order (x, y in level-0 pixels)."""
        mask = self.tissue_mask() if mask is None else mask
        return train.tissue_tiles(self._core, mask, level, size, stride, min_tissue)

    def stains(self, max_side=2048, cache=True):
        """The slide's H&E Stains by Macenko's method, from its image `max_side` across; with
        `cache`, read from (or written to) the per-slide estimate cache (docs/stains.md)."""
        if not cache:
            return train.Stains(*self._core.stains(int(max_side)))
        return stain_tools.estimate_stains(self._core, max_side, True)[0]

    def reinhard_stats(self, max_side=2048, cache=True):
        """The slide's ReinhardStats (CIELAB mean and std of its tissue pixels) from its image
        `max_side` across, through the per-slide estimate cache unless `cache` is false."""
        return stain_tools.estimate_stains(self._core, max_side, bool(cache), False)[1]

    def pixel_hash(self, threads=0):
        """The slide's pixel hash: 64 hex digits of a SHA-256 over its levels' decoded RGB8
        pixels alone (docs/pixel-hash.md), the same for a slide and any lossless re-encoding of
        it, whatever the file name, codec or chunking. `threads` (0: one per core) never changes
        the result; the GIL is released while the pixels are read and hashed."""
        return self._core.pixel_hash(int(threads))


def open(path, *, mpp=None, apply_icc=False, plane=None):
    """Open the slide at `path` (any format slidepipe reads; OME-Zarr too); `mpp` overrides its
    microns per pixel (a number, or (x, y)); `apply_icc` converts reads to sRGB, `plane` picks
    (z, c, t) (Slide)."""
    return Slide(path, mpp=mpp, apply_icc=apply_icc, plane=plane)


_REOPEN = threading.Lock()


def _mpp_pair(mpp):
    if mpp is None:
        return None
    pair = (float(mpp), float(mpp)) if np.ndim(mpp) == 0 else tuple(float(v) for v in mpp)
    if len(pair) != 2 or not all(np.isfinite(pair)) or min(pair) <= 0:
        raise ValueError(f"mpp must be a positive number or (x, y), not {mpp!r}")
    return pair


def _level_tuple(level):
    return (level.width, level.height, level.downsample, level.tile_width, level.tile_height,
            level.compression)


def _unpickle_slide(path, mpp, fmt, levels, apply_icc=False, plane=(0, 0, 0)):
    """A Slide that opens its file on first use (Slide.__reduce__)."""
    slide = Slide.__new__(Slide)
    slide.path, slide._mpp_override, slide.format = path, mpp, fmt
    slide.apply_icc, slide._plane = apply_icc, tuple(plane)
    slide.levels = tuple(Level(*t) for t in levels)
    slide._core_obj, slide._closed, slide._properties = None, False, None
    return slide


def read_regions(requests, size, *, rgb=False, threads=0, out=None):
    """Read a batch: each request is (slide, level, x, y), every region `size` pixels of its
    level, into one array of shape (n, height, width, 4) (3 with rgb=True), on `threads` threads
    (0: one per core). The slides may differ. Every region is read even when some fail; then
    BatchError says which (its ``array`` has the rest)."""
    width, height = _size(size)
    reqs = []
    for i, r in enumerate(requests):
        slide, level, x, y = r
        if not isinstance(slide, Slide):
            raise TypeError(f"request {i}: the first item must be a slidepipe.Slide")
        reqs.append((slide._core, int(level), int(x), int(y)))
    arr = _output(out, (len(reqs), height, width, 3 if rgb else 4))
    statuses = _core.read_regions(reqs, arr, width, height, bool(rgb), int(threads))
    failed = [(i, st) for i, st in enumerate(statuses) if st != 0]
    if failed:
        raise BatchError({i: _core.status_str(st) for i, st in failed}, arr, failed[0][1])
    return arr


def set_cache_capacity(nbytes):
    """Bound the process-wide decoded-tile cache to `nbytes` (0 turns it off)."""
    _core.cache_set_capacity(int(nbytes))


def cache_stats():
    """The tile cache's capacity, bytes used, entries, hits, misses, insertions, evictions."""
    return _core.cache_stats()
