// Newt e2e probe: a test-only extension that runs in the same extension host as the Newt extension, asks
// VS Code what Newt shows (diagnostics, hovers, code lenses), runs Newt's commands the way a click would,
// and writes one JSON report to $NEWT_E2E_OUT. It never talks to the language server itself.
'use strict';
const vscode = require('vscode');
const fs = require('fs');
const path = require('path');

const OUT = process.env.NEWT_E2E_OUT;
const EXPECT = process.env.NEWT_E2E_EXPECT;
const MODE = process.env.NEWT_E2E_MODE || 'trusted';
const NEWT_ID = 'newt.newt';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const report = { mode: MODE, vscode: vscode.version, checks: [], log: [] };
const log = (msg) => report.log.push(`${((Date.now() - t0) / 1000).toFixed(1)}s ${msg}`);

function write() {
  report.ms = Date.now() - t0;
  report.passed = report.checks.filter((c) => c.ok).length;
  report.failed = report.checks.filter((c) => !c.ok).length;
  report.ok = report.failed === 0 && report.checks.length > 0;
  fs.writeFileSync(OUT + '.tmp', JSON.stringify(report, null, 2));
  fs.renameSync(OUT + '.tmp', OUT);
}

function withTimeout(p, ms, what) {
  return Promise.race([p, sleep(ms).then(() => { throw new Error(`${what}: no answer in ${ms / 1000}s`); })]);
}

/** Runs one named check; `fn` returns {ok, ...detail} or throws. */
async function check(name, fn, timeoutMs = 120000) {
  const start = Date.now();
  let entry;
  try {
    const r = await withTimeout(Promise.resolve().then(fn), timeoutMs, name);
    entry = { name, ok: !!r.ok, ...r };
  } catch (e) {
    entry = { name, ok: false, error: String((e && e.stack) || e) };
  }
  entry.ms = Date.now() - start;
  report.checks.push(entry);
  log(`${entry.ok ? 'PASS' : 'FAIL'} ${name}`);
  write();
  return entry;
}

function hoverText(hovers) {
  const parts = [];
  for (const h of hovers || []) {
    for (const c of h.contents || []) parts.push(typeof c === 'string' ? c : c.value !== undefined ? c.value : String(c));
  }
  return parts.join('\n');
}

/** Whether a diagnostic's code link opens the code's section: `diagnostics.md#L<line>` of its heading. */
function sectionOpens(href, code) {
  try {
    const m = /^(file:.*diagnostics\.md)#L(\d+)$/.exec(href);
    if (!m) return false;
    const lines = fs.readFileSync(vscode.Uri.parse(m[1]).fsPath, 'utf8').split(/\r?\n/);
    return lines[Number(m[2]) - 1].startsWith(`## ${code}`);
  } catch {
    return false;
  }
}

const SEVERITY = { 0: 'error', 1: 'warning', 2: 'information', 3: 'hint' };

function codeOf(d) {
  return typeof d.code === 'object' && d.code !== null ? String(d.code.value) : String(d.code);
}

async function waitFor(fn, ms, interval = 250) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(interval);
  }
  return last;
}

async function activate() {
  if (!OUT) return;
  try {
    await (MODE === 'restricted' ? runRestricted() : run());
  } catch (e) {
    report.checks.push({ name: 'probe', ok: false, error: String((e && e.stack) || e) });
  }
  // nothing of the workspace ran at start-up (json.py, argparse.py, pygls/, newt/, lsp_server/ shadows)
  await check('no workspace module shadowing the server\'s imports was run', async () => {
    const ws = vscode.workspace.workspaceFolders[0].uri.fsPath;
    const ran = fs.readdirSync(ws).filter((f) => f.startsWith('RAN_'));
    return { ok: ran.length === 0, ran };
  });
  report.done = true;
  write();
  if (MODE === 'trusted') {
    await secondScene();
    await thirdScene();
    await fourthScene();
  }
}

