import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explicitTarget, RESTART_SETTINGS, toServerSettings } from '../src/core/settings';

function config(values: Record<string, unknown>) {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

describe('toServerSettings', () => {
  it('maps VS Code settings to the protocol object', () => {
    const s = toServerSettings(config({
      target: 'sm_80', diagnosticsOn: 'save', 'inlayHints.shapes': false, 'inlayHints.dtypes': true,
      perfDiagnostics: false, cacheDir: '${workspaceFolder}/.cache', logLevel: 'debug', interpreter: '/x/python',
    }), { trusted: true, python: '/x/python', expand: (p) => p.replace('${workspaceFolder}', '/ws') });
    assert.deepEqual(s, {
      trusted: true, target: 'sm_80', diagnosticsOn: 'save', inlayHints: { shapes: false, dtypes: true },
      perfDiagnostics: false, cacheDir: '/ws/.cache', python: '/x/python', logLevel: 'debug',
    });
  });

  it('uses the documented defaults for missing or invalid values', () => {
    const s = toServerSettings(config({ target: 'sm_75', diagnosticsOn: 'never', 'inlayHints.shapes': 'yes', cacheDir: '  ', logLevel: 'trace' }),
      { trusted: false });
    assert.deepEqual(s, {
      trusted: false, target: 'auto', diagnosticsOn: 'type', inlayHints: { shapes: true, dtypes: true },
      perfDiagnostics: true, cacheDir: null, python: null, logLevel: 'info',
    });
  });

  it('passes every documented target through', () => {
    for (const t of ['auto', 'sm_80', 'sm_89', 'sm_90a', 'sm_120']) {
      assert.equal(toServerSettings(config({ target: t }), { trusted: true }).target, t);
    }
  });

  it('gives no explicit target for auto', () => {
    assert.equal(explicitTarget('auto'), undefined);
    assert.equal(explicitTarget('sm_90a'), 'sm_90a');
  });

  it('restarts the server for the interpreter', () => {
    assert.ok(RESTART_SETTINGS.includes('newt.interpreter'));
  });
});
