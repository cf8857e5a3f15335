import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServerLogParser } from '../src/core/serverLog';

describe('server stderr lines', () => {
  it('maps Python logging records to levels and drops their timestamp', () => {
    const p = new ServerLogParser();
    assert.deepEqual(p.parse('2026-11-30 05:08:45,988 INFO newt-lsp: newt-lsp 0.1.0 for code-server'),
      { level: 'info', text: 'newt-lsp: newt-lsp 0.1.0 for code-server' });
    assert.deepEqual(p.parse('2026-11-30 05:08:45,988 WARNING newt-lsp: ignoring setting'), { level: 'warn', text: 'newt-lsp: ignoring setting' });
    assert.deepEqual(p.parse('DEBUG:newt-lsp:analysis took 3 ms'), { level: 'debug', text: 'newt-lsp:analysis took 3 ms' });
    assert.deepEqual(p.parse('2026-11-30 05:08:45.1 CRITICAL boom'), { level: 'error', text: 'boom' });
  });
  it('keeps the level of the record for continuation lines, and starts at error', () => {
    const p = new ServerLogParser();
    assert.equal(p.parse('Traceback (most recent call last):').level, 'error');
    p.parse('2026-11-30 05:08:45,988 INFO newt-lsp: worker output:');
    assert.deepEqual(p.parse('  some detail'), { level: 'info', text: '  some detail' });
    assert.equal(p.parse('2026-11-30 05:08:45,988 ERROR newt-lsp: failed').level, 'error');
    assert.equal(p.parse('Traceback (most recent call last):').level, 'error');
  });
  it('does not mistake words in a message for a level', () => {
    const p = new ServerLogParser();
    assert.deepEqual(p.parse('INFORMATION is not a level'), { level: 'error', text: 'INFORMATION is not a level' });
  });
});
