"""slidepipe for Dask: a pyramid level of a slide (or of a converted OME-Zarr) as a lazy dask
array chunked on the level's own tile grid, each chunk read by the C library with the GIL
released (docs/distributed.md).

    import slidepipe.dask
    level = slidepipe.dask.from_slide("slide.svs", 0)          # (height, width, 3) uint8
    edges = level.map_overlap(my_filter, depth=(8, 8, 0), boundary="reflect")

A chunk is one stored tile (the last row and column are cut at the level's edge), so a chunk
reads each tile once and neighbouring chunks never decode the same tile twice. The task holds
only the path and the level, never an open handle: every worker process (threads, a
LocalCluster, a distributed cluster) opens the slide once, on its first chunk, and keeps it, so
its tile cache serves all the chunks that worker reads. ``dask`` is imported only when this
module is.
"""

import os
import threading

import numpy as np

__all__ = ["from_slide", "read_chunk"]

_SLIDES = {}
_SLIDES_LOCK = threading.Lock()

# A level stored without tiles (strips, or one image) is cut into chunks of this side.
_UNTILED_CHUNK = 1024


def _dask_array():
    try:
        import dask.array as da
    except ImportError as e:
        raise ImportError("slidepipe.dask needs dask: pip install 'dask[array]' "
                          "(or slidepipe[dask])") from e
    return da


def _slide(path, mpp):
    """This process's open Slide for (path, mpp), opened on first use."""
    from . import Slide

    key = (path, mpp)
    with _SLIDES_LOCK:
        slide = _SLIDES.get(key)
        if slide is None:
            slide = _SLIDES[key] = Slide(path, mpp=mpp)
        return slide


def read_chunk(path, level, x, y, width, height, *, rgb=True, mpp=None):
    """Pixels (height, width, 3 or 4) of `level` whose top-left is (x, y) in that level's own
    pixels, read through this process's handle on the slide."""
    slide = _slide(path, mpp)
    ds = slide.levels[level].downsample
    return slide.read_region((_level0(x, ds), _level0(y, ds)), level, (width, height), rgb=rgb)


def _level0(v, ds):
    """The least level-0 coordinate that the library maps back to level pixel v (it takes
    floor(x0 / downsample)); rounding v * ds would land a pixel short where the downsample is
    not whole (2.00051)."""
    x0 = int(np.ceil(v * ds))
    while np.floor(x0 / ds) < v:
        x0 += 1
    while x0 > 0 and np.floor((x0 - 1) / ds) >= v:
        x0 -= 1
    return x0


def _chunk_sides(lv):
    def side(tile, full):
        return tile if 0 < tile <= 8192 and tile < full else min(full, _UNTILED_CHUNK)
    return side(lv.tile_width, lv.width), side(lv.tile_height, lv.height)


def _runs(total, step):
    return tuple(min(step, total - start) for start in range(0, total, step))


def from_slide(path, level=0, *, rgb=True, mpp=None, chunks=None):
    """Level `level` of the slide at `path` (any format slidepipe.open reads, OME-Zarr
    included) as a dask array (height, width, 3) uint8 (4, straight RGBA, with rgb=False),
    chunked on the level's tile grid unless `chunks` (height, width) says otherwise. Nothing is
    read until it is computed. Raises what slidepipe.open raises for a file it cannot open."""
    from . import Slide

    da = _dask_array()
    path = os.fspath(path)
    with Slide(path, mpp=mpp) as slide:  # the header now, so a bad path fails here
        if not 0 <= int(level) < len(slide.levels):
            raise ValueError(f"{path} has {len(slide.levels)} levels; level {level} was asked")
        lv = slide.levels[int(level)]
    cw, ch = _chunk_sides(lv) if chunks is None else (int(chunks[1]), int(chunks[0]))
    if cw < 1 or ch < 1:
        raise ValueError("chunks must be positive")
    bands = 3 if rgb else 4
    grid = (_runs(lv.height, ch), _runs(lv.width, cw), (bands,))
    mpp_pair = None if mpp is None else (tuple(mpp) if np.ndim(mpp) else (mpp, mpp))

    def block(block_info=None):
        (y0, y1), (x0, x1), _ = block_info[None]["array-location"]
        return read_chunk(path, int(level), x0, y0, x1 - x0, y1 - y0, rgb=rgb, mpp=mpp_pair)

    from dask.base import tokenize
    # A local file's size and time in the name, so that a changed file is a new array.
    stat = os.stat(path) if os.path.exists(path) else None
    name = "slidepipe-" + tokenize(path, int(level), rgb, mpp_pair, grid,
                                   None if stat is None else (stat.st_mtime_ns, stat.st_size))
    return da.map_blocks(block, chunks=grid, dtype=np.uint8, name=name,
                         meta=np.empty((0, 0, bands), dtype=np.uint8))
