/** VS Code settings (the `newt.*` keys of package.json) -> the server's settings object. */
import { DiagnosticsOn, LOG_LEVELS, LogLevel, ServerSettings, Target, TARGETS } from './protocol';

/** What `workspace.getConfiguration('newt', scope)` offers: `get(key)` for dotted keys. */
export interface ConfigLike {
  get<T>(key: string): T | undefined;
}

function pick<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value) ? (value as T) : fallback;
}

function bool(value: unknown, fallback: boolean): boolean {
  return typeof value === 'boolean' ? value : fallback;
}

function nonEmpty(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

export function toServerSettings(
  config: ConfigLike,
  opts: { trusted: boolean; python?: string | null; expand?: (s: string) => string },
): ServerSettings {
  const expand = opts.expand ?? ((s: string) => s);
  const cacheDir = nonEmpty(config.get('cacheDir'));
  return {
    trusted: opts.trusted,
    target: pick<Target>(config.get('target'), TARGETS, 'auto'),
    diagnosticsOn: pick<DiagnosticsOn>(config.get('diagnosticsOn'), ['type', 'save'], 'type'),
    inlayHints: {
      shapes: bool(config.get('inlayHints.shapes'), true),
      dtypes: bool(config.get('inlayHints.dtypes'), true),
    },
    perfDiagnostics: bool(config.get('perfDiagnostics'), true),
    cacheDir: cacheDir === null ? null : expand(cacheDir),
    python: opts.python ?? null,
    logLevel: pick<LogLevel>(config.get('logLevel'), LOG_LEVELS, 'info'),
  };
}

/**
 * The settings whose change needs a new server process (they are fixed when it starts: the
 * interpreter, the cache folder in its environment, its log level and when it is asked for
 * diagnostics); the others reach the running server through `workspace/didChangeConfiguration`.
 */
export const RESTART_SETTINGS = ['newt.interpreter', 'newt.cacheDir', 'newt.logLevel', 'newt.diagnosticsOn'];
export const LIVE_SETTINGS = ['newt.target', 'newt.inlayHints', 'newt.perfDiagnostics', 'newt.trace.server'];

/** The explicit compile target of a setting (`auto` leaves the choice to the server). */
export function explicitTarget(target: Target): Exclude<Target, 'auto'> | undefined {
  return target === 'auto' ? undefined : target;
}
