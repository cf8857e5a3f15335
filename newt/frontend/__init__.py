"""The newt front end: Python source of a kernel -> typed tile IR + diagnostics.

It reads source text only; it never imports or runs the user's module.
"""

from .check import FileAnalysis, KernelAnalysis, SpecResult, analyze_source, build_ir  # noqa: F401
from .diagnostics import CODES, CompilationError, Diagnostic, Severity, Span, render  # noqa: F401
from .kinds import load_installed_kinds, register_kernel_kind  # noqa: F401
from . import rules  # noqa: F401,E402  (the type rules of the nl.* builtins register into ops.RULES)
