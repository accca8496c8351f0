"""Patches in the tensor a model takes, made by the C library: read, stain-normalized, augmented
and written as uint8, float16 or float32, NHWC or NCHW, with mean/std applied while the batch is
written (docs/train.md, "Batches").

    fmt = BatchFormat("float16", "NCHW", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    loader = Loader([slide], requests, fmt, size=224, batch_size=64, prefetch=4)
    for batch in loader:                       # made ahead on the library's threads
        x = torch.from_dlpack(batch)           # (64, 3, 224, 224) float16, the same memory

``requests`` is a numpy array of REQUEST_DTYPE: which slide, a level (or -1 and a downsample),
the top-left in level-0 pixels and the patch's augmentation seed. PatchSampler (slidepipe.train)
builds them from tissue tiles; this module is the layer under it.
"""

import numpy as np

from . import _core

__all__ = ["BatchFormat", "Batch", "Loader", "REQUEST_DTYPE", "read_patches", "read_image"]

# sp_patch_request, field for field.
REQUEST_DTYPE = np.dtype([("slide", "<i4"), ("level", "<i4"), ("downsample", "<f8"),
                          ("x", "<i8"), ("y", "<i8"), ("seed", "<u8")], align=True)
assert REQUEST_DTYPE.itemsize == _core.PATCH_REQUEST_BYTES

_DTYPES = {"uint8": (0, np.uint8), "float16": (1, np.float16), "float32": (2, np.float32)}
_LAYOUTS = {"NHWC": 0, "NCHW": 1}


class BatchFormat:
    """A batch's element type (uint8, float16, float32) and layout (NHWC, NCHW); floats are
    ((v / 255) - mean) / std per channel in float32, as torchvision's ToTensor and Normalize
    compute them (float16: that value rounded to the nearest half)."""

    __slots__ = ("dtype", "layout", "mean", "std")

    def __init__(self, dtype="uint8", layout="NHWC", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0)):
        name = np.dtype(getattr(dtype, "name", None) or str(dtype).replace("torch.", "")).name
        if name not in _DTYPES:
            raise ValueError(f"dtype must be uint8, float16 or float32, not {dtype!r}")
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be NHWC or NCHW, not {layout!r}")
        mean, std = tuple(float(v) for v in mean), tuple(float(v) for v in std)
        if len(mean) != 3 or len(std) != 3 or not all(np.isfinite(mean + std)) or 0.0 in std:
            raise ValueError("mean and std: three finite numbers each, std nonzero")
        self.dtype, self.layout, self.mean, self.std = name, layout, mean, std

    @property
    def numpy_dtype(self):
        return np.dtype(_DTYPES[self.dtype][1])

    def shape(self, n, size, group=1):
        """The batch shape of n patches of size x size (group patches per sample)."""
        lead = (n // group, group) if group > 1 else (n,)
        return lead + ((3, size, size) if self.layout == "NCHW" else (size, size, 3))

    def __repr__(self):
        return f"BatchFormat({self.dtype!r}, {self.layout!r}, mean={self.mean}, std={self.std})"

    def __eq__(self, other):
        return isinstance(other, BatchFormat) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)


def numa_node(numa):
    """The NUMA node to place a loader on: `numa` itself when a number, None for none, "auto"
    for the node of the GPU this process uses (LOCAL_RANK's, as torchrun sets it, else 0) when
    there is one; -1 for none."""
    if numa is None:
        return -1
    if numa == "auto":
        import os
        devices, _ = _core.cuda_device_count()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        return _core.cuda_device_numa_node(local) if 0 <= local < devices else -1
    return int(numa)


def cuda_device(device):
    """The CUDA device a batch goes to: None or "cpu" for host memory (-1), "cuda" (LOCAL_RANK's
    device, as torchrun sets it, else 0), "cuda:N" or N."""
    if device is None or str(device) == "cpu":
        return -1
    if str(device) == "cuda":
        import os
        return int(os.environ.get("LOCAL_RANK", "0"))
    text = str(device)
    return int(text[5:]) if text.startswith("cuda:") else int(device)


_NORMALIZERS = {None: 0, "macenko": 1, "reinhard": 2}


