"""`slidepipe spectrum` and `slidepipe-mpi spectrum` (issue 6): log-magnitude spectral statistics.

The oracle is the definition of ../shared/bench/py_spectrum.py re-implemented here in numpy on small
levels, so it runs in seconds: grey = the float32 product (R*0.299 + G*0.587) + B*0.114 (what
Debian's numpy computes for `a @ w`, checked on all 2^24 colours), full PxP patches on the level's
grid, numpy.fft.fft2 in double precision (Debian's numpy 1.24, which py_spectrum runs on, transforms
float32 input in complex128; the pinned numpy 2 would use complex64, so the test converts to float64
first), dB = 20*log10(|F| + 1e-6), numpy.histogram over linspace(-40, 160, 801), mean and
sqrt(E[x^2] - mean^2).

Tolerances (slidepipe's FFT is FFTW in single precision):
- |mean difference| and |std difference| < 0.01 dB (measured: about 3e-6 dB);
- histograms: counts may move between neighbouring bins only where float rounding can move them:
  the net count moved across every bin edge must not exceed the number of reference values whose
  magnitude |F| lies within max(1e-3, 1e-5 |F|) of that edge's magnitude. Measured: at most 6
  values moved across one edge (of 13 million values) on the real slides below; each test prints
  its figures.
Pixels come from `slidepipe region` so that the comparison is about the spectrum alone (the
region reader is checked against OpenSlide elsewhere); for CMU-1-Small-Region.svs OpenSlide's
pixels are used too, as py_spectrum reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

EDGES = np.linspace(-40.0, 160.0, 801)
TIMING_KEYS = ("seconds", "read_seconds", "fft_seconds")

# (file, level, patch, block): small levels of real slides, JPEG and JPEG 2000.
CASES = [
    ("aperio/CMU-1-Small-Region.svs", 0, 256, 1024),
    ("aperio/tcga-cr-7395-01a-01-ts1.svs", 1, 128, 256),
    ("generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", 0, 64, 192),
]


def reference(rgb: np.ndarray, patch: int):
    """py_spectrum.py's statistics of an RGB level (uint8, h x w x 3), whole patches only."""
    h, w = rgb.shape[0] // patch * patch, rgb.shape[1] // patch * patch
    a = rgb[:h, :w].astype(np.float32)
    wt = np.array([0.299, 0.587, 0.114], np.float32)
    g = (a[..., 0] * wt[0] + a[..., 1] * wt[1]) + a[..., 2] * wt[2]
    patches = g.reshape(h // patch, patch, w // patch, patch).transpose(0, 2, 1, 3)
    patches = patches.reshape(-1, patch, patch).astype(np.float64)
    db = 20.0 * np.log10(np.abs(np.fft.fft2(patches)) + 1e-6).ravel()
    hist = np.histogram(db, EDGES)[0]
    n = db.size
    mean = db.sum(dtype=np.float64) / n
    std = ((db.astype(np.float64) ** 2).sum() / n - mean * mean) ** 0.5
    return db, hist, mean, std, n // (patch * patch)


def check_histogram(ours: np.ndarray, db: np.ndarray, hist: np.ndarray, what: str) -> int:
    """Assert that every count moved across a bin edge is explained by float rounding; returns
    the largest net count moved across one edge."""
    assert ours.sum() <= db.size
    flow = np.cumsum(ours - hist)[:-1]  # net count moved across inner edges 1..799
    mags = np.sort(10 ** (db / 20))
    edge_mag = 10 ** (EDGES[1:-1] / 20)
    tol = np.maximum(1e-3, 1e-5 * edge_mag)
    near = np.searchsorted(mags, edge_mag + tol) - np.searchsorted(mags, edge_mag - tol)
    bad = np.nonzero(np.abs(flow) > near)[0]
    assert bad.size == 0, (
        f"{what}: counts moved across edges {EDGES[1:-1][bad][:5]} dB ({flow[bad][:5]}) beyond the "
        f"values that float rounding can move there ({near[bad][:5]})"
    )
    # What crosses the outer edges (-40, 160 dB) shows in the totals.
    return int(np.abs(flow).max()) if flow.size else 0


def spectrum_json(run, args, tmp_path: Path, name="out.json", expect=0) -> dict:
    out = tmp_path / name
    proc = run(["spectrum", *args, "--json", out], timeout=300)
    assert proc.returncode == expect, proc.stderr
    return json.loads(out.read_text())


def without_timings(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    for s in doc["slides"]:
        for k in TIMING_KEYS:
            s.pop(k, None)
    return doc


def level_rgb(read_region, info, path, level) -> np.ndarray:
    facts = info(path)
    lv = facts["levels"][level]
    rgba = read_region(path, level, 0, 0, lv["width"], lv["height"])
    assert (rgba[..., 3] == 255).all(), "the test levels are opaque"
    return rgba[..., :3]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}:L{c[1]}:P{c[2]}" for c in CASES])
def test_same_statistics_as_reference(case, run, info, read_region, testdata, tmp_path):
    rel, level, patch, block = case
    path = testdata / rel
    doc = spectrum_json(
        run, [path, "--level", level, "--patch", patch, "--block", block], tmp_path
    )
    (s,) = doc["slides"]
    db, hist, mean, std, patches = reference(level_rgb(read_region, info, path, level), patch)
    assert s["patches"] == patches
    assert s["values"] == db.size
    assert sum(s["histogram"]) + s["below"] + s["above"] == db.size
    dmean, dstd = abs(s["mean"] - mean), abs(s["std"] - std)
    moved = check_histogram(np.array(s["histogram"]), db, hist, rel)
    l1 = int(np.abs(np.array(s["histogram"]) - hist).sum())
    print(
        f"{rel} L{level} P{patch}: |dmean| {dmean:.2e} dB, |dstd| {dstd:.2e} dB, "
        f"max net count moved across one edge {moved}, sum |bin diff| {l1} of {db.size} values"
    )
    assert dmean < 0.01 and dstd < 0.01
    # The corpus of one slide is that slide.
    for k in ("histogram", "mean", "std", "patches"):
        assert doc["corpus"][k] == s[k]


def test_reference_with_openslide_pixels(run, testdata, tmp_path):
    """py_spectrum reads with OpenSlide: on a JPEG slide its pixels give the same statistics."""
    openslide = pytest.importorskip("openslide", reason="openslide-python is not installed")
    path = testdata / "aperio/CMU-1-Small-Region.svs"
    slide = openslide.OpenSlide(str(path))
    w, h = slide.level_dimensions[0]
    rgb = np.asarray(slide.read_region((0, 0), 0, (w, h)))[..., :3]
    db, hist, mean, std, patches = reference(rgb, 256)
    (s,) = spectrum_json(run, [path], tmp_path)["slides"]
    assert s["patches"] == patches
    assert abs(s["mean"] - mean) < 0.01 and abs(s["std"] - std) < 0.01
    check_histogram(np.array(s["histogram"]), db, hist, "CMU-1-Small-Region.svs (OpenSlide)")


def test_broken_file_is_reported_and_the_run_goes_on(run, testdata, tmp_path):
    good = testdata / "aperio/CMU-1-Small-Region.svs"
    broken = testdata / "robustness/broken.svs"
    small = testdata / "generic-tiff/test_orient1.tif"  # 120x180: no 256x256 patch
    lst = tmp_path / "list.txt"
    lst.write_text(f"# a comment\n{good}\n\n{broken}\n{small}\n")
    out = tmp_path / "out.json"
    proc = run(["spectrum", "--list", lst, "--json", out])
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(out.read_text())
    assert [s["path"] for s in doc["slides"]] == [str(good), str(broken), str(small)]
    assert "error" not in doc["slides"][0]
    assert set(doc["slides"][1]) == {"path", "error"} and doc["slides"][1]["error"]
    assert "patch" in doc["slides"][2]["error"]
    assert f"slidepipe: {broken}" in proc.stderr
    for k in ("histogram", "mean", "std", "patches"):
        assert doc["corpus"][k] == doc["slides"][0][k]


def test_threads_and_block_do_not_change_the_result(run, testdata, tmp_path):
    path = testdata / "aperio/tcga-cr-7395-01a-01-ts1.svs"
    args = [path, "--level", "1", "--patch", "128"]
    one = spectrum_json(run, [*args, "--threads", "1"], tmp_path, "t1.json")
    two = spectrum_json(run, [*args, "--threads", "2"], tmp_path, "t2.json")
    three = spectrum_json(run, [*args, "--threads", "3", "--block", "128"], tmp_path, "t3.json")
    assert without_timings(one) == without_timings(two)
    one["block"] = three["block"]
    assert without_timings(one) == without_timings(three)


def test_json_to_stdout_and_plot(run, testdata, tmp_path):
    a = testdata / "aperio/CMU-1-Small-Region.svs"
    b = testdata / "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif"
    png = tmp_path / "plot.png"
    proc = run(["spectrum", a, b, "--patch", "64", "--json", "-", "--plot", png])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["slides"]) == 2 and doc["corpus"]["patches"] == sum(
        s["patches"] for s in doc["slides"]
    )
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (960, 600)


