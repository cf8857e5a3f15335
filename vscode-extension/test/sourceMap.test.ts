import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SourceMapIndex } from '../src/core/sourceMap';

describe('source map of a generated view', () => {
  const m = new SourceMapIndex('file:///ws/k.py', [[10, 37], [12, 37], [11, 37], [20, 35], [30, 37]]);
  it('lists the view lines of a source line, sorted', () => {
    assert.deepEqual(m.viewLines(37), [10, 11, 12, 30]);
    assert.deepEqual(m.viewLines(35), [20]);
    assert.deepEqual(m.viewLines(1), []);
  });
  it('finds the source line of a view line', () => {
    assert.equal(m.sourceLine(12), 37);
    assert.equal(m.sourceLine(20), 35);
    assert.equal(m.sourceLine(0), undefined);
  });
  it('merges consecutive lines into runs', () => {
    assert.deepEqual(SourceMapIndex.runs([10, 11, 12, 30]), [[10, 12], [30, 30]]);
    assert.deepEqual(SourceMapIndex.runs([]), []);
  });
});