def _steps(*, dihedral=False, hed_sigma=0.0, normalize=None, stains=None, target=None,
           reinhard=None, reinhard_target=None, stain_sigma=0.0, geometry=None,
           photometric=None):
    """What is done to every patch (docs/train.md: read, normalize, geometry, flips and HED
    jitter, stain augmentation, photometric), as the parts of the config tuple. `normalize` is
    "macenko" (per-slide `stains` to `target`, default Stains.reference()), "reinhard" (per-slide
    `reinhard` statistics to `reinhard_target`, default ReinhardStats.reference()) or None;
    given only `stains`, it is "macenko". `stain_sigma` augments the stains (per-slide `stains`
    needed)."""
    if normalize is None and stains is not None and not stain_sigma:
        normalize = "macenko"
    if normalize not in _NORMALIZERS:
        raise ValueError(f"normalize must be 'macenko', 'reinhard' or None, not {normalize!r}")
    if not 0.0 <= float(hed_sigma) <= 1.0 or not 0.0 <= float(stain_sigma) <= 1.0:
        raise ValueError("hed_sigma and stain_sigma must lie in [0, 1]")
    if normalize == "macenko" and target is None:
        from .train import Stains
        target = Stains.reference()
    if normalize == "reinhard" and reinhard_target is None:
        from .stain_tools import ReinhardStats
        reinhard_target = ReinhardStats.reference()
    return dict(
        dihedral=bool(dihedral), hed_sigma=float(hed_sigma),
        stains=None if stains is None else [x._tuple() for x in stains],
        target=None if target is None else target._tuple(),
        geometry=None if geometry is None else geometry._tuple(),
        photometric=None if photometric is None else photometric.as_tuple(),
        normalize=_NORMALIZERS[normalize],
        reinhard=None if reinhard is None else [x._tuple() for x in reinhard],
        reinhard_target=None if reinhard_target is None else reinhard_target._tuple(),
        stain_sigma=float(stain_sigma))


def _config(fmt, size, batch_size, *, prefetch=1, threads=0, pinned=False, numa=None,
            device=None, **steps):
    """The tuple _core.Loader and _core.patches_read take (python/_loader.c, parse_config)."""
    t = _steps(**steps)
    return (int(size), int(batch_size), _DTYPES[fmt.dtype][0], _LAYOUTS[fmt.layout], fmt.mean,
            fmt.std, t["dihedral"], t["hed_sigma"], t["stains"], t["target"], int(prefetch),
            int(threads), bool(pinned), numa_node(numa), cuda_device(device), t["geometry"],
            t["photometric"], t["normalize"], t["reinhard"], t["reinhard_target"],
            t["stain_sigma"])


def _requests(requests):
    reqs = np.ascontiguousarray(requests)
    if reqs.dtype != REQUEST_DTYPE:
        raise ValueError("requests must be a numpy array of slidepipe.loader.REQUEST_DTYPE")
    return reqs


class Batch:
    """One batch made by a Loader: the library's memory, handed to numpy or PyTorch through
    DLPack without a copy (``numpy.from_dlpack(batch)``, ``torch.from_dlpack(batch)``).
    ``first``/``count``: which requests it holds; ``statuses``: each patch's status code (0 read;
    a failed patch is zeros); ``pinned``: page-locked memory; ``device``: -1 for host memory,
    else the CUDA device holding it."""

    __slots__ = ("_core", "first", "count", "shape", "pinned", "statuses", "nbytes", "device")

    def __init__(self, core):
        info = core.info
        self._core = core
        self.first, self.count, self.shape = info["first"], info["count"], info["shape"]
        self.pinned, self.nbytes, self.device = info["pinned"], info["nbytes"], info["device"]
        self.statuses = np.asarray(core.statuses, dtype=np.int32)

    def __dlpack__(self, *args, **kwargs):
        return self._core.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._core.__dlpack_device__()

    def numpy(self):
        """The batch as a numpy array over the same memory (host batches only)."""
        if self.device >= 0:
            raise ValueError(f"this batch is in the memory of CUDA device {self.device}: take it "
                             "with torch.from_dlpack")
        return np.from_dlpack(self._core)

    @property
    def address(self):
        return self._core.info["address"]


