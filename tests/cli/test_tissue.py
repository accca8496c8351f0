"""`slidepipe tissue` and `slidepipe tiles`: tissue masks and foreground tile lists.

Oracles, computed in the same run from the image `tissue --image` writes (the RGB image the mask
is computed from): the chroma max - min, Otsu's threshold written out in numpy from its
definition (docs/tissue.md), the minimum chroma, and the clean-up through scipy.ndimage
(binary_opening, then binary_closing, 3x3 square, border_value 0); the mask `tissue -o` writes
must equal that bit for bit. The tile list of `tiles --json` is recomputed in numpy from the same
mask: grid positions, level-0 origins, the mask pixels whose centres lie inside each tile
(a summed-area table), and the pixel holding the tile's centre when none does. Real slides from
the shared test data, a synthetic H&E slide and an all-white slide made here with tifffile.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

ndi = pytest.importorskip("scipy.ndimage")
Image = pytest.importorskip("PIL.Image")

MIN_CHROMA = 8  # SP_TISSUE_MIN_CHROMA (docs/tissue.md)
DEFAULT_SIDE = 2048


def describe(proc) -> str:
    return (
        f"command: {' '.join(map(str, proc.args))}\nreturncode: {proc.returncode}\n"
        f"stderr: {proc.stderr[-2000:]!r}\nstdout: {proc.stdout[:500]!r}"
    )


def ok(run, args) -> str:
    proc = run(args)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == "", describe(proc)
    return proc.stdout


# ---- the definitions, in numpy ---------------------------------------------------------------


def otsu(hist: np.ndarray) -> int:
    """The t in 0..254 maximising w0 * w1 * (mu0 - mu1)^2 (class 0: c <= t), smallest on ties,
    0 where a class is empty: the same double expressions as the library evaluates."""
    h = hist.astype(np.int64)
    total = int(h.sum())
    if total == 0:
        return 0
    n0 = np.cumsum(h)[:255]
    s0 = np.cumsum(np.arange(256, dtype=np.float64) * h)[:255]
    n1 = total - n0
    ssum = float((np.arange(256, dtype=np.float64) * h).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        w0, w1 = n0 / float(total), n1 / float(total)
        d = s0 / n0 - (ssum - s0) / n1
        v = w0 * w1 * (d * d)
    v = np.where((n0 > 0) & (n1 > 0), v, 0.0)
    return int(np.argmax(v))


def mask_geometry(w0: int, h0: int, side: int) -> tuple[float, int, int]:
    d = max(1.0, max(w0, h0) / side)
    w = min(max(math.ceil(w0 / d), 1), side)
    h = min(max(math.ceil(h0 / d), 1), side)
    return d, w, h


def expected_mask(rgb: np.ndarray) -> tuple[np.ndarray, int]:
    a = rgb.astype(np.int16)
    chroma = (a.max(axis=2) - a.min(axis=2)).astype(np.uint8)
    threshold = max(otsu(np.bincount(chroma.ravel(), minlength=256)), MIN_CHROMA)
    raw = chroma > threshold
    square = np.ones((3, 3), dtype=bool)
    opened = ndi.binary_opening(raw, structure=square)
    return ndi.binary_closing(opened, structure=square), threshold


def level0_floor(lx: int, ds: float) -> int:
    """The smallest integer level-0 coordinate X with floor(X / ds) == lx."""
    x = math.ceil(lx * ds)
    while math.floor((x - 1) / ds) >= lx:
        x -= 1
    while math.floor(x / ds) < lx:
        x += 1
    return x


def axis_cover(extent, size, stride, ds, dm, mask_extent):
    """Per grid position along one axis: level-0 origin, first and end mask pixel whose centre
    lies inside, and the mask pixel holding the tile's centre."""
    positions = range(0, extent - size + 1, stride) if extent >= size else range(0)
    centres = (np.arange(mask_extent, dtype=np.float64) + 0.5) * dm
    out = []
    for lx in positions:
        x0 = level0_floor(lx, ds)
        x1 = float(x0) + size * ds
        lo = int(np.searchsorted(centres, float(x0), side="left"))
        hi = int(np.searchsorted(centres, x1, side="left"))
        c = math.floor((float(x0) + size * ds / 2.0) / dm)
        out.append((x0, lo, hi, min(max(c, 0), mask_extent - 1)))
    return out


