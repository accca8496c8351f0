#!/usr/bin/env bash
# bench_spectrum.sh — spectral statistics of a whole slide, slidepipe against the numpy reference
# in one invocation on the same input (issue 6; DESIGN.md's "spectra, 256² patches" row). Each
# tool is timed with /usr/bin/time -v (wall time, CPU time = user + system, peak resident
# memory); the table gives the peer's wall time as a multiple of slidepipe's, slidepipe's split
# between reading/decoding and the FFT work (thread-seconds, from its JSON), and both tools'
# statistics side by side. The load average is printed too: on a shared machine other work
# stretches wall times.
#
#   usage: bench/bench_spectrum.sh DIR [SLIDEPIPE]
#     DIR        holds jpeg.tif from ../shared/bench/make-bench-slides.sh DIR 16384
#     SLIDEPIPE  the binary to time (default: build/slidepipe)
#   env: PATCH (default 256), BLOCK (default 1024), THREADS (default: all cores)
#
# The three runs, in this order (the input is read once beforehand so all find it cached):
#   slidepipe spectrum jpeg.tif --patch 256 --block 1024 --json OUT            (default threads)
#   slidepipe spectrum jpeg.tif --patch 256 --block 1024 --json OUT --threads 1 (one core)
#   /usr/bin/python3 ../shared/bench/py_spectrum.py jpeg.tif 256 1024
set -euo pipefail

dir=${1:?usage: bench_spectrum.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
peers=$repo/../shared/bench
patch=${PATCH:-256}
block=${BLOCK:-1024}
slide=$dir/jpeg.tif

[ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 16384)" >&2; exit 1; }
[ -x "$sp" ] || { echo "no slidepipe binary at $sp (build it with make)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
/usr/bin/python3 -c 'import numpy, openslide' 2>/dev/null ||
    { echo "needs python3-numpy and python3-openslide for /usr/bin/python3" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-spectrum.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat "$slide" >/dev/null
load=$(cut -d' ' -f1-3 /proc/loadavg)

# run NAME CMD...: time CMD, leave "seconds cpu_seconds peak_mb" in $tmp/NAME.row.
run() {
    local name=$1
    shift
    if ! /usr/bin/time -v -o "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1; then
        echo "$name failed:" >&2
        cat "$tmp/$name.log" >&2
        exit 1
    fi
    local wall cpu rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/$name.time" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
    cpu=$(sed -n 's/.*\(User\|System\) time (seconds): //p' "$tmp/$name.time" |
        awk '{ s += $1 } END { printf "%.2f", s }')
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/$name.time" |
        awk '{ printf "%.0f", $1 / 1024 }')
    echo "$wall $cpu $rss" >"$tmp/$name.row"
}

threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
run slidepipe "$sp" spectrum "$slide" --patch "$patch" --block "$block" --json "$tmp/sp.json" "${threads[@]}"
run slidepipe1 "$sp" spectrum "$slide" --patch "$patch" --block "$block" --json "$tmp/sp1.json" --threads 1
run python /usr/bin/python3 "$peers/py_spectrum.py" "$slide" "$patch" "$block"

# slidepipe's statistics and time split, from its JSON.
read -r sp_mean sp_std sp_patches sp_read sp_fft < <(/usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["slides"][0]
print("%.4f %.4f %d %.2f %.2f" % (s["mean"], s["std"], s["patches"], s["read_seconds"], s["fft_seconds"]))
' "$tmp/sp.json")
# The reference prints "python spectrum: WxH patches=N mean=M dB std=S dB time=T s".
py_line=$(grep '^python spectrum:' "$tmp/python.log")
py_mean=$(sed -n 's/.*mean=\([-0-9.]*\)dB.*/\1/p' <<<"$py_line")
py_std=$(sed -n 's/.*std=\([-0-9.]*\)dB.*/\1/p' <<<"$py_line")
py_patches=$(sed -n 's/.*patches=\([0-9]*\).*/\1/p' <<<"$py_line")

read -r sp_s sp_cpu sp_rss <"$tmp/slidepipe.row"
read -r sp1_s sp1_cpu sp1_rss <"$tmp/slidepipe1.row"
read -r py_s py_cpu py_rss <"$tmp/python.row"
echo "spectrum of jpeg.tif ($(/usr/bin/python3 -c 'import openslide,sys; print("%dx%d" % openslide.OpenSlide(sys.argv[1]).dimensions)' "$slide")), ${patch}² patches, ${block}-row strips;" \
    "$(nproc) cores; $(date -u +%Y-%m-%d); load average before: $load"
printf '%-34s %9s %9s %13s %9s %11s %10s %9s\n' tool seconds "CPU s" "peak RSS MB" patches "mean dB" "std dB" "x slower"
printf '%-34s %9s %9s %13s %9s %11s %10s %9s\n' "slidepipe spectrum" "$sp_s" "$sp_cpu" "$sp_rss" \
    "$sp_patches" "$sp_mean" "$sp_std" 1.0
printf '%-34s %9s %9s %13s %9s %11s %10s %9s\n' "slidepipe spectrum --threads 1" "$sp1_s" "$sp1_cpu" \
    "$sp1_rss" "$sp_patches" "" "" "$(awk -v a="$sp1_s" -v b="$sp_s" 'BEGIN { printf "%.1f", (b > 0) ? a / b : 0 }')"
printf '%-34s %9s %9s %13s %9s %11s %10s %9s\n' "numpy reference (py_spectrum.py)" "$py_s" "$py_cpu" \
    "$py_rss" "$py_patches" "$py_mean" "$py_std" \
    "$(awk -v a="$py_s" -v b="$sp_s" 'BEGIN { printf "%.1f", (b > 0) ? a / b : 0 }')"
echo "slidepipe time split (thread-seconds over its threads): read+decode $sp_read s, grey+FFT+dB+histogram $sp_fft s"
echo "difference of the statistics: mean $(awk -v a="$sp_mean" -v b="$py_mean" 'BEGIN { printf "%.4f", a - b }') dB," \
    "std $(awk -v a="$sp_std" -v b="$py_std" 'BEGIN { printf "%.4f", a - b }') dB (the reference prints 3 decimals)"
