/**
 * The one language client for all workspace folders: finds the interpreter, checks that it can import
 * the server, starts `python -m lsp_server`, keeps the settings and the workspace trust in sync, and
 * shows the server's status in the status bar.
 */
import * as cp from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as readline from 'readline';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from 'vscode-languageclient/node';
import { failureActions, statusText } from './core/format';
import {
  describeImportFailure,
  expandVariables,
  IMPORT_CHECK_ARGS,
  ImportCheck,
  InterpreterInfo,
  isNewtPyproject,
  launchOptions,
  newtLspOnPath,
  parseImportCheck,
  ResolvedInterpreter,
  ResolveInputs,
  resolveInterpreter,
} from './core/interpreter';
import { ServerLogParser } from './core/serverLog';
import { ClientCommand, ServerSettings, ServerStatus, StatusNotification } from './core/protocol';
import { LIVE_SETTINGS, RESTART_SETTINGS, toServerSettings } from './core/settings';
import { onDidChangePythonInterpreter, pythonExtensionInterpreter } from './pythonExtension';

export type ServerState = 'stopped' | 'starting' | 'running' | 'failed';

const IMPORT_CHECK_TIMEOUT_MS = 60000;

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The first bytes of a file (a `newt-lsp` script's `#!` line), or undefined. */
function readHead(file: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(512);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).toString('utf8');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function runImportCheck(command: string, cwd: string | undefined, env: NodeJS.ProcessEnv): Promise<ImportCheck> {
  return new Promise((resolve) => {
    cp.execFile(command, IMPORT_CHECK_ARGS, { cwd, env, timeout: IMPORT_CHECK_TIMEOUT_MS, windowsHide: true },
      (error, stdout, stderr) => {
        const e = error as (NodeJS.ErrnoException & { killed?: boolean; code?: string | number }) | null;
        if (e && typeof e.code === 'string') {
          resolve({ spawnError: { code: e.code, message: e.message }, status: null, stdout, stderr });
        } else {
          resolve({ status: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr, timedOut: !!e?.killed });
        }
      });
  });
}

/** The folder itself when it is a clone of this project (its pyproject.toml names `newt`), for the install advice. */
function newtCheckout(folder: string | undefined): string | undefined {
  if (!folder) return undefined;
  try {
    return isNewtPyproject(fs.readFileSync(`${folder}/pyproject.toml`, 'utf8')) ? folder : undefined;
  } catch {
    return undefined;
  }
}

export class NewtServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<LanguageClient | undefined> | undefined;
  private _state: ServerState = 'stopped';
  private readonly statusItem: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly onDidChangeStateEmitter = new vscode.EventEmitter<ServerState>();
  readonly onDidChangeState = this.onDidChangeStateEmitter.event;
  private readonly onDidStartEmitter = new vscode.EventEmitter<LanguageClient>();
  /** Fires each time a (re)started client is running. */
  readonly onDidStart = this.onDidStartEmitter.event;
  interpreter: (ResolvedInterpreter & Partial<InterpreterInfo>) | undefined;
  status: ServerStatus | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  /** The last reason the server could not start, for the status bar tooltip and tests. */
  lastError: string | undefined;

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.statusItem = vscode.window.createStatusBarItem('newt.status', vscode.StatusBarAlignment.Right, 100);
    this.statusItem.name = 'Newt';
    this.statusItem.command = ClientCommand.showLogs;
    this.disposables.push(
      this.statusItem,
      this.onDidChangeStateEmitter,
      this.onDidStartEmitter,
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.log.info('workspace trusted: Compile, Verify and Autotune are available');
        void this.sendSettings();
      }),
      vscode.workspace.onDidChangeWorkspaceFolders(() => {
        // one client serves every folder; the first folder's settings may have changed
        if (this.client) void this.sendSettings();
      }),
    );
    void onDidChangePythonInterpreter(() => {
      const setting = vscode.workspace.getConfiguration('newt', this.scope()).get<string>('interpreter');
      if (!setting && this._state !== 'stopped') {
        this.log.info('the Python extension selected another interpreter: restarting the server');
        void this.restart();
      }
    }).then((d) => d && this.disposables.push(d));
  }

  get state(): ServerState {
    return this._state;
  }

  private setState(state: ServerState): void {
    this._state = state;
    void vscode.commands.executeCommand('setContext', 'newt.serverRunning', state === 'running');
    this.onDidChangeStateEmitter.fire(state);
  }

  /** The running client, if any (no start). */
  get running(): LanguageClient | undefined {
    return this._state === 'running' ? this.client : undefined;
  }

  private scope(): vscode.Uri | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri;
  }

  /** The server's settings for a folder or file (the first folder when none is given). */
  settingsFor(scope?: vscode.Uri): ServerSettings {
    const config = vscode.workspace.getConfiguration('newt', scope ?? this.scope());
    const folder = (scope && vscode.workspace.getWorkspaceFolder(scope)) ?? vscode.workspace.workspaceFolders?.[0];
    return toServerSettings(config, {
      trusted: vscode.workspace.isTrusted,
      python: this.interpreter?.executable ?? this.interpreter?.command ?? null,
      expand: (s) => expandVariables(s, { workspaceFolder: folder?.uri.fsPath, env: process.env, homedir: os.homedir() }),
    });
  }

  /** Starts the server unless it runs already; resolves to the client, or undefined if it cannot start. */
  ensureStarted(): Promise<LanguageClient | undefined> {
    if (this._state === 'running' && this.client) return Promise.resolve(this.client);
    if (this.starting) return this.starting;
    this.starting = this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async start(): Promise<LanguageClient | undefined> {
    this.setState('starting');
    this.lastError = undefined;
    this.statusItem.text = '$(loading~spin) newt';
    this.statusItem.tooltip = 'Newt: starting the language server';
    this.statusItem.backgroundColor = undefined;
    this.statusItem.show();

    const folder = vscode.workspace.workspaceFolders?.[0];
    const config = vscode.workspace.getConfiguration('newt', folder?.uri);
    const inputs: ResolveInputs = {
      setting: config.get<string>('interpreter'),
      workspaceFolder: folder?.uri.fsPath,
      pythonExtension: () => pythonExtensionInterpreter(folder?.uri),
      env: process.env,
      platform: process.platform,
      homedir: os.homedir(),
      isExecutable,
      trusted: vscode.workspace.isTrusted,
      readHead,
    };
    let interp = await resolveInterpreter(inputs);
    const settings = this.settingsFor(folder?.uri);
    // Never the workspace as the working directory: Python would import a workspace json.py, argparse.py,
    // pygls/ or newt/ at start-up (Restricted Mode included). The extension's own folder holds no Python.
    const launch = launchOptions(__dirname, process.env);
    const env: NodeJS.ProcessEnv = launch.env;
    if (settings.cacheDir) env.NEWT_CACHE_DIR = settings.cacheDir;
    const cwd = launch.cwd;

    this.log.info(`starting the language server with ${interp.command} (from ${interp.description})`);
    if (interp.note) this.log.warn(`Newt: ${interp.note}`);
    const check = await runImportCheck(interp.command, cwd, env);
    let info = parseImportCheck(check);
    // An interpreter found on the way (the Python extension's, a workspace venv, python3) that lacks newt:
    // newt-lsp on PATH (a wheel installed elsewhere) is the fallback. An explicit setting is kept.
    const lsp = !info && interp.source !== 'setting' ? newtLspOnPath(inputs) : undefined;
    if (lsp && lsp.command !== interp.command) {
      const lspCheck = await runImportCheck(lsp.command, cwd, env);
      const lspInfo = parseImportCheck(lspCheck);
      if (lspInfo) {
        this.log.info(`${interp.command} (from ${interp.description}) cannot import the server: using ${lsp.description}`);
        [interp, info] = [lsp, lspInfo];
      }
    }
    if (!info) {
      const failure = describeImportFailure(interp, check, newtCheckout(folder?.uri.fsPath));
      this.interpreter = interp;
      this.fail(failure.message, failure.detail, 'interpreter');
      return undefined;
    }
    this.interpreter = { ...interp, ...info };
    this.log.info(`interpreter: ${info.executable} (Python ${info.version})`);

    const serverOptions: ServerOptions = {
      command: interp.command,
      args: ['-m', 'lsp_server'],
      transport: TransportKind.stdio,
      options: { cwd, env },
    };
    const initializationOptions = this.settingsFor(folder?.uri);
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: 4 /* RevealOutputChannelOn.Never */,
      initializationOptions,
      // the server's stderr is its Python log: keep each record's level in the output channel
      stdioOptions: {
        stdout: (input, channel) => {
          readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', (l) => channel.info(l));
        },
        stderr: (input, channel) => {
          const parser = new ServerLogParser();
          readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', (l) => {
            const { level, text } = parser.parse(l);
            channel[level](`[server] ${text}`);
          });
        },
      },
      diagnosticPullOptions: { onChange: settings.diagnosticsOn === 'type', onSave: true },
      markdown: {
        isTrusted: { enabledCommands: Object.values(ClientCommand) },
        supportHtml: false,
      },
      middleware: {
        workspace: {
          // The server asks for the `newt` section per folder: answer in the protocol's shape.
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) return answer;
            return params.items.map((item, i) =>
              item.section === 'newt' ? this.settingsFor(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined) : answer[i]);
          },
          // Never forward VS Code's raw `newt` settings: the server wants the protocol's object.
          didChangeConfiguration: async (sections, next) => {
            if (sections && sections.some((s) => s === 'newt' || s.startsWith('newt.'))) {
              await this.sendSettings();
              const rest = sections.filter((s) => !(s === 'newt' || s.startsWith('newt.')));
              if (rest.length) await next(rest);
              return;
            }
            await next(sections);
          },
        },
      },
    };

    const client = new LanguageClient('newt', 'Newt Language Server', serverOptions, clientOptions);
    client.onNotification(StatusNotification, (s: ServerStatus) => this.showStatus(s));
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Stopped && this._state === 'running') {
        this.fail('Newt: the language server stopped (its last output is in the Newt log).', undefined, 'crash');
      } else if (e.newState === State.Running && this._state === 'failed') {
        // the client restarted the server after a crash
        this.setState('running');
        this.statusItem.backgroundColor = undefined;
        if (this.status) this.showStatus(this.status);
      }
    });
    this.client = client;
    try {
      await client.start();
    } catch (e) {
      this.client = undefined;
      const msg = e instanceof Error ? e.message : String(e);
      this.fail(`Newt: the language server (${interp.command} -m lsp_server) stopped while starting; ` +
        `its error is in the Newt output (${msg}).`, undefined, 'crash');
      try {
        await client.dispose();
      } catch {
        // already stopped
      }
      return undefined;
    }
    const serverInfo = client.initializeResult?.serverInfo;
    this.log.info(`language server running: ${serverInfo ? `${serverInfo.name} ${serverInfo.version ?? ''}`.trim() : 'python -m lsp_server'}`);
    this.setState('running');
    if (!this.status) {
      this.statusItem.text = '$(chip) newt';
      this.statusItem.tooltip = 'Newt: language server running. Click for the logs.';
    }
    this.onDidStartEmitter.fire(client);
    return client;
  }

  private fail(message: string, detail: string | undefined, notify: 'interpreter' | 'crash' | false): void {
    this.lastError = message;
    this.log.error(detail ?? message);
    this.setState('failed');
    this.statusItem.text = '$(error) newt';
    this.statusItem.tooltip = `${message}\nClick for the logs.`;
    this.statusItem.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
    this.statusItem.show();
    if (notify) {
      const buttons = failureActions(notify);
      void vscode.window.showErrorMessage(message, ...buttons).then((pick) => {
        if (pick === 'Set Interpreter') void vscode.commands.executeCommand('workbench.action.openSettings', 'newt.interpreter');
        else if (pick === 'Restart Server') void this.restart();
        else if (pick === 'Show Logs') this.log.show();
      });
    }
  }

  private showStatus(s: ServerStatus): void {
    this.status = s;
    const t = statusText(s);
    this.statusItem.text = t.text;
    this.statusItem.tooltip = t.tooltip;
    this.statusItem.backgroundColor = undefined;
    this.statusItem.show();
    this.log.info(`server status: ${s.mode}${s.gpu ? `, ${s.gpu}` : ''}${s.arch ? ` (${s.arch})` : ''}${s.target ? `, target ${s.target}` : ''}`);
  }

  /** Pushes the current settings (and trust) to the running server. */
  async sendSettings(): Promise<void> {
    const client = this.running;
    if (!client) return;
    const settings = this.settingsFor();
    this.log.debug(`settings -> server: ${JSON.stringify(settings)}`);
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { newt: settings } });
  }

  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration('newt')) return;
    if (RESTART_SETTINGS.some((s) => e.affectsConfiguration(s))) {
      if (this._state !== 'stopped') {
        // one restart for a burst of changes (a settings file write can report several)
        if (this.restartTimer) clearTimeout(this.restartTimer);
        this.restartTimer = setTimeout(() => {
          this.restartTimer = undefined;
          this.log.info('settings changed: restarting the language server');
          void this.restart();
        }, 250);
      }
    } else if (LIVE_SETTINGS.some((s) => e.affectsConfiguration(s))) {
      void this.sendSettings();
    }
  }

  async stop(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    this.status = undefined;
    this.setState('stopped');
    if (client) {
      try {
        await client.stop(5000);
      } catch (e) {
        this.log.warn(`stopping the server: ${e instanceof Error ? e.message : String(e)}`);
      }
      try {
        await client.dispose();
      } catch {
        // already disposed
      }
    }
  }

  async restart(): Promise<LanguageClient | undefined> {
    await this.stop();
    return this.ensureStarted();
  }

  dispose(): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    void this.stop();
    for (const d of this.disposables) d.dispose();
  }
}