def expected_tiles(mask, dm, level_w, level_h, ds, size, stride, min_tissue):
    sat = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), dtype=np.int64)
    sat[1:, 1:] = mask.astype(np.int64).cumsum(0).cumsum(1)
    xs = axis_cover(level_w, size, stride, ds, dm, mask.shape[1])
    ys = axis_cover(level_h, size, stride, ds, dm, mask.shape[0])
    tiles = []
    for y0, ylo, yhi, yc in ys:
        for x0, xlo, xhi, xc in xs:
            if xlo < xhi and ylo < yhi:
                inside = sat[yhi, xhi] - sat[ylo, xhi] - sat[yhi, xlo] + sat[ylo, xlo]
                f = inside / ((xhi - xlo) * (yhi - ylo))
            else:
                f = 1.0 if mask[yc, xc] else 0.0
            if f >= min_tissue:
                tiles.append((x0, y0, f))
    return tiles


# ---- running the commands --------------------------------------------------------------------


def tissue(run, slide, tmp_path, *args):
    """`tissue --json -o --image`: the JSON, the mask (bool) and the image (RGB uint8)."""
    m, im = tmp_path / "mask.png", tmp_path / "image.png"
    out = ok(run, ["tissue", slide, "--json", "-o", m, "--image", im, *args])
    meta = json.loads(out)
    mask = np.asarray(Image.open(m))
    image = np.asarray(Image.open(im))
    assert mask.shape == (meta["height"], meta["width"], 4) and mask.dtype == np.uint8
    assert set(np.unique(mask[..., :3]).tolist()) <= {0, 255}
    assert (mask[..., 3] == 255).all() and (image[..., 3] == 255).all()
    assert (mask[..., 0] == mask[..., 1]).all() and (mask[..., 0] == mask[..., 2]).all()
    assert not list(tmp_path.glob("*.tmp-*")), "a temporary file was left behind"
    return meta, mask[..., 0] == 255, image[..., :3]


def tiles_json(run, slide, *args) -> dict:
    return json.loads(ok(run, ["tiles", slide, "--json", *args]))


def check_mask(run, info, slide, tmp_path, side=None):
    args = [] if side is None else ["--max-side", side]
    meta, mask, image = tissue(run, slide, tmp_path, *args)
    lv0 = info(slide)["levels"][0]
    d, w, h = mask_geometry(lv0["width"], lv0["height"], side or DEFAULT_SIDE)
    assert (meta["width"], meta["height"]) == (w, h)
    assert meta["downsample"] == pytest.approx(d, rel=1e-14)
    want, threshold = expected_mask(image)
    assert meta["threshold"] == threshold
    if not np.array_equal(mask, want):
        diff = np.argwhere(mask != want)
        pytest.fail(f"mask differs from scipy on {len(diff)} pixels, first (y, x) {diff[0]}")
    assert meta["tissue_fraction"] == pytest.approx(mask.mean(), abs=1e-12)
    return meta, mask


def check_tiles(run, info, slide, meta, mask, level, size, stride=None, min_tissue=None, side=None):
    args = ["--size", size, "--level", level]
    args += [] if stride is None else ["--stride", stride]
    args += [] if min_tissue is None else ["--min-tissue", min_tissue]
    args += [] if side is None else ["--max-side", side]
    got = tiles_json(run, slide, *args)
    lv = info(slide)["levels"][level]
    stride = stride or size
    min_tissue = 0.5 if min_tissue is None else float(min_tissue)
    want = expected_tiles(
        mask, meta["downsample"], lv["width"], lv["height"], lv["downsample"], size, stride,
        min_tissue,
    )
    assert (got["level"], got["size"], got["stride"]) == (level, size, stride)
    assert got["count"] == len(got["tiles"]) == len(want), (got["count"], len(want))
    for g, e in zip(got["tiles"], want):
        assert (g[0], g[1]) == (e[0], e[1])
        assert abs(g[2] - e[2]) <= 1e-9, (g, e)
    return got


