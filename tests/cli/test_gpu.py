"""The GPU backend seen from the command line: `slidepipe gpu` always answers (a machine without a
GPU is an answer, not an error), the run-time libraries are found where SLIDEPIPE_CUDA_LIBS points
and reported missing otherwise, and `region --device cuda` either gives the CPU's bytes exactly
on the CPU decode path (SLIDEPIPE_NVJPEG=0) and pixels within a stated bound of them with JPEG
tiles decoded by nvJPEG (with a GPU), or fails with one clear line and exit 1 (without one)."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

SLIDE = "aperio/CMU-1-Small-Region.svs"


def gpu_report(sp_bin, env=None) -> dict:
    proc = subprocess.run([str(sp_bin), "gpu", "--json"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_gpu_report_shape(slidepipe_bin):
    report = gpu_report(slidepipe_bin)
    assert set(report) >= {"devices", "default_device", "reason", "nvjpeg", "cufile", "cufft",
                           "nvjpeg2k", "jpeg_decode"}
    if report["devices"]:
        assert 0 <= report["default_device"] < len(report["devices"])
        for d in report["devices"]:
            assert d["name"] and d["memory_bytes"] > 0
    else:
        assert report["default_device"] == -1
        assert report["reason"], "no devices must come with a reason"


def test_gpu_libraries_not_found_are_reported(slidepipe_bin, tmp_path):
    env = dict(os.environ, SLIDEPIPE_CUDA_LIBS=str(tmp_path), LD_LIBRARY_PATH=str(tmp_path))
    report = gpu_report(slidepipe_bin, env)
    for lib in ("nvjpeg", "cufile", "nvjpeg2k"):
        if report[lib]["found"]:
            # Installed system-wide on this machine: then it must say where it came from.
            assert "/" in report[lib]["detail"] or ".so" in report[lib]["detail"]
        else:
            assert report[lib]["detail"]


def region_args(testdata, out, device):
    return ["region", testdata / SLIDE, "--level", 0, "--x", 301, "--y", 77, "--width", 900,
            "--height", 700, "-o", out, "--device", device]


def test_region_device_cuda(run, testdata, slidepipe_bin, tmp_path, monkeypatch):
    monkeypatch.setenv("SLIDEPIPE_NVJPEG", "0")  # the CPU decode path: exact
    report = gpu_report(slidepipe_bin)
    assert report["jpeg_decode"].startswith("cpu")
    cpu = tmp_path / "cpu.rgba"
    proc = run(region_args(testdata, cpu, "cpu"))
    assert proc.returncode == 0, proc.stderr
    gpu = tmp_path / "gpu.rgba"
    proc = run(region_args(testdata, gpu, "cuda"))
    if not report["devices"]:
        assert proc.returncode == 1
        assert proc.stderr.startswith("slidepipe: --device cuda: ") and proc.stderr.count("\n") == 1
        assert not gpu.exists()
        pytest.skip(f"no GPU here ({report['reason']}): device pixels not compared")
    assert proc.returncode == 0, proc.stderr
    assert gpu.read_bytes() == cpu.read_bytes()


# How far nvJPEG's pixels may be from libjpeg-turbo's (only the inverse DCT differs; see
# tests/unit/test_jpeg_planes.c): measured 0 on an H200 with nvJPEG 13.3.2 (docs/gpu.md); one
# level of rounding allowed. The test prints what it saw.
NVJPEG_MAX_ABS, NVJPEG_MAX_MEAN = 1, 0.01


@pytest.mark.parametrize("x,y", [(301, 77), (1900, 2700)])  # inside; across the bottom-right edge
def test_region_device_cuda_nvjpeg(run, testdata, slidepipe_bin, tmp_path, monkeypatch, x, y):
    monkeypatch.delenv("SLIDEPIPE_NVJPEG", raising=False)
    report = gpu_report(slidepipe_bin)
    if not report["devices"]:
        pytest.skip(f"no GPU here ({report['reason']}): nvJPEG path not compared")
    if not report["nvjpeg"]["found"]:
        pytest.skip(f"nvJPEG not found ({report['nvjpeg']['detail']}): nvJPEG path not compared")
    assert report["jpeg_decode"].startswith("nvjpeg")
    args = ["region", testdata / SLIDE, "--level", 0, "--x", x, "--y", y, "--width", 900,
            "--height", 700]
    cpu, gpu = tmp_path / "cpu.rgba", tmp_path / "gpu.rgba"
    assert run([*args, "-o", cpu, "--device", "cpu"]).returncode == 0
    proc = run([*args, "-o", gpu, "--device", "cuda"])
    assert proc.returncode == 0, proc.stderr
    a = np.fromfile(cpu, np.uint8).reshape(700, 900, 4).astype(np.int16)
    b = np.fromfile(gpu, np.uint8).reshape(700, 900, 4).astype(np.int16)
    assert np.array_equal(a[..., 3], b[..., 3]), "alpha (opaque tiles, transparent outside)"
    outside = a[..., 3] == 0
    assert np.array_equal(a[outside], b[outside])
    diff = np.abs(a[..., :3] - b[..., :3])
    print(f"nvJPEG vs CPU at ({x}, {y}): max |diff| {diff.max()}, mean {diff.mean():.4f}")
    assert diff.max() <= NVJPEG_MAX_ABS and diff.mean() <= NVJPEG_MAX_MEAN


def test_region_device_usage_error(run, testdata, tmp_path):
    proc = run(region_args(testdata, tmp_path / "x.rgba", "tpu"))
    assert proc.returncode == 2
    assert "--device is cpu or cuda" in proc.stderr


PROCESS_OPS = ["grey", "od", "sobel", "gaussian:2.5", "macenko"]


@pytest.mark.parametrize("op", PROCESS_OPS)
def test_process_device_cuda(run, testdata, slidepipe_bin, tmp_path, op):
    """On a GPU the op's kernels give the CPU's output bit for bit, so the dataset hashes are
    equal; without one the run stops before writing anything, with one clear line."""
    report = gpu_report(slidepipe_bin)
    slide = testdata / SLIDE
    common = ["--op", op, "--chunk", 333, "--threads", 2]
    gpu_out = tmp_path / "gpu.zarr"
    proc = run(["process", slide, gpu_out, *common, "--device", "cuda"])
    if not report["devices"]:
        assert proc.returncode == 1
        assert proc.stderr.startswith("slidepipe: ") and "--device cuda" in proc.stderr
        assert not gpu_out.exists()
        pytest.skip(f"no GPU here ({report['reason']}): GPU op output not compared")
    assert proc.returncode == 0, proc.stderr
    cpu = run(["process", slide, tmp_path / "cpu.zarr", *common, "--device", "cpu"])
    assert cpu.returncode == 0, cpu.stderr
    assert proc.stdout == cpu.stdout  # "dataset_hash HEX"


def test_process_global_mode_is_cpu_only(run, testdata, tmp_path):
    proc = run(["process", testdata / SLIDE, tmp_path / "g.zarr", "--op", "sobel", "--mode",
                "global", "--device", "cuda"])
    assert proc.returncode == 2
    assert "global runs on the CPU only" in proc.stderr


def test_spectrum_device_cuda(run, testdata, slidepipe_bin, tmp_path):
    """cuFFT spectra against FFTW's on the same slide: everything but the FFT is the same
    arithmetic, so the statistics agree to float rounding of the transforms (means and standard
    deviations within 1e-3 dB, at most 1e-4 of the values in another bin)."""
    report = gpu_report(slidepipe_bin)
    slide = testdata / SLIDE
    gpu_json = tmp_path / "gpu.json"
    proc = run(["spectrum", slide, "--json", gpu_json, "--device", "cuda"])
    if not report["devices"]:
        assert proc.returncode == 1
        assert proc.stderr.startswith("slidepipe: --device cuda: ")
        assert not gpu_json.exists()
        pytest.skip(f"no GPU here ({report['reason']}): GPU spectra not compared")
    assert proc.returncode == 0, proc.stderr
    cpu_json = tmp_path / "cpu.json"
    assert run(["spectrum", slide, "--json", cpu_json]).returncode == 0
    gpu = json.loads(gpu_json.read_text())["corpus"]
    cpu = json.loads(cpu_json.read_text())["corpus"]
    assert gpu["patches"] == cpu["patches"]
    assert abs(gpu["mean"] - cpu["mean"]) < 1e-3
    assert abs(gpu["std"] - cpu["std"]) < 1e-3
    moved = sum(abs(a - b) for a, b in zip(gpu["histogram"], cpu["histogram"])) / 2
    assert moved <= 1e-4 * sum(cpu["histogram"]), f"{moved} values in other bins"
