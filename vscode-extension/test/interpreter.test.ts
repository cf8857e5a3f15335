import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  describeImportFailure,
  expandVariables,
  findOnPath,
  isNewtPyproject,
  lastErrorLine,
  launchOptions,
  newtLspInterpreter,
  newtLspOnPath,
  parseImportCheck,
  resolveInterpreter,
  ResolveInputs,
} from '../src/core/interpreter';

const files = new Set(['/usr/bin/python3', '/opt/py/bin/python3.12', '/ws/.venv/bin/python', '/home/u/bin/python']);
const base: ResolveInputs = {
  env: { PATH: '/home/u/nothing:/usr/bin:/opt/py/bin', HOME: '/home/u', VENV: '/ws/.venv' },
  platform: 'linux',
  homedir: '/home/u',
  workspaceFolder: '/ws',
  isExecutable: (f) => files.has(f),
};

describe('resolveInterpreter', () => {
  it('prefers the newt.interpreter setting, resolving a relative path against the first folder', async () => {
    const r = await resolveInterpreter({ ...base, setting: '.venv/bin/python', pythonExtension: async () => '/other/python' });
    assert.equal(r.command, '/ws/.venv/bin/python');
    assert.equal(r.source, 'setting');
    assert.match(r.description, /newt\.interpreter setting \(\.venv\/bin\/python\)/);
  });

  it('expands ${workspaceFolder}, ${env:...} and ~ in the setting', async () => {
    assert.equal((await resolveInterpreter({ ...base, setting: '${workspaceFolder}/.venv/bin/python' })).command, '/ws/.venv/bin/python');
    assert.equal((await resolveInterpreter({ ...base, setting: '${env:VENV}/bin/python' })).command, '/ws/.venv/bin/python');
    assert.equal((await resolveInterpreter({ ...base, setting: '~/bin/python' })).command, '/home/u/bin/python');
  });

  it('does not repeat an absolute path in the description', async () => {
    const r = await resolveInterpreter({ ...base, setting: '/ws/.venv/bin/python' });
    assert.deepEqual([r.command, r.description], ['/ws/.venv/bin/python', 'the newt.interpreter setting']);
  });

  it('looks a bare command of the setting up on PATH, and keeps it when it is not there', async () => {
    assert.equal((await resolveInterpreter({ ...base, setting: 'python3.12' })).command, '/opt/py/bin/python3.12');
    assert.equal((await resolveInterpreter({ ...base, setting: 'python9' })).command, 'python9');
  });

  it('uses the Python extension when the setting is empty', async () => {
    const r = await resolveInterpreter({ ...base, setting: '  ', pythonExtension: async () => '/conda/envs/k/bin/python' });
    assert.deepEqual([r.command, r.source], ['/conda/envs/k/bin/python', 'python-extension']);
  });

  it('falls back to python3 on PATH when the Python extension is absent, has no interpreter or throws', async () => {
    for (const pythonExtension of [undefined, async () => undefined, async () => { throw new Error('boom'); }]) {
      const r = await resolveInterpreter({ ...base, pythonExtension });
      assert.deepEqual([r.command, r.source, r.description], ['/usr/bin/python3', 'path', 'python3 on PATH']);
    }
  });

  it('returns the bare python3 when nothing is on PATH', async () => {
    const r = await resolveInterpreter({ ...base, env: { PATH: '/nowhere' } });
    assert.deepEqual([r.command, r.source], ['python3', 'path']);
  });

  it('uses a workspace .venv, then venv, before PATH, in a trusted workspace only', async () => {
    const have = new Set(['/usr/bin/python3', '/ws/.venv/bin/python', '/ws/venv/bin/python3']);
    const isExecutable = (f: string) => have.has(f);
    const r = await resolveInterpreter({ ...base, isExecutable, trusted: true });
    assert.deepEqual([r.command, r.source, r.description],
      ['/ws/.venv/bin/python', 'workspace-venv', "the workspace's virtual environment (.venv/bin/python)"]);
    have.delete('/ws/.venv/bin/python');
    assert.equal((await resolveInterpreter({ ...base, isExecutable, trusted: true })).command, '/ws/venv/bin/python3');
    // Restricted Mode: the workspace's binary is not run, and the result says why (the server logs it)
    const restricted = await resolveInterpreter({ ...base, isExecutable, trusted: false });
    assert.deepEqual(restricted.source, 'path');
    assert.match(restricted.note ?? '', /virtual environment \(venv\/bin\/python3\) is not used in Restricted Mode/);
    assert.equal((await resolveInterpreter({ ...base, isExecutable, trusted: true })).note, undefined);
    // the Python extension's choice comes first
    assert.equal((await resolveInterpreter({ ...base, isExecutable, trusted: true, pythonExtension: async () => '/x/py' })).command, '/x/py');
    const win = new Set(['C:\\ws\\.venv\\Scripts\\python.exe']);
    assert.equal((await resolveInterpreter({ ...base, platform: 'win32', workspaceFolder: 'C:\\ws', env: { Path: '' },
      isExecutable: (f) => win.has(f), trusted: true })).command, 'C:\\ws\\.venv\\Scripts\\python.exe');
  });

  it('uses python.exe and PATHEXT on Windows', async () => {
    const win = new Set(['C:\\Py\\python.exe']);
    const r = await resolveInterpreter({
      ...base, platform: 'win32', env: { Path: 'C:\\Windows;C:\\Py', PATHEXT: '.COM;.EXE' },
      isExecutable: (f) => win.has(f.replace(/\.exe$/i, '.exe')),
    });
    assert.equal(r.command, 'C:\\Py\\python.exe');
  });
});

