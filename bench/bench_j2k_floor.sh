#!/usr/bin/env bash
# bench_j2k_floor.sh — how far any OpenJPEG-based reader can get past OpenSlide on random
# unaligned regions of a JPEG 2000 slide (issue 8's j2k-svs.svs row), measured in one run.
#
# An unaligned 256² region of a slide with 256² tiles touches four tiles (k, measured below from
# the tile cache's misses). OpenSlide decodes each of them whole. The fastest OpenJPEG can give a
# reader for one tile is its cost for the smallest area (opj_set_decode_area over one pixel):
# every band below the finest resolution is a single code-block there, and the tile's packets are
# parsed whole, whatever the area. So no reader built on OpenJPEG, at equal threads, can exceed
#   bound = OpenSlide's time per region / (k x OpenJPEG's time for a one-pixel area)
# The script prints, on one thread and for the same seeded regions:
#   slidepipe and OpenSlide on 256² unaligned regions (the issue's figure) and their ratio;
#   slidepipe on 1x1 regions (one tile each: OpenJPEG's one-pixel area decode, T_min);
#   slidepipe and OpenSlide on 256² tile-aligned regions (one whole tile each, T_full);
#   the bound above, and the share of it slidepipe reaches.
#
#   usage: bench/bench_j2k_floor.sh DIR [SLIDEPIPE]
#     DIR holds j2k-svs.svs from ../shared/bench/make-bench-slides.sh DIR 16384
#   env: COUNT (regions per run, default 300), SEED (default 1), REPEAT (default 3; the fastest
#        run of each is kept, as in bench_read.sh)
set -euo pipefail

dir=${1:?usage: bench_j2k_floor.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
py=$repo/.venv/bin/python
count=${COUNT:-300}
seed=${SEED:-1}
repeat=${REPEAT:-3}
slide=$dir/j2k-svs.svs

[ -x "$sp" ] || { echo "no slidepipe binary at $sp (build it with make)" >&2; exit 1; }
[ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 16384)" >&2; exit 1; }
pkg-config --exists openslide || { echo "needs libopenslide-dev" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-j2k.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
gcc -O2 "$repo/../shared/bench/osbench.c" -o "$tmp/osbench" $(pkg-config --cflags --libs openslide) -lpthread
sed 's|int64_t x = rand_r(&s) % (lw - W), y = rand_r(&s) % (lh - H);|int64_t x = rand_r(\&s) % (lw - W) / 256 * 256, y = rand_r(\&s) % (lh - H) / 256 * 256;|' \
    "$repo/../shared/bench/osbench.c" >"$tmp/osbench_aligned.c"
grep -q '/ 256 \* 256' "$tmp/osbench_aligned.c" || { echo "could not make the aligned osbench" >&2; exit 1; }
gcc -O2 "$tmp/osbench_aligned.c" -o "$tmp/osbench_aligned" $(pkg-config --cflags --libs openslide) -lpthread
cat "$slide" >/dev/null # page cache, for both tools alike

# Milliseconds per region of slidepipe (best of REPEAT), and tiles decoded per region.
sp_run() {
    local best=1e9 ms tiles
    for _ in $(seq "$repeat"); do
        "$sp" bench read "$slide" --threads 1 --count "$count" --seed "$seed" "$@" --json >"$tmp/out"
        read -r ms tiles < <("$py" -c "import json,sys; j=json.load(open(sys.argv[1])); \
print(1e3*j['seconds']/j['count'], j['cache']['misses']/j['count'])" "$tmp/out")
        best=$("$py" -c "print(min($best, $ms))")
    done
    echo "$best $tiles"
}
# Milliseconds per region of OpenSlide (best of REPEAT).
os_run() {
    local best=1e9 ms
    for _ in $(seq "$repeat"); do
        "$1" "$slide" 0 "$2" "$2" "$count" 1 "$seed" >"$tmp/out"
        ms=$(sed -n 's/.*time=\([0-9.]*\)s.*/\1/p' "$tmp/out")
        best=$("$py" -c "print(min($best, 1e3 * $ms / $count))")
    done
    echo "$best"
}

read -r sp_region k < <(sp_run --size 256)
os_region=$(os_run "$tmp/osbench" 256)
read -r sp_min _ < <(sp_run --size 1)
read -r sp_full _ < <(sp_run --size 256 --aligned)
os_full=$(os_run "$tmp/osbench_aligned" 256)

echo "# bench_j2k_floor.sh on $(hostname), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$sp" --version), OpenSlide $(pkg-config --modversion openslide), OpenJPEG $(pkg-config --modversion libopenjp2), $count regions a run, 1 thread, best of $repeat"
"$py" - "$sp_region" "$os_region" "$k" "$sp_min" "$sp_full" "$os_full" <<'PY'
import sys
sp_region, os_region, k, sp_min, sp_full, os_full = map(float, sys.argv[1:])
mps = lambda ms: 256 * 256 / ms / 1e3
print(f"unaligned 256² region: slidepipe {sp_region:.2f} ms ({mps(sp_region):.1f} MP/s), "
      f"OpenSlide {os_region:.2f} ms ({mps(os_region):.1f} MP/s): {os_region / sp_region:.2f}x")
print(f"tiles touched per region: {k:.2f}")
print(f"one tile, a one-pixel area (T_min): {sp_min:.2f} ms; whole tile (T_full): slidepipe "
      f"{sp_full:.2f} ms, OpenSlide {os_full:.2f} ms")
bound = os_region / (k * sp_min)
print(f"bound for any OpenJPEG-based reader: {os_region:.2f} / ({k:.2f} x {sp_min:.2f}) = "
      f"{bound:.2f}x OpenSlide; slidepipe reaches {os_region / sp_region / bound:.0%} of it")
PY
