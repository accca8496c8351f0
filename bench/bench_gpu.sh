#!/usr/bin/env bash
# bench_gpu.sh — the CUDA backend's checks and benchmark in ONE run on a GPU machine (issue 7),
# from the repository root, with the device pack that scripts/device-pack made here (.devpack/,
# carried by the device tool). Nothing is built there: the pack holds the release binaries, the
# Debian libraries they load, the peers' wheels and the test slides. Steps, each under its own
# time limit so that one hang cannot cost the table:
#   setup   wheels into /tmp/site (the device README's pip line), library paths, nvidia-smi and
#           `slidepipe gpu`
#   checks  test_cuda and the test_cuda_* kernels' tests; tests/cli/test_gpu.py (GPU == CPU
#           parity); the binding's GPU tests (DLPack batches in GPU memory)
#   inputs  SIDE² (default 16384) slides made here, on the device: jpeg.tif by `slidepipe synth`
#           (256² JPEG tiles, pyramidal), raw.tif (512² uncompressed tiles) from its level 0 by
#           `slidepipe region` + tifffile; a list of COUNT random REGION² regions
#   bench   each comparison of issue 7 against its peer in the same run (bench/gpu_peers.py):
#           1 raw.tif level 0 into one GPU array vs tifffile.imread + cupy.asarray; ours again
#             with SLIDEPIPE_CUFILE=1 (cuFile reads into device memory) against ours pinned
#           2 jpeg.tif regions into GPU memory (GP/s) vs our CPU path on all cores and vs cuCIM's
#             batched read_region(device="cuda") on the same regions; ours also in batches of 64
#             regions (sp_cuda_read_regions), and with 4 and 8 nvJPEG decoders shared by the
#             threads, the others decoding on the CPU beside them (SLIDEPIPE_NVJPEG_DECODERS)
#           3 raw.tif -> Sobel -> Zarr, tile-wise on the GPU, vs CuPy whole-image (peak GPU
#             memory of both) and vs our CPU engine
#           4 spectra of a corpus (CORPUS names of raw.tif, default 4) vs PyTorch (unfold, fft2,
#             histc) over the same files: times and statistics
#           5 training batches into GPU memory (bench/gpu_train.py): Loader(device="cuda") vs
#             cuCIM batched read_region(device="cuda") + Kornia, patches/s
#           6 the Aperio JPEG 2000 test slide's level 0 into one GPU array, its tiles decoded by
#             nvJPEG2000 vs by OpenJPEG on all cores and uploaded (SLIDEPIPE_NVJPEG2K=0)
#   report  the table and $OUT/bench_gpu.json
#   memcheck  compute-sanitizer memcheck over test_cuda and one `region` (JPEG, nvJPEG),
#           `process` and `spectrum` with --device cuda; then the table again, to end the output
# Everything is written under $OUT (the device tool brings back $OUT/bench_gpu.log and
# $OUT/bench_gpu.json); elsewhere OUT defaults to ./bench-gpu-out. Whole run: about 6 to 8 min
# on an H100 with SIDE=16384.
#   usage: bench/bench_gpu.sh [setup,checks,inputs,bench,report,memcheck]  (default: all of them)
#   env:   SIDE (16384), REGION (512), COUNT (2000), REPEAT (3), THREADS (all cores), BUDGET (560 s),
#          PACK (.devpack), KEEP_GOING=0 to stop when a check failed
set -uo pipefail

steps=${1:-setup,checks,inputs,bench,report,memcheck}
repo=$(pwd)
pack=${PACK:-$repo/.devpack}
out=${OUT:-$repo/bench-gpu-out}
side=${SIDE:-16384}
region=${REGION:-512}
count=${COUNT:-2000}
repeat=${REPEAT:-3}
threads=${THREADS:-$(nproc)}
work=/tmp/slidepipe-gpu-bench
res=$work/results # per-run JSON; only the log and the summary go to $OUT (8 files come back)
mkdir -p "$out" "$res" "$work"
log=$out/bench_gpu.log
exec > >(tee -a "$log") 2>&1
export PYTHONUNBUFFERED=1

