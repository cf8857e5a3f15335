#!/usr/bin/env bash
# The lead's batched device run: the GPU test suite and the benchmarks in one call.
#   bash benchmarks/run_device.sh suite|bench|dots|tma|deuteron|tune|lsp|perfdiag ...   (several parts run in order)
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
  echo "git ${NEWT_GIT_REV:-$(git rev-parse --short HEAD 2>/dev/null)}"
} > "$R/env.txt" 2>&1
cat "$R/env.txt"
for part in "$@"; do
  t0=$(date +%s)
  case "$part" in
    suite)
      timeout ${SUITE_T:-420} python3 -m pytest tests -m gpu -v -rf --tb=short --durations=20 -p no:cacheprovider -n 8 --ignore=tests/lsp --ignore=tests/e2e \
        -o addopts="" > "$R/gpu_suite.log" 2>&1; grep -E "FAILED|ERROR|passed|failed" "$R/gpu_suite.log" | tail -30 ;;
    failed)
      timeout 200 python3 -m pytest tests -m gpu -q -p no:cacheprovider --ignore=tests/lsp --ignore=tests/e2e \
        -o addopts="" --lf 2>&1 | tee "$R/gpu_failed.log" | tail -40 ;;
    bench)
      # 47 cells (memory-bound, matmul fp16/bf16/fp8/tf32 1024^3..8192^3, attention d=64/128): ~6 min
      timeout ${BENCH_T:-560} python3 benchmarks/bench.py --out "$R" --budget ${BENCH_BUDGET:-480} 2>&1 | tail -80 > "$R/bench.log"; tail -55 "$R/bench.log" ;;
    dots)
      # matmul and attention rows only (wgmma on sm_90a; NEWT_DOT_LOWERING=mma_sync for the old path)
      timeout ${BENCH_T:-330} python3 benchmarks/bench.py --only matmul,attention --out "$R/dots" --budget ${BENCH_BUDGET:-280} 2>&1 | tail -40 > "$R/dots.log"; tail -30 "$R/dots.log" ;;
    hopper24)
      # issue 24 in one call (timeouts add up to 520 s; the device compiles a matmul cell's configs in ~10 s):
      # fp16/bf16 matmul rows (1024^3..8192^3), the persistent matmul (2048^3..8192^3), the masked-K matmul
      # with K = s - 1 (2048, 4096) and the attention rows, newt vs Triton (same source) vs torch in one run;
      # the GPU tests of the persistent kernel, the unaligned big-tile masked-K matmul and the stmatrix
      # epilogue; then the matmul rows again with NEWT_STMATRIX=1 (their own same-run ratios)
      timeout ${BENCH_T:-300} python3 benchmarks/bench.py --only matmul,matmul_persistent,matmul_masked,attention \
        --dtypes float16,bfloat16 --out "$R/hopper24" --budget ${BENCH_BUDGET:-270} 2>&1 | tail -60 > "$R/hopper24.log"
      tail -32 "$R/hopper24.log"
      timeout ${TEST_T:-100} python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -n 8 -m gpu \
        tests/backend/test_persistent.py tests/backend/test_stmatrix.py tests/backend/test_gpu.py \
        -k "persistent or unaligned_big_tiles or stmatrix" > "$R/hopper24_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$R/hopper24_tests.log" | tail -15
      NEWT_STMATRIX=1 timeout ${STM_T:-120} python3 benchmarks/bench.py --only matmul --dtypes float16,bfloat16 \
        --out "$R/hopper24_stm" --budget ${STM_BUDGET:-105} 2>&1 | tail -30 > "$R/hopper24_stm.log"
      tail -14 "$R/hopper24_stm.log" ;;
    stmatrix)
      # the stmatrix epilogue (NEWT_STMATRIX=1, off by default): its GPU tests, then the fp16/bf16 matmul rows
      # without and with it, each against Triton in its own run (make it the default only if every cell gains)
      timeout 90 python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -n 8 -m gpu \
        tests/backend/test_stmatrix.py > "$R/stmatrix_tests.log" 2>&1; tail -3 "$R/stmatrix_tests.log"
      timeout ${BENCH_T:-210} python3 benchmarks/bench.py --only matmul --dtypes float16,bfloat16 --out "$R/stm_off" \
        --budget ${BENCH_BUDGET:-190} 2>&1 | tail -30 > "$R/stm_off.log"; tail -14 "$R/stm_off.log"
      NEWT_STMATRIX=1 timeout ${BENCH_T:-210} python3 benchmarks/bench.py --only matmul --dtypes float16,bfloat16 \
        --out "$R/stm_on" --budget ${BENCH_BUDGET:-190} 2>&1 | tail -30 > "$R/stm_on.log"; tail -14 "$R/stm_on.log" ;;
    tma)
      # issue 13's default-on decision for TMA: the matmul rows without and with NEWT_TMA=1, each run its own
      # same-run ratio to Triton (then flip newt/backend/cuda/tma.py's _DEFAULT_ON only if every cell gains)
      timeout ${BENCH_T:-200} python3 benchmarks/bench.py --only matmul --out "$R/tma_off" --budget ${BENCH_BUDGET:-170} \
        2>&1 | tail -30 > "$R/tma_off.log"; tail -20 "$R/tma_off.log"
      NEWT_TMA=1 timeout ${BENCH_T:-200} python3 benchmarks/bench.py --only matmul --out "$R/tma_on" \
        --budget ${BENCH_BUDGET:-170} 2>&1 | tail -30 > "$R/tma_on.log"; tail -20 "$R/tma_on.log"
      NEWT_TMA=1 timeout ${SUITE_T:-300} python3 -m pytest tests -m gpu -q -p no:cacheprovider -n 8 --ignore=tests/lsp \
        --ignore=tests/e2e -o addopts="" > "$R/gpu_suite_tma.log" 2>&1; tail -3 "$R/gpu_suite_tma.log" ;;
    atomics)
      # the atomics tests on the GPU, several times over (they once hung at random)
      for i in 1 2 3 4 5; do timeout 90 python3 -m pytest tests/ops/test_atomics.py -k cuda -q -p no:cacheprovider \
        -o addopts="" 2>&1 | tail -1; done | tee "$R/atomics.log" ;;
    sweep)
      timeout 150 python3 benchmarks/config_sweep.py --out "$R" ${SWEEP_CELLS:+--cells "$SWEEP_CELLS"} 2>&1 | tee "$R/sweep.log" | tail -40 ;;
    overhead)
      timeout 60 python3 benchmarks/launch_overhead.py --out "$R" 2>&1 | tee "$R/overhead.log" | tail -15 ;;
    deuteron)
      timeout 270 python3 benchmarks/deuteron_bench.py --out "$R" --budget 230 2>&1 | tail -60 > "$R/deuteron.log"; tail -30 "$R/deuteron.log" ;;
    tune)
      # the tuning executor (benchmarks/autotune_scaling.md): deuteron quick tunes from scratch, the one-GPU
      # serial-vs-executor comparison (each row a fresh process), the CPU compile scaling with a loopback Dask
      # cluster (the distributed wheels carried in .whl, installed into /tmp/site for that part only)
      timeout ${TUNE_QUICK_T:-80} python3 benchmarks/autotune_scaling.py quick 2>&1 | tee "$R/tune_quick.log" | tail -8
      timeout ${TUNE_SINGLE_T:-115} python3 benchmarks/autotune_scaling.py gpu-single --max-configs ${TUNE_CONFIGS:-60} \
        2>&1 | tee "$R/tune_single.log" | tail -9
      W=${WHL:-.whl}; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        "$W"/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout ${TUNE_CPU_T:-60} python3 benchmarks/autotune_scaling.py cpu \
        --configs ${TUNE_CPU_CONFIGS:-80} 2>&1 | tee "$R/tune_cpu.log" | tail -8
      timeout ${TUNE_TEST_T:-35} python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/tune -m gpu \
        tests/deuteron/test_dt_gpu.py -k "autotun or resources or gpu_workers" 2>&1 | tail -4 | tee "$R/tune_tests.log" ;;
    rerun)
      # the failures of the last suite run, serially, with tracebacks
      timeout 240 python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" \
        "tests/deuteron/test_dt_gpu.py::test_random_configs_on_gpu" \
        tests/deuteron/test_dt_gpu.py::test_autotuner_never_picks_a_wrong_config \
        tests/deuteron/test_dt_gpu.py::test_out_of_resources_is_skipped_quietly \
        tests/runtime/test_gpu.py::test_unaligned_views_and_non_multiple_sizes \
        tests/ops/test_elementwise.py::test_float_math tests/ops/test_atomics.py -k "cuda or dt_gpu or runtime" \
        > "$R/rerun.log" 2>&1; grep -E "^(FAILED|ERROR)|^E  |passed|failed" "$R/rerun.log" | head -60 ;;
    lspcmd)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout ${LSP_T:-150} python3 -m pytest tests/lsp/test_commands.py -q -rf --tb=short ${LSP_K:+-k "$LSP_K"} \
        -p no:cacheprovider -o addopts="" > "$R/lsp_commands.log" 2>&1; grep -E "^(FAILED|ERROR)|^E  |passed|failed" "$R/lsp_commands.log" | head -30 ;;
    lsp)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout 60 python3 -m pytest tests/lsp -q -p no:cacheprovider -o addopts="" -m gpu \
        2>&1 | tee "$R/lsp_gpu.log" | tail -25 ;;
    perfdiag)
      # issue 23 on an idle CPU (no GPU needed): the first N100 spill warning of tests/lsp/fixtures/perf_matmul.py
      # within 3 s of opening it (a fresh server, an empty compile cache), and the figures equal newt.compile's
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout 400 python3 -m pytest tests/lsp/test_perf_diagnostics.py -q -s -rf \
        -p no:cacheprovider -o addopts="" -m "slow or not slow" 2>&1 | tee "$R/perfdiag.log" | \
        grep -E "first N100|passed|failed|Error" | tail -12 ;;
  esac
  echo "== $part took $(( $(date +%s) - t0 )) s"
done
tar -C "$R" -czf "$OUT/results.tgz" .
