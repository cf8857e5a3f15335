#!/usr/bin/env bash
# The lead's batched device run: the GPU test suite and the benchmarks in one call.
#   bash benchmarks/run_device.sh suite|bench|deuteron|lsp ...   (several parts run in order)
# Writes logs and reports under $OUT and packs them into $OUT/results.tgz (the device tool returns
# at most 8 files).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/newt-out}
mkdir -p "$OUT/r"
R=$OUT/r
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  python3 -c "import torch, triton, cuda.bindings; from cuda.bindings import nvrtc; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda-bindings', cuda.bindings.__version__, 'nvrtc', nvrtc.nvrtcVersion()[1:])"
  git rev-parse --short HEAD 2>/dev/null || true
} > "$R/env.txt" 2>&1
cat "$R/env.txt"
for part in "$@"; do
  t0=$(date +%s)
  case "$part" in
    suite)
      timeout 240 python3 -m pytest tests -m gpu -q -p no:cacheprovider -n 6 --ignore=tests/lsp --ignore=tests/e2e \
        -o addopts="" 2>&1 | tee "$R/gpu_suite.log" | tail -40 ;;
    failed)
      timeout 200 python3 -m pytest tests -m gpu -q -p no:cacheprovider --ignore=tests/lsp --ignore=tests/e2e \
        -o addopts="" --lf 2>&1 | tee "$R/gpu_failed.log" | tail -40 ;;
    bench)
      timeout 250 python3 benchmarks/bench.py --out "$R" --budget 200 2>&1 | tail -60 > "$R/bench.log"; tail -45 "$R/bench.log" ;;
    overhead)
      timeout 60 python3 benchmarks/launch_overhead.py --out "$R" 2>&1 | tee "$R/overhead.log" | tail -15 ;;
    deuteron)
      timeout 330 python3 benchmarks/deuteron_bench.py --out "$R" --budget 300 2>&1 | tail -60 > "$R/deuteron.log"; tail -30 "$R/deuteron.log" ;;
    lsp)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout 240 python3 -m pytest tests/lsp -q -p no:cacheprovider -o addopts="" -m gpu \
        2>&1 | tee "$R/lsp_gpu.log" | tail -25 ;;
  esac
  echo "== $part took $(( $(date +%s) - t0 )) s"
done
tar -C "$R" -czf "$OUT/results.tgz" .
