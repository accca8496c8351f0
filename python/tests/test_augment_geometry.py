"""Geometric augmentation (slidepipe.augment_geometry, docs/augment-geometry.md) against the
libraries whose definitions it follows, driven with the very numbers the library drew
(Geometry.draw, Geometry.elastic_noise):

- the affine map against kornia.geometry.transform.warp_affine (bilinear, align_corners=True,
  padding "reflection" for border="reflect" and "fill" for border="constant");
- the elastic field against kornia.geometry.transform.elastic_transform2d with the same noise
  (align_corners=True, kernel (k, k), sigma (s, s), alpha (ax, ay));
- the random resized crop against torchvision.transforms.functional.resized_crop with the same box
  (bilinear, antialias off);
- everything at once against a numpy evaluation of the documented composed map;
- bytes identical on 1 and 2 threads and for a batch split 1 x N or N x 1.

The references run in float64 and are rounded half up to uint8 as the library does; a pixel may
then differ by one level where the two sides' roundings of the same real number fall on either
side of a half. The asserts allow max |diff| <= 1 and mean |diff| < 0.001, every pixel included
(no border excluded). Measured here (8 seeds each, 64 x 48 patches of uniform noise): the affine
map (both borders), the elastic field (both borders) and the composed map agree exactly (max 0,
mean 0); the crop has max 1, mean 5.4e-5 (PyTorch's interpolate computes the source coordinate
with the scale in a different order, (x + 0.5) * (h / H) - 0.5, and a few samples round the other
way).
"""

import math

import numpy as np
import pytest
import torch

import slidepipe

kornia = pytest.importorskip("kornia")
import torchvision.transforms.functional as TF  # noqa: E402

W, H, N = 64, 48, 8


def patches(seed=0, n=N):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, H, W, 3), dtype=np.uint8)


def to_uint8(t):
    """float64 (1, 3, h, w) tensor -> (h, w, 3) uint8, rounded half up as the library does."""
    a = t[0].permute(1, 2, 0).numpy()
    return np.floor(np.clip(a, 0, 255) + 0.5).astype(np.uint8)


def as_tensor(p):
    return torch.from_numpy(p.astype(np.float64)).permute(2, 0, 1)[None]


def compare(ours, ref, what):
    d = np.abs(ours.astype(int) - ref.astype(int))
    msg = f"{what}: max |diff| {d.max()}, mean {d.mean():.5f}, pixels off {np.mean(d > 0):.5f}"
    assert d.max() <= 1 and d.mean() < 0.001, msg
    return d.max(), d.mean()


AFFINE = dict(rotation=(-35, 35), scale=(0.75, 1.3), scale_x=(0.9, 1.15), scale_y=(0.85, 1.1),
              shear_x=(-15, 15), shear_y=(-10, 10), translate_x=(-0.2, 0.2),
              translate_y=(-0.15, 0.15))


@pytest.mark.parametrize("border", ["reflect", "constant"])
def test_affine_matches_kornia_warp_affine(border):
    """Measured max |diff| 0, mean 0 (reflect and constant, fill (30, 140, 250))."""
    g = slidepipe.Geometry(**AFFINE, border=border, fill=(30, 140, 250))
    src = patches(1)
    out = src.copy()
    seeds = np.arange(N, dtype=np.uint64) * 7919 + 3
    slidepipe.augment_geometry(out, seeds, g, threads=2)
    worst = []
    for i in range(N):
        m = torch.from_numpy(g.draw(int(seeds[i]), W, H)["matrix"])[None]
        mode = "reflection" if border == "reflect" else "fill"
        ref = kornia.geometry.transform.warp_affine(
            as_tensor(src[i]), m, (H, W), mode="bilinear", padding_mode=mode, align_corners=True,
            fill_value=torch.tensor([30.0, 140.0, 250.0], dtype=torch.float64))
        worst.append(compare(out[i], to_uint8(ref), f"affine {border} patch {i}"))
    assert not np.array_equal(out, src)
    print("affine", border, "max", max(w[0] for w in worst), "mean", np.mean([w[1] for w in worst]))


@pytest.mark.parametrize("border", ["reflect", "constant"])
@pytest.mark.parametrize("alpha,sigma,kernel", [((0.3, 0.5), 4.0, 17), ((1.0, 1.0), 32.0, 63)])
def test_elastic_matches_kornia_elastic_transform2d(border, alpha, sigma, kernel):
    """kornia smooths the same noise (zeros beyond the edges) and samples with grid_sample; the
    second case is RandomElasticTransform's defaults. Measured max |diff| 0, mean 0."""
    g = slidepipe.Geometry(elastic_alpha=alpha, elastic_sigma=sigma, elastic_kernel=kernel,
                           border=border)
    src = patches(2)
    out = src.copy()
    seeds = np.arange(N, dtype=np.uint64) + 100
    slidepipe.augment_geometry(out, seeds, g, threads=2)
    worst = []
    for i in range(N):
        noise = torch.from_numpy(g.elastic_noise(int(seeds[i]), W, H))[None]
        ref = kornia.geometry.transform.elastic_transform2d(
            as_tensor(src[i]), noise, kernel_size=(kernel, kernel), sigma=(sigma, sigma),
            alpha=alpha,
            align_corners=True, mode="bilinear",
            padding_mode="reflection" if border == "reflect" else "zeros")
        worst.append(compare(out[i], to_uint8(ref), f"elastic {border} patch {i}"))
    assert not np.array_equal(out, src)
    print("elastic", border, "max", max(w[0] for w in worst), "mean",
          np.mean([w[1] for w in worst]))


