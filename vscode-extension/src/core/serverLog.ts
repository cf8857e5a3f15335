/**
 * The server logs to stderr with Python's logging ("2026-11-30 05:08:45,988 INFO newt-lsp: message").
 * These lines go to the Newt output channel at their own level, without the duplicate timestamp; lines
 * that are not log records (tracebacks, warnings from libraries) keep the level of the record they follow.
 */
export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const RECORD_RE = /^(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?\s+)?(CRITICAL|FATAL|ERROR|WARNING|WARN|INFO|DEBUG)\b[:\s]\s*(.*)$/;

const LEVELS: Record<string, Level> = {
  CRITICAL: 'error', FATAL: 'error', ERROR: 'error', WARNING: 'warn', WARN: 'warn', INFO: 'info', DEBUG: 'debug',
};

export class ServerLogParser {
  private level: Level = 'error';

  /** The level and text of one stderr line. */
  parse(line: string): { level: Level; text: string } {
    const m = RECORD_RE.exec(line);
    if (m) {
      this.level = LEVELS[m[1]];
      return { level: this.level, text: m[2] };
    }
    return { level: this.level, text: line };
  }
}
