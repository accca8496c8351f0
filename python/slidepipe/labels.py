"""Annotations as training labels: QuPath's GeoJSON or ASAP's XML, painted onto label maps and
turned into one label per patch or a mask per patch (docs/labels.md defines every rule).

    import slidepipe
    from slidepipe.labels import patch_labels, mask_patches
    ann = slidepipe.Annotations.load("slide.geojson")
    ann.classes                                   # ["background", "tumor", "stroma", ...]
    lab = ann.rasterize(downsample=16)            # (h, w) uint8, 0 = background
    y = patch_labels(lab, 16, tiles_xy, 224, rule="majority")   # one class index per patch
    masks = mask_patches(ann, tiles_xy, 224, downsample=1)      # (N, 224, 224) uint8

A label-map pixel stands for its centre: pixel (i, j) of a map of downsample d whose top-left is
level-0 (x, y) is the point (x + (i + 0.5) d, y + (j + 0.5) d), labelled by the last feature in
file order whose polygon contains it (even-odd over the polygon's rings, so holes cut out).
Painting is the C library's, with the GIL released.
"""

import math

import numpy as np

from . import _core

__all__ = ["Annotations", "patch_labels", "mask_patches"]


class Annotations:
    """An annotation file's features (areas only; points and lines are counted in ``skipped``).

    ``classes[k]`` is the name of label k: ``classes[0]`` is "background", then the class names
    in the order they first appear in the file. ``feature_classes`` holds each kept feature's
    label, in file order. ``bounds`` is (x_min, y_min, x_max, y_max) of all vertices in level-0
    pixels, or None when no feature was kept. Pickles by path (reloaded on unpickling)."""

    __slots__ = ("_capsule", "path", "classes", "feature_classes", "skipped", "bounds")

    def __init__(self, path, capsule):
        self.path = path
        self._capsule = capsule
        classes, features, self.skipped, self.bounds = _core.annotations_info(capsule)
        self.classes = ["background", *classes]
        self.feature_classes = features

    @classmethod
    def load(cls, path):
        """Read a GeoJSON (QuPath) or ASAP XML file, told apart by content. Raises
        SlidepipeError for an unreadable file or invalid geometry; the message names the file
        and the feature."""
        path = str(path) if not isinstance(path, (str, bytes)) else path
        return cls(path, _core.annotations_load(path))

    def __reduce__(self):
        return (Annotations.load, (self.path,))

    def __repr__(self):
        return (f"Annotations({self.path!r}, {len(self.feature_classes)} features, "
                f"classes={self.classes[1:]}, skipped={self.skipped})")

    def _paint(self, out, downsample, x, y):
        h, w = out.shape
        _core.annotations_rasterize(self._capsule, out, float(downsample), float(x), float(y),
                                    w, h)

    def rasterize(self, downsample=1.0, x=0, y=0, width=None, height=None):
        """The label map of a window: (height, width) uint8 whose pixel (i, j) is the label at
        level-0 point (x + (i + 0.5) * downsample, y + (j + 0.5) * downsample). ``width`` and
        ``height`` default to reaching the annotations' right and bottom bounds from (x, y)."""
        usable = isinstance(downsample, (int, float)) and math.isfinite(downsample) \
            and downsample > 0  # otherwise the library refuses it, whatever the size
        if (width is None or height is None) and not usable:
            width, height = width or 0, height or 0
        elif width is None or height is None:
            bx, by = (self.bounds[2], self.bounds[3]) if self.bounds is not None else (x, y)
            if width is None:
                width = max(0, math.ceil((bx - x) / downsample))
            if height is None:
                height = max(0, math.ceil((by - y) / downsample))
        out = np.empty((int(height), int(width)), np.uint8)
        self._paint(out, downsample, x, y)
        return out