def test_crop_matches_torchvision_resized_crop():
    """The box of Geometry.draw given to resized_crop (bilinear, antialias off); measured max
    |diff| 1, mean 5.4e-5. (The boxes themselves are checked in test_draws_follow_the_stream.)"""
    g = slidepipe.Geometry(crop=True, crop_scale=(0.2, 1.0), crop_ratio=(0.6, 1.6))
    src = patches(3)
    out = src.copy()
    seeds = np.arange(N, dtype=np.uint64) * 31 + 5
    slidepipe.augment_geometry(out, seeds, g)
    worst = []
    for i in range(N):
        top, left, h, w = g.draw(int(seeds[i]), W, H)["crop"]
        assert 0 <= top and top + h <= H and 0 <= left and left + w <= W
        area = h * w / (H * W)
        assert 0.2 - 0.05 <= area <= 1.0 + 1e-9
        ref = TF.resized_crop(as_tensor(src[i])[0], top, left, h, w, [H, W],
                              interpolation=TF.InterpolationMode.BILINEAR, antialias=False)
        worst.append(compare(out[i], to_uint8(ref[None]), f"crop patch {i}"))
    print("crop max", max(w[0] for w in worst), "mean", np.mean([w[1] for w in worst]))


MASK64 = (1 << 64) - 1
STREAM = 0x67656F6D65747279  # "geometry"


def stream_draws(seed, n):
    """The geometry stream of docs/augment-geometry.md: splitmix64 from seed ^ STREAM, each
    output turned into (z >> 11) * 2^-53."""
    state, out = (seed ^ STREAM) & MASK64, []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(((z ^ (z >> 31)) >> 11) * 2.0**-53)
    return out


