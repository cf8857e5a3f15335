/**
 * The Python extension (ms-python.python) through its public API, when it is installed. No hard
 * dependency: without it (it cannot be installed offline, and many users of other editors' forks
 * do not have it) these functions answer undefined.
 */
import * as vscode from 'vscode';

const PYTHON_EXTENSION_ID = 'ms-python.python';

interface EnvironmentPath {
  id: string;
  path: string;
}

interface ResolvedEnvironment {
  executable?: { uri?: vscode.Uri };
}

/** The part of the Python extension's API that is used here (the "environments" API). */
interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri | vscode.WorkspaceFolder): EnvironmentPath;
    resolveEnvironment(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails(resource?: vscode.Uri): { execCommand: string[] | undefined };
  };
}

function withTimeout<T>(p: Thenable<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => { clearTimeout(timer); resolve(v); },
      () => { clearTimeout(timer); resolve(undefined); },
    );
  });
}

async function api(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext) return undefined;
  if (ext.isActive) return ext.exports;
  return withTimeout(ext.activate(), 15000);
}

/** The interpreter the Python extension has selected for `resource`, as a path. */
export async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const py = await api();
  if (!py) return undefined;
  if (py.environments) {
    const envPath = py.environments.getActiveEnvironmentPath(resource);
    const env = await withTimeout(py.environments.resolveEnvironment(envPath), 15000);
    return env?.executable?.uri?.fsPath ?? envPath?.path;
  }
  const cmd = py.settings?.getExecutionDetails(resource)?.execCommand;
  return cmd && cmd.length ? cmd[0] : undefined;
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onDidChangePythonInterpreter(listener: () => void): Promise<vscode.Disposable | undefined> {
  const py = await api();
  return py?.environments?.onDidChangeActiveEnvironmentPath(() => listener());
}
