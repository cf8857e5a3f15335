import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KIND_BY_COMMAND, languageFor, toLspPosition, virtualQuery } from '../src/core/uris';

describe('virtual documents', () => {
  const all = new Set(['cuda-cpp', 'cpp', 'ptx', 'cuda-sass', 'newt-ir', 'plaintext', 'python']);
  it('maps the server\'s language ids to the ones this extension highlights', () => {
    assert.equal(languageFor('cuda-cpp', all), 'cuda-cpp');
    assert.equal(languageFor('ptx', all), 'ptx');
    assert.equal(languageFor('sass', all), 'cuda-sass');
    assert.equal(languageFor('plaintext', all), 'plaintext');
    assert.equal(languageFor(undefined, all), 'plaintext');
  });
  it('falls back to C++ for CUDA and to plain text for unknown languages', () => {
    assert.equal(languageFor('cuda-cpp', new Set(['cpp', 'plaintext'])), 'cpp');
    assert.equal(languageFor('cuda-cpp', new Set(['plaintext'])), 'plaintext');
    assert.equal(languageFor('klingon', all), 'plaintext');
  });
  it('reads the query of a newt: URI', () => {
    const q = virtualQuery('?src=file%3A%2F%2F%2Fws%2Fkernels%2Fadd.py&spec=0&kind=cuda');
    assert.deepEqual(q, { src: 'file:///ws/kernels/add.py', spec: '0', kind: 'cuda' });
    assert.deepEqual(virtualQuery('src=%E0%A4%A&kind'), { src: '%E0%A4%A', kind: '' });
  });
  it('knows which kind each show command asks for', () => {
    assert.deepEqual(KIND_BY_COMMAND, { 'newt.showCuda': 'cuda', 'newt.showPtx': 'ptx', 'newt.showSass': 'sass', 'newt.showIr': 'ir' });
  });
  it('accepts code-lens positions and rejects anything else', () => {
    assert.deepEqual(toLspPosition({ line: 3, character: 4 }), { line: 3, character: 4 });
    assert.equal(toLspPosition({ line: -1, character: 0 }), undefined);
    assert.equal(toLspPosition('3:4'), undefined);
    assert.equal(toLspPosition(undefined), undefined);
  });
});
