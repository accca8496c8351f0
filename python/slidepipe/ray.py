"""slidepipe for Ray Data: training patches as a Ray Dataset whose blocks are read on the cluster's
workers by the C library, with the same samples, seeds and pixels as the single-process
PatchSampler (docs/distributed.md).

    import ray, slidepipe.ray
    ds = slidepipe.ray.read_patches(paths, 224, mpp=0.5, batch_size=64, seed=7, epoch=0,
                                    dtype="float16", layout="NCHW", hed_sigma=0.05)
    for batch in ds.iter_torch_batches(batch_size=64):
        x = batch["image"]                        # (64, 3, 224, 224) float16

The driver builds the PatchSampler (tissue masks, candidate tiles, stains: once per slide) and
plans the epoch exactly as the sampler does: the order and each sample's seed come from
(seed, epoch), a rank keeps every world_size-th sample. The plan is cut into blocks, each one a
Ray read task: with order="slide" (the default) a block is a run of neighbouring tiles of one
slide (sorted by row, then column), so a worker opens one slide per block and the decoded-tile
cache serves tiles that neighbouring patches share; with order="epoch" a block is a run of the
epoch order, so the rows arrive in exactly the order PatchSampler.epoch() yields them. Either
way each row carries ``index``, its position in the epoch order, and its pixels are the ones
the sampler makes for that position, whatever block or worker reads it. Ray retries a read task
whose worker dies; a block is written whole or not at all, so nothing is lost or duplicated.
``ray`` is imported only when this module is.
"""

import threading
import uuid

import numpy as np

from . import loader as _loader
from .train import PatchSampler

__all__ = ["read_patches", "plan_blocks", "read_block", "convert", "process"]

# Each worker process keeps the samplers it has been sent, so that the slides they hold are
# opened once per process, not once per block (the tile cache is per open slide).
_SAMPLERS = {}
_SAMPLERS_LOCK = threading.Lock()


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise ImportError("slidepipe.ray needs Ray Data: pip install 'ray[data]' "
                          "(or slidepipe[ray])") from e
    return ray


def plan_blocks(sampler, epoch, *, order="slide", block_size=256):
    """The blocks of `epoch` for this sampler's rank: a list of arrays of positions in the epoch
    order (PatchSampler.plan). order="slide": runs of at most `block_size` samples of one slide,
    neighbours first (by y, then x); order="epoch": runs of the epoch order."""
    if order not in ("slide", "epoch"):
        raise ValueError(f'order must be "slide" or "epoch", not {order!r}')
    if int(block_size) < 1:
        raise ValueError("block_size must be positive")
    b = int(block_size)
    tiles, _ = sampler.plan(epoch)
    n = len(tiles)
    if order == "epoch":
        return [np.arange(i, min(i + b, n)) for i in range(0, n, b)]
    blocks = []
    for slide in np.unique(tiles["slide"]):
        mine = np.flatnonzero(tiles["slide"] == slide)
        mine = mine[np.lexsort((tiles["x"][mine], tiles["y"][mine]))]
        blocks.extend(mine[i:i + b] for i in range(0, len(mine), b))
    return blocks


def read_block(sampler, epoch, positions, *, threads=1):
    """The rows of one block: a dict of numpy arrays with ``image`` (n, ...) in the sampler's
    dtype and layout, ``index`` (position in the epoch order), ``seed`` and the tile's
    ``slide``, ``x``, ``y``, ``tissue`` and ``label``. A patch that fails raises with
    on_error="raise"; with "skip" its row is left out."""
    tiles, seeds = sampler.plan(epoch)
    positions = np.asarray(positions, dtype=np.int64)
    tiles, seeds = tiles[positions], seeds[positions]
    reqs = sampler.requests(tiles, seeds)
    out, statuses = _loader.read_patches(sampler.slides, reqs, sampler.format,
                                         size=sampler.size, threads=threads, **sampler.steps())
    g = sampler.group
    if g > 1:
        out = out.reshape((len(tiles), g) + out.shape[1:])
    failed = statuses.reshape(len(tiles), g).any(axis=1)
    if failed.any():
        i = int(np.flatnonzero(failed)[0])
        path = sampler.slides[int(tiles["slide"][i])].path
        if sampler.on_error == "raise":
            from . import _core
            code = int(statuses.reshape(len(tiles), g)[i].min())
            raise _core.Error(f"{path}: the patch at ({int(tiles['x'][i])}, "
                              f"{int(tiles['y'][i])}) failed: {_core.status_str(code)}")
        keep = ~failed
        out, tiles, seeds, positions = out[keep], tiles[keep], seeds[keep], positions[keep]
    rows = {"image": out, "index": positions, "seed": seeds}
    for name in ("slide", "x", "y", "tissue", "label"):
        rows[name] = np.ascontiguousarray(tiles[name])
    return rows


