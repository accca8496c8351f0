"""The peers of slidepipe's GPU benchmark (bench/bench_gpu.sh, issue 7): what a user writes today
with the GPU Python stack, each timed the same way and printed as one JSON line on stdout.

  raw SLIDE.tif                   tifffile.imread of an uncompressed TIFF + cupy.asarray: the whole
                                  level in one GPU array (comparison 1)
  cucim SLIDE LIST                cuCIM's batched read_region(..., device="cuda") over the regions of
                                  LIST ("x y w h" lines, one size), as GP/s (comparison 2)
  sobel RAW.tif OUT.zarr          the whole image on the GPU with cupyx.scipy.ndimage: per channel
                                  hypot(sobel(axis 0), sobel(axis 1)), float32, mode 'reflect' (the
                                  definition of docs/ops.md), then written as a (3, H, W) float32
                                  Zarr v2 array, 1024² chunks, zstd level 3, through tensorstore
                                  (zarr-python is not in the GPU image); peak GPU memory from
                                  CuPy's pool (comparison 3)
  spectrum RAW.tif [P] [B]        the spectral statistics with PyTorch: strips of B rows to the GPU,
                                  grey (0.299 R + 0.587 G) + 0.114 B in float32, torch unfold into
                                  P x P patches, torch.fft.fft2, 20 log10(|F| + 1e-6), an 800-bin
                                  histogram over -40..160 dB and float64 sums (comparison 4)

Two helpers make the inputs (not timed): `mkraw RGBA W H OUT.tif` turns `slidepipe region ... -o
X.rgba` output into an uncompressed 512²-tiled RGB BigTIFF (what make-bench-slides.sh's raw.tif is);
`mklist W H SIZE COUNT SEED OUT` writes COUNT random SIZE² regions inside a W x H level.

Two more run the benchmark (bench_gpu.sh): `timecmd [--repeat R] -- CMD...` runs a command R times
(first a warm-up; --rm DIR deletes an output folder before each) while sampling the GPU's used memory (NVML, else nvidia-smi) and prints the
times, the median, the peak above the memory used before, and the last run's stdout; `report DIR`
reads the JSON files bench_gpu.sh left in DIR and prints the table of the four comparisons and
the parity checks (--json FILE: also as JSON, with every run's record).

--cpu runs the same steps with numpy / scipy instead of CuPy / PyTorch (and a plain zarr write when
tensorstore is absent), so the steps can be checked against slidepipe's CPU output on a machine
without a GPU (tests/cli/test_gpu_peers.py does). --repeat R repeats the timed part; the first run
is a warm-up (CUDA context, FFT plans, kernel compilation) and is left out of the median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

DB_MIN, DB_MAX, BINS = -40.0, 160.0, 800


class Backend:
    """numpy/scipy on the CPU, or CuPy on the GPU: the array module, ndimage and a sync."""

    def __init__(self, cpu: bool):
        self.cpu = cpu
        if cpu:
            import scipy.ndimage as ndi

            self.xp, self.ndi = np, ndi
        else:
            import cupy
            import cupyx.scipy.ndimage as ndi

            self.xp, self.ndi, self.cupy = cupy, ndi, cupy

    def sync(self):
        if not self.cpu:
            self.cupy.cuda.Device().synchronize()

    def to_device(self, a):
        return a if self.cpu else self.cupy.asarray(a)

    def to_host(self, a):
        return a if self.cpu else self.cupy.asnumpy(a)

    def peak_bytes(self) -> int:
        if self.cpu:
            return 0
        return int(self.cupy.get_default_memory_pool().total_bytes())


def timed(fn, repeat: int):
    """Run fn() repeat times; return (last result, list of seconds, median of the timed runs)."""
    secs, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    timed_runs = secs[1:] if len(secs) > 1 else secs
    return out, secs, statistics.median(timed_runs)


def read_rgb(path: str) -> np.ndarray:
    import tifffile

    a = tifffile.imread(path)
    if a.ndim != 3 or a.shape[2] < 3:
        raise SystemExit(f"gpu_peers: {path}: expected an RGB image, got shape {a.shape}")
    return a[..., :3]


def cmd_raw(args, be: Backend) -> dict:
    def once():
        a = read_rgb(args.slide)
        g = be.to_device(np.ascontiguousarray(a))
        be.sync()
        return g.shape

    shape, secs, median = timed(once, args.repeat)
    pixels = shape[0] * shape[1]
    return {"peer": "tifffile.imread" + ("" if be.cpu else "+cupy.asarray"), "width": shape[1], "height": shape[0],
            "pixels": pixels, "median_s": median, "gpix_per_s": pixels / median * 1e-9,
            "seconds": secs}


def load_list(path: str) -> list[tuple[int, int, int, int]]:
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                out.append(tuple(int(v) for v in parts))
    if not out:
        raise SystemExit(f"gpu_peers: {path}: no regions")
    return out


def cmd_cucim(args, be: Backend) -> dict:
    from cucim import CuImage

    regions = load_list(args.list)
    sizes = {(w, h) for _, _, w, h in regions}
    if len(sizes) != 1:
        raise SystemExit("gpu_peers: cuCIM's batched read_region needs one region size")
    (w, h), = sizes
    img = CuImage(args.slide)
    locations = [(x, y) for x, y, _, _ in regions]
    device = "cpu" if be.cpu else "cuda"

    def once():
        n = 0
        batches = img.read_region(locations, (w, h), level=0, num_workers=args.workers,
                                  batch_size=args.batch, device=device)
        for batch in batches:
            arr = be.xp.asarray(batch)
            n += arr.shape[0] if arr.ndim == 4 else 1
        be.sync()
        return n

    n, secs, median = timed(once, args.repeat)
    if n != len(regions):
        raise SystemExit(f"gpu_peers: cuCIM returned {n} regions of {len(regions)}")
    pixels = w * h * len(regions)
    return {"peer": f"cucim read_region device={device} batch={args.batch} "
                    f"workers={args.workers}", "regions": len(regions), "pixels": pixels,
            "median_s": median, "gpix_per_s": pixels / median * 1e-9, "seconds": secs}


def write_zarr(path: str, planes: np.ndarray, chunk: int):
    """(3, H, W) float32 as a Zarr v2 array, chunks (3, chunk, chunk), zstd level 3."""
    try:
        import tensorstore as ts
    except ImportError:
        ts = None
    if ts is not None:
        store = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": path},
                         "metadata": {"shape": list(planes.shape), "dtype": "<f4",
                                      "chunks": [planes.shape[0], chunk, chunk],
                                      "compressor": {"id": "zstd", "level": 3}}},
                        create=True, delete_existing=True).result()
        store.write(planes).result()
        return "tensorstore"
    import numcodecs
    import zarr

    arr = zarr.open_array(path, mode="w", shape=planes.shape, dtype="<f4",
                          chunks=(planes.shape[0], chunk, chunk), zarr_format=2,
                          compressor=numcodecs.Zstd(level=3))
    arr[...] = planes
    return "zarr"


def sobel_planes(rgb, be: Backend):
    """Per channel hypot(sobel axis 0, sobel axis 1) in float32, reflected at the border."""
    xp, ndi = be.xp, be.ndi
    out = xp.empty((3,) + rgb.shape[:2], dtype=xp.float32)
    for c in range(3):
        ch = rgb[..., c].astype(xp.float32)
        gy = ndi.sobel(ch, axis=0, mode="reflect")
        gx = ndi.sobel(ch, axis=1, mode="reflect")
        out[c] = xp.hypot(gx, gy)
        del ch, gx, gy
    return out


def cmd_sobel(args, be: Backend) -> dict:
    writer = []

    def once():
        rgb = be.to_device(np.ascontiguousarray(read_rgb(args.slide)))
        planes = sobel_planes(rgb, be)
        del rgb
        host = be.to_host(planes)
        del planes
        writer.append(write_zarr(args.out, host, args.chunk))
        return host.shape

    shape, secs, median = timed(once, args.repeat)
    return {"peer": f"{'scipy' if be.cpu else 'cupyx'}.ndimage.sobel whole image + "
                    f"{writer[-1]} zarr", "width": shape[2], "height": shape[1],
            "pixels": shape[1] * shape[2], "median_s": median, "seconds": secs,
            "peak_gpu_pool_bytes": be.peak_bytes()}


def spectrum_stats(rgb_strips, patch: int, torch_mod, device):
    """Histogram, sums and counts of dB values over the patches of the strips (each an
    (h, W, 3) uint8 array whose h and W are multiples of `patch`). With torch_mod None the same
    steps run in numpy (the check on a machine without a GPU)."""
    hist = np.zeros(BINS, np.int64)
    n, s1, s2, patches = 0, 0.0, 0.0, 0
    for strip in rgb_strips:
        if torch_mod is not None:
            t = torch_mod
            a = t.from_numpy(np.ascontiguousarray(strip)).to(device)
            a = a.to(t.float32)
            g = (a[..., 0] * 0.299 + a[..., 1] * 0.587) + a[..., 2] * 0.114
            # (h, W) -> (h/P * W/P, P, P): unfold rows then columns, as torch users do
            p = g.unfold(0, patch, patch).unfold(1, patch, patch).reshape(-1, patch, patch)
            db = 20.0 * t.log10(t.abs(t.fft.fft2(p)) + 1e-6)
            hist += t.histc(db, bins=BINS, min=DB_MIN, max=DB_MAX).to(t.int64).cpu().numpy()
            d64 = db.to(t.float64)
            s1 += float(d64.sum())
            s2 += float((d64 * d64).sum())
            n += db.numel()
            patches += p.shape[0]
        else:
            a = strip.astype(np.float32)
            g = (a[..., 0] * np.float32(0.299) + a[..., 1] * np.float32(0.587)) + \
                a[..., 2] * np.float32(0.114)
            h, w = g.shape
            p = g.reshape(h // patch, patch, w // patch, patch).transpose(0, 2, 1, 3)
            p = p.reshape(-1, patch, patch)
            db = (20.0 * np.log10(np.abs(np.fft.fft2(p)) + 1e-6)).astype(np.float32)
            hist += np.histogram(db, np.linspace(DB_MIN, DB_MAX, BINS + 1))[0]
            s1 += float(db.sum(dtype=np.float64))
            s2 += float((db.astype(np.float64) ** 2).sum())
            n += db.size
            patches += p.shape[0]
    return hist, n, s1, s2, patches


def cmd_spectrum(args, be: Backend) -> dict:
    torch_mod, device = None, None
    if not be.cpu:
        import torch

        torch_mod, device = torch, "cuda"
    P, B = args.patch, args.block

    def once():
        total = None
        for path in args.slides:  # a corpus: the statistics of all its slides together
            rgb = read_rgb(path)
            H, W = rgb.shape[:2]
            Wp = W // P * P
            strips = (rgb[y:y + min(B, H - y) // P * P, :Wp] for y in range(0, H - P + 1, B))
            out = spectrum_stats(strips, P, torch_mod, device)
            total = out if total is None else tuple(a + b for a, b in zip(total, out))
        if torch_mod is not None:
            torch_mod.cuda.synchronize()
        return total + (W, H)

    (hist, n, s1, s2, patches, W, H), secs, median = timed(once, args.repeat)
    mean = s1 / n
    std = max(s2 / n - mean * mean, 0.0) ** 0.5
    return {"peer": "numpy" if be.cpu else "torch unfold+fft2+histc", "width": W, "height": H,
            "patch": P, "block": B, "patches": patches, "values": n, "mean": mean, "std": std,
            "histogram": hist.tolist(), "median_s": median, "seconds": secs,
            "peak_gpu_bytes": int(torch_mod.cuda.max_memory_allocated()) if torch_mod else 0}


def cmd_mkraw(args, be: Backend) -> dict:
    import tifffile

    a = np.fromfile(args.rgba, dtype=np.uint8)
    if a.size != args.width * args.height * 4:
        raise SystemExit(f"gpu_peers: {args.rgba}: {a.size} bytes, not {args.width}x{args.height}x4")
    rgb = a.reshape(args.height, args.width, 4)[..., :3]
    tifffile.imwrite(args.out, rgb, tile=(512, 512), compression=None, bigtiff=True,
                     photometric="rgb")
    return {"wrote": args.out, "width": args.width, "height": args.height}


def cmd_mklist(args, be: Backend) -> dict:
    rng = np.random.default_rng(args.seed)
    xs = rng.integers(0, args.width - args.size + 1, args.count)
    ys = rng.integers(0, args.height - args.size + 1, args.count)
    with open(args.out, "w") as f:
        for x, y in zip(xs, ys):
            f.write(f"{x} {y} {args.size} {args.size}\n")
    return {"wrote": args.out, "regions": args.count, "size": args.size}


class GpuMemorySampler:
    """Samples the used memory of GPU 0 every ~20 ms in a thread; peak() is the largest value
    seen minus the value before start(), in bytes (0 where neither NVML nor nvidia-smi works)."""

    def __init__(self):
        import threading

        self.read = self._reader()
        self.base = self.read()
        self.top = self.base
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _reader():
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            return lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        except Exception:
            import subprocess

            def smi():
                try:
                    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                                          "--format=csv,noheader,nounits", "-i", "0"],
                                         capture_output=True, text=True, timeout=5).stdout
                    return int(out.split()[0]) << 20
                except Exception:
                    return 0
            return smi

    def _run(self):
        while not self.stop_flag.wait(0.02):
            self.top = max(self.top, self.read())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()
        self.top = max(self.top, self.read())

    def peak(self) -> int:
        return max(self.top - self.base, 0)


def cmd_timecmd(args, be: Backend) -> dict:
    import subprocess

    if not args.command:
        raise SystemExit("gpu_peers: timecmd needs a command after --")
    secs, out, peak = [], "", 0
    for _ in range(args.repeat):
        if args.rm:
            import shutil

            shutil.rmtree(args.rm, ignore_errors=True)
        with GpuMemorySampler() as sampler:
            t0 = time.perf_counter()
            proc = subprocess.run(args.command, capture_output=True, text=True)
            secs.append(time.perf_counter() - t0)
        peak = max(peak, sampler.peak())
        if proc.returncode != 0:
            raise SystemExit(f"gpu_peers: {' '.join(args.command)}: exit {proc.returncode}: "
                             f"{proc.stderr.strip()[-2000:]}")
        out = proc.stdout
    timed_runs = secs[1:] if len(secs) > 1 else secs
    return {"command": args.command, "median_s": statistics.median(timed_runs), "seconds": secs,
            "peak_gpu_bytes": peak, "stdout": out[-4000:]}


def _load(folder, name):
    import os

    path = os.path.join(folder, name + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _stdout_json(rec):
    """The JSON a timed command printed (the last line that parses), or None."""
    if rec is None:
        return None
    for line in reversed(rec.get("stdout", "").splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def cmd_report(args, be: Backend) -> dict:
    """The table: one row per comparison, ours against each peer, ratio = peer time / ours."""
    import os

    d = args.dir
    rows, checks = [], {}

    def gib(rec):
        return f"{rec['peak_gpu_bytes'] / 2**30:.2f} GiB" if rec and "peak_gpu_bytes" in rec \
            else "-"

    def row(what, ours, peer, peer_name, unit="s", mem=False):
        if ours is None or peer is None:
            rows.append((what, "missing" if ours is None else _fmt(ours, unit),
                         peer_name, "missing" if peer is None else _fmt(peer, unit), "-",
                         ""))
            return
        ratio = peer["median_s"] / ours["median_s"]
        rows.append((what, _fmt(ours, unit), peer_name, _fmt(peer, unit), f"{ratio:.2f}x",
                     f"GPU peak ours {gib(ours)}, peer {gib(peer)}" if mem else ""))

    # 1. raw level 0 into one GPU array
    raw_ours = _load(d, "raw_ours")
    row("1 raw.tif level 0 -> one GPU array", raw_ours, _load(d, "raw_peer"),
        "tifffile.imread + cupy.asarray", unit="gps")
    if raw_ours and "direct_regions" in raw_ours:
        checks["raw path"] = (f"{raw_ours['direct_regions']} stripes copied directly, "
                              f"{raw_ours['cpu_regions']} on the CPU path")
    # ... and with cuFile asked for (SLIDEPIPE_CUFILE=1): against the pinned path above
    raw_cufile = _load(d, "raw_ours_cufile")
    row("1 raw.tif -> one GPU array, cuFile", raw_cufile, raw_ours,
        "ours, pread into pinned staging", unit="gps")
    if raw_cufile and "cufile_regions" in raw_cufile:
        checks["raw path, cuFile"] = (
            f"{raw_cufile['cufile_regions']} of {raw_cufile['direct_regions']} stripes read with "
            f"cuFile, {raw_cufile['cpu_regions']} on the CPU path; last reason: "
            f"{raw_cufile.get('last_fallback') or '-'}")
    # 2. JPEG regions into GPU memory
    jpeg_ours = _load(d, "jpeg_ours")
    row("2 jpeg.tif regions -> GPU", jpeg_ours, _load(d, "jpeg_cpu"),
        "slidepipe CPU, all cores (host memory)", unit="gps")
    row("2 jpeg.tif regions -> GPU", jpeg_ours, _load(d, "jpeg_cucim"),
        "cuCIM read_region(device='cuda'), batched", unit="gps")
    row("2 jpeg.tif regions -> GPU", jpeg_ours, _load(d, "jpeg_ours_cpudecode"),
        "ours, CPU decode + upload (SLIDEPIPE_NVJPEG=0)", unit="gps")
    batched = _load(d, "jpeg_ours_batch")
    row("2 jpeg.tif regions -> GPU, batches of 64", batched, _load(d, "jpeg_cucim"),
        "cuCIM read_region(device='cuda'), batched", unit="gps")
    if batched and "nvjpeg_tiles" in batched:
        checks["jpeg path, batches of 64"] = (
            f"{batched['nvjpeg_regions']} regions ({batched['nvjpeg_tiles']} tiles) through "
            f"nvJPEG, {batched['cpu_regions']} on the CPU path")
    for decoders in (4, 8):
        shared = _load(d, f"jpeg_ours_decoders{decoders}")
        row(f"2 jpeg.tif regions -> GPU, {decoders} shared decoders", shared, jpeg_ours,
            "ours, a decoder per thread", unit="gps")
        if shared and "nvjpeg_tiles" in shared:
            checks[f"jpeg path, {decoders} shared decoders"] = (
                f"{shared['nvjpeg_regions']} regions through nvJPEG, {shared['cpu_regions']} on "
                f"the CPU path beside them")
    if jpeg_ours and "nvjpeg_tiles" in jpeg_ours:
        checks["jpeg path"] = (f"{jpeg_ours['nvjpeg_regions']} regions ({jpeg_ours['nvjpeg_tiles']}"
                               f" tiles) through nvJPEG, {jpeg_ours['cpu_regions']} on the CPU "
                               f"path; last reason: {jpeg_ours.get('last_fallback') or '-'}")
    # 6. JPEG 2000 tiles into GPU memory
    j2k = _load(d, "j2k_ours")
    row("6 J2K slide level 0 -> GPU", j2k, _load(d, "j2k_cpudecode"),
        "ours, OpenJPEG on all cores + upload", unit="gps")
    if j2k and "nvjpeg2k_tiles" in j2k:
        checks["j2k path"] = (f"{j2k['nvjpeg2k_regions']} stripes ({j2k['nvjpeg2k_tiles']} tiles)"
                              f" through nvJPEG2000, {j2k['cpu_regions']} on the CPU path; last "
                              f"reason: {j2k.get('last_fallback') or '-'}")
    # 3. read -> Sobel -> Zarr
    so, sc = _load(d, "sobel_ours"), _load(d, "sobel_cpu")
    # the CuPy peer's own median (its Python start, imports and warm-up left out), with the
    # peak GPU memory sampled around the whole process
    cupy_rec = _load(d, "sobel_cupy")
    cupy_inner = _stdout_json(cupy_rec)
    if cupy_rec and cupy_inner:
        cupy_inner["peak_gpu_bytes"] = cupy_rec.get("peak_gpu_bytes", 0)
    row("3 raw.tif -> Sobel -> Zarr", so, cupy_inner,
        "CuPy cupyx.scipy.ndimage, whole image", mem=True)
    row("3 raw.tif -> Sobel -> Zarr", so, sc, "slidepipe CPU engine, all cores")
    jo, jc = _stdout_json(so), _stdout_json(sc)
    if jo and jc:
        checks["sobel dataset hash GPU == CPU"] = jo["dataset_hash"] == jc["dataset_hash"]
    # 4. spectra
    spo, spt = _load(d, "spec_ours"), _load(d, "spec_torch")
    row("4 spectra of a corpus", spo, spt, "PyTorch unfold + fft2 + histc", mem=True)
    row("4 spectra of a corpus", spo, _load(d, "spec_cpu"), "slidepipe CPU (FFTW), all cores")
    so_json = _load(d, "spec_ours_stats")
    if so_json and spt:
        c = so_json["corpus"]
        moved = sum(abs(a - b) for a, b in zip(c["histogram"], spt["histogram"])) / 2
        checks["spectra ours vs torch"] = (
            f"patches {c['patches']} / {spt['patches']}, mean {c['mean']:.4f} / "
            f"{spt['mean']:.4f} dB, std {c['std']:.4f} / {spt['std']:.4f} dB, "
            f"{moved / max(sum(c['histogram']), 1):.2e} of values in another bin")
    lines = [f"{'comparison':36} {'ours':>18} | {'peer':48} {'peer':>18} | {'ratio':>7}"]
    for what, ours, peer_name, peer, ratio, extra in rows:
        lines.append(f"{what:36} {ours:>18} | {peer_name:48} {peer:>18} | {ratio:>7}"
                     + (f"  {extra}" if extra else ""))
    for k, v in checks.items():
        lines.append(f"check: {k}: {v}")
    print("\n".join(lines))
    result = {"rows": [dict(zip(("comparison", "ours", "peer_name", "peer", "ratio", "extra"),
                                r)) for r in rows], "checks": checks}
    if args.json:
        result["runs"] = {name[:-5]: _load(d, name[:-5]) for name in sorted(os.listdir(d))
                          if name.endswith(".json")}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return {"table_lines": len(lines)}


def _fmt(rec, unit):
    if unit == "gps" and rec.get("pixels"):
        return f"{rec['pixels'] / rec['median_s'] * 1e-9:.3f} GP/s"
    return f"{rec['median_s']:.3f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="numpy/scipy instead of CuPy/PyTorch")
    ap.add_argument("--repeat", type=int, default=3)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("raw")
    p.add_argument("slide")
    p = sub.add_parser("cucim")
    p.add_argument("slide")
    p.add_argument("list")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=16)
    p = sub.add_parser("sobel")
    p.add_argument("slide")
    p.add_argument("out")
    p.add_argument("--chunk", type=int, default=1024)
    p = sub.add_parser("spectrum")
    p.add_argument("slides", nargs="+")
    p.add_argument("--patch", type=int, default=256)
    p.add_argument("--block", type=int, default=1024)
    p = sub.add_parser("mkraw")
    p.add_argument("rgba")
    p.add_argument("width", type=int)
    p.add_argument("height", type=int)
    p.add_argument("out")
    p = sub.add_parser("mklist")
    for name in ("width", "height", "size", "count", "seed"):
        p.add_argument(name, type=int)
    p.add_argument("out")
    p = sub.add_parser("timecmd")
    p.add_argument("--rm", help="a folder to delete before each run (an output the command "
                                "refuses to overwrite)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("report")
    p.add_argument("dir")
    p.add_argument("--json", help="also write the table, the checks and every run's record here")
    args = ap.parse_args(argv)
    if args.cmd == "timecmd" and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    be = Backend(args.cpu or args.cmd in ("mkraw", "mklist", "timecmd", "report"))
    result = {"raw": cmd_raw, "cucim": cmd_cucim, "sobel": cmd_sobel, "spectrum": cmd_spectrum,
              "mkraw": cmd_mkraw, "mklist": cmd_mklist, "timecmd": cmd_timecmd,
              "report": cmd_report}[args.cmd](args, be)
    if args.cmd != "report":
        result["cmd"] = args.cmd
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
