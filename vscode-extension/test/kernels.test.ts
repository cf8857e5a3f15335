import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findKernels, kernelAt, usesNewt } from '../src/core/kernels';

describe('usesNewt', () => {
  it('finds the imports of newt and deuteron', () => {
    for (const src of ['import newt\n', 'import newt.language as nl\n', 'from newt import jit\n', 'from newt.language import core\n',
      'import torch, newt\n', 'import deuteron as dt\n', 'import triton\n', 'import triton.language as tl\n', 'from deuteron import kernel\n', 'x = 1\nif True:\n    import newt\n']) {
      assert.ok(usesNewt(src), src);
    }
  });
  it('ignores lookalikes', () => {
    for (const src of ['import newton\n', 'from newtonian import x\n', '# import newt\n', 'x = "import newt"\n', 'import torch\n', '']) {
      assert.ok(!usesNewt(src), src);
    }
  });
});

const FILE = `import newt
import newt.language as nl
import deuteron as dt


def helper(x):
    return x


@newt.autotune(
    configs=[
        newt.Config({"BLOCK": 128}, num_warps=4),

        newt.Config({"BLOCK": 256}, num_warps=8),
    ],
    key=["n"],
)
@newt.jit
def add_kernel(x_ptr, y_ptr,
               n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)

    # a comment at column 0 inside the body
    nl.store(x_ptr, pid)


@newt.jit(do_not_specialize=["n"])
def other(x_ptr, n):
    pass

@dt.kernel
def matmul(x, y):
    for tile in dt.tile(x.shape):
        pass
    return x


class K:
    @newt.jit
    def method_kernel(self):
        pass
`;

describe('findKernels', () => {
  const ks = findKernels(FILE);
  it('finds every decorated kernel with its name position and extent', () => {
    assert.deepEqual(ks.map((k) => [k.name, k.kind, k.position.line, k.position.character, k.firstLine, k.lastLine]), [
      ['add_kernel', 'jit', 18, 4, 9, 23],
      ['other', 'jit', 27, 4, 26, 28],
      ['matmul', 'deuteron', 31, 4, 30, 34],
      ['method_kernel', 'jit', 39, 8, 38, 40],
    ]);
  });
  it('skips plain functions', () => {
    assert.ok(!ks.some((k) => k.name === 'helper'));
  });
  it('handles CRLF line endings', () => {
    assert.deepEqual(findKernels(FILE.replace(/\n/g, '\r\n')).map((k) => k.position.line), [18, 27, 31, 39]);
  });
});

describe('kernelAt', () => {
  const ks = findKernels(FILE);
  it('picks the kernel containing the cursor, including its decorators and signature', () => {
    assert.equal(kernelAt(ks, 21, undefined)?.name, 'add_kernel');
    assert.equal(kernelAt(ks, 11, undefined)?.name, 'add_kernel'); // inside the autotune configs
    assert.equal(kernelAt(ks, 19, undefined)?.name, 'add_kernel'); // the signature's second line
    assert.equal(kernelAt(ks, 33, undefined)?.name, 'matmul');
  });
  it('finds nothing outside kernels', () => {
    assert.equal(kernelAt(ks, 5, undefined), undefined);
    assert.equal(kernelAt(ks, 25, undefined), undefined);
  });
  it('lets the server\'s code lenses decide which functions are kernels', () => {
    assert.equal(kernelAt(ks, 33, [{ line: 18, character: 4 }]), undefined);
    assert.equal(kernelAt(ks, 21, [{ line: 18, character: 4 }])?.name, 'add_kernel');
    // lenses that match nothing the scan found: fall back to the scan
    assert.equal(kernelAt(ks, 33, [{ line: 2, character: 0 }])?.name, 'matmul');
  });
});