class Loader:
    """Batches of `batch_size` consecutive requests, made `prefetch` ahead on `threads` threads
    (0: one per core) while the caller uses the current one; each patch read, normalized and
    augmented from its request's seed as `steps` say (`normalize`, `stains`, `target`,
    `reinhard`, `reinhard_target`, `geometry`, `dihedral`, `hed_sigma`, `stain_sigma`,
    `photometric`: _steps has them) and written in `fmt`. With `pinned`, batch
    memory is page-locked where a CUDA device is present (``stats()["pinned"]`` says whether it
    was). `numa` (a node, "auto": the GPU's, or None) runs the loader's threads on that NUMA
    node where the machine has several, so the batches are written into its memory
    (``stats()["numa_node"]``: the node, or -1). With `device` ("cuda", "cuda:N") the patches are
    read into that GPU's memory (JPEG tiles decoded there by nvJPEG where it is found, the rest
    read on the CPU and sent up as 8-bit RGB); every later step (normalization, augmentation, the
    dtype and layout) runs there, and the batch's DLPack capsule is a CUDA one
    (torch.from_dlpack gives a CUDA tensor). `group` patches make one sample: batches then have
    the shape (n, group, ...).
    Iterating yields Batch objects until the requests are used up. Memory: at most prefetch + 1
    batches held by the loader, those the caller keeps, and up to two let go, kept for reuse."""

    def __init__(self, slides, requests, fmt, *, size, batch_size, prefetch=2, threads=0,
                 pinned=False, numa="auto", device=None, group=1, **steps):
        from . import Slide  # the package imports this module first

        cores = [s._core if isinstance(s, Slide) else s for s in slides]
        config = _config(fmt, size, batch_size, prefetch=prefetch, threads=threads,
                         pinned=pinned, numa=numa, device=device, **steps)
        self.format, self.size, self.group = fmt, int(size), int(group)
        self._core = _core.Loader(cores, _requests(requests), config, self.group)

    def __iter__(self):
        return self

    def __next__(self):
        if self._core is None:
            raise StopIteration
        core = self._core.next()
        if core is None:
            raise StopIteration
        return Batch(core)

    def stats(self):
        """batches_made, batches_taken, bytes_held (ready batches not taken yet),
        bytes_held_peak, patches_failed, wait_seconds (spent waiting in next), pinned,
        numa_node."""
        return self._core.stats()

    def close(self):
        """Stop making batches and let go of the slides (batches handed out stay valid)."""
        if self._core is not None:
            self._core.close()
            self._core = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 — interpreter shutdown
            pass


def read_patches(slides, requests, fmt, *, size, threads=0, out=None, **steps):
    """The Loader's work for `requests` done now into one array (n, ...) of `fmt`: returns
    (array, statuses). The same pixels a Loader makes for the same requests and `steps`."""
    from . import Slide

    reqs = _requests(requests)
    shape = fmt.shape(len(reqs), int(size))
    if out is None:
        out = np.empty(shape, dtype=fmt.numpy_dtype)
    elif out.shape != shape or out.dtype != fmt.numpy_dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {fmt.dtype} array of shape {shape}")
    cores = [s._core if isinstance(s, Slide) else s for s in slides]
    config = _config(fmt, size, max(1, len(reqs)), threads=threads, **steps)
    statuses = _core.patches_read(cores, reqs, config, out)
    return out, np.asarray(statuses, dtype=np.int32)


def read_image(slide, downsample, location=(0, 0), size=None, fmt=None, *, out=None):
    """A region (default: the whole slide) at `downsample` of level 0 into one array in `fmt`
    (default uint8 NHWC; NCHW gives (3, height, width)), streamed in bands: no full-size RGB
    copy is held besides the result. `size` is (width, height) in output pixels."""
    fmt = fmt or BatchFormat()
    downsample = float(downsample)
    if size is None:
        w0, h0 = slide.dimensions
        size = (int(w0 / downsample), int(h0 / downsample))
    width, height = (int(v) for v in size)
    shape = (3, height, width) if fmt.layout == "NCHW" else (height, width, 3)
    if out is None:
        out = np.empty(shape, dtype=fmt.numpy_dtype)
    elif out.shape != shape or out.dtype != fmt.numpy_dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {fmt.dtype} array of shape {shape}")
    x, y = location
    _core.read_image(slide._core, downsample, int(x), int(y), width, height,
                     _DTYPES[fmt.dtype][0], _LAYOUTS[fmt.layout], fmt.mean, fmt.std, out)
    return out
