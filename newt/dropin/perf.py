"""``triton.testing.perf_report`` / ``Benchmark`` / ``Mark`` for the drop-in mode.

``@perf_report(Benchmark(x_names=[...], x_vals=[...], line_arg=..., line_vals=[...], line_names=[...],
ylabel=..., plot_name=..., args={...}))`` turns a function into a ``Mark``; ``mark.run(print_data=True,
show_plots=False, save_path=None)`` calls the function for every x value and line and prints (and, with
``save_path``, writes as CSV) one table per benchmark.  A function may return one number or
``(value, min, max)``; the table holds the first.  Plots are drawn only when matplotlib is installed and
``show_plots`` or ``save_path`` asks for them.
"""

from __future__ import annotations

import os

__all__ = ["Benchmark", "Mark", "perf_report"]


class Benchmark:
    """One benchmark table: the x axis (``x_names`` take ``x_vals``), one line per ``line_vals`` value
    passed as ``line_arg``, fixed ``args``."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args=None, xlabel="",
                 ylabel="", x_log=False, y_log=False, styles=None):
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.x_log = x_log
        self.y_log = y_log
        self.styles = styles


class Mark:
    """What ``perf_report`` returns: ``run()`` measures, ``fn`` is the function."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _run(self, bench: Benchmark, print_data: bool, save_path: str | None, **kwargs) -> list[list]:
        rows = []
        for x in bench.x_vals:
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            xargs = dict(zip(bench.x_names, xs))
            row = list(xs)
            for lv in bench.line_vals:
                ret = self.fn(**xargs, **{bench.line_arg: lv}, **bench.args, **kwargs)
                row.append(ret[0] if isinstance(ret, (tuple, list)) else ret)
            rows.append(row)
        header = list(bench.x_names) + list(bench.line_names)
        if print_data:
            print(f"{bench.plot_name}:")
            print("  ".join(f"{h:>14}" for h in header))
            for r in rows:
                print("  ".join(f"{v:>14.6g}" if isinstance(v, (int, float)) else f"{v!s:>14}" for v in r))
        if save_path:
            os.makedirs(save_path, exist_ok=True)
            with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w", encoding="utf-8") as f:
                f.write(",".join(header) + "\n")
                for r in rows:
                    f.write(",".join(str(v) for v in r) + "\n")
        return rows

    def run(self, show_plots=False, print_data=False, save_path=None, return_df=False, **kwargs):
        benches = self.benchmarks if isinstance(self.benchmarks, (list, tuple)) else [self.benchmarks]
        out = [self._run(b, print_data, save_path, **kwargs) for b in benches]
        if return_df:
            return out if isinstance(self.benchmarks, (list, tuple)) else out[0]
        return None


def perf_report(benchmarks):
    """Decorator: ``@perf_report(Benchmark(...))`` (or a list of them) makes the function a ``Mark``."""
    return lambda fn: Mark(fn, benchmarks)
