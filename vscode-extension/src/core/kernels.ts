/**
 * Cheap text-level facts about Python files, so that the extension can decide whether to start the
 * server and which kernel a palette command means. The server's front end is the authority on what
 * a kernel is; these scans only need to agree with it on ordinary code.
 */
import type { LspPosition } from './protocol';

/** Only this much of a file is scanned for imports. */
const SCAN_LIMIT = 256 * 1024;
const IMPORT_RE = /^[ \t]*(?:from[ \t]+(?:newt|deuteron|triton)(?:\.[\w.]+)?[ \t]+import\b|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*(?:newt|deuteron|triton)\b)/m;

/** Whether a Python file imports newt, deuteron or triton (the activation check: Triton files are analyzed as they are). */
export function usesNewt(text: string): boolean {
  return IMPORT_RE.test(text.length > SCAN_LIMIT ? text.slice(0, SCAN_LIMIT) : text);
}

export interface KernelSpan {
  name: string;
  kind: 'jit' | 'deuteron';
  /** The position of the kernel's name in `def name(` (what code lenses carry). */
  position: LspPosition;
  /** 0-based lines: the first decorator, and the last line of the body. */
  firstLine: number;
  lastLine: number;
}

const DEF_RE = /^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)/;
const DECORATOR_RE = /^[ \t]*@[ \t]*([\w.]+)/;

function indentOf(line: string): number {
  let n = 0;
  for (const ch of line) {
    if (ch === ' ') n += 1;
    else if (ch === '\t') n += 8 - (n % 8);
    else break;
  }
  return n;
}

function isBlankOrComment(line: string): boolean {
  const t = line.trim();
  return t === '' || t.startsWith('#');
}

/** Net bracket depth change of a line, ignoring brackets inside strings and comments (roughly). */
function bracketDelta(line: string): number {
  let depth = 0;
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = null;
      continue;
    }
    if (ch === '#') break;
    if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '(' || ch === '[' || ch === '{') depth++;
    else if (ch === ')' || ch === ']' || ch === '}') depth--;
  }
  return depth;
}

function kernelKind(decorators: string[]): 'jit' | 'deuteron' | undefined {
  let kind: 'jit' | 'deuteron' | undefined;
  for (const d of decorators) {
    const last = d.split('.').pop() ?? d;
    if (last === 'jit') kind = 'jit';
    else if (last === 'kernel' && kind === undefined) kind = 'deuteron';
  }
  return kind;
}

/** Every decorated kernel of a file (`@newt.jit`, `@jit`, `@deuteron.kernel`, `@dt.kernel(...)`). */
export function findKernels(text: string): KernelSpan[] {
  const lines = text.split(/\r?\n/);
  const out: KernelSpan[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = DEF_RE.exec(lines[i]);
    if (!m) continue;
    const indent = indentOf(lines[i]);
    // Decorators: walk up over decorator lines and the continuation lines of multi-line decorators.
    const decorators: string[] = [];
    let first = i;
    let depth = 0;
    for (let j = i - 1; j >= 0; j--) {
      const line = lines[j];
      depth -= bracketDelta(line);
      if (isBlankOrComment(line) && depth === 0) break;
      const dm = DECORATOR_RE.exec(line);
      if (dm && indentOf(line) === indent && depth === 0) {
        decorators.push(dm[1]);
        first = j;
        continue;
      }
      if (depth > 0 || indentOf(line) > indent || /^[ \t]*[)\]}]/.test(line)) continue;
      break;
    }
    const kind = kernelKind(decorators);
    if (!kind) continue;
    // The signature may span lines; the body ends before the next line indented <= the def.
    let k = i;
    let sig = bracketDelta(lines[i]);
    while (sig > 0 && k + 1 < lines.length) sig += bracketDelta(lines[++k]);
    let last = k;
    for (let j = k + 1; j < lines.length; j++) {
      if (isBlankOrComment(lines[j])) continue;
      if (indentOf(lines[j]) <= indent) break;
      last = j;
    }
    const character = lines[i].indexOf(m[2], m[0].length - m[2].length);
    out.push({ name: m[2], kind, position: { line: i, character }, firstLine: first, lastLine: last });
  }
  return out;
}

/**
 * The kernel a command at `line` acts on: the innermost kernel whose lines contain it. When the server's
 * code lenses are known, `serverKernels` (their positions) decides which kernels count.
 */
export function kernelAt(kernels: KernelSpan[], line: number, serverKernels?: LspPosition[]): KernelSpan | undefined {
  let candidates = kernels;
  if (serverKernels && serverKernels.length) {
    const known = new Set(serverKernels.map((p) => p.line));
    const confirmed = kernels.filter((k) => known.has(k.position.line));
    if (confirmed.length) candidates = confirmed;
  }
  const containing = candidates.filter((k) => k.firstLine <= line && line <= k.lastLine);
  if (!containing.length) return undefined;
  return containing.reduce((a, b) => (b.firstLine >= a.firstLine ? b : a));
}
