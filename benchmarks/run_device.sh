#!/usr/bin/env bash
# The lead's batched device run: the GPU test suite and the benchmarks in one call.
#   bash benchmarks/run_device.sh suite|bench|mm24|mmflags|attn24|dots|hopper25|ws24|tma|deuteron|dt25|dtattn|tune|lsp|lsp23|tcompile|perfdiag|tutorials|piperows|tut06|prof06|bwd06|bwd06on|bwd06off|bwd06z|bwd06za|bwd06r|libraries|lib28|helion|helionex|fix13|fix13g|fix13t|fp8ws ...   (several parts run in order)
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
    mm24)
      # issue 24's matmul target cells only: fp16/bf16 at 2048^3..8192^3, newt vs Triton (same source) vs cuBLAS
      timeout ${BENCH_T:-300} python3 benchmarks/bench.py --only matmul --dtypes float16,bfloat16 \
        --matmul-sizes 2048,4096,8192 --out "$R/mm24" --budget ${BENCH_BUDGET:-270} 2>&1 | tail -40 > "$R/mm24.log"
      tail -20 "$R/mm24.log" ;;
    mmflags)
      # issue 24's matmul cells (fp16/bf16 2048^3..8192^3) with the opt-in epilogue and loop flags as variants in the
      # same interleaved rounds: newt, newt[flags] (NEWT_CPASYNC_FENCE=0 NEWT_PIPE_ISSUE=late NEWT_CONVERT_ADDR=split),
      # newt[stm] (NEWT_STMATRIX=1 NEWT_CONVERT_ADDR=split), newt[all] (the four), Triton, cuBLAS (~3 min)
      timeout ${BENCH_T:-300} python3 benchmarks/bench.py --only matmul --dtypes float16,bfloat16 \
        --matmul-sizes 2048,4096,8192 --variant flags:NEWT_CPASYNC_FENCE=0,NEWT_PIPE_ISSUE=late,NEWT_CONVERT_ADDR=split \
        --variant stm:NEWT_STMATRIX=1,NEWT_CONVERT_ADDR=split \
        --variant all:NEWT_CPASYNC_FENCE=0,NEWT_PIPE_ISSUE=late,NEWT_CONVERT_ADDR=split,NEWT_STMATRIX=1 \
        --out "$R/mmflags" --budget ${BENCH_BUDGET:-270} 2>&1 | tail -40 > "$R/mmflags.log"
      tail -12 "$R/mmflags.log"; grep -A9 "^## Variant" "$R/mmflags/results.md" | head -40 ;;
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
    hopper25)
      # issue 24, round two, in one call (timeouts add up to 300 s): bench.py's fp16/bf16 matmul rows 2048^3..8192^3,
      # then its attention rows (d=128 first, then 64; causal and not, fp16 and bf16, 4x32x4096 and 16x16x1024), each
      # timed as newt (default), newt[flags] (NEWT_CPASYNC_FENCE=0 NEWT_PIPE_ISSUE=late NEWT_CONVERT_ADDR=split, its own module
      # autotuned over the same configs), Triton (same source) and torch (SDPA / cuBLAS) in interleaved rounds, L2
      # flushed, medians (results.md: the usual tables plus a "Variant newt[flags]" table: variant/newt, variant vs
      # Triton, newt vs Triton, variant vs torch per cell); then the flags' GPU correctness tests. Cells past the
      # budget are listed as skipped (raise BENCH_BUDGET/BENCH_T to run them all).
      timeout ${BENCH_T:-245} python3 benchmarks/bench.py --only matmul,attention --dtypes float16,bfloat16 \
        --matmul-sizes 2048,4096,8192 --attention-dims 128,64 --variant flags:NEWT_CPASYNC_FENCE=0,NEWT_PIPE_ISSUE=late,NEWT_CONVERT_ADDR=split \
        --out "$R/hopper25" --budget ${BENCH_BUDGET:-225} 2>&1 | tail -80 > "$R/hopper25.log"
      tail -30 "$R/hopper25.log"; grep -A30 "^## Variant" "$R/hopper25/results.md" | head -34
      timeout ${TEST_T:-55} python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -n 8 -m gpu \
        tests/backend/test_attention_sass.py tests/backend/test_matmul_sass.py > "$R/hopper25_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$R/hopper25_tests.log" | tail -15 ;;
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
    dtattn)
      # issue 25 (~6 min; carry .whl and .ext/helion): deuteron's attention -- its own example and Helion's
      # examples/attention.py through the drop-in -- at pinned configs against hand-written newt in one process
      # (benchmarks/dtattn_configs.py), then deuteron_bench.py's attention cell alone (quick tune, vs newt and
      # Triton), then Helion's quick tune against deuteron's on Helion's attention example only
      timeout 150 python3 benchmarks/dtattn_configs.py --helion-examples "${HELION_EXAMPLES:-.ext/helion/examples}" \
        > "$R/dtattn_configs.log" 2>&1; echo "dtattn_configs.py exit $?"; tail -40 "$R/dtattn_configs.log"
      timeout 100 python3 benchmarks/deuteron_bench.py --out "$R/dtattn_bench" --only attention --budget 80 \
        > "$R/dtattn_bench.log" 2>&1; echo "deuteron_bench.py exit $?"; grep -A3 "^| kernel" "$R/dtattn_bench.log" | head -4
      rm -rf /tmp/helion-site
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/helion-site \
        "${WHL:-.whl}"/helion/*.whl > "$R/helion_pip.log" 2>&1 || echo "Helion's wheels did not install"
      timeout 230 python3 benchmarks/helion_vs_deuteron.py --examples "${HELION_EXAMPLES:-.ext/helion/examples}" \
        --helion-site /tmp/helion-site --out "$R/dtattn_helion" --budget 215 --only attention --full "" \
        > "$R/dtattn_helion.log" 2>&1; echo "helion_vs_deuteron.py exit $?"; tail -20 "$R/dtattn_helion.log" ;;
    helion)
      # issue 25 in one call of ~9 min (carry .whl and .ext/helion): Helion 1.4.0 (its wheels in .whl/helion,
      # installed into /tmp/helion-site, which only Helion's processes see) against deuteron on Helion's own
      # example files at ef091f41 (.ext/helion/examples), unmodified: deuteron's quick tunes from empty caches
      # one at a time, Helion's HELION_PAR at a time, deuteron's full tunes that fit, then both timed in
      # interleaved rounds (benchmarks/helion_vs_deuteron.py, one deadline over its phases); then
      # benchmarks/deuteron_bench.py (deuteron against hand-written newt and Triton) if 80 s are left, else
      # it needs its own call (the `deuteron` case). HELION_ONLY picks kernels; HELION_ARGS adds arguments
      HT0=$(date +%s); HEND=$(( HT0 + ${HELION_CASE_T:-555} ))
      rm -rf /tmp/helion-site
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/helion-site \
        "${WHL:-.whl}"/helion/*.whl > "$R/helion_pip.log" 2>&1 || { echo "Helion's wheels did not install:"; tail -5 "$R/helion_pip.log"; }
      PYTHONPATH=/tmp/helion-site python3 -c "import importlib.metadata as m, helion, filecheck; print('helion', m.version('helion'), helion.__file__)" 2>&1 | tail -2 | tee -a "$R/env.txt"
      # the GPU's load every 2 s (how busy the parallel Helion tunes kept it): helion_gpu.csv
      nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 2000 \
        > "$R/helion_gpu.csv" 2>/dev/null & SMI=$!
      HT=$(( HEND - $(date +%s) - ${HELION_DBENCH_T:-0} ))
      timeout $HT python3 benchmarks/helion_vs_deuteron.py --examples "${HELION_EXAMPLES:-.ext/helion/examples}" \
        --helion-site /tmp/helion-site --out "$R/helion" --budget $(( HT - 15 )) --parallel ${HELION_PAR:-4} \
        ${HELION_ONLY:+--only "$HELION_ONLY"} ${HELION_ARGS:-} > "$R/helion.log" 2>&1
      echo "helion_vs_deuteron.py exit $? (given ${HT} s)"; kill $SMI 2>/dev/null
      grep -E "^(phase|  tuned)" "$R/helion.log"
      cat "$R/helion/helion_vs_deuteron.md" 2>/dev/null || tail -30 "$R/helion.log"
      DT=$(( HEND - $(date +%s) ))
      # deuteron_bench.py took 110 s with its matmul full tune (H200, 2026-12-02), ~60 s without
      if [ "$DT" -ge 80 ]; then
        DFULL=""; [ "$DT" -ge 150 ] && DFULL="--full matmul"
        timeout $DT python3 benchmarks/deuteron_bench.py --out "$R/helion_dbench" $DFULL > "$R/helion_dbench.log" 2>&1
        echo "deuteron_bench.py $DFULL exit $? (given ${DT} s)"; grep -A8 "^| kernel" "$R/helion_dbench.log" | tail -9
      else
        echo "deuteron_bench.py: not run, ${DT} s left (run the deuteron case in a call of its own)"
      fi ;;
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
    lsp23)
      # issue 23's GPU half: Verify and Autotune on every shipped example with CUDA (tests/lsp/test_examples_verify.py),
      # the commands' GPU Verify/Autotune and the CUDA-fault test (tests/lsp/test_commands.py); pygls & co from .whl
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      PYTHONPATH=$PWD:/tmp/site timeout ${LSP23_T:-240} python3 -m pytest tests/lsp/test_examples_verify.py \
        tests/lsp/test_commands.py -m gpu -q -rf --tb=short -p no:cacheprovider -o addopts="" -n 8 \
        > "$R/lsp23.log" 2>&1; grep -E "^(FAILED|ERROR)|passed|failed" "$R/lsp23.log" | tail -20 ;;
    tcompile)
      # issue 27: newt and deuteron kernels as torch custom ops inside torch.compile (inductor) on the GPU
      timeout ${TCOMPILE_T:-150} python3 -m pytest tests/runtime/test_torch_compile.py -m gpu -v -rf --tb=short \
        -p no:cacheprovider -o addopts="" > "$R/tcompile.log" 2>&1; grep -E "PASSED|FAILED|ERROR|passed|failed" "$R/tcompile.log" | tail -8 ;;
    tutorials)
      # issue 28: Triton's tutorials 01-06 as Triton 3.6 ships them (.ext/triton-tutorials, see COMMITS.txt there).
      # First each tutorial kernel's time, newt (drop-in) vs the installed Triton, interleaved rounds in one run
      # (GPU otherwise idle; compile caches empty); then the tutorials' own checks through the drop-in (15)
      T=${TUT_DIR:-.ext/triton-tutorials}
      timeout ${TUT_TIME_T:-235} python3 benchmarks/triton_tutorial_timings.py "$T" --budget ${TUT_BUDGET:-185} \
        --setup-timeout 150 --json "$R/tutorial_timings.json" --md "$R/tutorial_timings.md" --logdir "$R/timing_logs" \
        > "$R/tutorial_timings.log" 2>&1; tail -45 "$R/tutorial_timings.log"
      timeout ${TUT_CHECK_T:-130} python3 benchmarks/triton_tutorials.py "$T" --gpu-section skip --timeout 75 \
        --json "$R/tutorial_checks.json" > "$R/tutorial_checks.log" 2>&1; tail -24 "$R/tutorial_checks.log" ;;
    piperows)
      # issue 24/28: NEWT_PIPE_ROWS=1 (loads of a dot-free num_stages loop through cp.async rings): its GPU tests, then
      # tutorials 02 and 05 timed without and with it (~3 min)
      T=${TUT_DIR:-.ext/triton-tutorials}
      NEWT_PIPE_ROWS=1 timeout 120 python3 -m pytest tests/backend/test_pipe_rows.py -m gpu -q -p no:cacheprovider \
        -o addopts="" > "$R/piperows_tests.log" 2>&1; grep -E "^(FAILED|ERROR)|passed|failed" "$R/piperows_tests.log" | tail -8
      for flag in 0 1; do
        NEWT_PIPE_ROWS=$flag timeout 100 python3 benchmarks/triton_tutorial_timings.py "$T" --only 02,05 --budget 60 \
          --setup-timeout 40 --md "$R/piperows$flag.md" > "$R/piperows$flag.log" 2>&1; tail -14 "$R/piperows$flag.log"
      done ;;
    tut06)
      # issue 28/24: tutorial 06 (fused attention) alone, newt (drop-in) vs Triton, interleaved rounds; then the
      # descriptor-attention GPU tests (transposed loads on the pipeline, fp8 with V transposed) and fp8 casts
      T=${TUT_DIR:-.ext/triton-tutorials}
      timeout ${TUT_TIME_T:-200} python3 benchmarks/triton_tutorial_timings.py "$T" --only 06 --budget ${TUT_BUDGET:-150} \
        --setup-timeout 120 --json "$R/tut06_timings.json" --md "$R/tut06_timings.md" --logdir "$R/tut06_logs" \
        > "$R/tut06_timings.log" 2>&1; tail -22 "$R/tut06_timings.log"
      timeout 150 python3 -m pytest tests/backend/test_tut06_attention.py tests/ops/test_casts.py -m gpu -q \
        -p no:cacheprovider -o addopts="" -k "desc_attention or fp8 or float8" > "$R/tut06_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$R/tut06_tests.log" | tail -15 ;;
    bwd06|bwd06off|bwd06on|bwd06z|bwd06za|bwd06r)
      # issue 28 (bwd06): tutorial 06's backward and fp8 forward after the offline fixes
      # (benchmarks/tut06_bwd_offline.md): x + dot folded (dot/fold.py), m / Di loaded in the accumulator's slice
      # (plan.py), dv/dk/dq left in flight (dot/wgmma.py), fp8 P from registers (dot/fp8_regs.py).  bwd06: the GPU
      # checks of the backward against torch (both ways) and of the descriptor attention (fp8 included), then
      # tutorial 06 newt vs Triton; bwd06off: the same timings with the four fixes off (the tree before them), to
      # read each ratio's change in one session; bwd06on: with the two opt-in paths on (in-flight register-A
      # accumulations, fp8 P from registers: off by default until this run checks them; the GPU tests of bwd06
      # cover them); bwd06z: the same with the opt-in zero-start dots on top; bwd06r: 1-D loads through the
      # cp.async ring (NEWT_RING_1D=1, pipeline.py RingRow: m and Di of the dK/dV loop), its GPU tests first
      # (tests/backend/test_ring1d.py: a ring kernel and the backward against torch), then the timings with it
      T=${TUT_DIR:-.ext/triton-tutorials}
      tag=$part
      if [ "$part" = bwd06 ] && [ "${BWD06_TESTS:-1}" = 0 ]; then
        env_off=""  # (BWD06_TESTS=0: the timings only, e.g. beside bwd06on in one call)
      elif [ "$part" = bwd06 ]; then
        timeout 200 python3 -m pytest tests/backend/test_tut06_bwd.py tests/backend/test_tut06_attention.py -m gpu -q \
          -p no:cacheprovider -o addopts="" > "$R/bwd06_tests.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed" "$R/bwd06_tests.log" | tail -15
        env_off=""
      elif [ "$part" = bwd06r ]; then
        timeout 200 python3 -m pytest tests/backend/test_ring1d.py -m gpu -q \
          -p no:cacheprovider -o addopts="" > "$R/bwd06r_tests.log" 2>&1
        grep -E "^(FAILED|ERROR)|passed|failed" "$R/bwd06r_tests.log" | tail -15
        env_off="NEWT_RING_1D=1"
      elif [ "$part" = bwd06z ]; then
        env_off="NEWT_WGMMA_ZERO_START=1"
      elif [ "$part" = bwd06za ]; then  # zero-start dots without in-flight register-A accumulations: offline the
        env_off="NEWT_WGMMA_ZERO_START=1 NEWT_ASYNC_RA=0"  # causal d=64 loops 401/348 -> 350/302, 0 spill (2026-12-07)
      elif [ "$part" = bwd06on ]; then
        env_off="NEWT_ASYNC_RA=1 NEWT_FP8_A_REGS=1"
      else
        env_off="NEWT_DOT_FOLD_ADD=0 NEWT_SLICE_LOADS=0 NEWT_ASYNC_RA=0 NEWT_FP8_A_REGS=0"
      fi
      env $env_off timeout ${TUT_TIME_T:-230} python3 benchmarks/triton_tutorial_timings.py "$T" --only 06 \
        --budget ${TUT_BUDGET:-120} --setup-timeout 100 --json "$R/${tag}_timings.json" --md "$R/${tag}_timings.md" \
        --logdir "$R/${tag}_logs" > "$R/${tag}_timings.log" 2>&1; tail -22 "$R/${tag}_timings.log" ;;
    prof06)
      # issue 28: where tutorial 06's time goes (benchmarks/tut06_profile.py): per call host and GPU time, the
      # kernels one call launches (torch.profiler), the host's top functions; Triton, newt, newt with NEWT_TMA=desc
      T=${TUT_DIR:-.ext/triton-tutorials}
      timeout ${PROF_T:-100} python3 benchmarks/tut06_profile.py "$T" > "$R/prof06_triton.log" 2>&1; echo "triton exit $?"
      timeout ${PROF_T:-100} python3 -m newt.dropin benchmarks/tut06_profile.py "$T" > "$R/prof06_newt.log" 2>&1; echo "newt exit $?"
      NEWT_TMA=${PROF_TMA:-desc} timeout ${PROF_T:-100} python3 -m newt.dropin benchmarks/tut06_profile.py "$T" > "$R/prof06_newt_tma.log" 2>&1
      echo "newt tma exit $?"; grep -h "^== " "$R"/prof06_*.log ;;
    libraries)
      # issue 28: the libraries' own kernel tests (.ext/<library>, COMMIT in each) on the GPU, one pytest run under
      # the installed Triton and one under newt's drop-in, compared case by case; the libraries run at once
      # (Liger: its kernel tests only, not the model-level ones (monkey patching, trainers, whole models), one
      # parametrization each, its files in 2 shards (the slow grpo_loss / cross_entropy / jsd files apart), each
      # shard its own pair of runs).  16 cores: 2 xdist workers per run (Liger 2 shards x 2 runs, attorch 2 runs,
      # ml-cross-entropy 2 runs: 16 workers).  Runs alone in one device call (the 600 s limit): each run stops at
      # LIB_RUN_T s and reports the cases it finished; a failing case's traceback end is in $R/lib_<library>.log
      for L in ${LIBS:-attorch Liger-Kernel ml-cross-entropy}; do
        [ -d ".ext/$L" ] || { echo "libraries: .ext/$L missing"; continue; }
        X="--per-test ${LIB_PER_TEST:-2} --workers 2"
        [ "$L" = Liger-Kernel ] && X="--per-test ${LIGER_PER_TEST:-1} --workers 2 --shards ${LIGER_SHARDS:-2} --skip test_monkey_patch,test_auto_model,test_trainer_integration,test_transformers.py,test_utils.py,cutedsl,cutile,cute_"
        timeout ${LIB_T:-530} python3 benchmarks/triton_libraries.py ".ext/$L" --impl both $X --timeout ${LIB_CASE_T:-120} \
          --file-timeout ${LIB_RUN_T:-500} --json "$R/lib_$L.json" --md > "$R/lib_$L.log" 2>&1 &
      done
      wait
      for L in ${LIBS:-attorch Liger-Kernel ml-cross-entropy}; do
        [ -f "$R/lib_$L.log" ] && grep -E "^(triton|newt):|kernels Triton runs|newt fails" "$R/lib_$L.log" | cut -c1-220
      done ;;
    lib28)
      # issue 28, lib28: the three library kernels that failed on the H100 (2026-12-07), after their fixes: attorch's
      # autotuned conv (its 16 configs now compile in the autotuner's workers, which turn the drop-in on; before,
      # each failed there and the main process compiled them again one by one: past the 120 s case limit) and
      # Liger's jsd (log as logf, not lg2.approx), dyt and mlp (the same autotune path, 18 and 32 configs), Triton
      # and newt in the same call, 2 xdist workers each; then the log-accuracy GPU test. Each case's seconds
      # (Triton | newt) from the JSON; the libraries case's limits (120 s per case)
      timeout ${LIB28_T:-240} python3 -m pytest tests/backend/test_lib28_log_accuracy.py -q -rf -p no:cacheprovider \
        -o addopts="" -m gpu > "$R/lib28_log.log" 2>&1; tail -3 "$R/lib28_log.log"
      timeout ${LIB28_RUN_T:-330} python3 benchmarks/triton_libraries.py .ext/attorch --impl both --only conv_layer \
        --per-test 2 --workers 2 --timeout 120 --file-timeout 300 --json "$R/lib28_attorch.json" --md \
        > "$R/lib28_attorch.log" 2>&1 &
      timeout ${LIB28_RUN_T:-330} python3 benchmarks/triton_libraries.py .ext/Liger-Kernel --impl both --only jsd,dyt,mlp,swiglu \
        --per-test 1 --workers 2 --timeout 120 --file-timeout 300 --json "$R/lib28_liger.json" --md \
        > "$R/lib28_liger.log" 2>&1 &
      wait
      for L in attorch liger; do
        grep -E "^(triton|newt):|kernels Triton runs|newt fails" "$R/lib28_$L.log" | cut -c1-220
        python3 - "$R/lib28_$L.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
by = {}
for impl, run in d["runs"].items():
    for f, cases in run["by_file"].items():
        for c in cases:
            by.setdefault((f, c["name"]), {})[impl] = f"{c['result']} {c['seconds']:.1f}s"
for (f, n), v in sorted(by.items()):
    print(f"  {f} {n[:70]}: triton {v.get('triton', '-')} | newt {v.get('newt', '-')}")
PY
      done ;;
    ws24)
      # issue 24, warp specialization (timeouts add up to 420 s): first the GPU tests -- descriptor matmuls fp16/bf16
      # 512..4096 with ragged sizes, the persistent descriptor matmul (few and many programs) and attention d=64/128
      # causal and not, each against torch, warp-specialized, each family in a subprocess with its own timeout (a
      # deadlock fails, it does not hang; the log shows the last case that finished); then bench_ws.py: descriptor
      # matmul (bench.py's 128x256x64 8-warp 3-stage tile), the persistent one (128x256x64, 2 stages, NUM_SMS
      # programs) and attention (4x32x4096, 16x16x1024, d=128 then 64, causal and not), 8192 before 4096 before 2048,
      # fp16 before bf16, as newt (NEWT_TMA=1), newt_ws (+NEWT_WARP_SPECIALIZE=1), Triton (same source) and torch
      # (cuBLAS / SDPA) in interleaved rounds, L2 flushed; cells past the budget are skipped (raise WS_BUDGET and
      # WS_BENCH_T for all of them). The ping-pong (NEWT_WS_PINGPONG=1, pingpong.py) and the intra-warpgroup overlap
      # (NEWT_WS_OVERLAP=1, overlap.py) and both together (both flags, ppov.py): their GPU tests (attention d=64/128,
      # causal and not, fp16/bf16, each in a subprocess limited to 45 s; the other parts' limits are 60/50/95 s) after
      # the others, and the attention rows' newt_pp, newt_ov and newt_ppov columns (newt_ws plus each, run in the same
      # rounds; pp/ws, ov/ws, ppov/ws, ppov/pp ... in the table). The bench's default budget covers the first cells
      # (attention d=128 4x32x4096 among them); WS_BENCH_T=250 WS_BUDGET=220 for more of the table
      timeout ${WS_TEST_T:-345} python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -m gpu \
        tests/backend/test_warp_specialize.py tests/backend/test_ws_pingpong.py tests/backend/test_ws_ppov.py \
        > "$R/ws24_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed|no result" "$R/ws24_tests.log" | tail -15
      timeout ${WS_BENCH_T:-75} python3 benchmarks/bench_ws.py --out "$R/ws24" --budget ${WS_BUDGET:-50} \
        > "$R/ws24_bench.log" 2>&1; tail -34 "$R/ws24_bench.log" ;;
    attn24)
      # issue 24, attention forward only (a short call beside others): the ping-pong + overlap GPU tests
      # (tests/backend/test_ws_ppov.py, each case in a subprocess limited to 45 s), then bench_ws.py's attention
      # rows (newt, newt_ws, newt_pp, newt_ov, newt_ppov, Triton, SDPA; d=128 before 64), ATTN24_BUDGET s of cells
      timeout ${ATTN24_TEST_T:-100} python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -m gpu \
        tests/backend/test_ws_ppov.py > "$R/attn24_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed|no result" "$R/attn24_tests.log" | tail -12
      timeout ${ATTN24_BENCH_T:-200} python3 benchmarks/bench_ws.py --out "$R/attn24" --only attention \
        --budget ${ATTN24_BUDGET:-160} > "$R/attn24_bench.log" 2>&1; tail -24 "$R/attn24_bench.log" ;;
    helionex)
      # issue 25 (dt25; carry .whl and .ext; <= 540 s): Helion's examples (.ext/helion/examples, pytorch/helion at
      # ef091f41, unmodified) on the GPU, every kernel at its default config (no tuning), checked against the
      # example's reference at its own tolerances: deuteron through the drop-in, then the real Helion 1.4 (.whl/helion
      # into /tmp/helion-site) on the same files and drivers, then the table of both (benchmarks/helion_examples.py)
      # (the files run in supervised children: a crash or a hang costs its own file; a hang is cut 30 s after
      # its checks' 45 s alarms)
      HX=${HELION_EXAMPLES:-.ext/helion/examples}; HX=${HX%/}; HX=${HX%/examples}; export HELION_EXAMPLES_HANG_MARGIN=30
      timeout ${HELIONEX_DT_T:-290} python3 benchmarks/helion_examples.py "$HX" --device cuda --timeout 45 \
        --json "$R/helionex_deuteron.json" > "$R/helionex_deuteron.log" 2>&1
      echo "deuteron (drop-in) exit $?"; grep -A12 "kernels run correctly" "$R/helionex_deuteron.log" | head -14
      rm -rf /tmp/helion-site
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/helion-site \
        "${WHL:-.whl}"/helion/*.whl > "$R/helion_pip.log" 2>&1 || { echo "Helion's wheels did not install:"; tail -5 "$R/helion_pip.log"; }
      timeout ${HELIONEX_H_T:-220} python3 benchmarks/helion_examples.py "$HX" --device cuda --impl helion \
        --helion-site /tmp/helion-site --timeout 45 --json "$R/helionex_helion.json" > "$R/helionex_helion.log" 2>&1
      echo "Helion exit $?"; grep -A8 "kernels run correctly" "$R/helionex_helion.log" | head -10
      python3 benchmarks/helion_examples.py --compare "$R/helionex_deuteron.json" "$R/helionex_helion.json" \
        --md "$R/helionex.md" 2>&1 | head -100 ;;
    dt25)
      # issue 25 (dt25; ~5 min): deuteron's quick tunes of matmul 4096^3 and attention 4x32x4096x64 from empty
      # caches at the quick effort's own limits (40 configs, 15 s; no --budget), against hand-written newt and
      # Triton in the same process; first as newt is by default, then with NEWT_TMA=1 (--tma: the tunes also try
      # the descriptor form, TMA copies, and its warp-specialized pipeline; newt's hand-written kernel gets TMA too)
      timeout ${DT25_T:-170} python3 benchmarks/deuteron_bench.py --out "$R/dt25_plain" --only matmul,attention \
        > "$R/dt25_plain.log" 2>&1; echo "deuteron_bench.py exit $?"; grep -B2 -A4 "^| kernel" "$R/dt25_plain.log" | head -8
      timeout ${DT25_T:-170} python3 benchmarks/deuteron_bench.py --out "$R/dt25_tma" --only matmul,attention --tma \
        > "$R/dt25_tma.log" 2>&1; echo "deuteron_bench.py --tma exit $?"; grep -B2 -A4 "^| kernel" "$R/dt25_tma.log" | head -8
      grep -h -A1 "^  deuteron " "$R/dt25_plain.log" "$R/dt25_tma.log" | head -16 ;;
    fix13|fix13g|fix13t)
      # (fix13g: the gathered-dot tests and Helion's two files only; fix13t: the full attention tune only)
      # session 13's offline fixes, first on the GPU (<= 300 s; carry .ext and .whl): the gathered-row dots and
      # deuteron's gather_gemv at its default config (the async-proxy scratch no longer shares bytes with a layout
      # conversion's), Helion's gather_gemv and moe_matmul_ogs files through the drop-in (moe_matmul_ogs races with
      # itself: expected to stay wrong), then deuteron's full attention tune (the tuner no longer keeps every
      # candidate's argument clones; it ran out of GPU memory before)
      if [ "$part" != fix13t ]; then
      timeout ${FIX13_TEST_T:-120} python3 -m pytest -q -rf --tb=short -p no:cacheprovider -o addopts="" -m gpu -n 4 \
        tests/backend/test_gather_dot.py tests/deuteron/test_dt_gpu.py -k "gather" > "$R/fix13_tests.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$R/fix13_tests.log" | tail -12
      HX=${HELION_EXAMPLES:-.ext/helion/examples}; HX=${HX%/}; HX=${HX%/examples}
      timeout 60 python3 benchmarks/helion_examples.py "$HX" --device cuda --only gather_gemv,moe_matmul_ogs \
        --timeout 30 > "$R/fix13_helionex.log" 2>&1; grep -E "kernels|Error|Mismatch" "$R/fix13_helionex.log" | head -8
      fi
      [ "$part" = fix13g ] && { echo "== $part took $(( $(date +%s) - t0 )) s"; continue; }
      timeout ${FIX13_TUNE_T:-150} python3 benchmarks/deuteron_bench.py --out "$R/fix13_dbench" --only attention \
        --full attention > "$R/fix13_dbench.log" 2>&1; echo "deuteron_bench.py --full attention exit $?"
      grep -E "^\| attention|^  full|FAILED|OutOfMemory" "$R/fix13_dbench.log" | head -6 ;;
    fp8ws)
      # issue 24's fp8 >= 0.90x cuBLAS: bench_ws.py's persistent fp8 e4m3 matmul (B K-major, 128x256x128, 2 stages,
      # 8 warps), newt with TMA, warp-specialized, Triton (same source) and cuBLAS (_scaled_mm) at 8192/4096/2048^3
      timeout ${FP8WS_T:-200} python3 benchmarks/bench_ws.py --out "$R/fp8ws" --only persistent_fp8 \
        --budget ${FP8WS_BUDGET:-160} > "$R/fp8ws.log" 2>&1; tail -12 "$R/fp8ws.log" ;;
    perfdiag)
      # issue 23 on an idle CPU (no GPU needed): the first N100 spill warning of tests/lsp/fixtures/perf_matmul.py
      # within 3 s of opening it (a fresh server, an empty compile cache), and the figures equal newt.compile's
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
      # the breakdown first (benchmarks/perf_first_warning.py: the server's timeline from didOpen to the warning,
      # each compile's wall and CPU time, the server tree's CPU), on the idle machine, then the tests
      { uptime; PYTHONPATH=$PWD:/tmp/site timeout 150 python3 benchmarks/perf_first_warning.py --runs 3;
        PYTHONPATH=$PWD:/tmp/site timeout 60 python3 benchmarks/perf_first_warning.py --runs 1 --workers 1;
        PYTHONPATH=$PWD:/tmp/site timeout 60 python3 benchmarks/perf_first_warning.py --runs 1 --immediate; } \
        2>&1 | tee "$R/perfdiag_breakdown.log"
      PYTHONPATH=$PWD:/tmp/site NEWT_PERF_BUDGET_S=3 timeout 400 python3 -m pytest tests/lsp/test_perf_diagnostics.py \
        -q -s -rf -p no:cacheprovider -o addopts="" -m "slow or not slow" 2>&1 | tee "$R/perfdiag.log" | \
        grep -E "first N100|passed|failed|Error" | tail -12 ;;
  esac
  echo "== $part took $(( $(date +%s) - t0 )) s"
done
tar -C "$R" -czf "$OUT/results.tgz" .