@pytest.mark.parametrize(
    "args,code",
    [
        (["--block", "1000"], 2),  # not a multiple of the patch
        (["--patch", "3"], 2),
        (["--threads", "x"], 2),
        (["--plot", "out.jpg"], 2),
        ([], 2),  # no slides
        (["--list", "/nonexistent/list.txt"], 1),
    ],
)
def test_usage_and_runtime_errors(run, args, code):
    proc = run(["spectrum", *args])
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith("slidepipe: ")


def test_unwritable_json_is_a_runtime_error(run, testdata):
    proc = run(
        ["spectrum", testdata / "aperio/CMU-1-Small-Region.svs", "--json", "/nonexistent/o.json"]
    )
    assert proc.returncode == 1
    assert "slidepipe: cannot" in proc.stderr


@pytest.mark.parametrize("ranks", [3, 1])
def test_mpi_equals_single_process(ranks, run, mpi_run, testdata, tmp_path):
    """Three ranks (rank 0 hands out slides and computes too), and one rank alone."""
    slides = [
        testdata / "aperio/CMU-1-Small-Region.svs",
        testdata / "robustness/broken.svs",
        testdata / "aperio/tcga-cr-7395-01a-01-ts1.svs",
        testdata / "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif",
        testdata / "generic-tiff/boxes.tiff",
    ]
    lst = tmp_path / "list.txt"
    lst.write_text("".join(f"{s}\n" for s in slides))
    opts = ["--level", "0", "--patch", "128", "--block", "512", "--threads", "1"]
    single = spectrum_json(run, ["--list", lst, *opts], tmp_path, "single.json", expect=3)
    out = tmp_path / "mpi.json"
    proc = mpi_run(ranks, ["spectrum", "--list", lst, "--json", out, *opts])
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"slidepipe: {slides[1]}" in proc.stderr
    doc = json.loads(out.read_text())
    assert set(doc["slides"][1]) == {"path", "error"}
    assert without_timings(doc) == without_timings(single)
