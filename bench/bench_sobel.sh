#!/usr/bin/env bash
# bench_sobel.sh — Sobel over a whole 16384² level, slidepipe's tile engine against libvips and
# against slidepipe's own whole-level mode, in one invocation on the same input (issue 5;
# DESIGN.md's "Sobel over a whole level" row). Each run is timed with /usr/bin/time -v (wall time,
# CPU time = user + system, peak resident memory); the table gives each run's wall time as a
# multiple of the tile engine's with the same output type (float32 runs against the float32 tile
# run, 8-bit runs and vips against the uint8 tile run). The load average is printed too: on a
# shared machine other work stretches wall times, while CPU times stay comparable.
#
#   usage: bench/bench_sobel.sh DIR [SLIDEPIPE]
#     DIR        holds jpeg.tif from ../shared/bench/make-bench-slides.sh DIR 16384
#     SLIDEPIPE  the binary to time (default: build/slidepipe)
#   env: ROUNDS (default 1) repeats the three runs; KEEP=1 keeps the outputs.
#
# The runs, in this order (the input is read once beforehand so all find it cached):
#   slidepipe process jpeg.tif OUT.zarr --op sobel                 (defaults: tiles, all cores)
#   slidepipe process jpeg.tif OUT.zarr --op sobel --mode global   (whole level in memory)
#   the same two with --dtype uint8                                (magnitudes rounded, clipped)
#   vips sobel jpeg.tif OUT.v                                      (libvips, its own threads)
# What they write differs, and the table says so: slidepipe writes float32 magnitudes (the exact
# scipy.ndimage definition, 3.2 GB raw), or with --dtype uint8 the same rounded and clipped to
# 255 (0.8 GB raw), compressed into OME-Zarr with a manifest of hashes and made durable;
# `vips sobel` on 8-bit input writes 8-bit results (its own rounded magnitude, clipped to 255)
# uncompressed into its native .v file (0.8 GB), with no hashing and no fsync.
set -euo pipefail

dir=${1:?usage: bench_sobel.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
rounds=${ROUNDS:-1}
slide=$dir/jpeg.tif

[ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 16384)" >&2; exit 1; }
[ -x "$sp" ] || { echo "no slidepipe binary at $sp (build it with make)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
command -v vips >/dev/null || { echo "needs vips (apt-get install libvips-tools)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-sobel.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "outputs kept in $tmp"
else
    trap 'rm -rf "$tmp"' EXIT
fi

cat "$slide" >/dev/null # into the page cache, for every tool alike

# run NAME OUTPUT CMD...: time CMD, append "seconds cpu_seconds peak_mb output_mb" to $tmp/NAME.rows.
run() {
    local name=$1 out=$2
    shift 2
    rm -rf "$out"
    sync # earlier runs' dirty pages are not this run's work
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
    echo "$wall $cpu $rss $size" >>"$tmp/$name.rows"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$out" # the same free disk space for the next run
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
    run tiled "$tmp/tiled.zarr" "$sp" process "$slide" "$tmp/tiled.zarr" --op sobel
    run global "$tmp/global.zarr" "$sp" process "$slide" "$tmp/global.zarr" --op sobel --mode global
    run tiled8 "$tmp/tiled8.zarr" "$sp" process "$slide" "$tmp/tiled8.zarr" --op sobel --dtype uint8
    run global8 "$tmp/global8.zarr" "$sp" process "$slide" "$tmp/global8.zarr" --op sobel \
        --dtype uint8 --mode global
    run vips "$tmp/vips.v" vips sobel "$slide" "$tmp/vips.v"
done

size=$(vipsheader -f width "$slide")x$(vipsheader -f height "$slide")
echo "sobel over $size jpeg.tif; $(nproc) cores; $(date -u +%Y-%m-%d); $rounds round(s);" \
    "load average before: $load"
printf '%-52s %9s %9s %13s %10s %9s\n' run seconds "CPU s" "peak RSS MB" "output MB" "x tiles"
for ((r = 1; r <= rounds; r++)); do
    read -r sp_s _ _ _ < <(sed -n "${r}p" "$tmp/tiled.rows")
    read -r sp8_s _ _ _ < <(sed -n "${r}p" "$tmp/tiled8.rows")
    for name in tiled global tiled8 global8 vips; do
        read -r s cpu rss out < <(sed -n "${r}p" "$tmp/$name.rows")
        base=$sp8_s
        case $name in
        tiled) label="slidepipe process --op sobel (tiles, float32 Zarr)" base=$sp_s ;;
        global) label="slidepipe process --op sobel --mode global" base=$sp_s ;;
        tiled8) label="slidepipe process --op sobel --dtype uint8 (tiles)" ;;
        global8) label="slidepipe ... --dtype uint8 --mode global" ;;
        vips) label="vips sobel (uchar, uncompressed .v)" ;;
        esac
        ratio=$(awk -v a="$s" -v b="$base" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
        printf '%-52s %9s %9s %13s %10s %9s\n' "$label" "$s" "$cpu" "$rss" "$out" "$ratio"
    done
done
