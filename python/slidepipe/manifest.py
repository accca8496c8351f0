"""Run manifests: what a training run read and how, so that it can be repeated exactly and a
changed input is caught by name.

A manifest (JSON) holds, under "definition" slidepipe-run-v1:
- "slides": each slide's path and pixel hash (docs/pixel-hash.md: its decoded pixels alone, so
  the same for a renamed file or a lossless re-encoding), and any mpp override;
- "annotations": each slide's annotation file path and the SHA-256 of its bytes, or null;
- "settings": the PatchSampler's settings (size, resolution, seed, augmentation, format...);
- "tiles_sha256": the SHA-256 of the candidate tiles (slide, x, y, tissue, label records);
- "run_hash": the SHA-256 of the canonical JSON (sorted keys, no spaces) of everything above
  except the paths: two runs with the same run hash read the same pixels with the same settings
  and so make the same batches.

    run_hash = sampler.write_manifest("run.json")
    again = slidepipe.PatchSampler.from_manifest("run.json")     # checks every input first
"""

import hashlib
import json
import os
import tempfile

import numpy as np

DEFINITION = "slidepipe-run-v1"
RUN_OPTIONS = ("threads", "prefetch", "pinned", "rank", "world_size", "on_error", "numa")


def _pixel_hash(slide):
    """A slide's pixel hash: the one a converted store records, else computed now."""
    recorded = slide.properties.get("slidepipe.pixel-hash")
    return recorded if recorded else slide.pixel_hash()


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run_hash(m):
    content = {
        "definition": m["definition"],
        "slides": [{"pixel_hash": s["pixel_hash"], "mpp": s["mpp"]} for s in m["slides"]],
        "annotations": [a and a["sha256"] for a in m["annotations"]],
        "settings": m["settings"],
        "tiles_sha256": m["tiles_sha256"],
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def manifest_of(sampler):
    m = {
        "definition": DEFINITION,
        "slides": [{"path": s.path, "pixel_hash": _pixel_hash(s),
                    "mpp": None if s._mpp_override is None else list(s._mpp_override)}
                   for s in sampler.slides],
        "annotations": [None if a is None else {"path": str(a.path),
                                                "sha256": _file_sha256(a.path)}
                        for a in sampler.annotations],
        "settings": sampler.settings,
        "tiles_sha256": hashlib.sha256(np.ascontiguousarray(sampler.tiles).tobytes()).hexdigest(),
    }
    if sampler.skipped:
        m["skipped"] = [{"path": p, "reason": r} for p, r in sampler.skipped]
    m["run_hash"] = _run_hash(m)
    return m


def write_manifest(manifest, path):
    """Write `manifest` to `path` atomically (a temporary file renamed over it)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return manifest["run_hash"]


def _load(manifest):
    if isinstance(manifest, dict):
        return manifest
    with open(manifest) as f:
        m = json.load(f)
    if not isinstance(m, dict) or m.get("definition") != DEFINITION:
        raise ValueError(f"{manifest}: not a slidepipe run manifest ({DEFINITION})")
    return m


def sampler_from_manifest(cls, manifest, run_options):
    from . import Slide
    from .train import Stains

    m = _load(manifest)
    unknown = set(run_options) - set(RUN_OPTIONS)
    if unknown:
        raise ValueError(f"from_manifest takes only run options {RUN_OPTIONS}, not "
                         f"{sorted(unknown)}: the rest is the manifest's")
    if _run_hash(m) != m.get("run_hash"):
        raise ValueError("the manifest's run hash does not match its contents (edited?)")
    slides = []
    try:
        for s in m["slides"]:
            slide = Slide(s["path"], mpp=s["mpp"])
            slides.append(slide)
            now = _pixel_hash(slide)
            if now != s["pixel_hash"]:
                raise ValueError(f"{s['path']}: its pixels changed since the manifest was written "
                                 f"(pixel hash {now}, recorded {s['pixel_hash']})")
        for a in m["annotations"]:
            if a is not None and _file_sha256(a["path"]) != a["sha256"]:
                raise ValueError(f"{a['path']}: the annotations changed since the manifest was "
                                 "written")
    except BaseException:
        for slide in slides:
            slide.close()
        raise
    from .augment_color import Photometric
    from .augment_geometry import Geometry

    settings = dict(m["settings"])
    target = settings.pop("target")
    if target is not None:
        settings["target"] = Stains(*target)
    reinhard_target = settings.pop("reinhard_target", None)
    if reinhard_target is not None:
        from .stain_tools import ReinhardStats
        settings["reinhard_target"] = ReinhardStats(*reinhard_target)
    for key, params in (("geometry", Geometry), ("photometric", Photometric)):
        if settings.get(key) is not None:
            settings[key] = params(**{k: tuple(v) if isinstance(v, list) else v
                                      for k, v in settings[key].items()})
    annotations = [a and a["path"] for a in m["annotations"]]
    sampler = cls(slides, annotations=annotations if any(annotations) else None, **settings,
                  **run_options)
    sampler._owned.extend(slides)
    tiles = hashlib.sha256(np.ascontiguousarray(sampler.tiles).tobytes()).hexdigest()
    if tiles != m["tiles_sha256"]:
        sampler.close()
        raise ValueError("the tiles found now differ from the manifest's (a different "
                         "slidepipe's tissue masks?); the batches would not repeat")
    return sampler
