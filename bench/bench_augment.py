"""bench_augment.py — a batch of patches through the whole augmentation set: slidepipe's seeded C
augmentations against Kornia on the CPU with the same transforms, threads and batch, in the
same run.

    usage: .venv/bin/python bench/bench_augment.py [SLIDE] [--batch 256] [--size 224]
               [--threads 1,2] [--repeat 3]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

The transforms (the issue's list): random flips and quarter turns; an affine map (rotation
±30°, scale 0.8–1.25, shear ±10°, translation ±10%); an elastic field (alpha 1, sigma 8, kernel
49, Kornia's normalised units); colour jitter (brightness, contrast, saturation 0.2, hue 0.05);
HED jitter (sigma 0.05); Gaussian noise (sigma 0.02 of the range, 5 in 8-bit units). slidepipe
runs them on uint8 patches in place: augment_geometry (affine and elastic as one resampling),
augment (flips, HED jitter), augment_photometric (jitter, noise), each on T threads. Kornia runs
AugmentationSequential(RandomHorizontalFlip, RandomVerticalFlip, RandomRotation90, RandomAffine,
RandomElasticTransform, ColorJitter, HED jitter written in torch, RandomGaussianNoise) on the
same patches as a float32 (n, 3, h, w) tensor in [0, 1], with torch.set_num_threads(T); the
conversion to float is not timed, so Kornia is timed on its own terms. The patches are tissue
windows read once from SLIDE (default: the shared CMU-1-Small-Region.svs), or, with no slide,
a synthetic H&E image. Prints patches/s of each side, the ratio, and the target (>= 5x).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import slidepipe

HED = torch.tensor([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])


def patches_from(path, n, size):
    if path is None or not os.path.exists(path):
        rng = np.random.default_rng(0)
        base = rng.integers(120, 255, (n, size, size, 3), dtype=np.uint8)
        return base
    with slidepipe.open(path) as s:
        tiles = s.tissue_tiles(size, min_tissue=0.5, mask=s.tissue_mask(1024))
        picks = tiles[np.arange(n) % len(tiles)]
        return s.read_regions([(int(t["x"]), int(t["y"])) for t in picks], 0, (size, size),
                              rgb=True)


def ours(patches, seeds, threads):
    g = slidepipe.Geometry(rotation=(-30, 30), scale=(0.8, 1.25), shear_x=(-10, 10),
                           shear_y=(-10, 10), translate_x=(-0.1, 0.1), translate_y=(-0.1, 0.1),
                           elastic_alpha=(1, 1), elastic_sigma=8, elastic_kernel=49)
    p = slidepipe.Photometric(brightness=0.2, contrast=0.2, saturation=0.2, hue=0.05,
                              noise=5.0)

    def run(x):
        slidepipe.augment_geometry(x, seeds, g, threads=threads)
        slidepipe.augment(x, seeds, dihedral=True, hed_sigma=0.05, threads=threads)
        slidepipe.augment_photometric(x, seeds, p, threads=threads)
        return x
    return run


class HedJitter(torch.nn.Module):
    """HED jitter (Tellez et al.), as docs/train.md defines it, per sample in torch."""

    def __init__(self, sigma):
        super().__init__()
        self.sigma, self.inv = sigma, torch.linalg.inv(HED)

    def forward(self, x):
        n = x.shape[0]
        od = -torch.log(torch.clamp(x * 255, min=1) / 255).permute(0, 2, 3, 1)
        c = od @ self.inv
        alpha = 1 + self.sigma * (2 * torch.rand(n, 1, 1, 3) - 1)
        beta = self.sigma * (2 * torch.rand(n, 1, 1, 3) - 1)
        return torch.exp(-((c * alpha + beta) @ HED)).clamp(0, 1).permute(0, 3, 1, 2)


def kornia_pipeline():
    import kornia.augmentation as K
    return K.AugmentationSequential(
        K.RandomHorizontalFlip(), K.RandomVerticalFlip(), K.RandomRotation90(times=(0, 3)),
        K.RandomAffine(degrees=30, translate=(0.1, 0.1), scale=(0.8, 1.25),
                       shear=(-10, 10, -10, 10), padding_mode="reflection", p=1.0),
        K.RandomElasticTransform(kernel_size=(49, 49), sigma=(8.0, 8.0), alpha=(1.0, 1.0),
                                 padding_mode="reflection", p=1.0),
        K.ColorJitter(0.2, 0.2, 0.2, 0.05, p=1.0),
        HedJitter(0.05),
        K.RandomGaussianNoise(std=5 / 255, p=1.0))


def best_of(fn, make_input, repeat):
    best = float("inf")
    for _ in range(repeat):
        x = make_input()
        t = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("slide", nargs="?",
                    default=os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                         "testdata", "aperio", "CMU-1-Small-Region.svs"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    patches = patches_from(args.slide, args.batch, args.size)
    seeds = np.arange(args.batch, dtype=np.uint64) * 0x9E3779B97F4A7C15 % (1 << 63)
    as_float = torch.from_numpy(patches).permute(0, 3, 1, 2).float().div(255).contiguous()
    pipeline = kornia_pipeline()
    print(f"{args.batch} patches of {args.size}² from {args.slide}: flips and turns, affine, "
          "elastic, colour jitter, HED jitter, noise")
    print(f"{'threads':>7} {'slidepipe p/s':>14} {'kornia p/s':>11} {'ratio':>6}")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        t_ours = best_of(ours(patches, seeds, threads), lambda: patches.copy(), args.repeat)
        with torch.no_grad():
            t_kornia = best_of(pipeline, lambda: as_float.clone(), args.repeat)
        a, b = args.batch / t_ours, args.batch / t_kornia
        print(f"{threads:>7} {a:>14.0f} {b:>11.0f} {a / b:>5.1f}x   (target >= 5x)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