// The driver hovers a kernel's name and clicks the rendered "CUDA" link: the probe opens the file there.
async function thirdScene() {
  const go = await waitFor(() => fs.existsSync(OUT + '.scene3'), 180000, 200);
  if (!go) return;
  try {
    const expect = JSON.parse(fs.readFileSync(EXPECT, 'utf8'));
    const c = expect.compile[0];
    const ws = vscode.workspace.workspaceFolders[0].uri;
    const uri = vscode.Uri.joinPath(ws, ...c.file.split('/'));
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('notifications.clearAll');
    const editor = await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { viewColumn: vscode.ViewColumn.One });
    editor.selection = new vscode.Selection(c.line, c.character + 2, c.line, c.character + 2);
    editor.revealRange(new vscode.Range(c.line, 0, c.line, 0), vscode.TextEditorRevealType.AtTop);
    // the hover of a kernel name generates CUDA: ask once so it is ready when shown
    await vscode.commands.executeCommand('vscode.executeHoverProvider', uri, new vscode.Position(c.line, c.character + 2));
    await vscode.commands.executeCommand('workbench.action.focusActiveEditorGroup');
    await vscode.commands.executeCommand('editor.action.showHover');
  } catch (e) {
    log(`scene 3: ${e}`);
  }
  fs.writeFileSync(OUT + '.scene3.ready', 'ok');
}

// A second screenshot, on the driver's request: Compile's result and the generated SASS beside the kernel.
async function secondScene() {
  const go = await waitFor(() => fs.existsSync(OUT + '.scene2'), 120000, 200);
  if (!go) return;
  try {
    const expect = JSON.parse(fs.readFileSync(EXPECT, 'utf8'));
    const c = expect.compile[0];
    const ws = vscode.workspace.workspaceFolders[0].uri;
    const uri = vscode.Uri.joinPath(ws, ...c.file.split('/'));
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('notifications.clearAll');
    await vscode.commands.executeCommand('workbench.action.closePanel');
    await vscode.commands.executeCommand('workbench.action.closeSidebar');
    const editor = await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { viewColumn: vscode.ViewColumn.One });
    editor.selection = new vscode.Selection(c.line + 3, 8, c.line + 3, 8);
    await vscode.commands.executeCommand('newt.showSass', uri.toString(), { line: c.line, character: c.character });
    await vscode.commands.executeCommand('workbench.action.focusFirstEditorGroup');
    await vscode.commands.executeCommand('newt.compileKernel');
  } catch (e) {
    log(`scene 2: ${e}`);
  }
  fs.writeFileSync(OUT + '.scene2.ready', 'ok');
}

/** Opening a file with a spilling config: the N100 warning in the Problems panel and the figures at the config
 * lines; the kernel hover's figures and instruction mix; Show SASS highlights the cursor's source line. */
