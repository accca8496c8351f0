"""The GPU benchmark's peers (bench/gpu_peers.py) compute what slidepipe computes, checked here
with their numpy/scipy form (--cpu: the same steps as the CuPy / PyTorch versions that run on the
GPU machine) against slidepipe's CPU output on a small synthetic slide: the input helpers (mkraw
gives the pixels slidepipe reads, mklist stays inside the level), the Sobel peer's Zarr planes
against `slidepipe process --op sobel`, and the spectrum peer's statistics against
`slidepipe spectrum`. The GPU-only parts (cuCIM, CuPy, PyTorch) run in bench/bench_gpu.sh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PEERS = Path(__file__).resolve().parents[2] / "bench" / "gpu_peers.py"
SIDE = 700


def peers(*args) -> dict:
    proc = subprocess.run([sys.executable, str(PEERS), *map(str, args)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def raw_slide(tmp_path_factory, slidepipe_bin):
    pytest.importorskip("tifffile")
    d = tmp_path_factory.mktemp("peers")
    synth, rgba, raw = d / "s.tif", d / "s.rgba", d / "raw.tif"
    for args in (["synth", synth, "--size", SIDE],
                 ["region", synth, "--level", 0, "--x", 0, "--y", 0, "--width", SIDE,
                  "--height", SIDE, "-o", rgba]):
        proc = subprocess.run([str(slidepipe_bin), *map(str, args)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    peers("mkraw", rgba, SIDE, SIDE, raw)
    return d, rgba, raw


def test_mkraw_gives_slidepipes_pixels(raw_slide, read_region):
    _, rgba, raw = raw_slide
    import tifffile

    ours = np.fromfile(rgba, np.uint8).reshape(SIDE, SIDE, 4)[..., :3]
    assert np.array_equal(tifffile.imread(raw), ours)
    assert np.array_equal(read_region(raw, 0, 0, 0, SIDE, SIDE)[..., :3], ours)


def test_mklist_regions_inside_level(tmp_path):
    out = tmp_path / "list.txt"
    peers("mklist", SIDE, SIDE - 100, 256, 200, 3, out)
    rows = np.loadtxt(out, dtype=np.int64).reshape(-1, 4)
    assert len(rows) == 200
    assert (rows[:, 0] >= 0).all() and (rows[:, 0] + rows[:, 2] <= SIDE).all()
    assert (rows[:, 1] >= 0).all() and (rows[:, 1] + rows[:, 3] <= SIDE - 100).all()


def test_sobel_peer_matches_process(raw_slide, run):
    pytest.importorskip("zarr")
    d, _, raw = raw_slide
    peer = peers("--cpu", "--repeat", 1, "sobel", raw, d / "peer.zarr", "--chunk", 256)
    assert (peer["width"], peer["height"]) == (SIDE, SIDE)
    assert run(["process", raw, d / "ours.zarr", "--op", "sobel", "--chunk", 256]).returncode == 0
    import zarr

    ours = np.asarray(zarr.open_group(str(d / "ours.zarr"), mode="r")["0"])
    theirs = np.asarray(zarr.open_array(str(d / "peer.zarr"), mode="r"))
    assert ours.shape == theirs.shape == (3, SIDE, SIDE)
    # both are float32 roundings of the same exact magnitudes (docs/ops.md)
    assert np.abs(ours - theirs).max() <= 6e-5 * 255


def test_spectrum_peer_matches_spectrum(raw_slide, run):
    d, _, raw = raw_slide
    # a corpus of two names of the slide, as bench_gpu.sh times it
    twin = d / "twin.tif"
    if not twin.exists():
        twin.symlink_to(raw)
    peer = peers("--cpu", "--repeat", 1, "spectrum", raw, twin, "--patch", 128, "--block", 256)
    out = d / "spec.json"
    assert run(["spectrum", raw, twin, "--patch", 128, "--block", 256, "--json",
                out]).returncode == 0
    ours = json.loads(out.read_text())["corpus"]
    assert peer["patches"] == ours["patches"] == 2 * (SIDE // 128) ** 2
    assert abs(peer["mean"] - ours["mean"]) < 1e-3
    assert abs(peer["std"] - ours["std"]) < 1e-3
    moved = sum(abs(a - b) for a, b in zip(peer["histogram"], ours["histogram"])) / 2
    assert moved <= 1e-4 * sum(ours["histogram"])
