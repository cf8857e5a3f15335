/**
 * The client-side commands: Compile / Verify / Autotune / Show CUDA, PTX, SASS, IR / Restart / Logs.
 * Code lenses call them with `[uri, {line, character}]`; from the palette or the context menu they act on
 * the kernel at the cursor. Each returns the server's result (or undefined), so other extensions and
 * the end-to-end tests can use them too.
 */
import * as vscode from 'vscode';
import {
  CodeLens,
  CodeLensRequest,
  ExecuteCommandRequest,
  LanguageClient,
  LSPErrorCodes,
  ResponseError,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressEnd,
  WorkDoneProgressReport,
} from 'vscode-languageclient/node';
import {
  autotuneDetail,
  autotuneSummary,
  compileSummary,
  failureActions,
  firstLine,
  verifyDetail,
  verifySummary,
} from './core/format';
import { findKernels, kernelAt, KernelSpan } from './core/kernels';
import { constexprItems, MissingConstexprs, missingConstexprs, OTHER_VALUE, parseConstexprValue } from './core/constexprs';
import {
  AutotuneResult,
  ClientCommand,
  CompileResult,
  DocumentKind,
  KernelArgument,
  LspPosition,
  ServerCommand,
  ShowResult,
  UNTRUSTED_ERROR_CODE,
  VerifyResult,
} from './core/protocol';
import { explicitTarget } from './core/settings';
import { KIND_BY_COMMAND, KIND_LABEL, toLspPosition } from './core/uris';
import type { NewtServer } from './server';
import type { VirtualDocuments } from './virtualDocuments';

interface KernelRef {
  uri: string;
  position: LspPosition;
  name: string;
}

const CODE_RUNNING: Record<string, string> = {
  [ServerCommand.compile]: 'Compile Kernel',
  [ServerCommand.verify]: 'Verify Kernel',
  [ServerCommand.autotune]: 'Autotune Kernel',
};
/** What messages call each server command (never its id). */
const COMMAND_LABEL: Record<string, string> = { ...CODE_RUNNING, [ServerCommand.show]: 'Show Generated Code' };

export class Commands {
  /** The last failure of a command, for the extension's API (tests read it). */
  lastError: { command: string; message: string; code?: number } | undefined;
  /** The `$/progress` values of the last Autotune, in order (the extension's API exposes them). */
  autotuneProgress: { kind: string; message?: string; percentage?: number }[] = [];

