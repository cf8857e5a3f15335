/** Virtual documents (`newt:` URIs) and the languages their text is shown in. */
import type { DocumentKind, LspPosition } from './protocol';

export const VIRTUAL_SCHEME = 'newt';

/** The server's languageId -> the id this extension highlights it with. */
const LANGUAGE_IDS: Record<string, string> = {
  'cuda-cpp': 'cuda-cpp',
  cuda: 'cuda-cpp',
  ptx: 'ptx',
  sass: 'cuda-sass', // "sass" is the CSS preprocessor's id in VS Code's world
  ir: 'newt-ir',
  'newt-ir': 'newt-ir',
  plaintext: 'plaintext',
};

/**
 * The language to show a virtual document in. `available` is what VS Code knows; a missing CUDA
 * grammar falls back to C++, anything else to plain text.
 */
export function languageFor(serverLanguageId: string | undefined, available: ReadonlySet<string>): string {
  const wanted = LANGUAGE_IDS[serverLanguageId ?? ''] ?? serverLanguageId ?? 'plaintext';
  if (available.has(wanted)) return wanted;
  if (wanted === 'cuda-cpp' && available.has('cpp')) return 'cpp';
  return 'plaintext';
}

export const KIND_BY_COMMAND: Record<string, DocumentKind> = {
  'newt.showCuda': 'cuda',
  'newt.showPtx': 'ptx',
  'newt.showSass': 'sass',
  'newt.showIr': 'ir',
};

export const KIND_LABEL: Record<DocumentKind, string> = { cuda: 'CUDA', ptx: 'PTX', sass: 'SASS', ir: 'tile IR' };

/** Parses the query of a virtual URI (`src=...&spec=0&kind=cuda`), for titles and refreshes. */
export function virtualQuery(query: string): { src?: string; spec?: string; kind?: string } {
  const out: Record<string, string> = {};
  for (const part of query.replace(/^\?/, '').split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const key = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    const val = eq < 0 ? '' : safeDecode(part.slice(eq + 1));
    out[key] = val;
  }
  return out;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** Normalizes a code-lens/command position argument (`{line, character}`, or VS Code's Position). */
export function toLspPosition(value: unknown): LspPosition | undefined {
  if (value && typeof value === 'object') {
    const v = value as { line?: unknown; character?: unknown };
    if (typeof v.line === 'number' && typeof v.character === 'number' && v.line >= 0 && v.character >= 0) {
      return { line: v.line, character: v.character };
    }
  }
  return undefined;
}
