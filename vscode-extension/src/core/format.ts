/** Turns server results into the short texts of notifications and the longer ones of the log. */
import type { AutotuneResult, CompileResult, ServerStatus, VerifyResult } from './protocol';

/** `{BLOCK: 128, num_warps: 4}` -> "BLOCK=128, num_warps=4"; strings and lists pass through. */
export function formatConfig(config: unknown): string {
  if (config == null) return '';
  if (typeof config === 'string') return config;
  if (typeof config === 'number' || typeof config === 'boolean') return String(config);
  if (Array.isArray(config)) return config.map(formatConfig).join(', ');
  if (typeof config === 'object') {
    const obj = config as Record<string, unknown>;
    // Config objects may nest their kwargs: {kwargs: {...}, num_warps: 4, num_stages: 3}
    const parts: string[] = [];
    for (const [k, v] of Object.entries(obj)) {
      if (v == null) continue;
      if ((k === 'kwargs' || k === 'constexprs') && typeof v === 'object' && !Array.isArray(v)) {
        const inner = formatConfig(v);
        if (inner) parts.push(inner);
      } else {
        parts.push(`${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
      }
    }
    return parts.join(', ');
  }
  return String(config);
}

export function formatBytes(n: number | undefined | null): string {
  if (n == null || !Number.isFinite(n)) return '?';
  if (n < 1024) return `${n} B`;
  const kib = n / 1024;
  return `${Number.isInteger(kib) ? kib : kib.toFixed(1)} KiB`;
}

export function formatMs(ms: number | undefined | null, digits = 3): string {
  if (ms == null || !Number.isFinite(ms)) return '?';
  if (ms >= 100) return `${Math.round(ms)} ms`;
  return `${Number(ms.toPrecision(digits))} ms`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function compileSummary(r: CompileResult): string {
  const spec = formatConfig(r.specialization);
  const head = `${r.kernel}${spec ? ` [${spec}]` : ''}${r.target ? ` for ${r.target}` : ''}`;
  const parts = [plural(r.n_regs, 'register'), plural(r.n_spills ?? 0, 'spill')];
  parts.push(`${formatBytes(r.shared ?? 0)} shared memory`);
  const time = r.compile_ms != null ? `, compiled in ${formatMs(r.compile_ms)}` : '';
  // never assume silently: what the file did not say (a pointer's dtype, a picked or host-derived constexpr)
  const assumed = Object.entries(r.assumed ?? {}).map(([k, v]) => `${k} ${String(v).split(' (')[0]}`);
  const tail = assumed.length ? `; assumed ${assumed.join(', ')}` : '';
  return `Newt: ${head}: ${parts.join(', ')}${time}${tail}`;
}

function err(x: number | null | undefined): string {
  return x == null ? '-' : x === 0 ? '0' : x.toExponential(2);
}

/** Where the fix for "no example inputs" is: the server's quick fix on the kernel's def line. */
export const ADD_EXAMPLE = ' (the light bulb on the kernel\'s def line inserts one)';

export function verifySummary(r: VerifyResult): string {
  if (r.reason === 'no_examples' && r.message) return `Newt: ${firstLine(r.message)}${ADD_EXAMPLE}`;
  // nothing was compared (no reference): say so, not "FAILED ... max abs err 0"
  if (r.reason === 'no_reference' && r.message) return `Newt: ${firstLine(r.message)}`;
  const cases = r.cases ?? [];
  const passed = cases.filter((c) => c.ok).length;
  const where = r.device === 'interpreter' ? 'the interpreter (no GPU)' : r.device === 'cuda' ? 'the GPU' : r.device;
  const count = cases.length ? `${passed}/${cases.length} cases passed` : r.ok ? 'passed' : 'failed';
  const measured = cases.filter((c) => c.max_abs_err != null);
  const worst = measured.reduce((m, c) => Math.max(m, c.max_abs_err ?? 0), 0);
  const errText = measured.length ? `, max abs err ${err(worst)}` : '';
  const verdict = r.ok ? 'verified' : 'FAILED verification';
  const extra = !r.ok && r.message ? `: ${firstLine(r.message)}` : '';
  return `Newt: ${r.kernel} ${verdict} on ${where}: ${count}${errText}${extra}`;
}

export function verifyDetail(r: VerifyResult): string {
  const lines = [verifySummary(r)];
  for (const c of r.cases ?? []) {
    lines.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}  max_abs_err=${err(c.max_abs_err)} max_rel_err=${err(c.max_rel_err)}` +
      (c.message ? `  ${c.message}` : ''));
  }
  if (r.message) lines.push(r.message);
  return lines.join('\n');
}

export function autotuneSummary(r: AutotuneResult): string {
  const results = r.results ?? [];
  const failed = results.filter((x) => x.error || x.ms == null).length;
  if (!r.best) {
    // nothing was timed: say why (no example inputs, not autotuned ...) instead of "0 configs tried"
    if (results.length === 0 && r.message) return `Newt: ${firstLine(r.message)}${r.reason === 'no_examples' ? ADD_EXAMPLE : ''}`;
    return `Newt: autotuning ${r.kernel} found no working config (${plural(results.length, 'config')} tried)`;
  }
  const tail = `${plural(results.length, 'config')} timed${failed ? `, ${failed} failed` : ''}`;
  // the interpreter's wall clock on the CPU says nothing about GPU speed: say so
  const where = r.device === 'interpreter' ? ', CPU interpreter wall-clock times, not GPU timings' : '';
  return `Newt: best config for ${r.kernel}: ${formatConfig(r.best.config)} (${formatMs(r.best.ms)}; ${tail}${where})`;
}

export function autotuneDetail(r: AutotuneResult): string {
  const lines = [autotuneSummary(r)];
  const sorted = [...(r.results ?? [])].sort((a, b) => (a.ms ?? Infinity) - (b.ms ?? Infinity));
  for (const x of sorted) {
    lines.push(`  ${x.ms == null ? '   failed' : formatMs(x.ms).padStart(9)}  ${formatConfig(x.config)}${x.error ? `  (${firstLine(x.error)})` : ''}`);
  }
  if (r.cache) lines.push(`  cache: ${typeof r.cache === 'string' ? r.cache : JSON.stringify(r.cache)}`);
  return lines.join('\n');
}

export interface StatusText {
  text: string;
  tooltip: string;
}

export function statusText(s: ServerStatus): StatusText {
  const target = s.target ? `, compiling for ${s.target}` : '';
  if (s.mode === 'gpu' && s.gpu) {
    const arch = s.arch ? ` · ${s.arch}` : '';
    return { text: `$(chip) ${s.gpu}${arch}`, tooltip: `Newt: kernels run on ${s.gpu}${s.arch ? ` (${s.arch})` : ''}${target}. Click for the logs.` };
  }
  return {
    text: '$(chip) newt: compile-only (no GPU)',
    tooltip: `Newt: no GPU found; Compile works${target}, Verify and Autotune run through the interpreter. Click for the logs.`,
  };
}

export function firstLine(s: string): string {
  const line = s.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  return line.length > 300 ? line.slice(0, 297) + '...' : line;
}

/** Why the server is not there to answer: it could not import newt (the interpreter), it stopped (a crash),
 * or a command found it not running. */
export type ServerFailure = 'interpreter' | 'crash' | 'not-running';

/** The buttons of the notification for a server failure: the fix first, then the log. A crash or a server
 * that is not running offers Restart Server; a wrong interpreter offers its setting (restarting would fail
 * the same way). */
export function failureActions(kind: ServerFailure): string[] {
  return kind === 'interpreter' ? ['Set Interpreter', 'Show Logs'] : ['Restart Server', 'Show Logs'];
}
