"""`slidepipe process --op reinhard`: the level Reinhard-normalized from the slide's own CIELAB
statistics to the reference statistics (docs/stains.md).

Oracles from the same run: the Python binding of the same build (Slide.reinhard_stats and
slidepipe.reinhard_normalize on the level as `slidepipe region` reads it) must give the same bytes;
a float64 numpy evaluation of the definition must agree within +-1 with at least 99.9% exact. The
statistics in the store's attributes must be the binding's, the tile-wise and global runs must
have the same hash, and a slide without tissue must fail with nothing written.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

HASH_LINE = re.compile(r"dataset_hash ([0-9a-f]{64})\n")
RGB_TO_XYZ = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169],
                       [0.019334, 0.119193, 0.950227]])
WHITE = np.array([0.95047, 1.0, 1.08883])


@pytest.fixture(scope="module")
def binding(slidepipe_bin):
    """The binding of the same build; None in the sanitizer run, whose extension a stock python
    cannot load without the sanitizer's runtime preloaded (the numpy oracle still runs there)."""
    sys.path.insert(0, str(Path(slidepipe_bin).parent / "python"))
    try:
        import slidepipe
    except ImportError:
        if os.environ.get("SLIDEPIPE_SANITIZED"):
            return None
        raise
    return slidepipe


def describe(proc) -> str:
    return (f"command: {' '.join(map(str, proc.args))}\nreturncode: {proc.returncode}\n"
            f"stderr: {proc.stderr[-2000:]!r}\nstdout: {proc.stdout[:500]!r}")


def reinhard_numpy(rgb, src, tgt):
    v = rgb.astype(np.float64) / 255.0
    lin = np.where(v > 0.04045, ((v + 0.055) / 1.055) ** 2.4, v / 12.92)
    t = (lin @ RGB_TO_XYZ.T) / WHITE
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16.0 / 116.0)
    lab = np.stack([116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]),
                    200.0 * (f[..., 1] - f[..., 2])], axis=-1)
    lab = (lab - np.array(src["mean"])) / np.array(src["std"]) * np.array(tgt["std"]) + \
        np.array(tgt["mean"])
    fy = (lab[..., 0] + 16.0) / 116.0
    f = np.stack([lab[..., 1] / 500.0 + fy, fy, fy - lab[..., 2] / 200.0], axis=-1)
    xyz = np.where(f > 0.2068966, f ** 3, (f - 16.0 / 116.0) / 7.787) * WHITE
    lin = xyz @ np.linalg.inv(RGB_TO_XYZ).T
    s = np.where(lin > 0.0031308, 1.055 * np.abs(lin) ** (1 / 2.4) - 0.055, 12.92 * lin)
    return np.floor(255.0 * np.clip(s, 0.0, 1.0) + 0.5).astype(np.uint8)


def process(run, slide, out, *args) -> str:
    proc = run(["process", slide, out, "--op", "reinhard", *args], timeout=300)
    assert proc.returncode == 0, describe(proc)
    m = HASH_LINE.fullmatch(proc.stdout)
    assert m, describe(proc)
    return m.group(1)


def level_rgb(info, read_region, slide, level) -> np.ndarray:
    lv = info(slide)["levels"][level]
    rgba = read_region(slide, level, 0, 0, lv["width"], lv["height"]).astype(np.int64)
    a = rgba[..., 3:4]
    return ((rgba[..., :3] * a + 255 * (255 - a) + 127) // 255).astype(np.uint8)


@pytest.mark.parametrize("slide,level,chunk", [("aperio/CMU-1-Small-Region.svs", 0, 333),
                                               ("aperio/tcga-cr-7395-01a-01-ts1.svs", 1, 256)])
def test_process_reinhard(run, info, read_region, binding, testdata, tmp_path, monkeypatch, slide,
                          level, chunk):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = testdata / slide
    tiled, glob = tmp_path / "tiled.zarr", tmp_path / "global.zarr"
    h_tiled = process(run, path, tiled, "--level", level, "--chunk", chunk)
    h_global = process(run, path, glob, "--level", level, "--chunk", chunk, "--mode", "global")
    assert h_tiled == h_global
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(tiled), mode="r")
        out, attrs = g["0"][:], g.attrs.asdict()
    op = attrs["slidepipe"]["op"]
    assert op["name"] == "reinhard" and op["halo"] == 0 and op["dtype"] == "uint8"
    src, tgt = op["parameters"]["source"], op["parameters"]["target"]
    assert tgt["mean"] == [49.2844, 27.8775, -12.0771] and tgt["std"] == [19.5856, 12.138, 8.29]
    rgb = level_rgb(info, read_region, path, level)
    got = np.moveaxis(out, 0, -1)
    if binding is not None:
        with binding.open(str(path)) as s:
            stats = s.reinhard_stats(cache=False)
        assert tuple(src["mean"]) == stats.mean and tuple(src["std"]) == stats.std
        assert src["pixels"] == stats.pixels
        ref = binding.ReinhardStats.reference()
        assert tuple(tgt["mean"]) == ref.mean and tuple(tgt["std"]) == ref.std
        want = binding.reinhard_normalize(rgb.copy(), stats, ref)
        assert np.array_equal(got, want)
    exact = reinhard_numpy(rgb, src, tgt)
    diff = np.abs(got.astype(np.int16) - exact)
    assert diff.max() <= 1 and np.mean(diff == 0) >= 0.999


def test_blank_slide_fails_cleanly(run, tmp_path):
    white = tmp_path / "white.tif"
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(white, np.full((512, 512, 3), 255, np.uint8), tile=(256, 256),
                     photometric="rgb")
    out = tmp_path / "o.zarr"
    proc = run(["process", white, out, "--op", "reinhard"])
    assert proc.returncode == 1, describe(proc)
    assert "too few tissue pixels" in proc.stderr
    assert not out.exists()


def test_unknown_op_lists_reinhard(run, tmp_path):
    proc = run(["process", tmp_path / "x.svs", tmp_path / "o.zarr", "--op", "reinhard:2"])
    assert proc.returncode != 0 and "takes no parameter" in proc.stderr, describe(proc)