async function perfChecks(p, show, api) {
  const t = Date.now();
  const { doc, editor } = await show(p.file);
  await check(`performance: the spilling config of ${p.file} is a warning at its line (Problems panel)`, async () => {
    const got = await waitFor(() => { const n = vscode.languages.getDiagnostics(doc.uri).filter((d) => codeOf(d) === 'N100'); return n.length ? n : null; }, 300000, 500);
    const d = (got || [])[0];
    await vscode.commands.executeCommand('workbench.actions.view.problems');
    return { ok: !!d && d.range.start.line === p.spillLine && SEVERITY[d.severity] === 'warning' && /spills registers/.test(d.message),
      seconds_after_open: (Date.now() - t) / 1000, diagnostic: d && { line: d.range.start.line, message: d.message } };
  }, 320000);
  await check(`performance: figures at the config lines of ${p.file} (inlay hints)`, async () => {
    const hints = await waitFor(async () => {
      const h = await vscode.commands.executeCommand('vscode.executeInlayHintProvider', doc.uri, new vscode.Range(0, 0, p.kernelLine, 0));
      const mine = (h || []).map((x) => ({ line: x.position.line, label: typeof x.label === 'string' ? x.label : x.label.map((l) => l.value).join('') }))
        .filter((x) => /regs/.test(x.label));
      return mine.length >= 2 ? mine : null;
    }, 240000, 1000);
    const at = Object.fromEntries((hints || []).map((h) => [h.line, h.label]));
    return { ok: /regs · no spill/.test(at[p.okLine] || '') && /regs · .* spilled/.test(at[p.spillLine] || ''), hints };
  }, 250000);
  await check(`performance: the hover of ${p.kernel} lists the figures and the instruction mix`, async () => {
    const pos = new vscode.Position(p.kernelLine, p.kernelChar);
    const text = await waitFor(async () => {
      const h = hoverText(await vscode.commands.executeCommand('vscode.executeHoverProvider', doc.uri, pos));
      return /Hottest source lines/.test(h) ? h : null;
    }, 60000, 1000);
    return { ok: !!text && /Resources on sm_/.test(text) && /LDL|STL|HGMMA|HMMA|LDG/.test(text), text: (text || '').slice(-1500) };
  });
  await check(`source map: Show SASS highlights the lines of the cursor's source line`, async () => {
    const target = await vscode.commands.executeCommand('newt.showSass', doc.uri.toString(), { line: p.kernelLine, character: p.kernelChar });
    const sass = target && await waitFor(() => vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === vscode.Uri.parse(target).toString() && /HGMMA|HMMA/.test(e.document.getText())), 300000, 500);
    if (!sass) return { ok: false, why: 'no SASS view', target };
    const src = await vscode.window.showTextDocument(doc, { viewColumn: editor.viewColumn, preserveFocus: false });
    src.selection = new vscode.Selection(p.dotLine, 8, p.dotLine, 8);
    const lines = await waitFor(() => { const l = api.sourceHighlights.highlighted[sass.document.uri.toString()]; return l && l.length ? l : null; }, 60000, 250);
    const texts = (lines || []).map((l) => sass.document.lineAt(l).text.trim());
    // the definition of a highlighted line is the dot's source line (what a click or F12 jumps to)
    const loc = lines && await vscode.commands.executeCommand('vscode.executeDefinitionProvider', sass.document.uri, new vscode.Position(lines[0], 10));
    const back = (loc || []).map((l) => (l.targetRange || l.range).start.line);
    return { ok: !!lines && texts.some((x) => /MMA/.test(x)) && back[0] === p.dotLine, count: (lines || []).length, sample: texts.slice(0, 6), back };
  }, 320000);
}

// Scene 4, on the driver's request: a SASS view beside the source; the driver clicks one of its lines and the
// probe checks the source editor landed on that line's source line.
async function fourthScene() {
  const go = await waitFor(() => fs.existsSync(OUT + '.scene4'), 180000, 200);
  if (!go) return;
  const expect = JSON.parse(fs.readFileSync(EXPECT, 'utf8'));
  const p = expect.perf;
  const api = vscode.extensions.getExtension(NEWT_ID).exports;
  let sass;
  try {
    const uri = vscode.Uri.joinPath(vscode.workspace.workspaceFolders[0].uri, ...p.file.split('/'));
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('workbench.action.closePanel');
    const src = await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { viewColumn: vscode.ViewColumn.One });
    src.revealRange(new vscode.Range(0, 0, 0, 0), vscode.TextEditorRevealType.AtTop);
    const target = await vscode.commands.executeCommand('newt.showSass', uri.toString(), { line: p.kernelLine, character: p.kernelChar });
    sass = await waitFor(() => vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === vscode.Uri.parse(target).toString()), 120000, 250);
    // put a dot instruction's line in the middle of the view (the driver clicks there, clear of the sticky
    // scroll at the top); the view may still be laid out or refreshed: reveal until VS Code shows it
    const i = sass.document.getText().split('\n').findIndex((l) => /HGMMA|HMMA/.test(l));
    await waitFor(async () => {
      const ed = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === sass.document.uri.toString());
      if (!ed) return false;
      sass = ed;
      ed.revealRange(new vscode.Range(i, 0, i, 0), vscode.TextEditorRevealType.InCenter);
      await sleep(500);
      return ed.visibleRanges.length && ed.visibleRanges[0].start.line < i && i < ed.visibleRanges[0].end.line;
    }, 20000, 250);
    await vscode.window.showTextDocument(sass.document, { viewColumn: sass.viewColumn, preserveFocus: true });
    report.scene4 = { revealed: i, visible: sass.visibleRanges.map((r) => [r.start.line, r.end.line]) };
  } catch (e) {
    log(`scene 4: ${e}`);
  }
  fs.writeFileSync(OUT + '.scene4.ready', 'ok');
  await waitFor(() => fs.existsSync(OUT + '.scene4.clicked'), 120000, 200);
  await check('source map: clicking a SASS line lands on its source line', async () => {
    sass = sass && (vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === sass.document.uri.toString()) || sass);
    const clicked = sass && sass.selection.active.line;
    const map = sass && await waitFor(async () => (await vscode.commands.executeCommand('vscode.executeDefinitionProvider', sass.document.uri, new vscode.Position(clicked, 10))) || null, 20000, 250);
    const want = map && map[0] ? (map[0].targetRange || map[0].range).start.line : undefined;
    const jump = await waitFor(() => api.sourceHighlights.lastJump, 20000, 250);
    const srcEditor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === (jump && jump.uri));
    const visible = !!srcEditor && srcEditor.visibleRanges.some((r) => r.start.line <= jump.line && jump.line <= r.end.line);
    return { ok: want !== undefined && !!jump && jump.line === want && visible, clicked, clickedText: sass && sass.document.lineAt(clicked).text.trim(), want, jump, visible };
  });
  report.done = true;
  write();
  fs.writeFileSync(OUT + '.scene4.done', 'ok');
}

