/**
 * Read-only documents for the generated CUDA, PTX, SASS and tile IR: `newt:` URIs whose text comes from
 * the server's `newt/virtualDocument` request, shown with CUDA / PTX / SASS highlighting.
 */
import * as vscode from 'vscode';
import { VirtualDocumentRequest, VirtualDocumentResult } from './core/protocol';
import { languageFor, VIRTUAL_SCHEME, virtualQuery } from './core/uris';
import type { NewtServer } from './server';

/** What fetch() returns when the server could not produce the document. */
const FAILED_FETCH = /^\/\/ Newt: (could not generate this document|the language server is not running)/;

export class VirtualDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  /** VS Code's normalized URI string -> the URI exactly as the server wrote it. */
  private readonly originals = new Map<string, string>();
  private readonly languages = new Map<string, string>();
  /** Text fetched for a refresh, handed to VS Code by the next provideTextDocumentContent. */
  private readonly pending = new Map<string, string>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly server: NewtServer, private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(VIRTUAL_SCHEME, this),
      // regenerate open views when their source is saved or the server restarts
      vscode.workspace.onDidSaveTextDocument((doc) => this.refreshFor(doc.uri)),
      server.onDidStart(() => this.refreshFor(undefined)),
      // links in hovers (`[CUDA](newt:/...)`) open these documents without going through open()
      vscode.workspace.onDidOpenTextDocument((doc) => {
        if (doc.uri.scheme === VIRTUAL_SCHEME) void this.applyLanguage(doc);
      }),
    );
  }

  /** Shows a virtual document in the language the server named (else the one its `kind` implies). */
  private async applyLanguage(doc: vscode.TextDocument): Promise<vscode.TextDocument> {
    const key = doc.uri.toString();
    const serverLanguage = this.languages.get(key) ?? virtualQuery(this.serverUri(doc.uri).split('?')[1] ?? '').kind;
    const lang = languageFor(serverLanguage, new Set(await vscode.languages.getLanguages()));
    if (doc.languageId === lang || doc.isClosed) return doc;
    return vscode.languages.setTextDocumentLanguage(doc, lang);
  }

  private serverUri(uri: vscode.Uri): string {
    return this.originals.get(uri.toString()) ?? uri.toString(true);
  }

  /** The URI of a view exactly as the server wrote it (for requests about the view). */
  serverUriOf(uri: vscode.Uri): string {
    return this.serverUri(uri);
  }

  async provideTextDocumentContent(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string> {
    const key = uri.toString();
    const fresh = this.pending.get(key);
    if (fresh !== undefined) {
      this.pending.delete(key);
      return fresh;
    }
    return this.fetch(uri, token);
  }

  /** The document's text from the server (or an explanation in a comment). */
  private async fetch(uri: vscode.Uri, token?: vscode.CancellationToken): Promise<string> {
    // a server that failed to start is not restarted for a view (that is Restart Server's job)
    const client = this.server.state === 'failed' ? this.server.running : await this.server.ensureStarted();
    if (!client) return `// Newt: the language server is not running (${this.server.lastError ?? 'see the Newt output channel'})`;
    try {
      // (no `undefined` token argument: vscode-jsonrpc would send it as a second, positional parameter)
      const params = { uri: this.serverUri(uri) };
      const res = token
        ? await client.sendRequest<VirtualDocumentResult>(VirtualDocumentRequest, params, token)
        : await client.sendRequest<VirtualDocumentResult>(VirtualDocumentRequest, params);
      this.languages.set(uri.toString(), res.languageId);
      return res.text;
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      this.log.error(`newt/virtualDocument ${this.serverUri(uri)}: ${msg}`);
      return `// Newt: could not generate this document:\n// ${msg.split(/\r?\n/).join('\n// ')}`;
    }
  }

  /** Replaces the text of an open virtual document and waits until VS Code shows it. A refresh that fails
   * (the server restarting after a settings change, a worker being replaced) keeps what is shown. */
  private async update(doc: vscode.TextDocument): Promise<void> {
    const text = await this.fetch(doc.uri);
    if (text === doc.getText()) return;
    if (FAILED_FETCH.test(text) && doc.getText().trim() && !FAILED_FETCH.test(doc.getText())) {
      this.log.info(`keeping ${doc.uri.toString(true)}: ${text.split('\n').slice(0, 2).join(' ')}`);
      return;
    }
    const key = doc.uri.toString();
    this.pending.set(key, text);
    await new Promise<void>((resolve) => {
      const done = () => {
        sub.dispose();
        clearTimeout(timer);
        resolve();
      };
      const sub = vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.uri.toString() === key) done();
      });
      const timer = setTimeout(done, 5000);
      this.changed.fire(doc.uri);
    });
    this.pending.delete(key);
  }

  /** Opens a server URI beside the editor, with the server's language. */
  async open(serverUri: string, opts: { preview?: boolean; preserveFocus?: boolean } = {}): Promise<vscode.TextDocument> {
    const uri = vscode.Uri.parse(serverUri, true);
    this.originals.set(uri.toString(), serverUri);
    const already = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (already) await this.update(already); // recompiled or restarted: show the current text
    const doc = await this.applyLanguage(await vscode.workspace.openTextDocument(uri));
    await vscode.window.showTextDocument(doc, {
      viewColumn: vscode.ViewColumn.Beside,
      preview: opts.preview ?? true,
      preserveFocus: opts.preserveFocus ?? false,
    });
    return doc;
  }

  private refreshFor(source: vscode.Uri | undefined): void {
    for (const doc of vscode.workspace.textDocuments) {
      if (doc.uri.scheme !== VIRTUAL_SCHEME) continue;
      if (source) {
        const src = virtualQuery(this.serverUri(doc.uri).split('?')[1] ?? '').src;
        if (!src || vscode.Uri.parse(src).toString() !== source.toString()) continue;
      }
      void this.update(doc);
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
