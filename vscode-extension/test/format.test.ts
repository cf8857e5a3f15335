import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  autotuneDetail,
  autotuneSummary,
  compileSummary,
  failureActions,
  firstLine,
  formatBytes,
  formatConfig,
  formatMs,
  statusText,
  verifyDetail,
  verifySummary,
} from '../src/core/format';

describe('compile results', () => {
  it('shows registers, spills, shared memory and time', () => {
    assert.equal(compileSummary({
      kernel: 'add_kernel', specialization: { BLOCK_SIZE: 1024 }, target: 'sm_90a', n_regs: 26, n_spills: 0, shared: 0, compile_ms: 412.4,
    }), 'Newt: add_kernel [BLOCK_SIZE=1024] for sm_90a: 26 registers, 0 spills, 0 B shared memory, compiled in 412 ms');
    assert.equal(compileSummary({ kernel: 'k', n_regs: 1, n_spills: 1, shared: 49152, specialization: 'BLOCK=64' }),
      'Newt: k [BLOCK=64]: 1 register, 1 spill, 48 KiB shared memory');
  });
});

describe('configs and numbers', () => {
  it('formats configs in Triton\'s style', () => {
    assert.equal(formatConfig({ BLOCK: 128, num_warps: 4 }), 'BLOCK=128, num_warps=4');
    assert.equal(formatConfig({ kwargs: { BLOCK_M: 64, BLOCK_N: 32 }, num_warps: 8, num_stages: null }), 'BLOCK_M=64, BLOCK_N=32, num_warps=8');
    assert.equal(formatConfig('BLOCK=64'), 'BLOCK=64');
    assert.equal(formatConfig(null), '');
    assert.equal(formatConfig({ shape: [1, 2] }), 'shape=[1,2]');
  });
  it('formats bytes and milliseconds', () => {
    assert.equal(formatBytes(512), '512 B');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(undefined), '?');
    assert.equal(formatMs(0.012345), '0.0123 ms');
    assert.equal(formatMs(1234.5), '1235 ms');
    assert.equal(formatMs(null), '?');
  });
  it('takes the first non-empty line', () => {
    assert.equal(firstLine('\n  \nfirst\nsecond'), 'first');
    assert.equal(firstLine('x'.repeat(400)).length, 300);
  });
});

describe('verify results', () => {
  const ok = {
    kernel: 'add_kernel', ok: true, device: 'interpreter',
    cases: [
      { name: 'n=1000', ok: true, max_abs_err: 0, max_rel_err: 0, message: null },
      { name: 'n=4096', ok: true, max_abs_err: 1.5e-7, max_rel_err: 2e-7, message: null },
    ],
    message: null,
  };
  it('summarizes a pass on the interpreter', () => {
    assert.equal(verifySummary(ok), 'Newt: add_kernel verified on the interpreter (no GPU): 2/2 cases passed, max abs err 1.50e-7');
  });
  it('summarizes a failure with its message, and details every case', () => {
    const bad = { ...ok, ok: false, device: 'cuda', cases: [ok.cases[0], { ...ok.cases[1], ok: false, max_abs_err: 0.5, message: 'mismatch' }],
      message: 'results differ from the reference\nmore' };
    assert.equal(verifySummary(bad), 'Newt: add_kernel FAILED verification on the GPU: 1/2 cases passed, max abs err 5.00e-1: results differ from the reference');
    const d = verifyDetail(bad);
    assert.match(d, /ok {3}n=1000/);
    assert.match(d, /FAIL n=4096 {2}max_abs_err=5.00e-1 max_rel_err=2.00e-7 {2}mismatch/);
  });
  it('says "no reference" when nothing was compared, never "max abs err 0"', () => {
    const none = { ...ok, ok: false, reason: 'no_reference', message: 'no reference for add_kernel: 2 of 2 ...',
      cases: ok.cases.map((c) => ({ ...c, ok: false, max_abs_err: null, max_rel_err: null, message: 'no reference: ...' })) };
    assert.equal(verifySummary(none), 'Newt: no reference for add_kernel: 2 of 2 ...');
    const crashed = { ...none, reason: undefined, message: 'the kernel failed' };
    assert.doesNotMatch(verifySummary(crashed), /max abs err/);
  });
});

describe('autotune results', () => {
  const r = {
    kernel: 'matmul', best: { config: { BLOCK: 128, num_warps: 4 }, ms: 0.0421 },
    results: [
      { config: { BLOCK: 64, num_warps: 4 }, ms: 0.08, error: null },
      { config: { BLOCK: 128, num_warps: 4 }, ms: 0.0421, error: null },
      { config: { BLOCK: 256, num_warps: 8 }, ms: null, error: 'out of resources: shared memory\ntrace' },
    ],
    cache: '/tmp/c/x.json',
  };
  it('names the winner and counts failures', () => {
    assert.equal(autotuneSummary(r), 'Newt: best config for matmul: BLOCK=128, num_warps=4 (0.0421 ms; 3 configs timed, 1 failed)');
    assert.equal(autotuneSummary({ kernel: 'k', best: null, results: [{ config: {}, ms: null, error: 'x' }] }),
      'Newt: autotuning k found no working config (1 config tried)');
    assert.equal(autotuneSummary({ kernel: 'k', best: null, results: [], reason: 'no_examples',
      message: 'no example inputs for k to autotune on: add one with @newt.harness.example(k)' }),
    "Newt: no example inputs for k to autotune on: add one with @newt.harness.example(k) (the light bulb on the kernel's def line inserts one)");
    assert.match(autotuneSummary({ ...r, device: 'interpreter' }), /CPU interpreter wall-clock times, not GPU timings\)$/);
  });
  it('lists configs fastest first with failures last', () => {
    const lines = autotuneDetail(r).split('\n');
    assert.match(lines[1], /0\.0421 ms {2}BLOCK=128/);
    assert.match(lines[2], /0\.08 ms {2}BLOCK=64/);
    assert.match(lines[3], /failed {2}BLOCK=256, num_warps=8 {2}\(out of resources: shared memory\)/);
    assert.match(lines[4], /cache: \/tmp\/c\/x\.json/);
  });
});

describe('status bar', () => {
  it('shows the GPU and its architecture', () => {
    const t = statusText({ mode: 'gpu', gpu: 'NVIDIA H200', arch: 'sm_90', target: 'sm_90a' });
    assert.equal(t.text, '$(chip) NVIDIA H200 · sm_90');
    assert.match(t.tooltip, /compiling for sm_90a/);
  });
  it('shows compile-only without a GPU', () => {
    assert.equal(statusText({ mode: 'compile-only', gpu: null, arch: null, target: 'sm_90a' }).text, '$(chip) newt: compile-only (no GPU)');
  });
});

describe('server failure notifications', () => {
  it('offer Restart Server after a crash and when a command finds the server not running', () => {
    assert.deepEqual(failureActions('crash'), ['Restart Server', 'Show Logs']);
    assert.deepEqual(failureActions('not-running'), ['Restart Server', 'Show Logs']);
  });
  it('offer the interpreter setting, not a restart, when newt cannot be imported', () => {
    assert.deepEqual(failureActions('interpreter'), ['Set Interpreter', 'Show Logs']);
  });
});
