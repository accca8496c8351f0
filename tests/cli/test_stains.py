"""`slidepipe stains` and `slidepipe process --op macenko`: Macenko stain estimation and
normalization (docs/stains.md).

Oracles, computed in the same run with numpy from the same pixels: the estimate from the image
the estimate reads (`slidepipe tissue --image` writes exactly that image, read with
sp_slide_read_region_scaled), through numpy.cov, numpy.linalg.eigh, numpy.percentile and
numpy.linalg.lstsq; the normalization of a whole level as `slidepipe region` reads it (RGBA
composited over white, as the engine's RGB8 read does), in float64. The estimate must match to
1e-6 (H, E) and 1e-6 relative (max_h, max_e); the normalized level within +-1 with at least
99.9% of the bytes exact (the two evaluations round differently only at half-integers). The
tile-wise and global runs must have the same dataset hash, and a slide without stain must fail
cleanly with nothing written.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
tifffile = pytest.importorskip("tifffile")
Image = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HASH_LINE = re.compile(r"dataset_hash ([0-9a-f]{64})\n")
REFERENCE_H = (0.5626, 0.7201, 0.4062)
REFERENCE_E = (0.2159, 0.8012, 0.5581)
REFERENCE_MAX = (1.9705, 1.0308)
SLIDES = [
    "aperio/CMU-1-Small-Region.svs",
    "aperio/tcga-cr-7395-01a-01-ts1.svs",
    "dicom/cmu-1-small-region",
    "synth",
]


def describe(proc) -> str:
    return (
        f"command: {' '.join(map(str, proc.args))}\nreturncode: {proc.returncode}\n"
        f"stderr: {proc.stderr[-2000:]!r}\nstdout: {proc.stdout[:500]!r}"
    )


@pytest.fixture(scope="module")
def synth_slide(run, tmp_path_factory) -> Path:
    """A synthetic H&E slide of 4096 x 4096 (five levels)."""
    path = tmp_path_factory.mktemp("stains") / "synth.tif"
    proc = run(["synth", path, "--size", 4096], timeout=120)
    assert proc.returncode == 0, describe(proc)
    return path


def slide_path(testdata, synth_slide, name) -> Path:
    return synth_slide if name == "synth" else testdata / name


# ---- the oracle --------------------------------------------------------------------------


def optical_density(rgb: np.ndarray) -> np.ndarray:
    return -np.log(np.maximum(rgb.reshape(-1, 3).astype(np.float64), 1) / 255.0)


def positive(v: np.ndarray) -> np.ndarray:
    return -v if v.sum() < 0 else v


def macenko(rgb: np.ndarray) -> dict:
    """Steps 2-7 of docs/stains.md in numpy."""
    od = optical_density(rgb)
    od = od[np.all(od >= 0.15, axis=1)]
    _, vecs = np.linalg.eigh(np.cov(od.T))  # ascending eigenvalues
    v1, v2 = positive(vecs[:, 2]), positive(vecs[:, 1])
    phi = np.arctan2(od @ v2, od @ v1)
    lo, hi = np.percentile(phi, [1, 99])
    a = positive((v1 * np.cos(lo) + v2 * np.sin(lo)) / np.linalg.norm(v1 * np.cos(lo) + v2 * np.sin(lo)))
    b = positive((v1 * np.cos(hi) + v2 * np.sin(hi)) / np.linalg.norm(v1 * np.cos(hi) + v2 * np.sin(hi)))
    h, e = (a, b) if a[0] > b[0] else (b, a)
    conc = np.linalg.lstsq(np.stack([h, e], axis=1), od.T, rcond=None)[0]
    max_h, max_e = np.percentile(conc, 99, axis=1)
    return {"h": h, "e": e, "max_h": max_h, "max_e": max_e, "pixels": len(od)}


def normalize(rgb: np.ndarray, src: dict, tgt: dict) -> np.ndarray:
    """Step 9 of docs/stains.md in float64: (H, W, 3) uint8."""
    od = optical_density(rgb)
    conc = np.linalg.lstsq(np.stack([src["h"], src["e"]], axis=1), od.T, rcond=None)[0]
    conc[0] *= tgt["max_h"] / src["max_h"]
    conc[1] *= tgt["max_e"] / src["max_e"]
    out = 255.0 * np.exp(-(np.stack([tgt["h"], tgt["e"]], axis=1) @ conc))
    out = np.floor(np.clip(out, 0, 255) + 0.5).astype(np.uint8)
    return out.T.reshape(rgb.shape)


def reference() -> dict:
    h, e = np.array(REFERENCE_H), np.array(REFERENCE_E)
    return {"h": h / np.linalg.norm(h), "e": e / np.linalg.norm(e), "max_h": REFERENCE_MAX[0],
            "max_e": REFERENCE_MAX[1]}


def estimate_image(run, path, tmp_path, max_side=None) -> np.ndarray:
    img = tmp_path / "image.png"
    extra = ["--max-side", max_side] if max_side else []
    proc = run(["tissue", path, "--image", img, *extra])
    assert proc.returncode == 0, describe(proc)
    rgba = np.asarray(Image.open(img).convert("RGBA"))
    assert np.all(rgba[..., 3] == 255), "the estimate's image of an opaque slide is opaque"
    return rgba[..., :3]


def stains_json(run, path, *args) -> dict:
    proc = run(["stains", path, "--json", *args])
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == ""
    return {k: np.array(v) if isinstance(v, list) else v for k, v in json.loads(proc.stdout).items()}


def check_close(got: dict, want: dict, what: str) -> None:
    for key in ("h", "e"):
        assert np.max(np.abs(got[key] - want[key])) < 1e-6, f"{what}: {key} {got[key]} vs {want[key]}"
    for key in ("max_h", "max_e"):
        assert abs(got[key] / want[key] - 1) < 1e-6, f"{what}: {key} {got[key]} vs {want[key]}"


# ---- the estimate --------------------------------------------------------------------------


@pytest.mark.parametrize("slide", SLIDES)
def test_estimate_equals_numpy(run, testdata, synth_slide, tmp_path, slide):
    path = slide_path(testdata, synth_slide, slide)
    got = stains_json(run, path)
    want = macenko(estimate_image(run, path, tmp_path))
    check_close(got, want, slide)
    assert got["pixels"] == want["pixels"]
    # H absorbs more red than E; both unit vectors with positive components here.
    assert got["h"][0] > got["e"][0]
    for key in ("h", "e"):
        assert abs(np.linalg.norm(got[key]) - 1) < 1e-12 and np.all(got[key] > 0)
    # The text form says the same, to six decimals.
    proc = run(["stains", path])
    assert proc.returncode == 0, describe(proc)
    assert f"{got['h'][0]:.6f} {got['h'][1]:.6f} {got['h'][2]:.6f}" in proc.stdout
    assert f"stained pixels: {got['pixels']}" in proc.stdout


def test_max_side(run, testdata, tmp_path):
    path = testdata / "aperio/CMU-1-Small-Region.svs"
    got = stains_json(run, path, "--max-side", 700)
    check_close(got, macenko(estimate_image(run, path, tmp_path, 700)), "--max-side 700")
    assert got["pixels"] < stains_json(run, path)["pixels"]


# ---- the op --------------------------------------------------------------------------------


def process(run, slide, out, *args) -> str:
    proc = run(["process", slide, out, "--op", "macenko", *args], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == ""
    m = HASH_LINE.fullmatch(proc.stdout)
    assert m, describe(proc)
    return m.group(1)


def read_array(path) -> tuple[np.ndarray, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="r")
        return g["0"][:], g.attrs.asdict()


def level_rgb(info, read_region, slide, level) -> np.ndarray:
    lv = info(slide)["levels"][level]
    rgba = read_region(slide, level, 0, 0, lv["width"], lv["height"]).astype(np.int64)
    a = rgba[..., 3:4]
    return ((rgba[..., :3] * a + 255 * (255 - a) + 127) // 255).astype(np.uint8)


# (slide, level, chunk): chunks that do not divide the level.
OP_CASES = [
    ("aperio/CMU-1-Small-Region.svs", 0, 333),
    ("dicom/cmu-1-small-region", 1, 256),
    ("synth", 1, 500),
]


@pytest.mark.parametrize("slide,level,chunk", OP_CASES, ids=[f"{c[0]}-L{c[1]}" for c in OP_CASES])
def test_process_macenko(run, info, read_region, testdata, synth_slide, tmp_path, slide, level, chunk):
    path = slide_path(testdata, synth_slide, slide)
    tiled, glob = tmp_path / "tiled.zarr", tmp_path / "global.zarr"
    h_tiled = process(run, path, tiled, "--level", level, "--chunk", chunk)
    h_global = process(run, path, glob, "--level", level, "--chunk", chunk, "--mode", "global")
    assert h_tiled == h_global, "tile-wise and global outputs differ (dataset hashes)"
    out, attrs = read_array(tiled)
    assert out.dtype == np.uint8 and out.shape[0] == 3
    op = attrs["slidepipe"]["op"]
    assert op["name"] == "macenko" and op["halo"] == 0 and op["dtype"] == "uint8"
    params = op["parameters"]
    # The stains in the attributes are the slide's estimate and the reference.
    est = stains_json(run, path)
    src = {k: np.array(v) if isinstance(v, list) else v for k, v in params["source"].items()}
    tgt = {k: np.array(v) if isinstance(v, list) else v for k, v in params["target"].items()}
    for key in ("h", "e", "max_h", "max_e", "pixels"):
        assert np.array_equal(src[key], est[key]), key
    check_close(tgt, reference(), "target")
    # The level normalized by numpy with those stains.
    rgb = level_rgb(info, read_region, path, level)
    want = normalize(rgb, src, tgt)
    got = np.moveaxis(out, 0, -1)
    assert got.shape == want.shape
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
    assert diff.max() <= 1, f"{slide}: off by {diff.max()}"
    exact = np.mean(diff == 0)
    assert exact >= 0.999, f"{slide}: only {exact:.5f} of the bytes exact"


def test_unstained_slide_fails_cleanly(run, tmp_path):
    white = tmp_path / "white.tif"
    tifffile.imwrite(white, np.full((1024, 1024, 3), 255, np.uint8), tile=(256, 256),
                     photometric="rgb")
    for args in (["stains", white], ["stains", white, "--json"]):
        proc = run(args)
        assert proc.returncode == 1, describe(proc)
        assert proc.stdout == ""
        assert re.fullmatch(r"slidepipe: too few stained pixels \(0\) to estimate stains from\n",
                            proc.stderr), describe(proc)
    out = tmp_path / "out.zarr"
    proc = run(["process", white, out, "--op", "macenko"])
    assert proc.returncode == 1, describe(proc)
    assert "too few stained pixels" in proc.stderr
    assert list(tmp_path.iterdir()) == [white], "nothing may be written"


@pytest.mark.parametrize(
    "args,why",
    [
        ([], "no slide"),
        (["a.svs", "b.svs"], "two slides"),
        (["{slide}", "--max-side"], "missing value"),
        (["{slide}", "--max-side", "0"], "max side below 1"),
        (["{slide}", "--max-side", "16385"], "max side above 16384"),
        (["{slide}", "--max-side", "12x"], "not a number"),
        (["{slide}", "--bogus"], "unknown option"),
    ],
)
def test_usage_errors(run, testdata, args, why):
    slide = str(testdata / "aperio/CMU-1-Small-Region.svs")
    proc = run(["stains", *[a.format(slide=slide) for a in args]])
    assert proc.returncode == 2, f"{why}\n{describe(proc)}"
    assert proc.stdout == ""
    assert proc.stderr.startswith("slidepipe: ") and "usage: slidepipe stains" in proc.stderr


def test_help_and_runtime_errors(run, tmp_path):
    proc = run(["stains", "--help"])
    assert proc.returncode == 0 and proc.stdout.startswith("usage: slidepipe stains")
    proc = run(["stains", tmp_path / "missing.svs"])
    assert proc.returncode == 1 and proc.stderr.startswith("slidepipe: ")
    assert proc.stderr.count("\n") == 1
    proc = run(["process", tmp_path / "x.svs", tmp_path / "o.zarr", "--op", "macenko:2"])
    assert proc.returncode == 2 and "takes no parameter" in proc.stderr
