"""stores.py — writing and checking OME-Zarr stores from Python: convert a slide into a pyramid,
process a level with an op, verify a store against its manifest. Each is one library call with the
GIL released (sp_convert_to_zarr, sp_process_to_zarr, sp_zarr_verify; docs/zarr.md and
docs/ops.md define what they write), so other Python threads go on meanwhile. Outputs may be
folders or s3:// and gs:// prefixes, and verify takes http(s):// stores too (docs/remote.md).

Options left at None take the library's defaults, so a call with the same options as a
`slidepipe convert` or `slidepipe process` command writes the same store, with the same dataset
hash.
"""

from __future__ import annotations

import os
from typing import Callable, NamedTuple

from . import _core

__all__ = ["convert", "process", "verify", "VerifyResult"]

_FORMATS = {"ome-zarr-0.4": _core.OME_ZARR_04, "ome-zarr-0.5": _core.OME_ZARR_05}
_CODECS = _core.CODECS  # name -> value, the library's list
_LAYOUTS = {"cyx": _core.LAYOUT_CYX, "yxc": _core.LAYOUT_YXC}
_MODES = {"tiled": _core.MODE_TILED, "global": _core.MODE_GLOBAL}
_DEVICES = {"cpu": _core.DEVICE_CPU, "cuda": _core.DEVICE_CUDA}
_DTYPES = {"op": _core.DTYPE_OP, "uint8": _core.DTYPE_UINT8}

Progress = Callable[[int, int], object]


class VerifyResult(NamedTuple):
    intact: bool
    dataset_hash: str
    problems: list  # [(path, "missing" | "changed"), ...]


def _named(what, table, value):
    if value not in table:
        raise ValueError(f"bad {what} {value!r} (one of {', '.join(table)})")
    return table[value]


def _pairs(spec):
    """[(option id, value)] for the options given (not None), names mapped to their values."""
    out = []
    for option, value, table, what in spec:
        if value is None:
            continue
        if table is not None:
            value = _named(what, table, value)
        out.append((option, int(value)))
    return out


def _with_slide(slide, job):
    """Run job(core slide) on a Slide, or on a path opened and closed here."""
    from . import Slide

    if isinstance(slide, Slide):
        return job(slide._core)
    with Slide(slide) as opened:
        return job(opened._core)


def convert(slide, out, *, format=None, chunk=None, codec=None, codec_level=None, shard=None,
            levels=None, layout=None, threads=None, resume=False,
            progress: Progress | None = None) -> str:
    """Write `slide` (a Slide or a path) as an OME-Zarr pyramid at `out` (a folder or an s3:// or
    gs:// prefix) and return its dataset hash. format "ome-zarr-0.4" (default) or "ome-zarr-0.5";
    chunk 256..4096 (512); codec "zstd" (default), "blosc-lz4", "blosc-zstd", "gzip" or "none",
    with codec_level; shard (chunks per shard side, ome-zarr-0.5); levels (0: down to one chunk);
    layout "cyx" (default) or "yxc"; threads (0: all cores); resume=True completes an interrupted
    conversion. progress(done, total) is called as chunks are written. A Slide opened with
    apply_icc=True is written converted to sRGB, and the store records it (slidepipe.icc in the
    group attributes, docs/zarr.md), as `slidepipe convert --icc` does."""
    spec = [(_core.CONVERT_FORMAT, format, _FORMATS, "format"),
            (_core.CONVERT_CHUNK, chunk, None, None),
            (_core.CONVERT_CODEC, codec, _CODECS, "codec"),
            (_core.CONVERT_LEVEL, codec_level, None, None),
            (_core.CONVERT_SHARD, shard, None, None),
            (_core.CONVERT_LEVELS, levels, None, None),
            (_core.CONVERT_LAYOUT, layout, _LAYOUTS, "layout"),
            (_core.CONVERT_THREADS, threads, None, None),
            (_core.CONVERT_RESUME, 1 if resume else None, None, None)]
    pairs = _pairs(spec)
    return _with_slide(slide, lambda s: _core.convert(s, os.fspath(out), pairs, progress))


def process(slide, out, op, *, level=None, chunk=None, codec=None, codec_level=None, format=None,
            threads=None, in_flight=None, mode=None, device=None, dtype=None,
            progress: Progress | None = None) -> str:
    """Run `op` ("grey", "od", "sobel", "gaussian:SIGMA" or "macenko", docs/ops.md) over a level
    of `slide` (a Slide or a path) and write the result as OME-Zarr at `out`; returns the dataset
    hash. mode "tiled" (default, bounded memory) or "global"; device "cpu" or "cuda"; dtype "op"
    (default, the op's own type) or "uint8" (a float op's values rounded and clipped to 0..255);
    the other options as `slidepipe process` takes them."""
    spec = [(_core.PROCESS_LEVEL, level, None, None),
            (_core.PROCESS_CHUNK, chunk, None, None),
            (_core.PROCESS_CODEC, codec, _CODECS, "codec"),
            (_core.PROCESS_CODEC_LEVEL, codec_level, None, None),
            (_core.PROCESS_FORMAT, format, _FORMATS, "format"),
            (_core.PROCESS_THREADS, threads, None, None),
            (_core.PROCESS_IN_FLIGHT, in_flight, None, None),
            (_core.PROCESS_MODE, mode, _MODES, "mode"),
            (_core.PROCESS_DEVICE, device, _DEVICES, "device"),
            (_core.PROCESS_DTYPE, dtype, _DTYPES, "dtype")]
    pairs = _pairs(spec)
    return _with_slide(slide, lambda s: _core.process(s, os.fspath(out), str(op), pairs, progress))


def verify(store) -> VerifyResult:
    """Re-hash every file the manifest of a converted store (a folder, or an http(s)://, s3:// or
    gs:// prefix) lists. An unfinished store (no manifest or marker) raises SlidepipeError."""
    dataset_hash, problems = _core.verify(os.fspath(store))
    return VerifyResult(not problems, dataset_hash, problems)
