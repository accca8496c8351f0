"""The photometric augmentation (docs/augment-color.md) against torchvision with the same drawn
numbers: the jitter's steps (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue on
the same uint8 tensor, in the drawn order), gaussian_blur with the same kernel size and sigma, the
noise against a numpy evaluation of its generator; and the bytes on 1 and 2 threads and over
different splits of a batch. Each comparison prints its max and mean absolute difference
(pytest -s shows them)."""

import numpy as np
import pytest

import slidepipe
from slidepipe import Photometric, augment_photometric, photometric_draws

torch = pytest.importorskip("torch")
TF = pytest.importorskip("torchvision.transforms.functional")

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
NOISE_STREAM = 0x6E6F697365676175
ADJUST = [TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue]


def patches(n, h, w, seed):
    """Half uniform noise, half smooth colour gradients with a little noise (tissue-like)."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w]
    for i in range(0, n, 2):
        base = rng.uniform(40, 220, 3) + rng.uniform(-60, 60, 3) * (x[..., None] / w) \
            + rng.uniform(-60, 60, 3) * (y[..., None] / h)
        out[i] = np.clip(base + rng.normal(0, 4, (h, w, 3)), 0, 255).astype(np.uint8)
    return out


def seeds_for(n, salt=0):
    return (np.arange(n, dtype=np.uint64) * GOLDEN) ^ np.uint64(salt)


def to_tensor(img):
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()


def from_tensor(t):
    return t.permute(1, 2, 0).numpy()


def reference_jitter(img, d):
    t = to_tensor(img)
    factors = [d["brightness"], d["contrast"], d["saturation"], d["hue"]]
    for step in d["order"]:
        identity = factors[step] == (0.0 if step == 3 else 1.0)
        if d["jitter"] and not identity:
            t = ADJUST[step](t, factors[step])
    return from_tensor(t)


def reference_blur(img, d):
    if not d["blur"]:
        return img
    k, s = d["blur_kernel"], d["blur_sigma"]
    return from_tensor(TF.gaussian_blur(to_tensor(img), [k, k], [s, s]))


def normal_numbers(seed, count):
    """The counter-based generator in numpy: output n of splitmix64 started at
    seed ^ NOISE_STREAM, two per pair of elements, Box-Muller in float64 (cos for the even
    element, sin for the odd one)."""
    key = np.uint64(int(seed) ^ NOISE_STREAM)
    pairs = (count + 1) // 2
    with np.errstate(over="ignore"):
        n = np.arange(2 * pairs, dtype=np.uint64)
        z = key + (n + np.uint64(1)) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    top = (z >> np.uint64(11)).astype(np.float64)
    u1 = (top[0::2] + 1.0) * 2.0**-53
    u2 = top[1::2] * 2.0**-53
    r, t = np.sqrt(-2.0 * np.log(u1)), 2.0 * np.pi * u2
    z = np.empty(2 * pairs)
    z[0::2], z[1::2] = r * np.cos(t), r * np.sin(t)
    return z[:count]


def reference_noise(img, seed, d):
    if not d["noise"] or d["noise_sigma"] == 0:
        return img
    z = normal_numbers(seed, img.size).reshape(img.shape)
    return np.clip(np.rint(img.astype(np.float64) + d["noise_sigma"] * z), 0, 255).astype(np.uint8)


def compare(name, params, reference, n=24, shape=(61, 47)):
    src = patches(n, *shape, seed=len(name))
    seeds = seeds_for(n, salt=len(name) * 7919)
    got = augment_photometric(src.copy(), seeds, params, threads=2)
    diffs = []
    for i in range(n):
        d = photometric_draws(seeds[i], params)
        ref = reference(src[i], int(seeds[i]), d)
        diffs.append(np.abs(ref.astype(int) - got[i].astype(int)))
    diff = np.stack(diffs)
    print(f"\n{name}: max |diff| {diff.max()}, mean {diff.mean():.2e}, "
          f"bytes differing {np.count_nonzero(diff)} of {diff.size}")
    return diff


@pytest.mark.parametrize("step,kw", [("brightness", dict(brightness=0.6)),
                                     ("contrast", dict(contrast=0.6)),
                                     ("saturation", dict(saturation=0.9)),
                                     ("hue", dict(hue=0.5))])
def test_each_jitter_step_equals_torchvision(step, kw):
    diff = compare(step, Photometric(**kw), lambda img, s, d: reference_jitter(img, d))
    assert diff.max() == 0


def test_jitter_in_drawn_order_equals_torchvision():
    params = Photometric(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1, jitter_p=0.8)
    diff = compare("jitter", params, lambda img, s, d: reference_jitter(img, d), n=48)
    assert diff.max() == 0


def test_contrast_mean_on_large_patches():
    """The grey sum passes 2^24 here; the library's exact integer sum still gives torch's mean."""
    params = Photometric(contrast=0.5)
    diff = compare("contrast 768x1024", params, lambda img, s, d: reference_jitter(img, d), n=3,
                   shape=(768, 1024))
    assert diff.max() == 0


def test_blur_equals_torchvision_up_to_float_rounding():
    for kernel in (0, 5):
        params = Photometric(blur=(0.2, 3.0), blur_kernel=kernel)
        diff = compare(f"blur k={kernel}", params, lambda img, s, d: reference_blur(img, d))
        # Separable float32 sums against torch's 2-D float32 convolution: a byte moves only when
        # the exact value lies within float32 rounding of .5.
        assert diff.max() <= 1
        assert np.count_nonzero(diff) <= diff.size * 1e-3


def test_noise_equals_numpy_definition():
    params = Photometric(noise=(0.5, 25.0))
    diff = compare("noise", params, lambda img, s, d: reference_noise(img, s, d))
    assert diff.max() == 0


def test_all_stages_in_order():
    params = Photometric(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05, noise=(1, 8),
                         blur=(0.3, 1.5), jitter_p=0.8, blur_p=0.5, noise_p=0.7)

    def reference(img, seed, d):
        return reference_noise(reference_blur(reference_jitter(img, d), d), seed, d)

    diff = compare("all", params, reference, n=48)
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= diff.size * 1e-3


def test_draws_follow_the_ranges_and_probabilities():
    params = Photometric(brightness=1.5, contrast=0.2, saturation=0.5, hue=0.25, noise=(2, 3),
                         blur=(0.5, 1.0), jitter_p=0.5, blur_p=0.25, noise_p=0.75)
    draws = [photometric_draws(s, params) for s in seeds_for(4000, 5)]
    on = [d for d in draws if d["jitter"]]
    assert all(0.0 <= d["brightness"] <= 2.5 for d in on)
    assert all(0.8 <= d["contrast"] <= 1.2 and 0.5 <= d["saturation"] <= 1.5 for d in on)
    assert all(-0.25 <= d["hue"] <= 0.25 for d in on)
    assert all(sorted(d["order"]) == [0, 1, 2, 3] for d in draws)
    assert len({d["order"] for d in draws}) == 24
    assert abs(len(on) / 4000 - 0.5) < 0.04
    assert abs(sum(d["blur"] for d in draws) / 4000 - 0.25) < 0.04
    assert abs(sum(d["noise"] for d in draws) / 4000 - 0.75) < 0.04
    blurred = [d for d in draws if d["blur"]]
    assert all(0.5 <= d["blur_sigma"] <= 1.0 for d in blurred)
    assert all(d["blur_kernel"] == 2 * int(np.ceil(3 * d["blur_sigma"])) + 1 for d in blurred)
    # A stage's draws do not move when another is switched off.
    noise_only = Photometric(noise=(2, 3), noise_p=0.75)
    for s, d in zip(seeds_for(200, 5), draws):
        e = photometric_draws(s, noise_only)
        assert (e["noise"], e["noise_sigma"]) == (d["noise"], d["noise_sigma"])


def test_same_bytes_on_any_threads_and_split():
    params = Photometric(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05, noise=(1, 8),
                         blur=(0.3, 1.5), jitter_p=0.8, blur_p=0.5, noise_p=0.7)
    src = patches(40, 32, 40, seed=3)
    seeds = seeds_for(40, 11)
    one = augment_photometric(src.copy(), seeds, params, threads=1)
    two = augment_photometric(src.copy(), seeds, params, threads=2)
    split = src.copy()
    for lo, hi in ((0, 7), (7, 8), (8, 40)):
        augment_photometric(split[lo:hi], seeds[lo:hi], params, threads=2)
    assert not np.array_equal(one, src)
    assert one.tobytes() == two.tobytes() == split.tobytes()


def test_bad_parameters_are_refused_and_change_nothing():
    src = patches(2, 8, 8, seed=1)
    out = src.copy()
    for bad in (Photometric(hue=0.6), Photometric(brightness=-1), Photometric(blur=(0, 1)),
                Photometric(blur=(2, 1)), Photometric(blur=1, blur_kernel=4),
                Photometric(noise=(0, 300)), Photometric(jitter_p=2.0)):
        with pytest.raises(slidepipe.SlidepipeError):
            augment_photometric(out, seeds_for(2), bad)
        with pytest.raises(slidepipe.SlidepipeError):
            photometric_draws(1, bad)
    assert np.array_equal(out, src)
    with pytest.raises(ValueError):
        augment_photometric(out[..., :2], seeds_for(2), Photometric())
    with pytest.raises(ValueError):
        augment_photometric(out, seeds_for(3), Photometric())