# ---- cases -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synth_slide(run, tmp_path_factory):
    path = tmp_path_factory.mktemp("tissue") / "synth.tif"
    proc = run(["synth", path, "--size", 4096, "--seed", 7])
    assert proc.returncode == 0, describe(proc)
    return path


@pytest.fixture(scope="module")
def white_slide(tmp_path_factory):
    tifffile = pytest.importorskip("tifffile")
    path = tmp_path_factory.mktemp("tissue") / "white.tif"
    tifffile.imwrite(path, np.full((768, 1024, 3), 255, np.uint8), tile=(256, 256),
                     photometric="rgb")
    return path


# (slide, --max-side or None, [(level, size, stride, min_tissue)])
REAL = [
    ("aperio/CMU-1-Small-Region.svs", None, [(0, 256, 128, None), (0, 100, 77, "0")]),
    ("aperio/tcga-cr-7395-01a-01-ts1.svs", None, [(1, 224, None, "0.25")]),
    ("aperio/tcga-cr-7395-01a-01-ts1.svs", 777, [(0, 512, 300, "0.9")]),
    ("dicom/cmu-1-small-region", 512, [(2, 64, 32, "0.5"), (0, 3, 5, "0.01")]),
    # mask pixels of 6 level-0 pixels, 3-pixel tiles every 2: most tiles hold no mask centre
    ("generic-tiff/boxes.tiff", 50, [(0, 3, 2, "0"), (2, 8, 5, "1")]),
    ("generic-tiff/boxes.tiff", None, [(1, 16, 7, "0.5")]),
]


@pytest.mark.parametrize("rel,side,grids", REAL, ids=[f"{r[0]}-{r[1]}" for r in REAL])
def test_real_slides(run, info, testdata, tmp_path, rel, side, grids):
    slide = testdata / rel
    meta, mask = check_mask(run, info, slide, tmp_path, side)
    for level, size, stride, min_tissue in grids:
        check_tiles(run, info, slide, meta, mask, level, size, stride, min_tissue, side)


@pytest.mark.parametrize(
    "rel", ["aperio/CMU-1-Small-Region.svs", "aperio/tcga-cr-7395-01a-01-ts1.svs",
            "dicom/cmu-1-small-region"]
)
def test_he_slides_are_partly_tissue(run, testdata, rel):
    meta = json.loads(ok(run, ["tissue", testdata / rel, "--json"]))
    assert 0.05 < meta["tissue_fraction"] < 0.95, meta
    assert meta["threshold"] >= MIN_CHROMA


def test_synthetic_slide(run, info, synth_slide, tmp_path):
    meta, mask = check_mask(run, info, synth_slide, tmp_path, 1000)  # downsample 4.096
    assert 0.05 < meta["tissue_fraction"] < 0.95, meta
    check_tiles(run, info, synth_slide, meta, mask, 1, 224, None, "0.3", 1000)
    check_tiles(run, info, synth_slide, meta, mask, 0, 512, 256, None, 1000)
    default = json.loads(ok(run, ["tissue", synth_slide, "--json"]))
    assert (default["width"], default["height"], default["downsample"]) == (2048, 2048, 2.0)


def test_plain_output_matches_json(run, synth_slide):
    args = ["--size", 300, "--level", 1, "--min-tissue", ".4", "--max-side", 512]
    js = tiles_json(run, synth_slide, *args)
    lines = ok(run, ["tiles", synth_slide, *args]).splitlines()
    assert len(lines) == js["count"] > 0
    for line, (x, y, f) in zip(lines, js["tiles"]):
        assert line == f"{x} {y} {f:.4f}"
    text = ok(run, ["tissue", synth_slide, "--max-side", 512])
    meta = json.loads(ok(run, ["tissue", synth_slide, "--max-side", 512, "--json"]))
    assert text == (
        f"mask {meta['width']}x{meta['height']}, downsample {meta['downsample']:.4f}, "
        f"threshold {meta['threshold']}, tissue fraction {meta['tissue_fraction']:.4f}\n"
    )


