"""`slidepipe process`: an op over a whole level, tile by tile with halos, into OME-Zarr.

Oracles, computed in the same run: scipy.ndimage (sobel, gaussian_filter with truncate 4.0, mode
'reflect') and numpy (optical density, BT.601 luma) on the whole level as `slidepipe region`
reads it (RGBA composited over white, as the RGB8 read the engine uses does), zarr-python 3
reading what was written, and the global mode (the whole level in memory, the op run once),
whose chunks and therefore dataset hash must be identical to the tile-wise run's.
Levels and chunk sizes are chosen so that tile corners and the level's edges fall in awkward
places: chunks that do not divide the level, levels with non-integer downsamples, a Gaussian
whose radius is larger than the level (scipy's reflection repeats).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
ndi = pytest.importorskip("scipy.ndimage")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HASH_LINE = re.compile(r"dataset_hash ([0-9a-f]{64})\n")
TOLERANCE = 0.01  # on the 0-255 scale (od: on its own scale, far below this)


def describe(proc) -> str:
    return (
        f"command: {' '.join(map(str, proc.args))}\nreturncode: {proc.returncode}\n"
        f"stderr: {proc.stderr[-2000:]!r}\nstdout: {proc.stdout[:500]!r}"
    )


def process(run, slide, out, op, *args) -> str:
    proc = run(["process", slide, out, "--op", op, *args], timeout=300)
    assert proc.returncode == 0, describe(proc)
    assert proc.stderr == "", f"process is quiet when stderr is not a terminal\n{describe(proc)}"
    m = HASH_LINE.fullmatch(proc.stdout)
    assert m, f"expected 'dataset_hash HEX'\n{describe(proc)}"
    return m.group(1)


def read_array(path) -> tuple[np.ndarray, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="r")
        attrs = g.attrs.asdict()
        return g["0"][:], attrs


def level_rgb(info, read_region, slide, level) -> np.ndarray:
    """The whole level as float64 RGB (H, W, 3), alpha composited over white like RGB8 reads."""
    lv = info(slide)["levels"][level]
    w, h = lv["width"], lv["height"]
    rgba = read_region(slide, level, 0, 0, w, h).astype(np.int64)
    a = rgba[..., 3:4]
    rgb = (rgba[..., :3] * a + 255 * (255 - a) + 127) // 255
    return rgb.astype(np.float64)


def expected(op: str, img: np.ndarray) -> np.ndarray:
    """The op's definition (docs/ops.md) through scipy/numpy, as (C, H, W)."""
    if op == "sobel":
        return np.stack(
            [
                np.hypot(
                    ndi.sobel(img[..., c], axis=0, mode="reflect"),
                    ndi.sobel(img[..., c], axis=1, mode="reflect"),
                )
                for c in range(3)
            ]
        )
    if op.startswith("gaussian:"):
        sigma = float(op.split(":", 1)[1])
        return np.stack(
            [ndi.gaussian_filter(img[..., c], sigma, truncate=4.0, mode="reflect") for c in range(3)]
        )
    if op == "od":
        return np.stack([-np.log(np.maximum(img[..., c], 1) / 255) for c in range(3)])
    if op == "grey":
        i = img.astype(np.int64)
        return ((299 * i[..., 0] + 587 * i[..., 1] + 114 * i[..., 2] + 500) // 1000)[None]
    raise ValueError(op)


def seam_mask(h: int, w: int, chunk: int, halo: int) -> np.ndarray:
    """Pixels within halo + 1 of a chunk boundary or of the level's edge."""
    near = max(halo, 1) + 1
    ys, xs = np.arange(h), np.arange(w)
    my = (np.minimum(ys % chunk, chunk - 1 - ys % chunk) < near) | (ys < near) | (ys >= h - near)
    mx = (np.minimum(xs % chunk, chunk - 1 - xs % chunk) < near) | (xs < near) | (xs >= w - near)
    return my[:, None] | mx[None, :]


@pytest.fixture(scope="module")
def synth_slide(run, tmp_path_factory) -> Path:
    """A synthetic H&E slide of 1000 x 1000 (levels 1000, 500, 250)."""
    path = tmp_path_factory.mktemp("process") / "synth.tif"
    proc = run(["synth", path, "--size", 1000, "--seed", 11])
    assert proc.returncode == 0, describe(proc)
    return path


# (slide, level, op, chunk): real slides from the shared test data and the synthetic one.
CASES = [
    ("aperio/CMU-1-Small-Region.svs", 0, "sobel", 100),  # 2220 x 2967, 240² JPEG tiles
    # the default chunk size (1024)
    ("aperio/CMU-1-Small-Region.svs", 0, "sobel", 1024),
    ("aperio/CMU-1-Small-Region.svs", 0, "gaussian:1.7", 333),
    ("generic-tiff/boxes.tiff", 0, "gaussian:0.6", 64),  # 300 x 250
    ("generic-tiff/boxes.tiff", 2, "sobel", 16),  # 75 x 62, downsample 4.016
    ("generic-tiff/boxes.tiff", 2, "gaussian:20", 37),  # radius 80 > the level's sides
    ("generic-tiff/boxes.tiff", 1, "od", 48),
    ("generic-tiff/boxes.tiff", 0, "grey", 64),
    ("synth", 0, "sobel", 96),
    ("synth", 1, "gaussian:2.25", 100),
    ("synth", 2, "gaussian:6", 64),
]


@pytest.mark.parametrize("slide,level,op,chunk", CASES, ids=[f"{c[0]}-L{c[1]}-{c[2]}-c{c[3]}" for c in CASES])
def test_tiled_equals_global_equals_scipy(
    run, info, read_region, testdata, synth_slide, tmp_path, slide, level, op, chunk
):
    path = synth_slide if slide == "synth" else testdata / slide
    tiled, glob = tmp_path / "tiled.zarr", tmp_path / "global.zarr"
    args = ["--level", level, "--chunk", chunk]
    h_tiled = process(run, path, tiled, op, *args, "--threads", 3, "--in-flight", 2)
    h_global = process(run, path, glob, op, *args, "--mode", "global")
    a, attrs = read_array(tiled)
    b, _ = read_array(glob)
    assert h_tiled == h_global, "tile-wise and global outputs differ (dataset hashes)"
    assert np.array_equal(a, b), "tile-wise and global arrays differ"

    img = level_rgb(info, read_region, path, level)
    ref = expected(op, img)
    assert a.shape == ref.shape, f"shape {a.shape} != {ref.shape}"
    assert a.dtype == (np.uint8 if op == "grey" else np.float32)
    if op == "grey":
        assert np.array_equal(a, ref.astype(np.uint8)), "grey differs from the BT.601 formula"
    else:
        err = np.abs(a.astype(np.float64) - ref)
        halo = attrs["slidepipe"]["op"]["halo"]
        seams = seam_mask(a.shape[1], a.shape[2], chunk, halo)
        assert err.max() < TOLERANCE, f"max |slidepipe - scipy| = {err.max()} (whole level)"
        assert err[:, seams].max() < TOLERANCE, "at tile seams and level edges"

    sp = attrs["slidepipe"]
    assert sp["op"]["spec"] == op and sp["source"]["level"] == level
    ms = attrs["multiscales"][0]
    assert [x["name"] for x in ms["axes"]] == ["c", "y", "x"]
    assert ms["datasets"][0]["path"] == "0"


def test_zarr_v3_and_codecs(run, synth_slide, tmp_path):
    """OME-Zarr 0.5 (Zarr v3) output, and every codec, give the same array."""
    arrays = []
    for i, extra in enumerate(
        [["--format", "ome-zarr-0.5"], ["--codec", "zstd"], ["--codec", "gzip"], ["--codec", "none"]]
    ):
        out = tmp_path / f"o{i}.zarr"
        process(run, synth_slide, out, "sobel", "--level", 1, "--chunk", 128, *extra)
        arrays.append(read_array(out)[0])
    meta = json.loads((tmp_path / "o0.zarr" / "zarr.json").read_text())
    assert meta["attributes"]["ome"]["version"] == "0.5"
    for a in arrays[1:]:
        assert np.array_equal(a, arrays[0])


def as_uint8(a: np.ndarray) -> np.ndarray:
    """--dtype uint8's definition (docs/ops.md), in float32 as slidepipe computes it."""
    assert a.dtype == np.float32
    return np.clip(np.floor(a + np.float32(0.5)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    "slide,level,op,chunk",
    [("aperio/CMU-1-Small-Region.svs", 0, "sobel", 300), ("synth", 1, "gaussian:1.5", 64),
     ("synth", 0, "od", 128)],
)
def test_dtype_uint8(run, testdata, synth_slide, tmp_path, slide, level, op, chunk):
    """--dtype uint8 stores the float result rounded and clipped, tile-wise and global alike, and
    the result opens as a slide."""
    path = synth_slide if slide == "synth" else testdata / slide
    args = ["--level", level, "--chunk", chunk]
    h_float = process(run, path, tmp_path / "f.zarr", op, *args)
    h_tiled = process(run, path, tmp_path / "t.zarr", op, *args, "--dtype", "uint8")
    h_global = process(run, path, tmp_path / "g.zarr", op, *args, "--dtype", "uint8",
                       "--mode", "global")
    assert h_tiled == h_global, "tile-wise and global uint8 outputs differ"
    assert h_tiled != h_float, "a uint8 store hashes like the float one"
    f, _ = read_array(tmp_path / "f.zarr")
    u, attrs = read_array(tmp_path / "t.zarr")
    assert u.dtype == np.uint8 and u.shape == f.shape
    want = as_uint8(f)
    assert np.array_equal(u, want), f"{np.count_nonzero(u != want)} values differ from the definition"
    if op == "sobel":
        assert (u == 255).any() and (u == 0).any(), "the clip at 255 and the 0 end are both exercised"
    stored = attrs["slidepipe"]["op"]["stored"]
    assert attrs["slidepipe"]["op"]["dtype"] == "float32" and stored["dtype"] == "uint8"
    proc = run(["info", tmp_path / "t.zarr", "--json"])
    assert proc.returncode == 0, describe(proc)
    assert json.loads(proc.stdout)["dataset_hash"] == h_tiled


def test_dtype_uint8_of_a_uint8_op(run, synth_slide, tmp_path):
    """grey already computes uint8: --dtype uint8 changes nothing, not even the hash."""
    a = process(run, synth_slide, tmp_path / "a.zarr", "grey", "--chunk", 128)
    b = process(run, synth_slide, tmp_path / "b.zarr", "grey", "--chunk", 128, "--dtype", "uint8")
    assert a == b


@pytest.mark.parametrize(
    "args,why",
    [
        (["--op", "blur"], "unknown op"),
        (["--op", "gaussian"], "needs a sigma"),
        (["--op", "gaussian:"], "needs a sigma"),
        (["--op", "gaussian:-1"], "bad gaussian sigma"),
        (["--op", "gaussian:abc"], "bad gaussian sigma"),
        (["--op", "sobel:3"], "takes no parameter"),
        ([], "--op is required"),
        (["--op", "sobel", "--chunk", "8"], "--chunk"),
        (["--op", "sobel", "--mode", "fast"], "--mode"),
        (["--op", "sobel", "--codec", "lzma"], "--codec"),
        (["--op", "sobel", "--device", "tpu"], "--device"),
        (["--op", "sobel", "--dtype", "float16"], "--dtype"),
        (["--op", "sobel", "--bogus"], "unknown option"),
    ],
)
def test_usage_errors(run, synth_slide, tmp_path, args, why):
    out = tmp_path / "out.zarr"
    proc = run(["process", synth_slide, out, *args])
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.startswith("slidepipe: ") and why in proc.stderr.splitlines()[0], describe(proc)
    assert not out.exists(), "a usage error wrote output"


def test_runtime_errors(run, testdata, synth_slide, tmp_path):
    cases = [
        (testdata / "robustness" / "unopenable.tiff", ["--op", "sobel"]),
        (tmp_path / "missing.svs", ["--op", "sobel"]),
    ]
    for slide, args in cases:
        proc = run(["process", slide, tmp_path / "out.zarr", *args])
        assert proc.returncode == 1, describe(proc)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("slidepipe: "), describe(proc)
    # A level the slide does not have is a usage error, as for `slidepipe region`.
    proc = run(["process", synth_slide, tmp_path / "out.zarr", "--op", "sobel", "--level", "9"])
    assert proc.returncode == 2 and "level 9 does not exist" in proc.stderr, describe(proc)
    # An output folder that already holds something is not overwritten.
    busy = tmp_path / "busy.zarr"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    proc = run(["process", synth_slide, busy, "--op", "grey"])
    assert proc.returncode == 1, describe(proc)
    assert (busy / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("mode", ["tiled", "global"])
def test_corrupt_tile(run, testdata, tmp_path, mode):
    """One tile in the middle of a real slide made undecodable (its JPEG header overwritten): the
    run stops with one clear line and exit 1, never a crash, a hang or a sanitizer report, and
    never leaves a completed store."""
    tifffile = pytest.importorskip("tifffile")
    src = testdata / "aperio" / "CMU-1-Small-Region.svs"
    with tifffile.TiffFile(src) as tf:
        page = tf.pages[0]
        offsets = page.tags["TileOffsets"].value
        middle = len(offsets) // 2
        at = offsets[middle]
    data = bytearray(src.read_bytes())
    data[at : at + 64] = bytes(64)
    slide = tmp_path / "broken.svs"
    slide.write_bytes(bytes(data))
    out = tmp_path / "out.zarr"
    proc = run(["process", slide, out, "--op", "sobel", "--chunk", 256, "--mode", mode])
    assert proc.returncode == 1, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("slidepipe: "), describe(proc)
    assert not (out / "slidepipe-complete").exists(), "a failed run left a completed store"
