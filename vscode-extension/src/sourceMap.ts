/**
 * Source <-> generated code in the editor: with a generated view (Show CUDA / PTX / SASS) open beside its
 * source, the view's lines generated from the source line under the cursor are highlighted (and scrolled
 * into view); clicking a line of the view highlights and reveals its source line in the source editor, and
 * Go to Definition (F12, Ctrl+click) on a view line jumps there. The map is the server's `newt/sourceMap`.
 */
import * as vscode from 'vscode';
import { SourceMapIndex, SourceMapRequest, SourceMapResult } from './core/sourceMap';
import { VIRTUAL_SCHEME } from './core/uris';
import type { NewtServer } from './server';
import type { VirtualDocuments } from './virtualDocuments';

export class SourceHighlighter implements vscode.Disposable, vscode.DefinitionProvider {
  private readonly maps = new Map<string, Promise<SourceMapIndex | undefined>>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly viewDecoration = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('editor.rangeHighlightBackground'),
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.rangeHighlightForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
  });
  private readonly sourceDecoration = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('editor.rangeHighlightBackground'),
  });
  /** What is highlighted now: view URI -> its highlighted lines (the e2e reads it). */
  readonly highlighted = new Map<string, number[]>();
  /** The last source line revealed from a click in a view (the e2e reads it). */
  lastJump: { uri: string; line: number } | undefined;

  constructor(private readonly server: NewtServer, private readonly docs: VirtualDocuments,
              private readonly log: vscode.LogOutputChannel) {
    this.disposables.push(
      this.viewDecoration,
      this.sourceDecoration,
      vscode.languages.registerDefinitionProvider({ scheme: VIRTUAL_SCHEME }, this),
      vscode.window.onDidChangeTextEditorSelection((e) => void this.selectionChanged(e)),
      vscode.window.onDidChangeVisibleTextEditors(() => void this.refresh()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.uri.scheme === VIRTUAL_SCHEME) this.maps.delete(e.document.uri.toString());
      }),
      vscode.workspace.onDidCloseTextDocument((d) => this.maps.delete(d.uri.toString())),
    );
  }

  /** The map of a view (fetched once per text of the view). */
  mapOf(view: vscode.Uri): Promise<SourceMapIndex | undefined> {
    const key = view.toString();
    let got = this.maps.get(key);
    if (!got) {
      got = this.fetch(view);
      this.maps.set(key, got);
    }
    return got;
  }

  private async fetch(view: vscode.Uri): Promise<SourceMapIndex | undefined> {
    const client = this.server.running;
    if (!client) return undefined;
    try {
      const res = await client.sendRequest<SourceMapResult>(SourceMapRequest, { uri: this.docs.serverUriOf(view) });
      return new SourceMapIndex(res.source, res.lines);
    } catch (e) {
      this.log.info(`newt/sourceMap ${view.toString(true)}: ${e instanceof Error ? e.message : String(e)}`);
      this.maps.delete(view.toString());
      return undefined;
    }
  }

  private static sameFile(a: string, b: vscode.Uri): boolean {
    return vscode.Uri.parse(a).toString() === b.toString();
  }

  /** Highlight, in every visible view of ``source``, the lines generated from ``line``. */
  async highlightFor(source: vscode.Uri, line: number, reveal: boolean): Promise<void> {
    for (const ed of vscode.window.visibleTextEditors) {
      if (ed.document.uri.scheme !== VIRTUAL_SCHEME) continue;
      const map = await this.mapOf(ed.document.uri);
      if (!map || !SourceHighlighter.sameFile(map.source, source)) continue;
      const lines = map.viewLines(line);
      ed.setDecorations(this.viewDecoration, SourceMapIndex.runs(lines).map(
        ([a, b]) => new vscode.Range(a, 0, b, 0)));
      this.highlighted.set(ed.document.uri.toString(), [...lines]);
      if (reveal && lines.length) {
        const first = new vscode.Range(lines[0], 0, lines[0], 0);
        const shown = ed.visibleRanges.some((r) => r.contains(first));
        if (!shown) ed.revealRange(first, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
      }
    }
  }

  private async selectionChanged(e: vscode.TextEditorSelectionChangeEvent): Promise<void> {
    const doc = e.textEditor.document;
    const line = e.selections[0]?.active.line;
    if (line === undefined) return;
    if (doc.uri.scheme === VIRTUAL_SCHEME) {
      if (e.kind !== vscode.TextEditorSelectionChangeKind.Mouse) return;
      await this.jumpFrom(doc.uri, line);
    } else if (doc.languageId === 'python') {
      await this.highlightFor(doc.uri, line, true);
    }
  }

  /** A click on a view line: highlight and reveal its source line (the source editor keeps its place in the
   * layout; the focus stays in the view). */
  async jumpFrom(view: vscode.Uri, line: number): Promise<void> {
    const map = await this.mapOf(view);
    const src = map?.sourceLine(line);
    if (!map || src === undefined) return;
    const source = vscode.Uri.parse(map.source);
    let ed = vscode.window.visibleTextEditors.find((x) => x.document.uri.toString() === source.toString());
    if (!ed) {
      const doc = await vscode.workspace.openTextDocument(source);
      ed = await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preserveFocus: true });
    }
    const range = new vscode.Range(src, 0, src, 0);
    ed.setDecorations(this.sourceDecoration, [range]);
    ed.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.lastJump = { uri: source.toString(), line: src };
    await this.highlightFor(source, src, false);
  }

  async provideDefinition(document: vscode.TextDocument, position: vscode.Position): Promise<vscode.Location | undefined> {
    const map = await this.mapOf(document.uri);
    const src = map?.sourceLine(position.line);
    if (!map || src === undefined) return undefined;
    return new vscode.Location(vscode.Uri.parse(map.source), new vscode.Position(src, 0));
  }

  private async refresh(): Promise<void> {
    const ed = vscode.window.activeTextEditor;
    if (ed && ed.document.languageId === 'python') await this.highlightFor(ed.document.uri, ed.selection.active.line, false);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