describe('newt-lsp on PATH (an install from a wheel)', () => {
  const have = new Set(['/usr/bin/python3', '/opt/newt/bin/newt-lsp', '/opt/newt/bin/python3.12', '/opt/newt/bin/python']);
  const heads: Record<string, string> = { '/opt/newt/bin/newt-lsp': '#!/opt/newt/bin/python3.12\n# -*- coding: utf-8 -*-\nimport re\n' };
  const inputs: ResolveInputs = {
    ...base,
    env: { PATH: '/home/u/nothing:/opt/newt/bin:/usr/bin' },
    isExecutable: (f) => have.has(f),
    readHead: (f) => heads[f],
  };

  it('runs the server with the interpreter on newt-lsp\'s #! line, before python3 on PATH', async () => {
    const r = await resolveInterpreter(inputs);
    assert.deepEqual([r.command, r.source, r.description],
      ['/opt/newt/bin/python3.12', 'newt-lsp', 'the interpreter of newt-lsp on PATH (/opt/newt/bin/newt-lsp)']);
  });

  it('comes after the setting, the Python extension and a workspace venv', async () => {
    assert.equal((await resolveInterpreter({ ...inputs, setting: '/usr/bin/python3' })).source, 'setting');
    assert.equal((await resolveInterpreter({ ...inputs, pythonExtension: async () => '/x/py' })).source, 'python-extension');
    const withVenv = new Set([...have, '/ws/.venv/bin/python']);
    const r = await resolveInterpreter({ ...inputs, isExecutable: (f) => withVenv.has(f), trusted: true });
    assert.equal(r.source, 'workspace-venv');
    // ... and is what newtLspOnPath offers when that one cannot import the server
    assert.equal(newtLspOnPath(inputs)?.command, '/opt/newt/bin/python3.12');
    assert.equal(newtLspOnPath({ ...inputs, env: { PATH: '/usr/bin' } }), undefined);
  });

  it('reads pip\'s /bin/sh form for long paths, and falls back to a python beside the script', () => {
    const long = '/very/long/path/env/bin/python3';
    const sh = `#!/bin/sh\n'''exec' "${long}" "$0" "$@"\n' '''\n`;
    const exe = (f: string) => f === long || f === '/opt/newt/bin/python';
    assert.equal(newtLspInterpreter('/opt/newt/bin/newt-lsp', 'linux', exe, () => sh), long);
    // #!/usr/bin/env python3 names no environment: the python beside the script
    assert.equal(newtLspInterpreter('/opt/newt/bin/newt-lsp', 'linux', exe, () => '#!/usr/bin/env python3\n'), '/opt/newt/bin/python');
    assert.equal(newtLspInterpreter('/opt/newt/bin/newt-lsp', 'linux', exe, () => undefined), '/opt/newt/bin/python');
    assert.equal(newtLspInterpreter('/opt/newt/bin/newt-lsp', 'linux', () => false, () => sh), undefined);
    // Windows: newt-lsp.exe is a launcher; python.exe sits beside it in Scripts
    const win = (f: string) => f === 'C:\\env\\Scripts\\python.exe';
    assert.equal(newtLspInterpreter('C:\\env\\Scripts\\newt-lsp.exe', 'win32', win), 'C:\\env\\Scripts\\python.exe');
  });
});

