import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { constexprItems, missingConstexprs, OTHER_VALUE, parseConstexprValue } from '../src/core/constexprs';

describe('constexprs the file does not say', () => {
  it('recognizes the server\'s error data', () => {
    assert.equal(missingConstexprs(undefined), undefined);
    assert.equal(missingConstexprs({ kind: 'spec' }), undefined);
    assert.equal(missingConstexprs({ missing: [] }), undefined);
    assert.deepEqual(missingConstexprs({ missing: ['BLOCK'] })?.missing, ['BLOCK']);
  });
  it('offers the suggestions first, the first marked, then another value', () => {
    const items = constexprItems('CAUSAL', { missing: ['CAUSAL'], suggestions: { CAUSAL: [false, true] } });
    assert.deepEqual(items.map((i) => i.label), ['False', 'True', OTHER_VALUE]);
    assert.equal(items[0].description, 'suggested');
    assert.equal(constexprItems('B', { missing: ['B'] })[0].label, '16');
  });
  it('parses typed values', () => {
    assert.equal(parseConstexprValue(' 128 '), 128);
    assert.equal(parseConstexprValue('1e-5'), 1e-5);
    assert.equal(parseConstexprValue('True'), true);
    assert.equal(parseConstexprValue('x'), undefined);
    assert.equal(parseConstexprValue(''), undefined);
  });
});
