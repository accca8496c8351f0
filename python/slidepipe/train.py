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

import dataclasses
import os
import weakref

import numpy as np

from . import _core

__all__ = ["TissueMask", "Stains", "normalize_stains", "augment", "PatchSampler", "TILE_DTYPE"]

# One foreground tile: which slide (an index into the sampler's slides; 0 for a single slide),
# its top-left in level-0 pixels, the fraction of it that is tissue, and its class (an index
# into PatchSampler.classes; 0, the background, when there are no annotations).
TILE_DTYPE = np.dtype([("slide", "<i4"), ("x", "<i8"), ("y", "<i8"), ("tissue", "<f8"),
                       ("label", "<i4")])
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

    Where patches come from: every slide's grid of `size` x `size` tiles (one every `stride`
    pixels, default `size`) with at least `min_tissue` tissue (under a mask `mask_side` pixels
    across). The grid is on pyramid `level`, or, with `mpp` (microns per pixel) or
    `magnification` (the slide's objective power over it), at that resolution on every slide:
    the patch is read at the downsample that resolution needs (docs/train.md, "Physical units").
    `context` (a tuple of µm/px, with mpp) makes each sample a stack of patches centred on the
    same point, one per resolution: batches of shape (n, len(context), ...).

    Each epoch visits every candidate once, in an order drawn from (seed, epoch), in batches of
    `batch_size` (the last one smaller unless drop_last). With `world_size` > 1, rank `rank`
    takes every world_size-th sample of that order (RANK and WORLD_SIZE, or Slurm's, are read
    when not given), so the ranks together see each sample once. Batches are made `prefetch`
    ahead by the library on `threads` threads (0: every core): read, stain-normalized
    (`normalize`: True or "macenko" from each slide's Macenko stains to `target`, "reinhard"
    from its LAB statistics to `reinhard_target`; estimated once per slide, and cached),
    augmented with a seed drawn for the sample (`geometry`, a slidepipe.Geometry: crop, affine
    and elastic in one resampling; `dihedral` flips and turns; HED jitter `hed_sigma`; stain
    augmentation `stain_sigma` in the Macenko stain space; `photometric`, a
    slidepipe.Photometric: colour jitter, blur, noise), and written as
    `dtype` (uint8, float16, float32) in `layout` (NHWC or NCHW), floats normalized by
    `mean`/`std`; `pinned` page-locks batch memory where a GPU is present, and `numa` ("auto":
    the GPU's node) keeps the loader's threads and the memory they write on one NUMA node where
    the machine has several. With `device` ("cuda", "cuda:N") every batch is handed over in that
    GPU's memory, as a torch tensor instead of a numpy array.

    Labels: `annotations` (one per slide: a GeoJSON or ASAP XML path, an Annotations, or None)
    give each tile a class (``tiles["label"]``, an index into ``classes``; `label_rule` "centre"
    or "majority", docs/labels.md); `classes` keeps only the tiles of those class names; with
    masks=True each batch also carries label masks lined up with its patches, flipped as they
    were: (n, [len(context),] size, size) uint8. `qc` (True: slidepipe.QC_THRESHOLDS, or a dict
    of qc_filter's limits) scores every candidate tile (blur, pen ink, folds, background;
    docs/qc.md) and leaves out those that fail; ``tile_qc`` keeps the kept tiles' scores.

    Iterating yields (patches, tiles), or (patches, tiles, masks): a numpy array over the
    library's batch memory (no copy; torch.from_numpy shares it) and the TILE_DTYPE records of
    its samples. Each iteration is the
    next epoch; epoch(e, start=step) gives any epoch from any step. A slide that cannot be used
    (it does not open, lacks an MPP, shows no tissue) raises, or with on_error="skip" is left out
    and listed in ``skipped`` as (path, reason); patches that fail to read then drop out of their
    batch and are listed in ``failures``. Slides given as paths are opened here, closed by
    close(). A sampler pickles (slides reopen lazily where it is unpickled).
    """

    def __init__(self, slides, size, *, level=0, mpp=None, magnification=None, context=None,
                 batch_size=64, min_tissue=0.5, stride=None, seed=0, dihedral=True,
                 hed_sigma=0.0, normalize=False, target=None, reinhard_target=None,
                 stain_sigma=0.0, threads=0, mask_side=2048,
                 drop_last=False, dtype="uint8", layout="NHWC", mean=(0.0, 0.0, 0.0),
                 std=(1.0, 1.0, 1.0), prefetch=2, pinned=False, rank=None, world_size=None,
                 on_error="raise", annotations=None, label_rule="centre", classes=None,
                 masks=False, numa="auto", device=None, geometry=None, photometric=None,
                 qc=None):
        from .loader import BatchFormat

        # What a run manifest records to make the same sampler again (slidepipe.manifest).
        self.settings = dict(
            size=int(size), level=int(level), mpp=mpp, magnification=magnification,
            context=None if context is None else [float(m) for m in context],
            batch_size=int(batch_size), min_tissue=float(min_tissue),
            stride=None if stride is None else int(stride), seed=int(seed),
            dihedral=bool(dihedral), hed_sigma=float(hed_sigma),
            normalize=_normalizer(normalize), stain_sigma=float(stain_sigma),
            target=None if target is None else [list(target.h), list(target.e), target.max_h,
                                                target.max_e],
            reinhard_target=None if reinhard_target is None else [list(reinhard_target.mean),
                                                                  list(reinhard_target.std)],
            mask_side=int(mask_side), drop_last=bool(drop_last), dtype=str(dtype),
            layout=str(layout), mean=[float(v) for v in mean], std=[float(v) for v in std],
            label_rule=label_rule, classes=None if classes is None else list(classes),
            masks=bool(masks), qc=_qc_limits(qc),
            geometry=None if geometry is None else dataclasses.asdict(geometry),
            photometric=None if photometric is None else dataclasses.asdict(photometric))
        if int(size) < 1 or int(batch_size) < 1:
            raise ValueError("size and batch_size must be positive")
        if not 0.0 <= float(hed_sigma) <= 1.0:
            raise ValueError("hed_sigma must lie in [0, 1]")
        if on_error not in ("raise", "skip"):
            raise ValueError('on_error must be "raise" or "skip"')
        if mpp is not None and magnification is not None:
            raise ValueError("give mpp or magnification, not both")
        if context is not None and mpp is None:
            raise ValueError("context stacks are given in µm/px: they need mpp")
        self.size, self.level, self.batch_size = int(size), int(level), int(batch_size)
        self.mpp = None if mpp is None else float(mpp)
        self.magnification = None if magnification is None else float(magnification)
        self.context = None if context is None else tuple(float(m) for m in context)
        self.seed, self.dihedral, self.hed_sigma = int(seed), bool(dihedral), float(hed_sigma)
        self.threads, self.drop_last, self.prefetch = int(threads), bool(drop_last), int(prefetch)
        self.pinned, self.on_error, self.numa, self.device = bool(pinned), on_error, numa, device
        self.geometry, self.photometric = geometry, photometric
        self.format = BatchFormat(dtype, layout, mean, std)
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        self.skipped, self.failures = [], []
        self.label_rule, self.masks, self.qc = label_rule, bool(masks), _qc_limits(qc)
        self.tile_qc = None if self.qc is None else []
        self.classes, self.annotations, self._class_maps = ["background"], [], []
        slides = list(slides)
        if annotations is not None and len(annotations) != len(slides):
            raise ValueError("annotations: one per slide (None for a slide without)")
        self.normalize, self.stain_sigma = _normalizer(normalize), float(stain_sigma)
        self._owned, self.slides, self.downsamples, parts, stains, reinhard = [], [], [], [], [], []
        self._loaders = weakref.WeakSet()  # the epochs under way, stopped by close()
        for i, s in enumerate(slides):
            ann = None if annotations is None else annotations[i]
            self._add_slide(s, ann, stride, min_tissue, mask_side, parts, stains, reinhard)
        self.tiles = np.concatenate(parts) if parts else np.zeros(0, dtype=TILE_DTYPE)
        if self.qc is not None:
            from .qc import QC_DTYPE, qc_filter
            scores = np.concatenate(self.tile_qc) if self.tile_qc else np.zeros(0, QC_DTYPE)
            keep = qc_filter(self.tiles, scores, **self.qc)
            self.tiles, self.tile_qc = self.tiles[keep], scores[keep]
        if classes is not None:
            unknown = sorted(set(classes) - set(self.classes))
            if unknown:
                self.close()
                raise ValueError(f"no annotation has the classes {unknown} (classes: "
                                 f"{self.classes[1:]})")
            keep = np.isin(self.tiles["label"], [self.classes.index(c) for c in classes])
            self.tiles = self.tiles[keep]
            if self.tile_qc is not None:
                self.tile_qc = self.tile_qc[keep]
        if len(self.tiles) == 0:
            self.close()
            where = f"level {self.level}" if self.mpp is None and self.magnification is None \
                else "the resolution asked"
            raise ValueError(f"no {self.size}x{self.size} tile at {where} holds {min_tissue:g} "
                             f"tissue in any of the slides" +
                             (f" ({len(self.skipped)} skipped)" if self.skipped else ""))
        self.target = (target or Stains.reference()) if self.normalize == "macenko" else None
        self.reinhard_target = reinhard_target
        self.stains = stains if self._needs_stains() else None
        self.reinhard = reinhard if self.normalize == "reinhard" else None
        self._epoch = 0

    def _needs_stains(self):
        return self.normalize == "macenko" or self.stain_sigma > 0

    def steps(self):
        """What the loader does to every patch (slidepipe.loader._steps)."""
        return dict(dihedral=self.dihedral, hed_sigma=self.hed_sigma, normalize=self.normalize,
                    stains=self.stains, target=self.target, reinhard=self.reinhard,
                    reinhard_target=self.reinhard_target, stain_sigma=self.stain_sigma,
                    geometry=self.geometry, photometric=self.photometric)

    def _add_slide(self, s, ann, stride, min_tissue, mask_side, parts, stains, reinhard):
        """Open (if a path), resolve the resolution, find tiles, labels and stains of one slide;
        on failure raise or, with on_error="skip", note it in skipped."""
        from . import Slide  # the package imports this module first
        from .labels import Annotations

        path = str(getattr(s, "path", s))
        opened = None
        try:
            if not isinstance(s, Slide):
                s = opened = Slide(s)
            downsample = self._downsample_of(s)
            t, mask = self._tiles_of(s, downsample, stride, min_tissue, mask_side)
            if ann is not None and not isinstance(ann, Annotations):
                ann = Annotations.load(ann)
            if ann is not None:
                class_map = self._class_map(ann)
                t["label"] = class_map[self._labels_of(ann, t, downsample, mask, s)]
            scores = self._qc_of(s, t, downsample)
            st = s.stains(mask_side) if self._needs_stains() and len(t) else None
            rs = s.reinhard_stats(mask_side) if self.normalize == "reinhard" and len(t) \
                else None
        except (_core.Error, ValueError, OSError) as e:
            if opened is not None:
                opened.close()
            if self.on_error == "raise":
                raise _naming(e, path) from e
            self.skipped.append((path, str(e)))
            return
        if opened is not None:
            self._owned.append(opened)
        t["slide"] = len(self.slides)
        self.annotations.append(ann)
        self._class_maps.append(None if ann is None else class_map)
        self.slides.append(s)
        self.downsamples.append(downsample)
        parts.append(t)
        stains.append(st)
        reinhard.append(rs)
        if scores is not None:
            self.tile_qc.append(scores)

    def _downsample_of(self, s):
        """Level-0 pixels per patch pixel on slide s: None for a level grid."""
        if self.mpp is None and self.magnification is None:
            if not 0 <= self.level < len(s.levels):
                raise ValueError(f"{s.path} has {len(s.levels)} levels; level {self.level} "
                                 "was asked")
            return None
        if self.magnification is not None:
            power = s.properties.get("slidepipe.objective-power")
            if power is None:
                raise ValueError(f"{s.path} does not record its objective power; give mpp "
                                 "instead of magnification")
            wanted = [float(power) / self.magnification]
        else:
            if s.mpp is None:
                raise ValueError(f"{s.path} does not record its microns per pixel; open it "
                                 "with slidepipe.open(path, mpp=...) to give them")
            base = (s.mpp[0] + s.mpp[1]) / 2
            wanted = [m / base for m in (self.context or ()) + (self.mpp,)]
        if min(wanted) < 1 - 1e-9:
            raise ValueError(f"{s.path} is scanned at {s.mpp} µm/px: the resolution asked "
                             "would need upsampling")
        return max(1.0, wanted[-1])

    def _tiles_of(self, s, downsample, stride, min_tissue, mask_side):
        """(tiles, tissue mask) of slide s."""
        mask = s.tissue_mask(mask_side)
        if downsample is None:
            return s.tissue_tiles(self.size, level=self.level, stride=stride,
                                  min_tissue=min_tissue, mask=mask), mask
        side = max(1, int(round(self.size * downsample)))
        step = None if stride is None else max(1, int(round(int(stride) * downsample)))
        return s.tissue_tiles(side, level=0, stride=step, min_tissue=min_tissue, mask=mask), mask

    def _qc_of(self, s, tiles, downsample):
        """The QC scores of slide s's tiles at their level (level 0 for an mpp grid), or None
        without qc."""
        if self.qc is None:
            return None
        from .qc import tile_qc
        if downsample is None:
            return tile_qc(s, tiles, self.size, level=self.level, threads=self.threads)
        side = max(1, int(round(self.size * downsample)))
        return tile_qc(s, tiles, side, level=0, threads=self.threads)

    def _class_map(self, ann):
        """Each of ann's labels as an index into self.classes (new names appended)."""
        for name in ann.classes[1:]:
            if name not in self.classes:
                self.classes.append(name)
        return np.array([self.classes.index(n) for n in ann.classes], dtype=np.int32)

    def _patch_downsample(self, s, downsample):
        return s.levels[self.level].downsample if downsample is None else downsample

    def _labels_of(self, ann, tiles, downsample, mask, s):
        """Each tile's label (ann's numbering) by label_rule, from a label map painted at the
        tissue mask's resolution (docs/labels.md)."""
        from .labels import patch_labels

        h, w = mask.array.shape
        label_map = ann.rasterize(mask.downsample, 0, 0, w, h)
        side = self.size * self._patch_downsample(s, downsample)
        xy = np.stack([tiles["x"], tiles["y"]], axis=1)
        return patch_labels(label_map, mask.downsample, xy, side, rule=self.label_rule)

    def _masks(self, tiles, seeds, requests):
        """Label masks lined up with a batch's patches, flipped as the patches were."""
        from .labels import mask_patches

        g = self.group
        out = np.zeros((len(tiles) * g, self.size, self.size), dtype=np.uint8)
        for k, r in enumerate(requests):
            i = k // g
            slide = int(tiles["slide"][i])
            ann = self.annotations[slide]
            if ann is None:
                continue
            d = r["downsample"] if r["level"] < 0 else self.slides[slide].levels[r["level"]] \
                .downsample
            local = mask_patches(ann, [(r["x"], r["y"])], self.size, d)[0]
            out[k] = self._class_maps[slide][local]
            if self.dihedral:
                out[k] = _dihedral(out[k], dihedral_index(int(seeds[i])))
        return out.reshape((len(tiles), g, self.size, self.size) if g > 1 else out.shape)

    @property
    def group(self):
        """Patches per sample: len(context), else 1."""
        return len(self.context) if self.context else 1

    def __len__(self):
        n, b = len(self._shard(np.arange(len(self.tiles)))), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        return self.epoch(epoch)

    def _shard(self, positions):
        return positions[self.rank::self.world_size]

    def plan(self, epoch):
        """(tiles, seeds) of this rank's samples in epoch `epoch`, in order: the i-th sample of
        the epoch order gets seeds[i] whichever rank takes it."""
        rng = np.random.default_rng([self.seed, int(epoch)])
        order = rng.permutation(len(self.tiles))
        seeds = rng.integers(0, 2**64 - 1, size=len(order), dtype=np.uint64, endpoint=True)
        keep = self._shard(np.arange(len(order)))
        n = len(keep) // self.batch_size * self.batch_size if self.drop_last else len(keep)
        keep = keep[:n]
        return self.tiles[order[keep]], seeds[keep]

    def requests(self, tiles, seeds):
        """The loader requests (slidepipe.loader.REQUEST_DTYPE) of samples: one per patch,
        len(context) per sample with context."""
        from .loader import REQUEST_DTYPE

        g = self.group
        reqs = np.zeros(len(tiles) * g, dtype=REQUEST_DTYPE)
        slide = tiles["slide"].astype(np.int64)
        reqs["slide"] = np.repeat(slide, g)
        reqs["seed"] = np.repeat(seeds, g)
        if self.mpp is None and self.magnification is None:
            reqs["level"], reqs["x"], reqs["y"] = self.level, tiles["x"], tiles["y"]
            return reqs
        reqs["level"] = -1
        ds = np.asarray(self.downsamples, dtype=np.float64)[slide]
        if self.context is None:
            reqs["downsample"], reqs["x"], reqs["y"] = ds, tiles["x"], tiles["y"]
            return reqs
        # Every patch of a stack is centred on its tile's centre (top-left rounded to a pixel).
        half = self.size * ds / 2
        cx, cy = tiles["x"] + half, tiles["y"] + half
        for k, m in enumerate(self.context):
            dk = ds * m / self.mpp
            reqs["downsample"][k::g] = dk
            reqs["x"][k::g] = np.floor(cx - self.size * dk / 2 + 0.5)
            reqs["y"][k::g] = np.floor(cy - self.size * dk / 2 + 0.5)
        return reqs

    def epoch(self, epoch, *, start=0, worker=0, workers=1):
        """The batches of epoch `epoch` from batch `start` on (a generator). With `workers` > 1,
        only the batches b with (b - start) % workers == worker: workers taking turns in
        DataLoader's order give the same sequence as one."""
        from .loader import Loader

        tiles, seeds = self.plan(epoch)
        b = self.batch_size
        mine = [i for i in range(int(start), len(self)) if (i - int(start)) % workers == worker]
        if not mine:
            return
        picks = np.concatenate([np.arange(i * b, min((i + 1) * b, len(tiles))) for i in mine])
        tiles, seeds = tiles[picks], seeds[picks]
        reqs = self.requests(tiles, seeds)
        loader = Loader(self.slides, reqs, self.format, size=self.size,
                        batch_size=b * self.group, prefetch=self.prefetch, threads=self.threads,
                        pinned=self.pinned, numa=self.numa, device=self.device,
                        group=self.group, **self.steps())
        self._loaders.add(loader)
        try:
            for batch in loader:
                first, n = batch.first // self.group, batch.count // self.group
                part = slice(first, first + n)
                if not self.masks:
                    yield self._checked(batch, tiles[part])
                    continue
                masks = self._masks(tiles[part], seeds[part],
                                    reqs[batch.first:batch.first + batch.count])
                patches, kept, ok = self._checked(batch, tiles[part], keep=True)
                yield patches, kept, masks[ok]
        finally:
            loader.close()

    def _checked(self, batch, tiles, keep=False):
        """(patches, tiles) of a batch; samples with a failed patch raise or are dropped. With
        keep, also which samples were kept."""
        if batch.device < 0:
            patches = batch.numpy()
        else:
            import torch
            patches = torch.from_dlpack(batch)
        failed = batch.statuses.reshape(len(tiles), self.group).any(axis=1)
        if not failed.any():
            return (patches, tiles, ~failed) if keep else (patches, tiles)
        bad = np.flatnonzero(failed)
        for i in bad:
            code = int(batch.statuses.reshape(len(tiles), self.group)[i].min())
            self.failures.append((self.slides[tiles["slide"][i]].path, int(tiles["x"][i]),
                                  int(tiles["y"][i]), _core.status_str(code)))
        if self.on_error == "raise":
            path, x, y, status = self.failures[-len(bad)]
            raise _core.Error(f"{path}: the patch at ({x}, {y}) failed: {status}")
        ok = ~failed
        if batch.device >= 0:
            import torch
            ok = torch.from_numpy(ok).to(patches.device)
        return (patches[ok], tiles[~failed]) + ((~failed,) if keep else ())

    def manifest(self):
        """This run's manifest: every slide's pixel hash, the annotations' contents, the
        settings, the seed and the tiles, with a run hash over all of them (not over paths);
        slidepipe.manifest defines it."""
        from .manifest import manifest_of
        return manifest_of(self)

    def write_manifest(self, path):
        """Write manifest() as JSON to `path` (atomically); returns the run hash."""
        from .manifest import write_manifest
        return write_manifest(self.manifest(), path)

    @classmethod
    def from_manifest(cls, manifest, **run_options):
        """The sampler a manifest (a dict or a JSON file) records, made again: every slide's
        pixels and every annotation file are checked against it first, and a changed input
        raises ValueError naming it. `run_options` (threads, prefetch, pinned, rank,
        world_size, on_error, numa) only decide how the batches are made, not which."""
        from .manifest import sampler_from_manifest
        return sampler_from_manifest(cls, manifest, run_options)

    def close(self):
        """Stop the epochs under way (an epoch left unfinished, its generator still held, ends
        there) and close the slides this sampler opened."""
        for loader in list(self._loaders):
            loader.close()
        for s in self._owned:
            s.close()
        self._owned = []

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_loaders"]  # this process's threads: a copy starts with none
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._loaders = weakref.WeakSet()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _qc_limits(qc):
    """qc as given to PatchSampler: None (no QC), True (slidepipe.QC_THRESHOLDS) or a dict of
    qc_filter's limits."""
    from .qc import QC_THRESHOLDS
    if qc is None or qc is False:
        return None
    limits = dict(QC_THRESHOLDS) if qc is True else dict(qc)
    unknown = set(limits) - set(QC_THRESHOLDS)
    if unknown:
        raise ValueError(f"qc limits are {sorted(QC_THRESHOLDS)}, not {sorted(unknown)}")
    return limits


def _normalizer(normalize):
    """normalize as given to PatchSampler: True or "macenko", "reinhard", False or None."""
    value = {True: "macenko", False: None}.get(normalize, normalize) \
        if isinstance(normalize, bool) or normalize is None else normalize
    if value not in (None, "macenko", "reinhard"):
        raise ValueError(f"normalize must be True, 'macenko', 'reinhard' or False, not "
                         f"{normalize!r}")
    return value


def dihedral_index(seed):
    """Which of the 8 flips and quarter turns sp_augment_patch gives the patch of `seed` (the
    first splitmix64 draw, docs/train.md), so that masks can follow their patches."""
    mask = (1 << 64) - 1
    z = (int(seed) + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return int((z >> 11) * 2.0**-53 * 8)


def _dihedral(a, t):
    """docs/train.md's flip t of a (size, size, ...) array."""
    if t & 4:
        a = a.swapaxes(0, 1)
    if t & 2:
        a = a[::-1]
    if t & 1:
        a = a[:, ::-1]
    return a


def _naming(error, path):
    """`error`, or one like it whose message starts with the slide's path when it did not name
    it (a SlidepipeError keeps its code and status)."""
    if path in str(error) or os.path.basename(path) in str(error):
        return error
    named = type(error)(f"{path}: {error}")
    for attr in ("code", "status"):
        if hasattr(error, attr):
            setattr(named, attr, getattr(error, attr))
    return named


def _rank_and_world(rank, world_size):
    """(rank, world size): as given, else torchrun's RANK/WORLD_SIZE, else Slurm's
    SLURM_PROCID/SLURM_NTASKS, else (0, 1)."""
    if world_size is None:
        for r, w in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
            if r in os.environ and w in os.environ:
                rank, world_size = int(os.environ[r]), int(os.environ[w])
                break
        else:
            rank, world_size = rank or 0, 1
    rank, world_size = int(rank or 0), int(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size}")
    return rank, world_size