  constructor(
    private readonly server: NewtServer,
    private readonly docs: VirtualDocuments,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  register(context: vscode.ExtensionContext): void {
    const reg = (id: string, fn: (...args: unknown[]) => unknown) =>
      context.subscriptions.push(vscode.commands.registerCommand(id, fn));
    reg(ClientCommand.compileKernel, (...a) => this.compile(a));
    reg(ClientCommand.verifyKernel, (...a) => this.verify(a));
    reg(ClientCommand.autotuneKernel, (...a) => this.autotune(a));
    for (const id of [ClientCommand.showCuda, ClientCommand.showPtx, ClientCommand.showSass, ClientCommand.showIr]) {
      reg(id, (...a) => this.show(KIND_BY_COMMAND[id], a));
    }
    reg(ClientCommand.restartServer, async () => {
      this.log.info('restart requested');
      const client = await this.server.restart();
      return client !== undefined;
    });
    reg(ClientCommand.showLogs, () => this.log.show(true));
  }

  // -- which kernel -----------------------------------------------------------------------------

  private async serverKernelPositions(client: LanguageClient, uri: string): Promise<LspPosition[] | undefined> {
    try {
      const lenses = await Promise.race([
        client.sendRequest(CodeLensRequest.type, { textDocument: { uri } }),
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 3000)),
      ]);
      if (!lenses) return undefined;
      return (lenses as CodeLens[])
        .filter((l) => l.command?.command === ClientCommand.compileKernel)
        .map((l) => toLspPosition(l.command?.arguments?.[1]) ?? l.range.start);
    } catch {
      return undefined;
    }
  }

  /** The kernel a command acts on: from the code lens arguments, else the kernel at the cursor. */
  private async kernel(args: unknown[], client: LanguageClient): Promise<KernelRef | undefined> {
    const [uriArg, posArg] = args;
    const position = toLspPosition(posArg);
    if (uriArg !== undefined && position) {
      const uri = uriArg instanceof vscode.Uri ? uriArg.toString() : String(uriArg);
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === vscode.Uri.parse(uri).toString());
      const name = doc ? doc.getText(doc.getWordRangeAtPosition(new vscode.Position(position.line, position.character))) : '';
      return { uri, position, name: name || 'kernel' };
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== 'python') {
      void vscode.window.showWarningMessage('Newt: open a Python file with a newt or deuteron kernel and put the cursor in the kernel.');
      return undefined;
    }
    const doc = editor.document;
    const uri = doc.uri.toString();
    const kernels = findKernels(doc.getText());
    const line = editor.selection.active.line;
    const serverPositions = await this.serverKernelPositions(client, uri);
    let k: KernelSpan | undefined = kernelAt(kernels, line, serverPositions);
    if (!k) {
      const known = serverPositions?.length
        ? kernels.filter((x) => serverPositions.some((p) => p.line === x.position.line))
        : kernels;
      if (known.length === 0) {
        void vscode.window.showWarningMessage(`Newt: ${vscode.workspace.asRelativePath(doc.uri)} has no @newt.jit or @deuteron.kernel kernel.`);
        return undefined;
      }
      if (known.length === 1) {
        k = known[0];
      } else {
        const pick = await vscode.window.showQuickPick(
          known.map((x) => ({ label: x.name, description: `line ${x.position.line + 1}`, kernel: x })),
          { placeHolder: 'The cursor is not in a kernel: which kernel?' },
        );
        if (!pick) return undefined;
        k = pick.kernel;
      }
    }
    return { uri, position: k.position, name: k.name };
  }

  // -- running server commands ------------------------------------------------------------------

  private explainUntrusted(what: string): void {
    const msg = `Newt: ${what} is not available in Restricted Mode: it compiles and runs code from this workspace. ` +
      'Diagnostics, hover, inlay hints and the generated CUDA still work. Trust the workspace to enable it.';
    this.log.warn(msg);
    void vscode.window.showWarningMessage(msg, 'Manage Workspace Trust').then((pick) => {
      if (pick) void vscode.commands.executeCommand('workbench.trust.manage');
    });
  }

  private async prepare(command: string, args: unknown[]): Promise<{ client: LanguageClient; kernel: KernelRef } | undefined> {
    const what = CODE_RUNNING[command];
    if (what && !vscode.workspace.isTrusted) {
      this.lastError = { command, message: 'untrusted workspace', code: UNTRUSTED_ERROR_CODE };
      this.explainUntrusted(what);
      return undefined;
    }
    const client = await this.server.ensureStarted();
    if (!client) {
      this.lastError = { command, message: this.server.lastError ?? 'the language server is not running' };
      void vscode.window.showErrorMessage(this.server.lastError ?? 'Newt: the language server is not running.',
        ...failureActions('not-running')).then((pick) => {
        if (pick === 'Restart Server') void this.server.restart();
        else if (pick === 'Show Logs') this.log.show();
      });
      return undefined;
    }
    const kernel = await this.kernel(args, client);
    return kernel ? { client, kernel } : undefined;
  }

  private async execute<T>(
    client: LanguageClient,
    command: string,
    arg: KernelArgument | (KernelArgument & { kind: DocumentKind }),
    token?: vscode.CancellationToken,
    workDoneToken?: string,
  ): Promise<T | undefined> {
    this.lastError = undefined;
    const started = Date.now();
    this.log.info(`${command} ${JSON.stringify(arg)}`);
    try {
      const result = (await client.sendRequest(
        ExecuteCommandRequest.type,
        { command, arguments: [arg], ...(workDoneToken ? { workDoneToken } : {}) },
        token,
      )) as T;
      this.log.info(`${command} finished in ${Date.now() - started} ms`);
      return result;
    } catch (e) {
      this.reportFailure(command, e, token);
      return undefined;
    }
  }

  /**
   * Runs a server command; when the server answers that constexprs have no value (the file launches the
   * kernel only with run-time values), asks for each in a quick pick (the server's suggestions, or a typed
   * value) and runs it again with them. The result says what was picked (`assumed`).
   */
  private async executeAsking<T>(
    client: LanguageClient,
    command: string,
    arg: KernelArgument | (KernelArgument & { kind: DocumentKind }),
    token?: vscode.CancellationToken,
  ): Promise<T | undefined> {
    let current: KernelArgument & { constexprs?: Record<string, number | boolean> } = { ...arg };
    for (let round = 0; round < 3; round++) {
      this.lastError = undefined;
      this.log.info(`${command} ${JSON.stringify(current)}`);
      try {
        return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [current] }, token)) as T;
      } catch (e) {
        const info = e instanceof ResponseError ? missingConstexprs(e.data) : undefined;
        if (!info || token?.isCancellationRequested) {
          this.reportFailure(command, e, token);
          return undefined;
        }
        this.log.info(`${command}: ${e instanceof Error ? e.message : String(e)}`);
        const picked = await this.askConstexprs(info);
        if (!picked) {
          this.lastError = { command, message: 'no value picked', code: e instanceof ResponseError ? e.code : undefined };
          this.log.info(`${command}: no constexpr value picked`);
          return undefined;
        }
        current = { ...current, constexprs: { ...(current.constexprs ?? {}), ...picked } };
      }
    }
    return undefined;
  }

  private async askConstexprs(info: MissingConstexprs): Promise<Record<string, number | boolean> | undefined> {
    const out: Record<string, number | boolean> = {};
    for (const name of info.missing) {
      const why = info.why?.[name];
      const pick = await vscode.window.showQuickPick(constexprItems(name, info), {
        title: `Newt: a value for ${name}${info.kernel ? ` (${info.kernel})` : ''}`,
        placeHolder: why ? `The file does not say: ${why}` : `The file does not say which ${name} to compile with`,
        ignoreFocusOut: true,
      });
      if (!pick) return undefined;
      let value: number | boolean | undefined;
      if (pick.label === OTHER_VALUE) {
        const typed = await vscode.window.showInputBox({
          title: `Newt: a value for ${name}`, prompt: 'an integer, a float, True or False', ignoreFocusOut: true,
          validateInput: (s) => (parseConstexprValue(s) === undefined ? 'an integer, a float, True or False' : undefined),
        });
        value = typed === undefined ? undefined : parseConstexprValue(typed);
      } else {
        value = parseConstexprValue(pick.label);
      }
      if (value === undefined) return undefined;
      out[name] = value;
    }
    return out;
  }

  private reportFailure(command: string, e: unknown, token?: vscode.CancellationToken): void {
    const code = e instanceof ResponseError ? e.code : undefined;
    const message = e instanceof Error ? e.message : String(e);
    this.lastError = { command, message, code };
    const what = COMMAND_LABEL[command] ?? 'the command';
    if (code === UNTRUSTED_ERROR_CODE) {
      this.explainUntrusted(what);
    } else if (token?.isCancellationRequested || code === LSPErrorCodes.RequestCancelled || code === -32800) {
      this.log.info(`${command} cancelled`);
      void vscode.window.showInformationMessage(`Newt: ${what} cancelled.`);
    } else {
      this.log.error(`${command} failed:\n${message}${e instanceof ResponseError && e.data ? `\n${JSON.stringify(e.data, null, 2)}` : ''}`);
      void vscode.window.showErrorMessage(`Newt: ${what} failed: ${firstLine(message)}`, 'Show Logs')
        .then((pick) => pick && this.log.show());
    }
  }

  private targetFor(uri: string): KernelArgument['target'] {
    return explicitTarget(this.server.settingsFor(vscode.Uri.parse(uri)).target);
  }

  // -- the commands -----------------------------------------------------------------------------

  async compile(args: unknown[]): Promise<CompileResult | undefined> {
    const p = await this.prepare(ServerCommand.compile, args);
    if (!p) return undefined;
    const { client, kernel } = p;
    const target = this.targetFor(kernel.uri);
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Newt: compiling ${kernel.name}`, cancellable: true },
      (_progress, token) => this.executeAsking<CompileResult>(client, ServerCommand.compile,
        { uri: kernel.uri, position: kernel.position, ...(target ? { target } : {}) }, token),
    );
    if (!result) return undefined;
    const summary = compileSummary(result);
    this.log.info(summary);
    const actions: { title: string; uri: string }[] = [];
    for (const kind of ['cuda', 'ptx', 'sass'] as const) {
      const uri = result.documents?.[kind];
      if (uri) actions.push({ title: `Show ${KIND_LABEL[kind]}`, uri });
    }
    void vscode.window.showInformationMessage(summary, ...actions.map((a) => a.title)).then((pick) => {
      const a = actions.find((x) => x.title === pick);
      if (a) void this.docs.open(a.uri, { preview: false });
    });
    return result;
  }

  async verify(args: unknown[]): Promise<VerifyResult | undefined> {
    const p = await this.prepare(ServerCommand.verify, args);
    if (!p) return undefined;
    const { client, kernel } = p;
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Newt: verifying ${kernel.name}`, cancellable: true },
      (_progress, token) => this.execute<VerifyResult>(client, ServerCommand.verify, { uri: kernel.uri, position: kernel.position }, token),
    );
    if (!result) return undefined;
    const detail = verifyDetail(result);
    if (result.ok) {
      this.log.info(detail);
      void vscode.window.showInformationMessage(verifySummary(result));
    } else {
      this.log.error(detail);
      void vscode.window.showErrorMessage(verifySummary(result), 'Show Logs').then((pick) => pick && this.log.show());
    }
    return result;
  }

  async autotune(args: unknown[]): Promise<AutotuneResult | undefined> {
    const p = await this.prepare(ServerCommand.autotune, args);
    if (!p) return undefined;
    const { client, kernel } = p;
    const workDoneToken = `newt-autotune-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Newt: autotuning ${kernel.name}`, cancellable: true },
      async (progress, token) => {
        let reported = 0;
        this.autotuneProgress = [];
        const sub = client.onProgress(WorkDoneProgress.type, workDoneToken,
          (v: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd) => {
            this.autotuneProgress.push({ kind: v.kind, message: v.message, percentage: v.kind === 'end' ? undefined : v.percentage });
            if (v.kind === 'end') {
              if (v.message) this.log.info(`autotune: ${v.message}`);
              return;
            }
            const pct = v.percentage;
            const increment = pct != null && pct > reported ? pct - reported : undefined;
            if (pct != null) reported = Math.max(reported, pct);
            if (v.message) this.log.info(`autotune: ${v.message}`);
            progress.report({ message: v.message, increment });
          });
        try {
          return await this.execute<AutotuneResult>(client, ServerCommand.autotune,
            { uri: kernel.uri, position: kernel.position }, token, workDoneToken);
        } finally {
          sub.dispose();
        }
      },
    );
    if (!result) return undefined;
    this.log.info(autotuneDetail(result));
    void vscode.window.showInformationMessage(autotuneSummary(result), 'Show Logs').then((pick) => pick && this.log.show());
    return result;
  }

  /** Shows the generated CUDA / PTX / SASS / IR; returns the virtual document's URI. */
  async show(kind: DocumentKind, args: unknown[]): Promise<string | undefined> {
    const p = await this.prepare(ServerCommand.show, args);
    if (!p) return undefined;
    const { client, kernel } = p;
    // a hover link names the specialization it showed: [uri, position, {spec}]
    const extra = args[2] && typeof args[2] === 'object' && typeof (args[2] as { spec?: unknown }).spec === 'number'
      ? { spec: (args[2] as { spec: number }).spec } : {};
    const target = this.targetFor(kernel.uri);
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: `Newt: generating ${KIND_LABEL[kind]} for ${kernel.name}` },
      () => this.executeAsking<ShowResult>(client, ServerCommand.show,
        { uri: kernel.uri, position: kernel.position, kind, ...extra, ...(target ? { target } : {}) }),
    );
    if (!result?.uri) return undefined;
    await this.docs.open(result.uri);
    return result.uri;
  }
}
