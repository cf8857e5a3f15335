/**
 * Asking for constexpr values the file does not say (Compile / Show on a kernel launched only with
 * run-time values): the server's error data, the quick pick's items, and parsing what was typed.
 */

/** `data` of the server's -32002 error when constexprs have no value (docs/lsp-protocol.md). */
export interface MissingConstexprs {
  kernel?: string;
  missing: string[];
  suggestions?: Record<string, (number | boolean)[]>;
  why?: Record<string, string>;
}

export function missingConstexprs(data: unknown): MissingConstexprs | undefined {
  if (!data || typeof data !== 'object') return undefined;
  const d = data as Partial<MissingConstexprs>;
  return Array.isArray(d.missing) && d.missing.length > 0 && d.missing.every((m) => typeof m === 'string')
    ? (d as MissingConstexprs) : undefined;
}

export const OTHER_VALUE = 'Other value…';

/** Quick pick items for one constexpr: the server's suggestions (the likeliest first), then "Other value…". */
export function constexprItems(name: string, info: MissingConstexprs): { label: string; description?: string }[] {
  const values = info.suggestions?.[name] ?? [16, 32, 64, 128, 256, 512, 1024];
  return [
    ...values.map((v, i) => ({ label: pyLiteral(v), description: i === 0 ? 'suggested' : undefined })),
    { label: OTHER_VALUE },
  ];
}

export function pyLiteral(v: number | boolean): string {
  return typeof v === 'boolean' ? (v ? 'True' : 'False') : String(v);
}

/** A typed constexpr value: an integer, a float, True / False; undefined when it is none of them. */
export function parseConstexprValue(s: string): number | boolean | undefined {
  const t = s.trim();
  if (t === 'True' || t === 'true') return true;
  if (t === 'False' || t === 'false') return false;
  if (/^[+-]?\d+$/.test(t)) return parseInt(t, 10);
  if (/^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$/.test(t)) return parseFloat(t);
  return undefined;
}