failed=()
die() { echo "bench_gpu: $*"; exit 1; }
has() { [[ ",$steps," == *",$1,"* ]]; }
budget=${BUDGET:-560}
step() { # NAME SECONDS CMD... : run under a time limit (capped by what is left of the budget),
    # record a failure, go on
    local name=$1 limit=$2
    shift 2
    local left=$((budget - SECONDS))
    if [ "$left" -lt 15 ]; then
        echo "=== $name: skipped, the time budget (BUDGET=$budget s) is spent" >&2
        failed+=("$name (no time left)")
        return 124
    fi
    [ "$limit" -le "$left" ] || limit=$left
    echo "=== $name ($(date -u +%T), limit ${limit}s)" >&2
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s" >&2
    [ $rc -eq 0 ] || failed+=("$name (exit $rc)")
    return $rc
}

stepo() { # NAME SECONDS FILE CMD... : step with stdout into FILE (kept in this shell, no pipe)
    local name=$1 limit=$2 file=$3
    shift 3
    step "$name" "$limit" "$@" >"$file"
    local rc=$?
    cat "$file"
    return $rc
}

if [ -f "$pack/payload.tar.xz" ] && [ ! -d "$pack/libexec" ]; then
    tar -C "$pack" -xJf "$pack/payload.tar.xz" || die "cannot unpack $pack/payload.tar.xz"
fi
[ -d "$pack/libexec" ] || die "no device pack at $pack: run scripts/device-pack on the build machine and name .devpack in the run's carry list"
[ -f bench/gpu_peers.py ] || die "run from the repository root"
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this script runs on a GPU machine (the device tool's run), not here"
nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi finds no GPU: $(nvidia-smi -L 2>&1 | head -1)"
py=${PYTHON:-python3}
sp=$pack/bin/slidepipe
gr=$pack/bin/gpu_read
peers="$py $repo/bench/gpu_peers.py"
export SP_TESTDATA=$pack/testdata SLIDEPIPE_CACHE_MB=0
cat "$pack/MANIFEST" 2>/dev/null

# ---- setup -----------------------------------------------------------------------------------
# Always (later steps need the paths); the wheels are installed once per machine.
if [ ! -f /tmp/site/.slidepipe-installed ]; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$pack"/wheels/*.whl || die "installing the pack's wheels failed"
    touch /tmp/site/.slidepipe-installed
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export SLIDEPIPE_CUDA_LIBS=/tmp/site/nvidia/cu13/lib
# cuFFT and cuFile come from the image: the wheels' folders of its Python, else the toolkit's.
extra=$($py - <<'EOF'
import glob, os, site
dirs = []
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for lib in ("libcufft.so.12", "libcufile.so.0"):
        for hit in glob.glob(os.path.join(base, "nvidia", "*", "lib", lib)) + \
                glob.glob(os.path.join(base, "nvidia", "*", "lib", "lib", lib)):
            d = os.path.dirname(hit)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))
