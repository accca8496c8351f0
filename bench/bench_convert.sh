#!/usr/bin/env bash
# bench_convert.sh — slide to pyramid, slidepipe against its peers, in one invocation on the same
# input (issue 4; DESIGN.md's "convert to OME-Zarr" row). Each tool is timed with /usr/bin/time -v
# (wall time, CPU time = user + system, and peak resident memory) and the table gives each peer's
# wall time as a multiple of slidepipe's at the same zstd level (vips, whose level is its own,
# against slidepipe's default). The load average is printed too: on a shared machine other work
# stretches wall times, while CPU times stay comparable.
#
#   usage: bench/bench_convert.sh DIR [SLIDEPIPE]
#     DIR        holds jpeg.tif from ../shared/bench/make-bench-slides.sh DIR 16384
#     SLIDEPIPE  the binary to time (default: build/slidepipe)
#   env: KEEP=1 keeps the outputs (in a temporary folder that is printed); CHUNK (default 512).
#
# The runs, in this order (the input is read once beforehand so all find it cached):
#   slidepipe convert jpeg.tif OUT.zarr --codec zstd --chunk 512            (level 1, the default)
#   slidepipe convert jpeg.tif OUT.zarr --codec zstd --chunk 512 --level 3  (zstd's own default)
#   /usr/bin/python3 ../shared/bench/py_zarr_convert.py jpeg.tif OUT2.zarr 512 1
#   /usr/bin/python3 ../shared/bench/py_zarr_convert.py jpeg.tif OUT2.zarr 512 3   (its default)
#                    (OpenSlide + zarr-python 2, 512² chunks, 2x2-mean pyramid)
#   vips tiffsave jpeg.tif OUT3.tif --tile --pyramid --compression zstd
set -euo pipefail

dir=${1:?usage: bench_convert.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
peers=$repo/../shared/bench
chunk=${CHUNK:-512}
slide=$dir/jpeg.tif

[ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 16384)" >&2; exit 1; }
[ -x "$sp" ] || { echo "no slidepipe binary at $sp (build it with make)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
command -v vips >/dev/null || { echo "needs vips (apt-get install libvips-tools)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-convert.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "outputs kept in $tmp"
else
    trap 'rm -rf "$tmp"' EXIT
fi

cat "$slide" >/dev/null # into the page cache, for every tool alike
load=$(cut -d' ' -f1-3 /proc/loadavg) # other work on the machine makes wall times longer

# run NAME OUTPUT CMD...: time CMD, leave "seconds cpu_seconds peak_mb output_mb" in $tmp/NAME.row.
run() {
    local name=$1 out=$2
    shift 2
    if ! /usr/bin/time -v -o "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1; then
        echo "$name failed:" >&2
        cat "$tmp/$name.log" >&2
        exit 1
    fi
    local wall cpu rss size
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/$name.time" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
    cpu=$(sed -n 's/.*\(User\|System\) time (seconds): //p' "$tmp/$name.time" |
        awk '{ s += $1 } END { printf "%.2f", s }')
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/$name.time" |
        awk '{ printf "%.0f", $1 / 1024 }')
    size=$(du -sb "$out" | awk '{ printf "%.0f", $1 / 1048576 }')
    echo "$wall $cpu $rss $size" >"$tmp/$name.row"
    rm -rf "$out" # keep the disk's free space the same for the next tool
}

run slidepipe "$tmp/sp.zarr" "$sp" convert "$slide" "$tmp/sp.zarr" --codec zstd --chunk "$chunk"
run slidepipe3 "$tmp/sp.zarr" "$sp" convert "$slide" "$tmp/sp.zarr" --codec zstd --chunk "$chunk" \
    --level 3
run python "$tmp/py.zarr" /usr/bin/python3 "$peers/py_zarr_convert.py" "$slide" "$tmp/py.zarr" \
    "$chunk" 1
run python3 "$tmp/py.zarr" /usr/bin/python3 "$peers/py_zarr_convert.py" "$slide" "$tmp/py.zarr" \
    "$chunk" 3
run vips "$tmp/vips.tif" vips tiffsave "$slide" "$tmp/vips.tif" --tile --pyramid --compression zstd

read -r sp_s _ _ _ <"$tmp/slidepipe.row"
read -r sp3_s _ _ _ <"$tmp/slidepipe3.row"
size=$(vipsheader -f width "$slide")x$(vipsheader -f height "$slide")
echo "convert $size jpeg.tif to a zstd pyramid; $(nproc) cores; $(date -u +%Y-%m-%d);" \
    "load average before: $load"
printf '%-50s %9s %9s %13s %10s %9s\n' tool seconds "CPU s" "peak RSS MB" "output MB" "x slower"
for name in slidepipe slidepipe3 python python3 vips; do
    read -r s cpu rss out <"$tmp/$name.row"
    base=$sp_s
    case $name in
    slidepipe) label="slidepipe convert (zstd 1, $chunk², OME-Zarr 0.4)" ;;
    slidepipe3) label="slidepipe convert --level 3" base=$sp3_s ;;
    python) label="OpenSlide + zarr-python, zstd 1 (py_zarr_convert)" ;;
    python3) label="OpenSlide + zarr-python, zstd 3 (its default)" base=$sp3_s ;;
    vips) label="vips tiffsave --tile --pyramid zstd" ;;
    esac
    ratio=$(awk -v a="$s" -v b="$base" 'BEGIN { printf "%.1f", (b > 0) ? a / b : 0 }')
    printf '%-50s %9s %9s %13s %10s %9s\n' "$label" "$s" "$cpu" "$rss" "$out" "$ratio"
done