def test_white_slide_has_no_tissue(run, info, white_slide, tmp_path):
    meta, mask = check_mask(run, info, white_slide, tmp_path)
    assert meta["tissue_fraction"] == 0 and meta["threshold"] == MIN_CHROMA and not mask.any()
    assert tiles_json(run, white_slide, "--size", 128)["count"] == 0
    assert ok(run, ["tiles", white_slide, "--size", 128]) == ""
    every = tiles_json(run, white_slide, "--size", 128, "--min-tissue", 0)
    assert every["count"] == 8 * 6 and all(t[2] == 0 for t in every["tiles"])


@pytest.mark.parametrize("side", [1, 2, 64])
def test_tiny_masks(run, info, synth_slide, tmp_path, side):
    """A mask of one or two pixels a side is all border, which the closing always clears."""
    meta, mask = check_mask(run, info, synth_slide, tmp_path, side)
    assert (meta["width"], meta["height"]) == (side, side)
    if side <= 2:
        assert meta["tissue_fraction"] == 0


def test_help(run):
    for cmd in ("tissue", "tiles"):
        proc = run([cmd, "--help"])
        assert proc.returncode == 0 and proc.stdout.startswith("usage: slidepipe " + cmd)


@pytest.mark.parametrize(
    "args,why",
    [
        (["tiles", "SLIDE"], "--size is required"),
        (["tiles", "SLIDE", "--size", "0"], "--size"),
        (["tiles", "SLIDE", "--size", "12x"], "--size"),
        (["tiles", "SLIDE", "--size", "64", "--stride", "0"], "--stride"),
        (["tiles", "SLIDE", "--size", "64", "--level", "-1"], "--level"),
        (["tiles", "SLIDE", "--size", "64", "--level", "9"], "level 9 does not exist"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "1.5"], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "-0.1"], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "abc"], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "nan"], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "0x1p-1"], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", ""], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--min-tissue", "0.5 "], "--min-tissue"),
        (["tiles", "SLIDE", "--size", "64", "--max-side", "0"], "--max-side"),
        (["tiles", "SLIDE", "--size", "64", "--bogus"], "unknown option"),
        (["tiles", "--size", "64"], "exactly one SLIDE"),
        (["tissue", "SLIDE", "--max-side", "16385"], "--max-side"),
        (["tissue", "SLIDE", "-o", "mask.jpg"], "-o needs a .png"),
        (["tissue", "SLIDE", "--image", "image.tif"], "--image needs a .png"),
        (["tissue", "SLIDE", "-o"], "needs a value"),
        (["tissue", "SLIDE", "SLIDE"], "exactly one SLIDE"),
    ],
)
def test_usage_errors(run, synth_slide, tmp_path, args, why):
    args = [synth_slide if a == "SLIDE" else a for a in args]
    args = [tmp_path / a if isinstance(a, str) and a.startswith(("mask.", "image.")) else a
            for a in args]
    proc = run(args)
    assert proc.returncode == 2, describe(proc)
    first = proc.stderr.splitlines()[0]
    assert first.startswith("slidepipe: ") and why in first, describe(proc)
    assert proc.stdout == "" and not list(tmp_path.iterdir()), "a usage error wrote output"


def test_runtime_errors(run, tmp_path):
    missing = tmp_path / "missing.svs"
    for args in (["tissue", missing], ["tiles", missing, "--size", 64]):
        proc = run(args)
        assert proc.returncode == 1, describe(proc)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("slidepipe: "), describe(proc)
    # an output folder that does not exist: one line, exit 1, nothing left behind
    proc = run(["tissue", "-o", tmp_path / "no" / "mask.png", missing])
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1, describe(proc)


def test_unwritable_output(run, synth_slide, tmp_path):
    proc = run(["tissue", synth_slide, "--max-side", 64, "-o", tmp_path / "no" / "mask.png"])
    assert proc.returncode == 1, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), describe(proc)