def get_params_reference(u, scale, ratio):
    """torchvision's RandomResizedCrop.get_params (0.29) with its random numbers replaced by the
    draws u[0..39]: 10 attempts of (area, log-ratio, top, left), then the centre crop."""
    area = H * W
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for k in range(10):
        a = u[4 * k:4 * k + 4]
        target = area * (scale[0] + (scale[1] - scale[0]) * a[0])
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * a[1])
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= W and 0 < h <= H:
            return int(a[2] * (H - h + 1)), int(a[3] * (W - w + 1)), h, w
    in_ratio = W / H
    if in_ratio < min(ratio):
        w, h = W, int(round(W / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = H, int(round(H * max(ratio)))
    else:
        w, h = W, H
    return (H - h) // 2, (W - w) // 2, h, w


def test_draws_follow_the_stream():
    """Every drawn number from the documented stream and order: rotation, scale, scale_x,
    scale_y, shear_x, shear_y, translate_x, translate_y, then the crop's 40, then the noise."""
    g = slidepipe.Geometry(**AFFINE, crop=True, crop_scale=(0.05, 0.9), crop_ratio=(0.3, 3.0),
                           elastic_alpha=(1, 1))
    names = ["rotation", "scale", "scale_x", "scale_y", "shear_x", "shear_y", "translate_x",
             "translate_y"]
    for seed in [0, 1, 2**63 + 5, MASK64] + list(range(100, 160)):
        u = stream_draws(seed, 48 + 2 * W * H)
        d = g.draw(seed, W, H)
        for k, name in enumerate(names):
            lo, hi = AFFINE[name]
            want = lo + (hi - lo) * u[k]
            if name == "translate_x":
                want *= W
            elif name == "translate_y":
                want *= H
            assert d[name] == pytest.approx(want, rel=1e-15, abs=1e-12), name
        assert d["crop"] == get_params_reference(u[8:48], (0.05, 0.9), (0.3, 3.0))
        noise = g.elastic_noise(seed, W, H)
        assert np.array_equal(noise.reshape(-1), 2.0 * np.array(u[48:]) - 1.0)


def gaussian_smooth(plane, k, sigma):
    r = k // 2
    x = np.arange(-r, r + 1, dtype=np.float64)
    wts = np.exp(-x * x / (2 * sigma * sigma))
    wts /= wts.sum()
    pad = np.pad(plane, r)
    rows = sum(wts[j] * pad[:, j:j + plane.shape[1]] for j in range(k))[r:-r or None, :]
    cols = np.pad(rows, ((r, r), (0, 0)))
    return sum(wts[j] * cols[j:j + plane.shape[0], :] for j in range(k))


def reflect101(t, n):
    if n == 1:
        return np.zeros_like(t)
    period = 2.0 * (n - 1)
    t = np.fmod(np.abs(t), period)
    return np.where(t > n - 1, period - t, t)


def numpy_reference(img, d, noise, g):
    """The documented map: output (x, y) -> crop -> inverse affine -> + elastic -> bilinear."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    top, left, ch, cw = d["crop"]
    u = np.clip((x + 0.5) * cw / W - 0.5, 0, cw - 1) + left
    v = np.clip((y + 0.5) * ch / H - 0.5, 0, ch - 1) + top
    m = d["matrix"]
    inv = np.linalg.inv(m[:, :2])
    a, b = u - m[0, 2], v - m[1, 2]
    sx = inv[0, 0] * a + inv[0, 1] * b
    sy = inv[1, 0] * a + inv[1, 1] * b
    sx = sx + g.elastic_alpha[0] * (W - 1) / 2 * gaussian_smooth(noise[0], g.elastic_kernel,
                                                                   g.elastic_sigma)
    sy = sy + g.elastic_alpha[1] * (H - 1) / 2 * gaussian_smooth(noise[1], g.elastic_kernel,
                                                                   g.elastic_sigma)
    sx, sy = reflect101(sx, W), reflect101(sy, H)
    x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    x1, y1 = np.minimum(x0 + 1, W - 1), np.minimum(y0 + 1, H - 1)
    f = img.astype(np.float64)
    top_ = (1 - fx) * f[y0, x0] + fx * f[y0, x1]
    bot = (1 - fx) * f[y1, x0] + fx * f[y1, x1]
    return np.floor(np.clip((1 - fy) * top_ + fy * bot, 0, 255) + 0.5).astype(np.uint8)


def test_composed_map_matches_numpy_definition():
    """Crop, affine and elastic at once, one resampling; measured max |diff| 0, mean 0."""
    g = slidepipe.Geometry(**AFFINE, crop=True, elastic_alpha=(0.2, 0.25), elastic_sigma=3.0,
                           elastic_kernel=13)
    src = patches(4)
    out = src.copy()
    seeds = np.arange(N, dtype=np.uint64) + 555
    slidepipe.augment_geometry(out, seeds, g)
    for i in range(N):
        s = int(seeds[i])
        ref = numpy_reference(src[i], g.draw(s, W, H), g.elastic_noise(s, W, H), g)
        compare(out[i], ref, f"composed patch {i}")


def test_identity_is_exact():
    src = patches(5)
    out = src.copy()
    slidepipe.augment_geometry(out, np.arange(N), slidepipe.Geometry())
    assert np.array_equal(out, src)


def test_threads_and_batch_split_do_not_matter():
    g = slidepipe.Geometry(**AFFINE, crop=True, elastic_alpha=(0.2, 0.2), elastic_sigma=5.0)
    src = patches(6, 12)
    seeds = np.arange(12, dtype=np.uint64) * 1000003
    one = src.copy()
    slidepipe.augment_geometry(one, seeds, g, threads=1)
    two = src.copy()
    slidepipe.augment_geometry(two, seeds, g, threads=2)
    assert np.array_equal(one, two)
    singles = src.copy()
    for i in range(12):
        view = singles[i:i + 1]
        slidepipe.augment_geometry(view, seeds[i:i + 1], g, threads=2)
    assert np.array_equal(one, singles)
    assert not np.array_equal(one, src)


def test_draws_do_not_depend_on_what_is_on():
    full = slidepipe.Geometry(**AFFINE, crop=True, elastic_alpha=(1, 1))
    affine_only = slidepipe.Geometry(**AFFINE)
    for s in range(20):
        a, b = full.draw(s, W, H), affine_only.draw(s, W, H)
        assert np.array_equal(a["matrix"], b["matrix"])
        assert a["rotation"] == b["rotation"]


def test_bad_parameters_are_refused():
    src = patches(7, 1)
    before = src.copy()
    for bad in (dict(rotation=(10, -10)), dict(scale=(0, 1)), dict(shear_x=(0, 45)),
                dict(translate_y=(-2, 0)), dict(crop=True, crop_scale=(0, 1)),
                dict(elastic_alpha=(1, 1), elastic_kernel=4),
                dict(elastic_alpha=(1, 1), elastic_sigma=0)):
        with pytest.raises(slidepipe.SlidepipeError):
            slidepipe.augment_geometry(src, [1], slidepipe.Geometry(**bad))
    with pytest.raises(ValueError):
        slidepipe.augment_geometry(src, [1], slidepipe.Geometry(border="wrap"))
    with pytest.raises(ValueError):
        slidepipe.augment_geometry(src, [1, 2], slidepipe.Geometry())
    assert np.array_equal(src, before)
