"""Tile quality control: blur, pen ink, folds and background per tile (docs/qc.md).

    import slidepipe
    with slidepipe.open("slide.svs") as slide:
        tiles = slide.tissue_tiles(256)
        qc = slidepipe.tile_qc(slide, tiles, 256, threads=4)
        keep = slidepipe.qc_filter(tiles, qc, max_pen=0.05, min_blur=50, max_fold=0.6)
        tiles = tiles[keep]

tile_qc wraps sp_tile_qc_compute: the scores do not depend on the thread count and are computed
with the GIL released. qc_filter turns them into a boolean mask over the tiles, for a sampler.
"""

import numpy as np

from . import _core

__all__ = ["QC_DTYPE", "QC_THRESHOLDS", "tile_qc", "qc_filter"]

# One tile's scores, the layout of sp_tile_qc (seven float64).
QC_DTYPE = np.dtype([("blur", "<f8"), ("pen", "<f8"), ("pen_blue", "<f8"), ("pen_green", "<f8"),
                     ("pen_black", "<f8"), ("fold", "<f8"), ("background", "<f8")])

# The thresholds docs/qc.md measured on synthetic slides with artefacts: a tile is flagged as
# pen when pen > 0.05, blurred when blur < 50, folded when fold > 0.6.
QC_THRESHOLDS = {"max_pen": 0.05, "min_blur": 50.0, "max_fold": 0.6, "max_background": None}

_C_TILE = np.dtype([("x", "<i8"), ("y", "<i8"), ("tissue", "<f8")])  # sp_tile


def _c_tiles(tiles):
    """sp_tile records from a structured array with x and y fields, or an (n, 2) array."""
    tiles = np.asarray(tiles)
    out = np.zeros(len(tiles), dtype=_C_TILE)
    if tiles.dtype.names is not None:
        out["x"], out["y"] = tiles["x"], tiles["y"]
    else:
        if tiles.size and (tiles.ndim != 2 or tiles.shape[1] != 2):
            raise ValueError("tiles must have x and y fields or be an (n, 2) array of (x, y)")
        if tiles.size:
            out["x"], out["y"] = tiles[:, 0], tiles[:, 1]
    return out


def tile_qc(slide, tiles, size, level=0, threads=0):
    """The QC scores of each tile: a structured array of QC_DTYPE aligned with ``tiles``.

    ``slide`` is a slidepipe Slide; ``tiles`` a structured array with x and y fields (the
    level-0 top-left, as Slide.tissue_tiles returns) or an (n, 2) array; ``size`` the tile side
    in pixels of ``level``. ``threads`` <= 0 uses every core; the result is the same for any."""
    core = getattr(slide, "_core", slide)
    c_tiles = _c_tiles(tiles)
    out = np.zeros(len(c_tiles), dtype=QC_DTYPE)
    _core.tile_qc(core, c_tiles, out, int(level), int(size), int(threads))
    return out


def qc_filter(tiles, qc, max_pen=None, min_blur=None, max_fold=None, max_background=None):
    """A boolean mask over ``tiles``: True where a tile passes every limit given (None: no
    limit): pen <= max_pen, blur >= min_blur, fold <= max_fold, background <= max_background.
    ``qc`` is tile_qc's result for the same tiles."""
    qc = np.asarray(qc)
    if len(qc) != len(tiles):
        raise ValueError(f"qc has {len(qc)} rows for {len(tiles)} tiles")
    keep = np.ones(len(qc), dtype=bool)
    if max_pen is not None:
        keep &= qc["pen"] <= max_pen
    if min_blur is not None:
        keep &= qc["blur"] >= min_blur
    if max_fold is not None:
        keep &= qc["fold"] <= max_fold
    if max_background is not None:
        keep &= qc["background"] <= max_background
    return keep
