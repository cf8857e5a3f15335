/**
 * Newt for VS Code: starts the kernel language server (`python -m lsp_server`) once a Python file that
 * uses newt or deuteron is open, and adds the commands that compile, verify and autotune kernels.
 */
import * as vscode from 'vscode';
import { Commands } from './commands';
import { usesNewt } from './core/kernels';
import { NewtServer, ServerState } from './server';
import { SourceHighlighter } from './sourceMap';
import { VirtualDocuments } from './virtualDocuments';

/** What `vscode.extensions.getExtension('newt.newt').exports` offers (used by the e2e tests). */
export interface NewtApi {
  readonly state: ServerState;
  /** Starts the server if needed; true when it runs. */
  ready(): Promise<boolean>;
  readonly status: NewtServer['status'];
  readonly interpreter: NewtServer['interpreter'];
  readonly lastError: string | undefined;
  readonly lastCommandError: Commands['lastError'];
  readonly lastAutotuneProgress: Commands['autotuneProgress'];
  /** Source <-> generated code: the view lines highlighted now, and the last click's source line. */
  readonly sourceHighlights: { highlighted: Record<string, number[]>; lastJump?: { uri: string; line: number } };
}

let server: NewtServer | undefined;

function isKernelFile(doc: vscode.TextDocument | undefined): boolean {
  return !!doc && doc.languageId === 'python' && (doc.uri.scheme === 'file' || doc.uri.scheme === 'untitled') && usesNewt(doc.getText());
}

export function activate(context: vscode.ExtensionContext): NewtApi {
  const log = vscode.window.createOutputChannel('Newt', { log: true });
  context.subscriptions.push(log);
  const srv = new NewtServer(log);
  server = srv;
  context.subscriptions.push(srv);
  const docs = new VirtualDocuments(srv, log);
  context.subscriptions.push(docs);
  const commands = new Commands(srv, docs, log);
  const highlighter = new SourceHighlighter(srv, docs, log);
  context.subscriptions.push(highlighter);
  commands.register(context);
  log.info(`Newt ${context.extension.packageJSON.version} activated (VS Code ${vscode.version}, workspace ${vscode.workspace.isTrusted ? 'trusted' : 'in Restricted Mode'})`);

  // Start the server for the first Python file that imports newt or deuteron (a cheap text check), so
  // that plain Python projects never pay for it.
  const maybeStart = (doc: vscode.TextDocument) => {
    if (srv.state === 'stopped' && isKernelFile(doc)) {
      log.info(`${vscode.workspace.asRelativePath(doc.uri)} uses newt: starting the language server`);
      void srv.ensureStarted();
    }
  };
  vscode.workspace.textDocuments.forEach(maybeStart);
  context.subscriptions.push(vscode.workspace.onDidOpenTextDocument(maybeStart));

  // `newt.kernelFile` shows the editor context menu entries in files with kernels.
  let timer: NodeJS.Timeout | undefined;
  const updateContext = () => {
    const doc = vscode.window.activeTextEditor?.document;
    const kernelFile = isKernelFile(doc);
    void vscode.commands.executeCommand('setContext', 'newt.kernelFile', kernelFile);
    if (kernelFile && doc) maybeStart(doc);
  };
  updateContext();
  context.subscriptions.push(
    vscode.window.onDidChangeActiveTextEditor(updateContext),
    vscode.workspace.onDidChangeTextDocument((e) => {
      if (e.document !== vscode.window.activeTextEditor?.document) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(updateContext, 500);
    }),
    { dispose: () => timer && clearTimeout(timer) },
  );

  return {
    get state() {
      return srv.state;
    },
    ready: async () => (await srv.ensureStarted()) !== undefined,
    get status() {
      return srv.status;
    },
    get interpreter() {
      return srv.interpreter;
    },
    get lastError() {
      return srv.lastError;
    },
    get lastCommandError() {
      return commands.lastError;
    },
    get lastAutotuneProgress() {
      return commands.autotuneProgress;
    },
    get sourceHighlights() {
      return { highlighted: Object.fromEntries(highlighter.highlighted), lastJump: highlighter.lastJump };
    },
  };
}

export async function deactivate(): Promise<void> {
  if (server) await server.stop();
  server = undefined;
}
