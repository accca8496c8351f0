"""Train a small CNN on whole-slide patches with slidepipe feeding the loop (CPU is enough).

    PYTHONPATH=build/python .venv/bin/python examples/train_cnn.py SLIDE [SLIDE...] \
        [--annotations A.geojson ...] [--mpp 1.0] [--steps 50] [--out run/]

Every patch is 64² at --mpp µm/px (each slide read at the downsample it needs), Macenko-
normalized, flipped and HED-jittered by the library, and handed over as float16 NCHW already
normalized by the ImageNet mean/std, made ahead on the library's threads while the model trains.
With --annotations (one GeoJSON or ASAP XML per slide) the model learns each patch's class;
without, it learns to tell the slides apart. The run writes run/manifest.json (every slide's
pixel hash, the settings, the seed, a run hash) and a checkpoint with (epoch, step), so
--resume continues exactly where the run stopped, and --repeat run/manifest.json makes the same
batches again after checking that no input changed. docs/train.md walks through it.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn as nn

import slidepipe
import slidepipe.torch as sptorch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def model_for(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, classes))


def sampler_from(args):
    if args.repeat:
        return slidepipe.PatchSampler.from_manifest(args.repeat, threads=args.threads)
    slides = []
    for path in args.slides:
        slide = slidepipe.open(path)
        if slide.mpp is None and args.slide_mpp is not None:
            slide.close()
            slide = slidepipe.open(path, mpp=args.slide_mpp)  # an override for this one
        slides.append(slide)
    return slidepipe.PatchSampler(
        slides, 64, mpp=args.mpp, batch_size=args.batch, min_tissue=0.5, mask_side=1024,
        normalize=True, dihedral=True, hed_sigma=0.05, seed=args.seed,
        dtype="float16", layout="NCHW", mean=MEAN, std=STD,
        annotations=args.annotations, threads=args.threads, prefetch=4, on_error="skip")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("slides", nargs="*")
    p.add_argument("--annotations", nargs="*", default=None)
    p.add_argument("--mpp", type=float, default=1.0, help="µm/px of the patches")
    p.add_argument("--slide-mpp", type=float, default=None,
                   help="µm/px of level 0 for slides that do not record it")
    p.add_argument("--steps", type=int, default=50, help="steps in all (--resume included)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="run")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--repeat", help="make the batches a manifest records (checks inputs)")
    args = p.parse_args()
    if not args.slides and not args.repeat:
        p.error("give slides, or --repeat MANIFEST")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the library's threads make the batches; one for the model
    os.makedirs(args.out, exist_ok=True)

    sampler = sampler_from(args)
    for path, why in sampler.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    labelled = sampler.annotations and any(a is not None for a in sampler.annotations)
    classes = len(sampler.classes) if labelled else len(sampler.slides)
    run_hash = sampler.write_manifest(os.path.join(args.out, "manifest.json"))
    print(f"{len(sampler.tiles)} patches from {len(sampler.slides)} slides, {len(sampler)} "
          f"batches an epoch, run hash {run_hash[:16]}")

    model = model_for(classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    epoch, step, done = 0, 0, 0
    checkpoint = os.path.join(args.out, "checkpoint.pt")
    if args.resume and os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        epoch, step, done = state["epoch"], state["step"], state["done"]
        print(f"resuming at epoch {epoch}, step {step}")

    loader = sptorch.PatchLoader(sampler)
    t0, seen = time.perf_counter(), 0
    while done < args.steps:
        loader.set_epoch(epoch, start=step)
        for x, tiles in loader:
            target = torch.from_numpy(tiles["label" if labelled else "slide"].astype("int64"))
            loss = nn.functional.cross_entropy(model(x.float()), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step, done, seen = step + 1, done + 1, seen + len(x)
            if done % 10 == 0 or done == args.steps:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}")
            if done == args.steps:
                break
        else:
            epoch, step = epoch + 1, 0
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                "step": step, "done": done}, checkpoint)
    print(f"{seen} patches in {time.perf_counter() - t0:.1f} s; checkpoint at epoch {epoch}, "
          f"step {step}")
    sampler.close()


if __name__ == "__main__":
    main()