describe('expandVariables / findOnPath', () => {
  it('leaves ${workspaceFolder} alone without a folder and expands a missing env var to empty', () => {
    assert.equal(expandVariables('${workspaceFolder}/p', { env: {}, homedir: '/h' }), '${workspaceFolder}/p');
    assert.equal(expandVariables('${env:NOPE}x', { env: {}, homedir: '/h' }), 'x');
    assert.equal(expandVariables('${workspaceFolderBasename}', { env: {}, homedir: '/h', workspaceFolder: '/a/proj' }), 'proj');
    assert.equal(expandVariables('${userHome}/x', { env: {}, homedir: '/h' }), '/h/x');
  });
  it('skips empty PATH entries and returns the first hit', () => {
    assert.equal(findOnPath('python3', { PATH: '::/usr/bin' }, 'linux', (f) => files.has(f)), '/usr/bin/python3');
    assert.equal(findOnPath('python3', {}, 'linux', () => true), undefined);
  });
});

describe('import check', () => {
  it('parses the executable and version the check prints', () => {
    assert.deepEqual(parseImportCheck({ status: 0, stdout: '/ws/.venv/bin/python\n3.11.9\n', stderr: '' }),
      { executable: '/ws/.venv/bin/python', version: '3.11.9' });
    assert.equal(parseImportCheck({ status: 1, stdout: '', stderr: 'x' }), undefined);
    assert.equal(parseImportCheck({ status: 0, stdout: '', stderr: '', timedOut: true }), undefined);
  });

  it('says which interpreter failed, why, and how to fix it', () => {
    const interp = { command: '/usr/bin/python3', source: 'path' as const, description: 'python3 on PATH' };
    const stderr = 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nModuleNotFoundError: No module named \'lsp_server\'\n';
    const f = describeImportFailure(interp, { status: 1, stdout: '', stderr });
    assert.match(f.message, /"import lsp_server" failed with \/usr\/bin\/python3 \(from python3 on PATH\): ModuleNotFoundError: No module named 'lsp_server'/);
    assert.match(f.message, /\/usr\/bin\/python3 -m pip install -e <path to your newt clone>/);
    assert.match(f.message, /"pip install newt" would fetch an unrelated PyPI package/);
    assert.match(f.message, /set "newt\.interpreter"/);
    assert.equal(f.installCommand, '/usr/bin/python3 -m pip install -e <path to your newt clone>');
    // in a newt checkout the command names it
    assert.equal(describeImportFailure(interp, { status: 1, stdout: '', stderr }, '/src/my newt').installCommand,
      '/usr/bin/python3 -m pip install -e "/src/my newt"');
    assert.match(f.detail, /stderr:\n {4}Traceback/);
  });

  it('explains a missing interpreter and quotes paths with spaces', () => {
    const interp = { command: '/My Envs/py', source: 'setting' as const, description: 'the newt.interpreter setting (/My Envs/py)' };
    const f = describeImportFailure(interp, { spawnError: { code: 'ENOENT', message: 'spawn ENOENT' }, status: null, stdout: '', stderr: '' });
    assert.match(f.message, /the interpreter \/My Envs\/py \(from the newt.interpreter setting \(\/My Envs\/py\)\) was not found/);
    assert.equal(f.installCommand, '"/My Envs/py" -m pip install -e <path to your newt clone>');
  });

  it('takes the last non-empty line of a traceback', () => {
    assert.equal(lastErrorLine('a\n\nImportError: x\n\n'), 'ImportError: x');
    assert.equal(lastErrorLine(''), '');
  });
});

describe('launchOptions', () => {
  it('starts in a neutral folder with PYTHONSAFEPATH so the workspace is not on sys.path', () => {
    const o = launchOptions('/ext/dist', { PATH: '/usr/bin', PYTHONPATH: '/lib' });
    assert.equal(o.cwd, '/ext/dist');
    assert.equal(o.env.PYTHONSAFEPATH, '1');
    assert.equal(o.env.PYTHONPATH, '/lib');
  });
  it('recognizes this project\'s pyproject.toml', () => {
    assert.ok(isNewtPyproject('[build-system]\nrequires = []\n\n[project]\nname = "newt"\nversion = "0.1"\n'));
    assert.ok(!isNewtPyproject('[project]\nname = "newt-other"\n'));
    assert.ok(!isNewtPyproject('[tool.x]\nname = "newt"\n[project]\nname = "y"\n'));
  });
});