EOF
)
# nvJPEG2000's wheel keeps its library in a folder of its own
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:/tmp/site/nvidia/nvjpeg2k/lib:${extra:+$extra:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
if has setup; then
    echo "=== setup ($(date -u +%T))"
    nvidia-smi
    $sp gpu
    $sp gpu --json >"$res/gpu.json"
    $py -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'
    $py -c 'import cucim; print("cucim", cucim.__version__)' || failed+=("cucim import")
    echo "compute-sanitizer: ${sanitizer:-not found}"
fi

# ---- checks ----------------------------------------------------------------------------------
if has checks; then
    step "test_cuda" 180 "$pack/bin/test_cuda"
    # nvJPEG's default (CUDA) back end too, for its pixel differences from libjpeg-turbo
    step "test_cuda (SLIDEPIPE_NVJPEG=default)" 180 env SLIDEPIPE_NVJPEG=default "$pack/bin/test_cuda"
    for t in test_cuda_augment_color test_cuda_augment_geometry test_cuda_augment_hed \
        test_cuda_stains test_cuda_tile_qc test_cuda_loader; do
        step "$t" 120 "$pack/bin/$t"
    done
    step "pytest test_gpu.py" 300 env SLIDEPIPE_BIN="$sp" $py -m pytest -q -rsP -p no:cacheprovider \
        tests/cli/test_gpu.py
    # The binding (built for this Python by device-pack, beside the packed command): batches in
    # GPU memory through DLPack, pinned batches.
    step "pytest binding GPU tests" 180 env SLIDEPIPE_BIN="$sp" $py -X faulthandler -m pytest -q -rsP -p no:cacheprovider \
        python/tests/test_torch.py python/tests/test_loader.py -k "gpu or cuda or pinned"
    if [ ${#failed[@]} -gt 0 ] && [ "${KEEP_GOING:-1}" != 1 ]; then
        echo "bench_gpu: checks failed: ${failed[*]}"
        exit 1
    fi
fi

# ---- inputs ----------------------------------------------------------------------------------
jpeg=$work/jpeg-$side.tif
raw=$work/raw-$side.tif
list=$work/regions-$side-$region-$count.txt
if has inputs; then
    echo "=== inputs ($(date -u +%T)): ${side}² slides in $work"
    [ -s "$jpeg" ] || step "synth jpeg.tif" 120 $sp synth "$jpeg" --size "$side" >/dev/null
    if [ ! -s "$raw" ]; then
        step "level 0 as RGBA" 120 $sp region "$jpeg" --level 0 --x 0 --y 0 --width "$side" \
            --height "$side" -o "$work/level0.rgba" >/dev/null &&
            step "raw.tif" 180 $peers mkraw "$work/level0.rgba" "$side" "$side" "$raw"
        rm -f "$work/level0.rgba"
    fi
    [ -s "$list" ] || $peers mklist "$side" "$side" "$region" "$count" 7 "$list" >/dev/null
    ls -l "$work"
fi

# ---- bench -----------------------------------------------------------------------------------
if has bench; then
    rm -f "$res"/*.json # no figure from an earlier run on a machine kept warm
    sync
    cat "$raw" "$jpeg" >/dev/null 2>&1 # everyone reads from the page cache
    R="--repeat $repeat"
    # 1
    stepo "1 ours: raw.tif -> GPU" 120 "$res/raw_ours.json" $gr "$raw" whole --threads "$threads" $R
    stepo "1 ours (SLIDEPIPE_CUFILE=1): raw.tif -> GPU" 120 "$res/raw_ours_cufile.json" \
        env SLIDEPIPE_CUFILE=1 $gr "$raw" whole --threads "$threads" $R
    stepo "1 peer: tifffile + cupy" 180 "$res/raw_peer.json" $peers $R raw "$raw"
    # 2
    stepo "2 ours (cuda): jpeg regions" 180 "$res/jpeg_ours.json" $gr "$jpeg" regions \
        --list "$list" --threads "$threads" --device cuda $R
    stepo "2 ours (cuda, --batch 64): jpeg regions" 180 "$res/jpeg_ours_batch.json" $gr "$jpeg" \
        regions --list "$list" --threads "$threads" --device cuda --batch 64 $R
    for n in 4 8; do
        stepo "2 ours (cuda, SLIDEPIPE_NVJPEG_DECODERS=$n): jpeg regions" 180 \
            "$res/jpeg_ours_decoders$n.json" env SLIDEPIPE_NVJPEG_DECODERS=$n $gr "$jpeg" regions \
            --list "$list" --threads "$threads" --device cuda $R
    done
    stepo "2 ours (cuda, SLIDEPIPE_NVJPEG=0): jpeg regions" 180 "$res/jpeg_ours_cpudecode.json" \
        env SLIDEPIPE_NVJPEG=0 $gr "$jpeg" regions --list "$list" --threads "$threads" --device cuda $R
    stepo "2 ours (cpu): jpeg regions" 180 "$res/jpeg_cpu.json" $gr "$jpeg" regions \
        --list "$list" --threads "$threads" --device cpu $R
    stepo "2 peer: cuCIM batched" 240 "$res/jpeg_cucim.json" $peers $R cucim "$jpeg" "$list" \
        --workers "$threads"
    # 3
    stepo "3 ours: process --device cuda" 240 "$res/sobel_ours.json" $peers --repeat 2 timecmd \
        --rm "$work/sobel-gpu.zarr" -- $sp process "$raw" "$work/sobel-gpu.zarr" --op sobel \
        --device cuda --threads "$threads" --json
    stepo "3 ours: process --device cpu" 240 "$res/sobel_cpu.json" $peers --repeat 2 timecmd \
        --rm "$work/sobel-cpu.zarr" -- $sp process "$raw" "$work/sobel-cpu.zarr" --op sobel \
        --device cpu --threads "$threads" --json
    stepo "3 peer: CuPy whole image" 300 "$res/sobel_cupy.json" $peers --repeat 1 timecmd \
        --rm "$work/sobel-cupy.zarr" -- $py bench/gpu_peers.py --repeat 2 sobel "$raw" \
        "$work/sobel-cupy.zarr"
    rm -rf "$work"/sobel-*.zarr
    # 4
    # a corpus of CORPUS slides (names of raw.tif), as spectra are taken: one command each side
    corpus=()
    for i in $(seq 1 "${CORPUS:-4}"); do
        ln -sf "$raw" "$work/corpus-$i.tif"
        corpus+=("$work/corpus-$i.tif")
    done
    stepo "4 ours: spectrum --device cuda" 180 "$res/spec_ours.json" $peers $R timecmd -- \
        $sp spectrum "${corpus[@]}" --device cuda --json "$res/spec_ours_stats.json"
    stepo "4 ours: spectrum (CPU)" 180 "$res/spec_cpu.json" $peers --repeat 2 timecmd -- \
        $sp spectrum "${corpus[@]}" --json "$res/spec_cpu_stats.json"
    stepo "4 peer: PyTorch" 240 "$res/spec_torch.json" $peers $R spectrum "${corpus[@]}"
    # 6 (before 5: 5 is the longest)
    j2k=$SP_TESTDATA/aperio/tcga-cr-7395-01a-01-ts1.svs
    stepo "6 ours: J2K slide level 0 -> GPU (nvJPEG2000)" 120 "$res/j2k_ours.json" $gr "$j2k" \
        whole --threads "$threads" $R
    stepo "6 ours (SLIDEPIPE_NVJPEG2K=0): J2K slide level 0 -> GPU" 120 "$res/j2k_cpudecode.json" \
        env SLIDEPIPE_NVJPEG2K=0 $gr "$j2k" whole --threads "$threads" $R
    # 5
    step "5 training batches into GPU memory (ours vs cuCIM + Kornia)" 240 env \
        PYTHONPATH="$pack/bin/python:$PYTHONPATH" $py -X faulthandler bench/gpu_train.py "$jpeg" --threads "$threads" --json "$out/gpu_train.json"
fi

# ---- report ----------------------------------------------------------------------------------
report() {
    echo "=== report ($(date -u +%T))"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "SIDE=$side REGION=$region COUNT=$count REPEAT=$repeat THREADS=$threads (median of the runs after the first)"
    $peers report "$res" --json "$out/bench_gpu.json" || failed+=("report")
}
has report && report

# ---- memcheck --------------------------------------------------------------------------------
# Last, because compute-sanitizer's slowdown is the least predictable part: each run gets what is
# left of the BUDGET (seconds since the start; default 560 of the device tool's 600), and the
# table is printed again after it so that it ends the output.
if has memcheck; then
    if [ -n "$sanitizer" ]; then
        small=$SP_TESTDATA/aperio/CMU-1-Small-Region.svs
        ms=("$sanitizer" --tool memcheck --error-exitcode 9)
        lib=$pack/lib
        step "memcheck region --device cuda (JPEG, nvJPEG)" 120 env LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" \
            "${ms[@]}" "$pack/libexec/slidepipe" region "$small" --level 0 --x 100 --y 100 \
            --width 1500 --height 1200 -o "$work/memcheck.rgba" --device cuda
        rm -rf "$work/memcheck.zarr"
        step "memcheck process --device cuda" 120 env LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" \
            "${ms[@]}" "$pack/libexec/slidepipe" process "$small" "$work/memcheck.zarr" --op sobel \
            --chunk 512 --threads 2 --device cuda
        step "memcheck spectrum --device cuda" 120 env LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" \
            "${ms[@]}" "$pack/libexec/slidepipe" spectrum "$small" --device cuda --threads 2
        step "memcheck test_cuda" 240 env LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" "${ms[@]}" \
            "$pack/libexec/test_cuda"
        for t in test_cuda_augment_color test_cuda_augment_geometry test_cuda_augment_hed \
            test_cuda_stains test_cuda_tile_qc test_cuda_loader; do
            step "memcheck $t" 90 env LD_LIBRARY_PATH="$lib:$LD_LIBRARY_PATH" "${ms[@]}" \
                "$pack/libexec/$t"
        done
    else
        failed+=("compute-sanitizer not found")
    fi
    has report && report
fi

if [ ${#failed[@]} -gt 0 ]; then
    printf 'bench_gpu: FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "bench_gpu: all steps passed"