def _worker_sampler(token, sampler):
    with _SAMPLERS_LOCK:
        return _SAMPLERS.setdefault(token, sampler)


def _datasource_class():
    """The Datasource subclass, made on first use so that this module imports without Ray."""
    ray = _ray()
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class PatchDatasource(Datasource):
        def __init__(self, sampler, epoch, blocks, threads, on_block):
            super().__init__()
            self._sampler, self._epoch, self._blocks = sampler, int(epoch), blocks
            self._threads, self._on_block = int(threads), on_block
            self._token = uuid.uuid4().hex
            self._row_bytes = (sampler.format.numpy_dtype.itemsize * 3 * sampler.size ** 2
                               * sampler.group + 64)

        def get_name(self):
            return "SlidepipePatches"

        def estimate_inmemory_data_size(self):
            return sum(len(b) for b in self._blocks) * self._row_bytes

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            tasks = []
            sampler_ref = ray.put(self._sampler)
            for number, positions in enumerate(self._blocks):
                slides = sorted({int(s) for s in
                                 self._sampler.plan(self._epoch)[0]["slide"][positions]}) \
                    if number == 0 else None  # the files, for the first block's metadata only
                meta = BlockMetadata(num_rows=len(positions),
                                     size_bytes=len(positions) * self._row_bytes,
                                     input_files=None if slides is None else
                                     [self._sampler.slides[s].path for s in slides],
                                     exec_stats=None)
                tasks.append(ReadTask(self._reader(number, positions, sampler_ref), meta))
            return tasks

        def _reader(self, number, positions, sampler_ref):
            token, epoch, threads, on_block = self._token, self._epoch, self._threads, \
                self._on_block

            def read():
                sampler = _worker_sampler(token, ray.get(sampler_ref))
                if on_block is not None:
                    on_block(number)
                rows = read_block(sampler, epoch, positions, threads=threads)
                return [BlockAccessor.batch_to_block(rows)]
            return read

    return PatchDatasource


def read_patches(slides, size=None, *, epoch=0, order="slide", block_size=256, threads=1,
                 on_block=None, num_cpus=1, preserve_order=True, **options):
    """A Ray Dataset of one epoch of training patches: one row per sample of this rank, with
    ``image`` and the columns read_block lists. `slides` is a list of paths or Slides (the
    sampler is built here with `size` and `options`, PatchSampler's keywords: mpp, level,
    batch_size, seed, rank, world_size, dtype, layout, normalize, hed_sigma, ...) or a
    PatchSampler (then `size` and `options` must be left out). Blocks are `order` runs of
    `block_size` samples (plan_blocks), each read by a Ray task of `num_cpus` CPUs on `threads`
    library threads. `on_block(number)`, if given, runs in the worker before each block is read
    (logging, fault injection in tests). With `preserve_order` (the default) the blocks are
    handed over in plan order, so the rows come in one fixed order for (seed, epoch, rank):
    the epoch's own order with order="epoch"; False lets a finished block overtake a slow one.
    Call it once per epoch."""
    ray = _ray()
    if isinstance(slides, PatchSampler):
        if size is not None or options:
            raise ValueError("give a PatchSampler, or slides with size and options, not both")
        sampler = slides
    else:
        if size is None:
            raise ValueError("size: the patch side in pixels")
        sampler = PatchSampler(slides, size, **options)
    blocks = plan_blocks(sampler, epoch, order=order, block_size=block_size)
    source = _datasource_class()(sampler, epoch, blocks, threads, on_block)
    ds = ray.data.read_datasource(source, override_num_blocks=max(1, len(blocks)),
                                  num_cpus=num_cpus)
    ds.context.execution_options.preserve_order = bool(preserve_order)
    return ds


def _job(kind, args, kwargs):
    from . import stores
    return getattr(stores, kind)(*args, **kwargs)


def _cohort(kind, jobs, num_cpus, max_retries):
    ray = _ray()
    remote = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_job)
    refs = [remote.remote(kind, tuple(args), dict(kwargs)) for args, kwargs in jobs]
    return ray.get(refs)


def convert(jobs, *, num_cpus=1, max_retries=3):
    """Run slidepipe.convert for each (args, kwargs) of `jobs` as a Ray task (retried
    `max_retries` times when its worker dies; conversions are resumable and atomic per chunk,
    so a retry finishes the same dataset). Returns their results in the order of `jobs`."""
    return _cohort("convert", jobs, num_cpus, max_retries)


def process(jobs, *, num_cpus=1, max_retries=3):
    """Run slidepipe.process for each (args, kwargs) of `jobs` as a Ray task, as convert does."""
    return _cohort("process", jobs, num_cpus, max_retries)