async function run() {
  const expect = JSON.parse(fs.readFileSync(EXPECT, 'utf8'));
  const ws = vscode.workspace.workspaceFolders[0].uri;
  const uriOf = (rel) => vscode.Uri.joinPath(ws, ...rel.split('/'));
  const show = async (rel, opts = {}) => {
    const doc = await vscode.workspace.openTextDocument(uriOf(rel));
    const editor = await vscode.window.showTextDocument(doc, { preview: false, ...opts });
    return { doc, editor };
  };
  report.trusted = vscode.workspace.isTrusted;
  log(`workspace ${ws.fsPath}, trusted=${vscode.workspace.isTrusted}`);

  // Opening a kernel file activates Newt (onLanguage:python) and starts its server.
  await show('kernels/broken.py');
  let api;
  await check('extension activates and the server starts', async () => {
    const ext = await waitFor(() => vscode.extensions.getExtension(NEWT_ID), 30000);
    if (!ext) return { ok: false, why: `${NEWT_ID} is not installed` };
    api = await ext.activate();
    const ready = await api.ready();
    return {
      ok: ready && api.state === 'running',
      version: ext.packageJSON.version,
      state: api.state,
      interpreter: api.interpreter,
      lastError: api.lastError,
    };
  });
  if (!api || api.state !== 'running') return;

  await check('status bar: compile-only (no GPU)', async () => {
    const status = await waitFor(() => api.status, 30000);
    return { ok: !!status && status.mode === 'compile-only' && status.gpu == null, status };
  });

  // -- diagnostics at exact lines and codes -----------------------------------------------------
  for (const [rel, want] of Object.entries(expect.diagnostics)) {
    await check(`diagnostics ${rel}`, async () => {
      const { doc } = await show(rel);
      const newtDiags = () => vscode.languages.getDiagnostics(doc.uri).filter((d) => d.source === 'newt');
      // a file with expected diagnostics: wait for them; a clean file: wait for the server to have seen it
      const got = want.length
        ? await waitFor(() => { const d = newtDiags(); return d.length >= want.length ? d : null; }, 60000) || newtDiags()
        : (await sleep(4000), newtDiags());
      const actual = got.map((d) => ({
        line: d.range.start.line, character: d.range.start.character, code: codeOf(d),
        severity: SEVERITY[d.severity], message: d.message,
        href: d.code && typeof d.code === 'object' && d.code.target ? d.code.target.toString() : undefined,
      }));
      const missing = want.filter((w) => !actual.some((a) => a.line === w.line && a.character === w.character &&
        a.code === w.code && a.severity === w.severity && a.message.includes(w.message)));
      const unexpected = actual.filter((a) => !want.some((w) => w.line === a.line && w.code === a.code));
      const badHref = actual.filter((a) => !a.href || !sectionOpens(a.href, a.code));
      return { ok: missing.length === 0 && unexpected.length === 0 && badHref.length === 0, missing, unexpected, badHref, actual };
    });
  }

  // -- hover: dtype, shape and a way to the CUDA --------------------------------------------------
  for (const h of expect.hover) {
    await check(`hover ${h.file}:${h.line + 1} ${h.word}`, async () => {
      const { doc } = await show(h.file);
      const pos = new vscode.Position(h.line, h.character);
      const word = doc.getText(doc.getWordRangeAtPosition(pos));
      const text = await waitFor(async () => hoverText(await vscode.commands.executeCommand('vscode.executeHoverProvider', doc.uri, pos)), 30000);
      const hasShape = h.contains.every((s) => (text || '').includes(s));
      const hasDtype = h.dtype.length === 0 || h.dtype.some((s) => (text || '').includes(s));
      // "offers the CUDA": a command link in the hover (VS Code renders only trusted command: links there);
      // run what a click runs (drive.js also clicks the rendered link)
      const link = /\[CUDA\]\(command:(newt\.show\w+)\?([^)\s]+)/.exec(text || '');
      let opened;
      if (link) {
        const linkArgs = JSON.parse(decodeURIComponent(link[2]));
        const target = await vscode.commands.executeCommand(link[1], ...linkArgs);
        const d = target && await waitFor(() => vscode.workspace.textDocuments.find((x) => x.uri.toString() === vscode.Uri.parse(target).toString() && x.languageId === 'cuda-cpp'), 20000);
        opened = d && { uri: d.uri.toString(), command: link[1], languageId: d.languageId, isCuda: /__global__|extern "C"/.test(d.getText()), head: d.getText().slice(0, 200) };
      }
      const offersCuda = !!opened && opened.languageId === 'cuda-cpp' && opened.isCuda;
      return { ok: word === h.word && hasShape && hasDtype && (!h.offersCuda || offersCuda), word, hasShape, hasDtype, offersCuda, opened, text };
    });
  }

  // -- code lenses ----------------------------------------------------------------------------------
  const lensesByFile = {};
  for (const [rel, wantLenses] of Object.entries(expect.codeLenses)) {
    await check(`code lenses ${rel}`, async () => {
      const { doc } = await show(rel);
      const lenses = await waitFor(async () => {
        const l = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', doc.uri, 100);
        return l && l.some((x) => x.command && x.command.command.startsWith('newt.')) ? l : null;
      }, 30000) || [];
      const actual = lenses.filter((l) => l.command).map((l) => ({
        line: l.range.start.line, title: l.command.title, command: l.command.command, arguments: l.command.arguments,
      }));
      lensesByFile[rel] = actual;
      const problems = [];
      for (const w of wantLenses) {
        const here = actual.filter((a) => a.line === w.line || (a.arguments && a.arguments[1] && a.arguments[1].line === w.line));
        for (const cmd of w.absent || []) {
          if (here.some((a) => a.command === cmd)) problems.push(`a ${cmd} lens on ${w.kernel}, which has nothing to tune`);
        }
        w.commands.forEach((cmd, i) => {
          const l = here.find((a) => a.command === cmd);
          if (!l) return problems.push(`no ${cmd} lens for ${w.kernel}`);
          if (!l.title.includes(w.titles[i])) problems.push(`${cmd} lens titled ${JSON.stringify(l.title)}`);
          const [u, p] = l.arguments || [];
          if (String(u) !== doc.uri.toString() || !p || p.line !== w.line || p.character !== w.character) {
            problems.push(`${cmd} lens arguments ${JSON.stringify(l.arguments)}`);
          }
        });
      }
      return { ok: problems.length === 0, problems, actual };
    });
  }

  const lens = (rel, cmd) => (lensesByFile[rel] || []).find((l) => l.command === cmd);

  // -- Compile (code lens) ------------------------------------------------------------------------
  for (const k of expect.compile) {
    await check(`compile ${k.kernel} (${k.file}) from its code lens`, async () => {
      await show(k.file);
      const l = lens(k.file, 'newt.compileKernel');
      const args = l ? l.arguments : [uriOf(k.file).toString(), { line: k.line, character: k.character }];
      const compiled = await vscode.commands.executeCommand('newt.compileKernel', ...args);
      const ok = !!compiled && compiled.kernel === k.kernel && Number.isInteger(compiled.n_regs) && compiled.n_regs > 0;
      return { ok, viaLens: !!l, result: compiled, lastCommandError: api.lastCommandError };
    }, 240000);
  }
  const c = expect.compile[0];

  // -- Show CUDA / PTX / SASS: read-only virtual documents with their languages --------------------
  const shows = [
    ['newt.showCuda', 'cuda-cpp', /__global__|extern "C"/],
    ['newt.showPtx', 'ptx', /\.entry|\.version/],
    ['newt.showSass', 'cuda-sass', /\b(EXIT|STG|LDG)\b/],
  ];
  for (const [cmd, lang, pattern] of shows) {
    await check(`${cmd} opens a ${lang} document`, async () => {
      await show(c.file);
      const uri = await vscode.commands.executeCommand(cmd, uriOf(c.file).toString(), { line: c.line, character: c.character });
      if (!uri) return { ok: false, lastCommandError: api.lastCommandError };
      const doc = await waitFor(() => vscode.workspace.textDocuments.find((d) => d.uri.toString() === vscode.Uri.parse(uri).toString()), 10000);
      if (!doc) return { ok: false, uri, why: 'document not open' };
      const text = doc.getText();
      return { ok: doc.uri.scheme === 'newt' && doc.languageId === lang && pattern.test(text), uri, languageId: doc.languageId, chars: text.length, head: text.slice(0, 400) };
    }, 180000);
  }

  // -- Compile on every kernel of examples/ and on a Triton file, from their code lenses; where the file
  //    only has run-time values, Newt asks in a quick pick and the probe accepts the suggested value
  //    (what pressing Enter does) ------------------------------------------------------------------
  const pyFiles = (rel) => (fs.existsSync(uriOf(rel).fsPath)
    ? fs.readdirSync(uriOf(rel).fsPath).filter((f) => f.endsWith('.py')).sort().map((f) => `${rel}/${f}`) : []);
  // newt kernels, and deuteron's Helion-style tile kernels (traced to newt by the server, then compiled)
  const exampleFiles = [...pyFiles('examples'), ...pyFiles('examples/deuteron')];
  for (const rel of [...exampleFiles, 'kernels/triton_add.py']) {
    await check(`compile every kernel of ${rel}`, async () => {
      const { doc } = await show(rel);
      const lenses = await waitFor(async () => {
        const l = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', doc.uri, 100);
        return l && l.some((x) => x.command && x.command.command === 'newt.compileKernel') ? l : null;
      }, 30000) || [];
      const compiles = lenses.filter((l) => l.command && l.command.command === 'newt.compileKernel');
      const results = [];
      for (const l of compiles) {
        let done = false;
        const run = Promise.resolve(vscode.commands.executeCommand('newt.compileKernel', ...l.command.arguments))
          .finally(() => { done = true; });
        let accepted = 0;
        while (!done) {
          await sleep(400);
          if (!done) {
            await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
            accepted++;
          }
        }
        const r = await run;
        results.push({ line: l.command.arguments[1].line, kernel: r && r.kernel, n_regs: r && r.n_regs,
          assumed: r && r.assumed, accepted, error: r ? undefined : api.lastCommandError });
      }
      const ok = compiles.length > 0 && results.every((r) => Number.isInteger(r.n_regs) && r.n_regs > 0);
      return { ok, kernels: compiles.length, results };
    }, 600000);
  }

  // -- Compile from the palette: the kernel at the cursor --------------------------------------------
  const p = expect.palette;
  await check(`palette compile at the cursor picks ${p.kernel}`, async () => {
    const { editor } = await show(p.file);
    editor.selection = new vscode.Selection(p.cursorLine, 4, p.cursorLine, 4);
    const r = await vscode.commands.executeCommand('newt.compileKernel');
    return { ok: !!r && r.kernel === p.kernel && r.n_regs > 0, result: r, lastCommandError: api.lastCommandError };
  }, 180000);

  // -- Verify (code lens): through the interpreter, no GPU ------------------------------------------
  for (const v of expect.verify) {
    await check(`verify ${v.kernel} (${v.file}) runs on the ${v.device}`, async () => {
      await show(v.file);
      const l = lens(v.file, 'newt.verifyKernel');
      const args = l ? l.arguments : [uriOf(v.file).toString(), { line: v.line, character: v.character }];
      const r = await vscode.commands.executeCommand('newt.verifyKernel', ...args);
      const ok = !!r && r.kernel === v.kernel && r.device === v.device && r.ok === true && Array.isArray(r.cases) && r.cases.length > 0;
      return { ok, viaLens: !!l, result: r, lastCommandError: api.lastCommandError };
    }, 300000);
  }

  // -- Autotune (code lens): every config timed, progress reported through $/progress ------------------
  const a = expect.autotune;
  await check(`autotune ${a.kernel} with progress`, async () => {
    const { doc } = await show(a.file);
    const lenses = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', doc.uri, 100);
    const l = (lenses || []).find((x) => x.command && x.command.command === 'newt.autotuneKernel');
    const args = l ? l.command.arguments : [doc.uri.toString(), { line: a.line, character: a.character }];
    const r = await vscode.commands.executeCommand('newt.autotuneKernel', ...args);
    const progress = api.lastAutotuneProgress;
    const kinds = progress.map((x) => x.kind);
    const timed = r && Array.isArray(r.results) ? r.results.filter((x) => typeof x.ms === 'number').length : 0;
    const ok = !!r && r.kernel === a.kernel && !!r.best && timed === a.configs &&
      kinds[0] === 'begin' && kinds[kinds.length - 1] === 'end' && kinds.filter((k) => k === 'report').length >= a.configs;
    return { ok, viaLens: !!l, result: r, progress, lastCommandError: api.lastCommandError };
  }, 400000);

  // -- settings reach the server: newt.target (live) and a restart --------------------------------------
  await check('newt.target setting changes the compile target', async () => {
    const config = vscode.workspace.getConfiguration('newt');
    await config.update('target', 'sm_80', vscode.ConfigurationTarget.Global);
    try {
      await sleep(500);
      const r = await vscode.commands.executeCommand('newt.compileKernel', uriOf(c.file).toString(), { line: c.line, character: c.character });
      return { ok: !!r && r.target === 'sm_80' && r.n_regs > 0, target: r && r.target, n_regs: r && r.n_regs };
    } finally {
      await config.update('target', undefined, vscode.ConfigurationTarget.Global);
    }
  }, 180000);

  // the generated documents the Show checks opened: a restart refreshes them, never blanks them
  const generated = () => vscode.workspace.textDocuments.filter((d) => d.uri.scheme === 'newt' && !d.isClosed);
  const before = generated().map((d) => ({ uri: d.uri.toString(), chars: d.getText().length }));
  await check('Newt: Restart Server brings the server and its diagnostics back', async () => {
    const restarted = await vscode.commands.executeCommand('newt.restartServer');
    const { doc } = await show('kernels/broken.py');
    const d = await waitFor(() => vscode.languages.getDiagnostics(doc.uri).filter((x) => x.source === 'newt').length >= 3, 60000);
    return { ok: restarted === true && api.state === 'running' && !!d, restarted, state: api.state };
  }, 120000);
  await check('open generated documents keep their code across the restart (no "worker killed", no error text)', async () => {
    await sleep(3000); // the refresh after the restart regenerates them
    const failed = /^\/\/ Newt: (could not generate this document|the language server is not running)|worker killed/;
    const after = generated().map((d) => ({ uri: d.uri.toString(), chars: d.getText().length, head: d.getText().slice(0, 160) }));
    const lost = before.filter((b) => !after.some((a) => a.uri === b.uri && a.chars > 0 && !failed.test(a.head)));
    return { ok: before.length >= 1 && lost.length === 0, before, after, lost };
  }, 60000);

  // -- an interpreter without newt: a clear message naming it and the fix, then back ----------------------
  const bad = process.env.NEWT_E2E_BAD_PYTHON;
  if (bad) {
    await check('an interpreter without newt gets a message naming it and the fix', async () => {
      const config = vscode.workspace.getConfiguration('newt');
      const good = config.inspect('interpreter').globalValue;
      await config.update('interpreter', bad, vscode.ConfigurationTarget.Global);
      let failed;
      try {
        failed = await waitFor(() => (api.state === 'failed' ? api.lastError : null), 60000);
      } finally {
        await config.update('interpreter', good, vscode.ConfigurationTarget.Global);
      }
      const back = await waitFor(() => api.state === 'running', 60000);
      const msg = failed || '';
      const ok = msg.includes(bad) && /No module named 'lsp_server'/.test(msg) && msg.includes(`${bad} -m pip install -e`) &&
        /unrelated PyPI package/.test(msg) &&
        msg.includes('newt.interpreter') && !!back;
      return { ok, message: msg, restoredState: api.state };
    }, 180000);
  }

  // -- performance figures as you type, and source <-> SASS (issue 23) -------------------------------------
  if (expect.perf) await perfChecks(expect.perf, show, api);

  // -- leave the workbench showing a diagnostic and its hover for the screenshot ----------------------
  const s = expect.screenshot;
  await check('screenshot setup: problems panel and a hover on a diagnostic', async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('notifications.clearAll');
    await vscode.commands.executeCommand('workbench.actions.view.problems');
    const { editor } = await show(s.file, { viewColumn: vscode.ViewColumn.One });
    // the hover is to show the diagnostic: wait until the reopened file has its diagnostics again
    const diags = await waitFor(() => vscode.languages.getDiagnostics(editor.document.uri).length > 0, 30000);
    await vscode.commands.executeCommand('workbench.action.focusActiveEditorGroup');
    editor.selection = new vscode.Selection(s.line, s.character, s.line, s.character);
    editor.revealRange(new vscode.Range(s.line, 0, s.line, 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    await sleep(500);
    await vscode.commands.executeCommand('editor.action.showHover');
    return { ok: !!diags, diagnostics: vscode.languages.getDiagnostics(editor.document.uri).length };
  });
}

// Restricted Mode: the static features work, the commands that run code explain why they do not.
async function runRestricted() {
  const expect = JSON.parse(fs.readFileSync(EXPECT, 'utf8'));
  const ws = vscode.workspace.workspaceFolders[0].uri;
  const uriOf = (rel) => vscode.Uri.joinPath(ws, ...rel.split('/'));
  let api;
  await check('workspace is in Restricted Mode', async () => ({ ok: vscode.workspace.isTrusted === false }));
  // a plain Python file activates the extension but does not start the server
  await check('a Python file without newt does not start the server', async () => {
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uriOf('plain.py')), { preview: false });
    const ext = await waitFor(() => vscode.extensions.getExtension(NEWT_ID), 30000);
    await waitFor(() => ext.isActive, 30000);
    await sleep(3000);
    return { ok: ext.isActive && ext.exports.state === 'stopped', active: ext.isActive, state: ext.exports && ext.exports.state };
  });
  const doc = await vscode.workspace.openTextDocument(uriOf('kernels/broken.py'));
  await vscode.window.showTextDocument(doc, { preview: false });
  await check('the server starts in Restricted Mode', async () => {
    const ext = await waitFor(() => vscode.extensions.getExtension(NEWT_ID), 30000);
    api = await ext.activate();
    return { ok: (await api.ready()) && api.state === 'running', state: api.state, lastError: api.lastError };
  });
  if (!api || api.state !== 'running') return;
  const n011 = expect.diagnostics['kernels/broken.py'][0];
  await check('diagnostics still appear', async () => {
    const d = await waitFor(() => vscode.languages.getDiagnostics(doc.uri).find((x) => x.source === 'newt' && codeOf(x) === n011.code), 60000);
    return { ok: !!d && d.range.start.line === n011.line, line: d && d.range.start.line };
  });
  const c = expect.compile[0];
  const args = [uriOf(c.file).toString(), { line: c.line, character: c.character }];
  for (const cmd of ['newt.compileKernel', 'newt.verifyKernel', 'newt.autotuneKernel']) {
    await check(`${cmd} explains that it needs trust`, async () => {
      const r = await vscode.commands.executeCommand(cmd, ...args);
      const e = api.lastCommandError;
      return { ok: r === undefined && !!e && e.code === -32001, result: r, lastCommandError: e };
    });
  }
  await check('the server refuses newt.compile itself (-32001)', async () => {
    try {
      const r = await vscode.commands.executeCommand('newt.compile', { uri: args[0], position: args[1] });
      return { ok: false, result: r };
    } catch (e) {
      const msg = String((e && e.message) || e);
      return { ok: /trust/i.test(msg), message: msg, code: e && e.code };
    }
  });
}

function deactivate() {}
module.exports = { activate, deactivate };
