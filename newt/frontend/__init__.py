"""The newt front end: Python source of a kernel -> typed tile IR + diagnostics.

It reads source text only; it never imports or runs the user's module.  Callers read files through
``Analyzer(cache=...).analyze(text, path)`` (``newt/frontend/analyzer.py``) and compile one specialization
with ``build_ir``.
"""

from newt.diagnostics import CODES, CompilationError, Diagnostic, Severity, Span, render  # noqa: F401

from . import rules  # noqa: F401  (the type rules of the nl.* builtins register into ops.RULES)
from .analyzer import AnalysisCache, Analyzer, analyze_source  # noqa: F401
from .check import FileAnalysis, KernelAnalysis, SpecResult, build_ir, build_specialization  # noqa: F401

# the host side of a file (launches, their tensors' shapes and dtypes, followed through the host code without
# running it): what other kernel kinds (deuteron) read for checks with the file's own shapes
from .hostshapes import CallLaunch, HostEval, TensorFact, call_launches  # noqa: F401
from .hostvalues import example_launches, host_index  # noqa: F401
from .kinds import (  # noqa: F401
    load_installed_kinds,
    register_kernel_kind,
    register_module_alias,
    unregister_kernel_kind,
)
