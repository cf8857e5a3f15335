/**
 * Which Python runs the language server: the `newt.interpreter` setting, else the interpreter selected
 * in the Python extension (when it is installed), else a virtual environment in the first workspace
 * folder (`.venv`, `venv`; trusted workspaces only: it is the workspace's own binary), else the
 * interpreter of `newt-lsp` on PATH (an install from a wheel: `pip install newt-*.whl` puts the
 * `newt-lsp` script in the environment's bin folder), else `python3` on PATH. When the chosen one cannot
 * import the server (and was not set explicitly), `newt-lsp`'s interpreter is the fallback
 * (`newtLspOnPath`). No VS Code here: the caller passes the setting, the Python extension's answer and the
 * environment in. `launchOptions` says how it is started so that nothing of the workspace is imported.
 */
import * as path from 'path';

export type InterpreterSource = 'setting' | 'python-extension' | 'workspace-venv' | 'newt-lsp' | 'path';

export interface ResolvedInterpreter {
  /** What is spawned: an absolute path when one could be found, else the bare command. */
  command: string;
  source: InterpreterSource;
  /** For messages: e.g. "the newt.interpreter setting (.venv/bin/python)". */
  description: string;
  /** Why an interpreter the workspace has was passed over (Restricted Mode and its `.venv`), for the log. */
  note?: string;
}

export interface ResolveInputs {
  /** The raw `newt.interpreter` setting. */
  setting?: string | null;
  /** The first workspace folder's path, for `${workspaceFolder}` and relative paths. */
  workspaceFolder?: string;
  /** Asks the Python extension for its interpreter; undefined when it is absent or has none. */
  pythonExtension?: () => Promise<string | undefined>;
  env: Record<string, string | undefined>;
  platform: NodeJS.Platform;
  homedir: string;
  isExecutable: (file: string) => boolean;
  /** Whether the workspace is trusted: only then is a workspace `.venv`/`venv` interpreter used. */
  trusted?: boolean;
  /** The first bytes of a file (for a `newt-lsp` script's `#!` line); undefined when it cannot be read. */
  readHead?: (file: string) => string | undefined;
}

/** The virtual environment folders looked for in the first workspace folder, in this order. */
export const WORKSPACE_VENVS = ['.venv', 'venv'];

/** `<folder>/.venv/bin/python` (or `Scripts\\python.exe` on Windows) when it exists. */
export function workspaceVenvInterpreter(
  folder: string | undefined,
  platform: NodeJS.Platform,
  isExecutable: (file: string) => boolean,
): string | undefined {
  if (!folder) return undefined;
  const win = platform === 'win32';
  const join = win ? path.win32.join : path.posix.join;
  for (const venv of WORKSPACE_VENVS) {
    const candidates = win ? [join(folder, venv, 'Scripts', 'python.exe')] : [join(folder, venv, 'bin', 'python3'), join(folder, venv, 'bin', 'python')];
    for (const c of candidates) if (isExecutable(c)) return c;
  }
  return undefined;
}

/**
 * How the server (and the import check) are started so that the workspace is not on `sys.path`: Python
 * puts the working directory first on `sys.path` for `-m` and `-c`, so a workspace `json.py`, `argparse.py`,
 * `pygls/` or `newt/` would be imported (and run) at start-up. The working directory is a neutral folder
 * (the extension's own), and `PYTHONSAFEPATH=1` (Python 3.11+) drops the implicit entry as well.
 */
export function launchOptions(
  neutralDir: string,
  env: Record<string, string | undefined>,
): { cwd: string; env: Record<string, string | undefined> } {
  return { cwd: neutralDir, env: { ...env, PYTHONSAFEPATH: '1', PYTHONUNBUFFERED: '1' } };
}

/** Expands `${workspaceFolder}`, `${workspaceFolderBasename}`, `${userHome}`, `${env:NAME}` and a leading `~`. */
export function expandVariables(
  value: string,
  ctx: { workspaceFolder?: string; env: Record<string, string | undefined>; homedir: string },
): string {
  let out = value.replace(/\$\{(workspaceFolder|workspaceFolderBasename|userHome|env:([^}]+))\}/g, (m, name: string, envName?: string) => {
    if (envName !== undefined) return ctx.env[envName] ?? '';
    if (name === 'userHome') return ctx.homedir;
    if (ctx.workspaceFolder === undefined) return m;
    return name === 'workspaceFolder' ? ctx.workspaceFolder : path.basename(ctx.workspaceFolder);
  });
  if (out === '~' || out.startsWith('~/') || out.startsWith('~\\')) out = ctx.homedir + out.slice(1);
  return out;
}

