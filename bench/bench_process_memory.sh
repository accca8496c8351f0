#!/usr/bin/env bash
# bench_process_memory.sh — peak memory of `slidepipe process --op sobel` with default settings on
# a large slide (issue 5: a 32768² slide must stay under 1 GiB of RSS), and what `--mode global`
# needs for the same level.
#
#   usage: bench/bench_process_memory.sh DIR [SLIDEPIPE]
#     DIR        holds jpeg.tif from ../shared/bench/make-bench-slides.sh DIR 32768
#     SLIDEPIPE  the binary (default: build/slidepipe)
#   env: GLOBAL=1 also runs --mode global, but only when MemAvailable exceeds its computed need
#        by 2 GiB (it holds the whole level: input RGB8 plus float32 output).
#
# The tile-wise run is timed with /usr/bin/time -v (wall, CPU, peak RSS); its output (about 6 GB
# for 32768²) goes to a temporary folder that is removed afterwards. The global mode's need is
# computed from the level's size: (W + 2) x (H + 2) x 3 bytes of padded input plus
# 3 x W x H x 4 bytes of float32 output (its buffers; the process adds a few tens of MB).
set -euo pipefail

dir=${1:?usage: bench_process_memory.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
slide=$dir/jpeg.tif
[ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 32768)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-process-mem.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# measure NAME ARGS...: run slidepipe process with ARGS, print "seconds cpu_s peak_MiB".
measure() {
    local name=$1
    shift
    /usr/bin/time -v -o "$tmp/$name.time" "$sp" process "$slide" "$tmp/$name.zarr" --op sobel "$@" \
        >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
    local wall cpu rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/$name.time" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
    cpu=$(sed -n 's/.*\(User\|System\) time (seconds): //p' "$tmp/$name.time" | awk '{ s += $1 } END { printf "%.1f", s }')
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/$name.time" | awk '{ printf "%.0f", $1 / 1024 }')
    rm -rf "$tmp/$name.zarr"
    echo "$wall $cpu $rss"
}

read -r w h < <("$sp" info "$slide" --json | /usr/bin/python3 -c \
    'import json, sys; l = json.load(sys.stdin)["levels"][0]; print(l["width"], l["height"])')
need=$(awk -v w="$w" -v h="$h" 'BEGIN { printf "%.0f", ((w + 2) * (h + 2) * 3 + 3 * w * h * 4) / 1048576 }')
echo "sobel over ${w}x${h} jpeg.tif; $(nproc) cores; $(date -u +%Y-%m-%d); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r s cpu rss < <(measure tiled)
printf '%-48s %9s %9s %14s\n' run seconds "CPU s" "peak RSS MiB"
printf '%-48s %9s %9s %14s\n' "slidepipe process --op sobel (defaults)" "$s" "$cpu" "$rss"
avail=$(awk '/MemAvailable/ { printf "%.0f", $2 / 1024 }' /proc/meminfo)
if [ "${GLOBAL:-0}" = 1 ] && [ "$avail" -gt $((need + 2048)) ]; then
    read -r s cpu rss < <(measure global --mode global)
    printf '%-48s %9s %9s %14s\n' "slidepipe process --op sobel --mode global" "$s" "$cpu" "$rss"
else
    printf '%-48s %9s %9s %14s\n' "--mode global (not run: computed need)" - - "$need"
fi
echo "global mode needs (W+2)(H+2)x3 + 3xWxHx4 bytes = $need MiB for this level; MemAvailable now $avail MiB"
