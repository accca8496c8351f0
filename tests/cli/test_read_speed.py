"""`slidepipe bench read` and the fast read path, end to end (issue 8).

The bench command's contract: its JSON (regions_per_s, mp_per_s, threads, size, level, seconds,
peak RSS, cache counters), its text line, its modes (--aligned, --rgb, --whole-level) and its
usage and runtime errors. And the read path under it against a real peer: windows at odd
offsets over JPEG tiles (4:4:4 and 4:2:0), which slidepipe decodes in part straight into the
output, must equal OpenSlide's pixels exactly. Each `slidepipe region` is a fresh process, so
this is the partial-decode path; the in-process cache path (second touches, hits) is compared
with cache-less reads in tests/unit/test_tile_cache.c and test_batch.c. No timings asserted.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

SMALL_SVS = "aperio/CMU-1-Small-Region.svs"  # JPEG tiles, RGB components
YCBCR_420 = "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif"  # JPEG 4:2:0, edge tiles
BOXES = "generic-tiff/boxes.tiff"  # Deflate, three levels


def assert_usage_error(proc, what):
    assert proc.returncode == 2, f"{what}: expected exit 2, got {proc.returncode}: {proc.stderr!r}"
    assert "usage" in proc.stderr.lower(), f"{what}: no usage message: {proc.stderr!r}"


def test_bench_json(run, testdata):
    proc = run(["bench", "read", testdata / SMALL_SVS, "--size", "128", "--count", "40",
                "--threads", "2", "--seed", "3", "--json"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("regions_per_s", "mp_per_s", "threads", "size", "level", "seconds", "peak_rss_mib"):
        assert key in out, f"bench JSON lacks {key}: {out}"
    assert out["threads"] == 2 and out["size"] == 128 and out["level"] == 0 and out["count"] == 40
    assert out["regions_per_s"] > 0 and out["mp_per_s"] > 0 and out["seconds"] > 0
    # MP/s counts requested pixels: regions/s times the region's pixels
    assert out["mp_per_s"] == pytest.approx(out["regions_per_s"] * 128 * 128 / 1e6, rel=1e-3)
    assert out["aligned"] is False and out["format"] == "rgba8"
    assert out["cache"]["used_bytes"] <= out["cache"]["capacity_bytes"]


def test_bench_text_and_modes(run, testdata):
    proc = run(["bench", "read", testdata / SMALL_SVS, "--size", "64", "--count", "20", "--aligned"])
    assert proc.returncode == 0, proc.stderr
    assert "regions/s" in proc.stdout and "MP/s" in proc.stdout and "aligned" in proc.stdout
    proc = run(["bench", "read", testdata / BOXES, "--level", "1", "--whole-level", "--rgb",
                "--threads", "1", "--json"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["mode"] == "whole-level" and out["format"] == "rgb8" and out["size"] == 150


def test_bench_errors(run, testdata, tmp_path):
    slide = testdata / SMALL_SVS
    assert_usage_error(run(["bench"]), "bench without a subcommand")
    assert_usage_error(run(["bench", "write", slide]), "an unknown bench subcommand")
    assert_usage_error(run(["bench", "read"]), "no slide")
    assert_usage_error(run(["bench", "read", slide, "--size", "0"]), "--size 0")
    assert_usage_error(run(["bench", "read", slide, "--threads", "-1"]), "--threads -1")
    assert_usage_error(run(["bench", "read", slide, "--level", "9"]), "a level the slide lacks")
    assert_usage_error(run(["bench", "read", slide, "--bogus"]), "an unknown option")
    not_a_slide = tmp_path / "x.svs"
    not_a_slide.write_bytes(b"not a slide at all")
    proc = run(["bench", "read", not_a_slide])
    assert proc.returncode == 1 and proc.stderr.startswith("slidepipe: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run(["bench", "read", slide, "--size", "4000"])  # larger than the level
    assert proc.returncode == 1 and proc.stderr.startswith("slidepipe: ")


def _windows(width, height, size, step, origin):
    """Overlapping windows: a row and a column of windows `step` apart, at odd offsets."""
    ox, oy = origin
    wins = [(ox + k * step, oy) for k in range(6) if ox + k * step + size <= width]
    wins += [(ox, oy + k * step) for k in range(1, 6) if oy + k * step + size <= height]
    return wins


@pytest.mark.parametrize("rel", [SMALL_SVS, YCBCR_420])
def test_partial_windows_match_openslide(rel, testdata, read_region):
    openslide = pytest.importorskip("openslide", reason="openslide-python is in tests/requirements.txt")
    path = testdata / rel
    slide = openslide.OpenSlide(str(path))
    width, height = slide.level_dimensions[0]
    size = min(200, width // 2, height // 2)
    wins = _windows(width, height, size, size // 3, (37, 51))
    assert len(wins) >= 4
    for x, y in wins:
        a = read_region(path, 0, x, y, size, size)
        want = np.asarray(slide.read_region((x, y), 0, (size, size)), dtype=np.uint8)
        diff = np.abs(a.astype(int) - want.astype(int))
        assert diff.max() == 0, f"{rel} window {x},{y}: differs from OpenSlide by up to {diff.max()}"