/** The first executable called `name` on PATH (with PATHEXT on Windows), or undefined. */
export function findOnPath(
  name: string,
  env: Record<string, string | undefined>,
  platform: NodeJS.Platform,
  isExecutable: (file: string) => boolean,
): string | undefined {
  const win = platform === 'win32';
  const sep = win ? ';' : ':';
  const pathVar = env.PATH ?? env.Path ?? '';
  const exts = win ? ['', ...(env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';').map((e) => e.toLowerCase())] : [''];
  const join = win ? path.win32.join : path.posix.join;
  for (const dir of pathVar.split(sep)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = join(dir, name + ext);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

/**
 * The Python a `newt-lsp` console script runs with: the interpreter on its `#!` line (pip writes the
 * environment's python there, or, for a long path, `#!/bin/sh` and `'''exec' "<python>" "$0" "$@"` on the
 * next line), else a `python3`/`python` (`python.exe` on Windows: the script is an .exe launcher) beside it.
 */
export function newtLspInterpreter(
  script: string,
  platform: NodeJS.Platform,
  isExecutable: (file: string) => boolean,
  readHead?: (file: string) => string | undefined,
): string | undefined {
  const win = platform === 'win32';
  const dir = win ? path.win32.dirname(script) : path.posix.dirname(script);
  if (!win && readHead) {
    const [first = '', second = ''] = (readHead(script) ?? '').split(/\r?\n/);
    let py: string | undefined;
    if (first.startsWith('#!')) {
      const words = first.slice(2).trim().split(/\s+/);
      if (words[0] === '/bin/sh') py = /^'''exec' "([^"]+)"/.exec(second)?.[1];
      else if (path.posix.basename(words[0]) !== 'env') py = words[0];
    }
    if (py && isExecutable(py)) return py;
  }
  const join = win ? path.win32.join : path.posix.join;
  for (const name of win ? ['python.exe'] : ['python3', 'python']) {
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/** `newt-lsp` on PATH and the interpreter it runs with, as a ResolvedInterpreter; undefined when absent. */
export function newtLspOnPath(inputs: ResolveInputs): ResolvedInterpreter | undefined {
  const script = findOnPath('newt-lsp', inputs.env, inputs.platform, inputs.isExecutable);
  if (!script) return undefined;
  const py = newtLspInterpreter(script, inputs.platform, inputs.isExecutable, inputs.readHead);
  if (!py) return undefined;
  return { command: py, source: 'newt-lsp', description: `the interpreter of newt-lsp on PATH (${script})` };
}

function hasSeparator(p: string): boolean {
  return p.includes('/') || p.includes('\\');
}

export async function resolveInterpreter(inputs: ResolveInputs): Promise<ResolvedInterpreter> {
  const { env, platform, isExecutable } = inputs;
  const setting = (inputs.setting ?? '').trim();
  if (setting) {
    let p = expandVariables(setting, { workspaceFolder: inputs.workspaceFolder, env, homedir: inputs.homedir });
    if (hasSeparator(p)) {
      const abs = platform === 'win32' ? path.win32.isAbsolute(p) : path.posix.isAbsolute(p);
      if (!abs && inputs.workspaceFolder) p = path.resolve(inputs.workspaceFolder, p);
    } else {
      p = findOnPath(p, env, platform, isExecutable) ?? p;
    }
    const description = p === setting ? 'the newt.interpreter setting' : `the newt.interpreter setting (${setting})`;
    return { command: p, source: 'setting', description };
  }
  if (inputs.pythonExtension) {
    let fromExt: string | undefined;
    try {
      fromExt = await inputs.pythonExtension();
    } catch {
      fromExt = undefined;
    }
    if (fromExt) return { command: fromExt, source: 'python-extension', description: 'the interpreter selected in the Python extension' };
  }
  const venv = workspaceVenvInterpreter(inputs.workspaceFolder, platform, isExecutable);
  const rel = venv && inputs.workspaceFolder ? path.relative(inputs.workspaceFolder, venv) : venv;
  if (venv && inputs.trusted) {
    return { command: venv, source: 'workspace-venv', description: `the workspace's virtual environment (${rel})` };
  }
  // Restricted Mode: the workspace's own binary is not run, and the user is told so (not silently passed over)
  const note = venv ? `the workspace's virtual environment (${rel}) is not used in Restricted Mode (it is a program ` +
    'from this workspace); trust the workspace, or set newt.interpreter, to use it' : undefined;
  const lsp = newtLspOnPath(inputs);
  if (lsp) return { ...lsp, ...(note ? { note } : {}) };
  const names = platform === 'win32' ? ['python', 'py'] : ['python3', 'python'];
  for (const name of names) {
    const found = findOnPath(name, env, platform, isExecutable);
    if (found) return { command: found, source: 'path', description: `${name} on PATH`, ...(note ? { note } : {}) };
  }
  return { command: names[0], source: 'path', description: `${names[0]} on PATH`, ...(note ? { note } : {}) };
}

/** Arguments that make an interpreter prove it can run the server: prints its executable and version. */
export const IMPORT_CHECK_ARGS = [
  '-c',
  'import sys; import lsp_server, newt; print(sys.executable); print(".".join(map(str, sys.version_info[:3])))',
];

export interface ImportCheck {
  /** Set when the process could not be started at all (e.g. ENOENT). */
  spawnError?: { code?: string; message: string };
  status: number | null;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
}

export interface InterpreterInfo {
  executable: string;
  version: string;
}

export function parseImportCheck(check: ImportCheck): InterpreterInfo | undefined {
  if (check.spawnError || check.timedOut || check.status !== 0) return undefined;
  const [executable, version] = check.stdout.trim().split(/\r?\n/);
  return executable ? { executable, version: version ?? '' } : undefined;
}

function quote(cmd: string): string {
  return /[\s"'$]/.test(cmd) ? `"${cmd.replace(/"/g, '\\"')}"` : cmd;
}

/** The last meaningful line of a Python traceback ("ModuleNotFoundError: No module named 'lsp_server'"). */
export function lastErrorLine(stderr: string): string {
  const lines = stderr.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  return lines.length ? lines[lines.length - 1] : '';
}

export interface FailureMessage {
  /** One line for the notification. */
  message: string;
  /** The full story for the output channel. */
  detail: string;
  installCommand: string;
}

/** Explains why `interp` cannot run the server and how to fix it. */
export function describeImportFailure(interp: ResolvedInterpreter, check: ImportCheck, newtCheckout?: string): FailureMessage {
  // newt is installed from its repository (a clone), not from PyPI: `newt` on PyPI is an unrelated package.
  const installCommand = `${quote(interp.command)} -m pip install -e ${newtCheckout ? quote(newtCheckout) : '<path to your newt clone>'}`;
  const fix = `Install this project into it (${installCommand}; "pip install newt" would fetch an unrelated PyPI package), `
    + 'or set "newt.interpreter" to a Python that has it, or select one in the Python extension.';
  let why: string;
  if (check.spawnError) {
    why = check.spawnError.code === 'ENOENT'
      ? `the interpreter ${interp.command} (from ${interp.description}) was not found`
      : `the interpreter ${interp.command} (from ${interp.description}) could not be started: ${check.spawnError.message}`;
  } else if (check.timedOut) {
    why = `"import lsp_server" with ${interp.command} (from ${interp.description}) did not finish in time`;
  } else {
    const err = lastErrorLine(check.stderr) || `exit status ${check.status}`;
    why = `"import lsp_server" failed with ${interp.command} (from ${interp.description}): ${err}`;
  }
  const message = `Newt: cannot start the language server: ${why}. ${fix}`;
  const detail = [
    message,
    `  interpreter: ${interp.command}`,
    `  chosen from: ${interp.description}`,
    `  checked with: ${quote(interp.command)} ${IMPORT_CHECK_ARGS.map(quote).join(' ')}`,
    check.stderr.trim() ? `  stderr:\n${check.stderr.trim().replace(/^/gm, '    ')}` : '',
  ].filter(Boolean).join('\n');
  return { message, detail, installCommand };
}

/** Whether `pyproject` (the text of a pyproject.toml) is this project's: `name = "newt"` in `[project]`. */
export function isNewtPyproject(pyproject: string): boolean {
  const m = /^\[project\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(pyproject);
  return !!m && /^name\s*=\s*["']newt["']\s*$/m.test(m[1]);
}
