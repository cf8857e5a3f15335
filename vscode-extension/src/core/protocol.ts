/**
 * The language server's protocol as documented in docs/lsp-protocol.md: settings, server commands,
 * their results, virtual documents and the status notification. Plain types, no VS Code.
 */

export type Target = 'auto' | 'sm_80' | 'sm_89' | 'sm_90a' | 'sm_120';
export const TARGETS: readonly Target[] = ['auto', 'sm_80', 'sm_89', 'sm_90a', 'sm_120'];
export type DiagnosticsOn = 'type' | 'save';
export type LogLevel = 'error' | 'warning' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['error', 'warning', 'info', 'debug'];

/** `initializationOptions` and the `newt` section of `workspace/didChangeConfiguration`. */
export interface ServerSettings {
  trusted: boolean;
  target: Target;
  diagnosticsOn: DiagnosticsOn;
  inlayHints: { shapes: boolean; dtypes: boolean };
  /** Registers, spills, shared memory and occupancy of every config, compiled in the background (trusted only). */
  perfDiagnostics: boolean;
  cacheDir: string | null;
  python: string | null;
  logLevel: LogLevel;
}

/** Server commands (`workspace/executeCommand`). */
export const ServerCommand = {
  compile: 'newt.compile',
  verify: 'newt.verify',
  autotune: 'newt.autotune',
  show: 'newt.show',
} as const;

/** Client commands: what the code lenses carry and the palette shows. */
export const ClientCommand = {
  compileKernel: 'newt.compileKernel',
  verifyKernel: 'newt.verifyKernel',
  autotuneKernel: 'newt.autotuneKernel',
  showCuda: 'newt.showCuda',
  showPtx: 'newt.showPtx',
  showSass: 'newt.showSass',
  showIr: 'newt.showIr',
  restartServer: 'newt.restartServer',
  showLogs: 'newt.showLogs',
} as const;

/** The error code with which the server refuses code-running commands in an untrusted workspace. */
export const UNTRUSTED_ERROR_CODE = -32001;

export interface LspPosition {
  line: number;
  character: number;
}

export interface KernelArgument {
  uri: string;
  position: LspPosition;
  target?: Exclude<Target, 'auto'>;
  /** Which specialization (an index the server reported, e.g. in a hover link); the first one when left out. */
  spec?: number;
}

export type DocumentKind = 'cuda' | 'ptx' | 'sass' | 'ir';

export interface CompileResult {
  kernel: string;
  specialization?: unknown;
  target?: string;
  n_regs: number;
  n_spills?: number;
  shared?: number;
  compile_ms?: number;
  documents?: Partial<Record<DocumentKind, string>>;
  /** What the file did not say and was assumed or picked: parameter -> explanation. */
  assumed?: Record<string, string>;
}

export interface VerifyCase {
  name: string;
  ok: boolean;
  max_abs_err?: number | null;
  max_rel_err?: number | null;
  message?: string | null;
}

export interface VerifyResult {
  kernel: string;
  ok: boolean;
  device: 'cuda' | 'interpreter' | string;
  /** `no_examples` when the kernel has no newt.harness example. */
  reason?: string;
  cases?: VerifyCase[];
  message?: string | null;
}

export interface AutotuneEntry {
  config: unknown;
  ms: number | null;
  error?: string | null;
}

export interface AutotuneResult {
  kernel: string;
  device?: 'cuda' | 'interpreter' | string;
  message?: string | null;
  /** `no_examples` when the kernel has no newt.harness example. */
  reason?: string;
  best?: { config: unknown; ms: number } | null;
  results?: AutotuneEntry[];
  cache?: unknown;
}

export interface ShowResult {
  uri: string;
}

export const VirtualDocumentRequest = 'newt/virtualDocument';
export interface VirtualDocumentParams {
  uri: string;
}
export interface VirtualDocumentResult {
  text: string;
  languageId: string;
}

export const StatusNotification = 'newt/status';
export interface ServerStatus {
  mode: 'gpu' | 'compile-only';
  gpu: string | null;
  arch: string | null;
  target?: string | null;
}