def _tiles(tiles_xy):
    t = np.asarray(tiles_xy, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != 2:
        t = t.reshape(-1, 2)
    return t


def patch_labels(label_map, map_downsample, tiles_xy, patch_size_level0, rule="centre",
                 map_origin=(0, 0)):
    """One label per patch from a label map (from ``Annotations.rasterize``).

    Map pixel (i, j) covers level-0 [ox + i d, ox + (i + 1) d) x [oy + j d, oy + (j + 1) d), with
    d = ``map_downsample`` and (ox, oy) = ``map_origin``; patch k covers level-0
    [x, x + s) x [y, y + s) with (x, y) = ``tiles_xy[k]`` and s = ``patch_size_level0``.

    - ``rule="centre"``: the label of the map pixel holding the patch's centre (x + s/2, y + s/2);
      0 when the centre is off the map.
    - ``rule="majority"``: the most frequent label among the map pixels whose centres lie in the
      patch, background included, a pixel off the map counting as background; ties go to the
      smaller label. A patch holding no map pixel centre (smaller than a map pixel) falls back
      to the centre rule.

    Returns an int64 array of N labels."""
    lab = np.asarray(label_map)
    if lab.ndim != 2:
        raise ValueError("label_map must be a 2-D array")
    if rule == "center":
        rule = "centre"
    if rule not in ("centre", "majority"):
        raise ValueError(f"rule must be 'centre' or 'majority', not {rule!r}")
    d = float(map_downsample)
    s = float(patch_size_level0)
    if not (d > 0 and s > 0 and math.isfinite(d) and math.isfinite(s)):
        raise ValueError("map_downsample and patch_size_level0 must be positive")
    t = _tiles(tiles_xy)
    ox, oy = float(map_origin[0]), float(map_origin[1])
    h, w = lab.shape
    out = np.zeros(len(t), np.int64)
    ci = np.floor((t[:, 0] + s / 2 - ox) / d)
    cj = np.floor((t[:, 1] + s / 2 - oy) / d)
    on = (ci >= 0) & (ci < w) & (cj >= 0) & (cj < h)
    out[on] = lab[cj[on].astype(np.int64), ci[on].astype(np.int64)]
    if rule == "centre":
        return out
    # Map pixel i's centre ox + (i + 0.5) d lies in [x, x + s) for i in [i0, i1).
    i0 = np.ceil((t[:, 0] - ox) / d - 0.5).astype(np.int64)
    i1 = np.ceil((t[:, 0] + s - ox) / d - 0.5).astype(np.int64)
    j0 = np.ceil((t[:, 1] - oy) / d - 0.5).astype(np.int64)
    j1 = np.ceil((t[:, 1] + s - oy) / d - 0.5).astype(np.int64)
    for k in range(len(t)):
        total = max(0, i1[k] - i0[k]) * max(0, j1[k] - j0[k])
        if total == 0:
            continue  # the centre rule's label stands
        win = lab[max(j0[k], 0):max(min(j1[k], h), 0), max(i0[k], 0):max(min(i1[k], w), 0)]
        counts = np.bincount(win.ravel(), minlength=int(lab.max(initial=0)) + 1)
        counts[0] += total - win.size
        out[k] = int(np.argmax(counts))  # the first maximum: ties to the smaller label
    return out


def mask_patches(annotations, tiles_xy, size, downsample=1.0):
    """Label masks aligned with patches read at ``downsample``: (N, size, size) uint8 where
    pixel (i, j) of patch k covers level-0 [x + i d, x + (i + 1) d) x [y + j d, y + (j + 1) d)
    and takes the label at its centre, (x, y) = ``tiles_xy[k]`` (a patch read with
    ``read_region((x, y), level, (size, size))`` at a level of downsample d lines up)."""
    t = _tiles(tiles_xy)
    size = int(size)
    if size < 0:
        raise ValueError("size must be 0 or more")
    out = np.empty((len(t), size, size), np.uint8)
    for k in range(len(t)):
        annotations._paint(out[k], downsample, t[k, 0], t[k, 1])
    return out
