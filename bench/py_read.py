"""py_read.py READER SLIDE COUNT THREADS SEED [ALIGN] -- a Python reader's figure for bench_read.sh.

READER is tiffslide, or slidepipe (this repository's binding, imported from build/python or
$SLIDEPIPE_PYTHONPATH). Reads the same random 256x256 level-0 regions as the OpenSlide baseline
(osbench.c) and `slidepipe bench read`: worker k of T draws its positions from glibc's rand_r
seeded with SEED + 7919 k (reimplemented below, bit for bit) and takes regions k, k + T, ...;
ALIGN > 0 rounds positions down to multiples of ALIGN (the tile size). Workers are threads
sharing one slide, as a PyTorch data loader with threads would, each region a numpy array of
its own. Prints one JSON object with mp_per_s and the peak RSS."""
import json
import os
import resource
import sys
import threading
import time

SIZE = 256


def rand_r(state):
    """glibc rand_r: returns (value, new state)."""
    nxt = state[0]
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (nxt // 65536) % 2048
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    state[0] = nxt
    return result


def open_reader(name, path):
    """(slide, read, label): read(slide, (x, y)) returns a (256, 256, 4) uint8 array."""
    if name == "tiffslide":
        import tiffslide
        return (tiffslide.TiffSlide(path),
                lambda s, xy: s.read_region(xy, 0, (SIZE, SIZE), as_array=True),
                "tiffslide " + tiffslide.__version__)
    if name == "slidepipe":
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.environ.get("SLIDEPIPE_PYTHONPATH",
                                          os.path.join(here, "..", "build", "python")))
        import slidepipe
        return (slidepipe.open(path), lambda s, xy: s.read_region(xy, 0, (SIZE, SIZE)),
                "slidepipe (Python) " + slidepipe.__version__)
    raise SystemExit(f"unknown reader {name!r} (tiffslide or slidepipe)")


def main():
    reader = sys.argv[1]
    path, count, threads, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    align = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    slide, read, label = open_reader(reader, path)
    lw, lh = slide.level_dimensions[0]
    regions = [None] * count
    for k in range(threads):
        state = [(seed + k * 7919) & 0xFFFFFFFF]
        for i in range(k, count, threads):
            x = rand_r(state) % (lw - SIZE)
            y = rand_r(state) % (lh - SIZE)
            if align:
                x, y = x // align * align, y // align * align
            regions[i] = (x, y)

    def work(k):
        for i in range(k, count, threads):
            read(slide, regions[i])

    t0 = time.monotonic()
    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    secs = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"reader": label, "seconds": secs,
                      "mp_per_s": count * SIZE * SIZE / secs / 1e6, "peak_rss_mib": rss}))


if __name__ == "__main__":
    main()
