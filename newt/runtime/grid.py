"""Launch options and grids: the checks every launch path shares (a leaf of the runtime).

``check_options`` validates ``num_warps`` / ``num_stages`` / ``num_ctas``; ``normalize_grid`` turns a
tuple, an int or a ``callable(meta)`` into the launch grid; ``grid_limit_error`` / ``check_grid`` hold
CUDA's grid limits for the paths that do not reach the driver (the interpreter, no GPU).  The JIT
(``jit.py``), ``newt.compile`` and ``CompiledKernel.run`` (``compiler.py``) and the driver import them from
here, so none of them imports another for these.
"""

from __future__ import annotations

from .errors import LaunchError

#: CUDA's grid limits (x, y, z): 2**31 - 1 blocks in x, 65535 in y and z
GRID_LIMITS = (2147483647, 65535, 65535)


def check_options(name, num_warps, num_stages, num_ctas, maxnreg=None):
    """``ValueError`` naming the kernel for launch options newt cannot honour."""
    if maxnreg is not None and (not isinstance(maxnreg, int) or isinstance(maxnreg, bool) or not 1 <= maxnreg <= 255):
        raise ValueError(f"{name}: maxnreg must be an int from 1 to 255 (registers per thread), got {maxnreg!r}")
    if not isinstance(num_warps, int) or isinstance(num_warps, bool) or not 1 <= num_warps <= 32 \
            or num_warps & (num_warps - 1):
        raise ValueError(f"{name}: num_warps must be a power of two from 1 to 32, got {num_warps!r}")
    if not isinstance(num_stages, int) or isinstance(num_stages, bool) or num_stages < 1:
        raise ValueError(f"{name}: num_stages must be an int >= 1, got {num_stages!r}")
    if num_ctas != 1:
        raise ValueError(f"{name}: num_ctas={num_ctas!r}: thread-block clusters are not supported (use num_ctas=1)")


def normalize_grid(grid, meta, name: str):
    """``(gx, gy, gz)`` from a tuple/list of 1-3 ints, an int, or ``callable(meta)``.

    A callable's tuple of 1-3 values is returned as it is, like a tuple grid given directly: the
    launcher unpacks it and rejects values that are not non-negative ints."""
    if callable(grid):
        grid = grid(meta)
        if type(grid) is tuple and 0 < len(grid) < 4:  # the usual case; the launcher checks the values
            return grid
    return normalize_grid_value(grid, name)


def normalize_grid_value(grid, name: str):
    """``(gx, gy, gz)`` from a grid that is not callable (or a callable's result that is not a tuple of 1-3
    values): an int, a tuple or list of ints; ``TypeError`` naming the kernel otherwise.  The compiled
    dispatcher (``_launch.c``) calls this after calling a grid callable itself."""
    if isinstance(grid, int):
        grid = (grid,)
    if grid is None:
        raise TypeError(f"{name}: no grid given: launch with {name}[grid](...) or {name}.run(..., grid=...)")
    try:
        g = tuple(grid)
    except TypeError:
        raise TypeError(f"{name}: the grid must be a tuple of 1 to 3 ints or a callable returning one, "
                        f"got {type(grid).__name__}") from None
    if not 1 <= len(g) <= 3:
        raise TypeError(f"{name}: the grid must have 1 to 3 dimensions, got {len(g)}: {g!r}")
    out = []
    for d in g:
        if hasattr(d, "__index__") and not isinstance(d, bool):
            out.append(int(d.__index__()))
        else:
            raise TypeError(f"{name}: grid dimensions must be ints, got {d!r} in {g!r}")
    while len(out) < 3:
        out.append(1)
    return tuple(out)


def grid_limit_error(name: str, grid) -> str | None:
    """The message for a grid of ints beyond CUDA's limits (or negative); None when it is valid."""
    for axis, (d, lim) in enumerate(zip(grid, GRID_LIMITS)):
        if type(d) is int and (d < 0 or d > lim):
            what = "negative" if d < 0 else f"above CUDA's limit of {lim} blocks in that dimension"
            return (f"{name}: invalid grid {tuple(grid)!r}: dimension {'xyz'[axis]} is {d}, {what}"
                    + ("" if d < 0 else " (split the work over more dimensions or loop inside the kernel)"))
    return None


def check_grid(grid, name: str):
    """The interpreter's and no-device paths' grid check: ``(gx, gy, gz)`` within CUDA's limits, as the GPU
    launcher checks them (``LaunchError`` otherwise)."""
    msg = grid_limit_error(name, grid)
    if msg:
        raise LaunchError(msg, kernel=name, code="CUDA_ERROR_INVALID_VALUE")
    return grid
