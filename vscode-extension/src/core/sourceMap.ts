/**
 * The map between a generated view (the `newt:` CUDA / PTX / SASS documents) and its source file, as the
 * server's `newt/sourceMap` request gives it: `[view line, source line]` pairs (0-based). Pure: no vscode.
 */

export const SourceMapRequest = 'newt/sourceMap';

export interface SourceMapResult {
  uri: string;
  source: string;
  lines: [number, number][];
}

export class SourceMapIndex {
  private readonly bySource = new Map<number, number[]>();
  private readonly byView = new Map<number, number>();

  constructor(readonly source: string, lines: readonly [number, number][]) {
    for (const [view, src] of lines) {
      this.byView.set(view, src);
      const list = this.bySource.get(src);
      if (list) list.push(view);
      else this.bySource.set(src, [view]);
    }
    for (const list of this.bySource.values()) list.sort((a, b) => a - b);
  }

  /** The view lines generated from source line `line` (sorted; empty when none). */
  viewLines(line: number): readonly number[] {
    return this.bySource.get(line) ?? [];
  }

  /** The source line view line `line` comes from, if any. */
  sourceLine(line: number): number | undefined {
    return this.byView.get(line);
  }

  /** Runs of consecutive view lines, for fewer decorations: `[[start, end], ...]` inclusive. */
  static runs(lines: readonly number[]): [number, number][] {
    const out: [number, number][] = [];
    for (const l of lines) {
      const last = out[out.length - 1];
      if (last && l === last[1] + 1) last[1] = l;
      else out.push([l, l]);
    }
    return out;
  }
}
