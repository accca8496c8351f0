"""gpu_train.py — training batches into GPU memory (issue 24): slidepipe's Loader(device="cuda")
against cuCIM's batched read_region(device="cuda") followed by Kornia's augmentations on the GPU,
on the same slide, the same patch positions and the same batch shape, in one run.

    usage: python3 bench/gpu_train.py SLIDE [--size 224] [--count 4096] [--batch 64]
               [--threads N] [--repeat 3] [--json FILE]
    (PYTHONPATH must reach the slidepipe package and cuCIM; bench/bench_gpu.sh sets it up)

Both sides hand the training loop float16 NCHW batches in GPU memory, each patch flipped or
turned (one of the 8 dihedral transforms), HED jittered (sigma 0.05) and normalised with
mean 0.5, std 0.2:
  ours  slidepipe.Loader(..., device="cuda", dihedral=True, hed_sigma=0.05), threads = cores:
        JPEG tiles decoded by nvJPEG, flips, HED jitter and float16 on the GPU; batches taken
        with torch.from_dlpack
  peer  cuCIM CuImage.read_region(locations, size, level 0, batch_size, num_workers=cores,
        device="cuda"), then on the GPU: uint8 NHWC -> float NCHW, Kornia RandomHorizontalFlip,
        RandomVerticalFlip and RandomRotation90, HED jitter in torch (optical density, the
        Ruifrok-Johnston matrix, per-patch scale and shift), kornia.enhance.Normalize, half().
        (MONAI's pathology readers wrap cuCIM the same way; MONAI adds no GPU step here.)
Ours also runs a second time with SLIDEPIPE_NVJPEG=0: the JPEG tiles decoded by the CPU's
threads, every later step still on the GPU. Each side runs in a process of its own. A parity
check first reads 64 patches without augmentation on both sides (uint8 NHWC) and prints the
largest pixel difference (the two JPEG decoders may differ by rounding). Each side's time ends
with torch.cuda.synchronize(); the first run is a warm-up, the median of the rest is printed, in
patches/s, with the ratio ours / peer.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import slidepipe
from slidepipe.loader import REQUEST_DTYPE, BatchFormat, Loader

HED = torch.tensor([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]],
                   dtype=torch.float32)


def positions(width, height, size, count, seed=7):
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, width - size, count)
    ys = rng.integers(0, height - size, count)
    return xs, ys


def ours(path, xs, ys, size, batch, threads, augment=True, fmt=None):
    reqs = np.zeros(len(xs), dtype=REQUEST_DTYPE)
    reqs["x"], reqs["y"], reqs["seed"] = xs, ys, np.arange(len(xs))
    fmt = fmt or BatchFormat("float16", "NCHW", (0.5,) * 3, (0.2,) * 3)
    steps = dict(dihedral=True, hed_sigma=0.05) if augment else {}
    out = []
    with slidepipe.open(path) as s, Loader([s], reqs, fmt, size=size, batch_size=batch,
                                           threads=threads, device="cuda", **steps) as loader:
        for b in loader:
            out.append(torch.from_dlpack(b))
    torch.cuda.synchronize()
    return out


def hed_jitter(x, sigma, gen):
    """x: float NCHW in [0, 1] on the GPU; per-patch, per-stain scale 1+N(0,s) and shift N(0,s)
    in HED optical density (the usual HED-light augmentation)."""
    n = x.shape[0]
    m = HED.to(x.device)
    od = -torch.log(x.clamp_min(1.0 / 255.0))                    # N,3,H,W
    hed = torch.einsum("nchw,cd->ndhw", od, torch.linalg.inv(m))  # stains
    a = 1 + sigma * torch.randn(n, 3, 1, 1, device=x.device, generator=gen)
    b = sigma * torch.randn(n, 3, 1, 1, device=x.device, generator=gen)
    od = torch.einsum("ndhw,dc->nchw", hed * a + b, m)
    return torch.exp(-od).clamp(0, 1)


def peer(path, xs, ys, size, batch, threads, augment=True):
    import cupy
    import kornia.augmentation as K
    import kornia.enhance
    from cucim import CuImage

    img = CuImage(path)
    locs = [(int(x), int(y)) for x, y in zip(xs, ys)]
    gen = torch.Generator(device="cuda").manual_seed(1)
    aug = torch.nn.Sequential(K.RandomHorizontalFlip(), K.RandomVerticalFlip(),
                              K.RandomRotation90(times=(0, 3))).cuda()
    norm = kornia.enhance.Normalize(torch.full((3,), 0.5), torch.full((3,), 0.2)).cuda()
    out = []
    for cb in img.read_region(locs, (size, size), level=0, batch_size=batch,
                              num_workers=threads, device="cuda"):
        t = torch.as_tensor(cupy.asarray(cb), device="cuda")  # N,H,W,C uint8 (C 3 or 4)
        if t.dim() == 3:
            t = t.unsqueeze(0)
        t = t[..., :3]
        if not augment:
            out.append(t)
            continue
        x = t.permute(0, 3, 1, 2).float().div_(255.0)
        x = hed_jitter(aug(x), 0.05, gen)
        out.append(norm(x).half())
    torch.cuda.synchronize()
    return out


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def side(a, xs, ys):
    """One side in this process: the parity batch saved to a.parity, then the timed runs; prints
    one JSON line."""
    fn = ours if a.side == "ours" else peer
    n = min(64, a.count)
    if a.side == "ours":
        first = fn(a.slide, xs[:n], ys[:n], a.size, n, a.threads, augment=False,
                   fmt=BatchFormat("uint8", "NHWC"))
    else:
        first = fn(a.slide, xs[:n], ys[:n], a.size, n, a.threads, augment=False)
    np.save(a.parity, torch.cat(first)[..., :3].cpu().numpy())
    shape = tuple(fn(a.slide, xs[:a.batch], ys[:a.batch], a.size, a.batch, a.threads)[0].shape)
    secs = timed(lambda: fn(a.slide, xs, ys, a.size, a.batch, a.threads), a.repeat)
    print(json.dumps({"side": a.side, "seconds": secs, "batch_shape": shape}))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("slide")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--side", choices=("ours", "peer"), help=argparse.SUPPRESS)
    ap.add_argument("--parity", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    with slidepipe.open(a.slide) as s:
        width, height = s.levels[0].width, s.levels[0].height
    xs, ys = positions(width, height, a.size, a.count)
    if a.side:
        return side(a, xs, ys)

    # Each side in a process of its own, as each would run in a training job (in one process,
    # cuCIM's TIFF plugin crashed after slidepipe's libraries were loaded: a JPEG library clash).
    recs, first = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        # ours twice: JPEG tiles decoded by nvJPEG (the default), and by the CPU's threads
        # (SLIDEPIPE_NVJPEG=0), the later steps on the GPU both times
        for name, side_name, env in (("ours", "ours", {}),
                                     ("ours_cpu_decode", "ours", {"SLIDEPIPE_NVJPEG": "0"}),
                                     ("peer", "peer", {})):
            parity = os.path.join(tmp, name + ".npy")
            cmd = [sys.executable, os.path.abspath(__file__), a.slide, "--side", side_name,
                   "--parity", parity] + [f"--{k}={getattr(a, k)}" for k in
                                          ("size", "count", "batch", "threads", "repeat")]
            out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, **env))
            if out.returncode != 0:
                print(f"gpu_train: the {name} side failed (exit {out.returncode})")
                return 1
            recs[name] = json.loads(out.stdout.strip().splitlines()[-1])
            first[name] = np.load(parity)
    diff = int(np.abs(first["ours"].astype(np.int16) - first["peer"].astype(np.int16)).max())
    print(f"parity (64 patches, uint8, no augmentation): max |ours - cuCIM| = {diff}")

    def per_s(rec):
        t = rec["seconds"][1:] or rec["seconds"]
        return a.count / statistics.median(t)

    rec = {"gpu": torch.cuda.get_device_name(0), "count": a.count, "size": a.size,
           "batch": a.batch, "threads": a.threads, "batch_shape": recs["ours"]["batch_shape"],
           "peer_batch_shape": recs["peer"]["batch_shape"],
           "ours_patches_per_s": per_s(recs["ours"]), "peer_patches_per_s": per_s(recs["peer"]),
           "ours_cpu_decode_patches_per_s": per_s(recs["ours_cpu_decode"]),
           "ours_seconds": recs["ours"]["seconds"], "peer_seconds": recs["peer"]["seconds"],
           "parity_max_diff": diff}
    rec["ratio"] = rec["ours_patches_per_s"] / rec["peer_patches_per_s"]
    print(f"training batches into GPU memory, {a.count} patches {a.size}², batch {a.batch}, "
          f"{a.threads} threads, {rec['gpu']}: ours {rec['ours_patches_per_s']:.0f} patches/s "
          f"({rec['ours_cpu_decode_patches_per_s']:.0f} with the CPU decoding), "
          f"cuCIM+Kornia {rec['peer_patches_per_s']:.0f} patches/s, ratio {rec['ratio']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
