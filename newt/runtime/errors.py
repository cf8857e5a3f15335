"""Errors raised by the runtime (compile failures are ``newt.CompilationError``)."""

from __future__ import annotations


class OutOfResources(RuntimeError):
    """A kernel needs more of a resource (shared memory, registers) than the target or device has.

    The autotuner skips configs that raise it.
    """

    def __init__(self, kernel: str, resource: str, required: int, limit: int, hint: str | None = None):
        self.kernel = kernel
        self.resource = resource
        self.required = required
        self.limit = limit
        msg = f"{kernel}: out of {resource}: required {required}, hardware limit {limit}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


class LaunchError(RuntimeError):
    """``cuLaunchKernel`` (or loading the kernel's module) returned an error.

    ``code`` is the CUDA driver error name (``CUDA_ERROR_INVALID_VALUE`` ...), ``kernel``
    the kernel's name.  ``sticky`` is True for errors that poison the CUDA context
    (an earlier kernel faulted): the process must be restarted to use the GPU again.
    """

    def __init__(self, message: str, kernel: str | None = None, code: str | None = None, sticky: bool = False):
        self.kernel = kernel
        self.code = code
        self.sticky = sticky
        super().__init__(message)


class KernelFaultError(LaunchError):
    """A kernel faulted on the device (illegal address, ``device_assert``, trap ...).

    Kernels run asynchronously, so the fault is seen at the next synchronisation
    (``newt.runtime.synchronize()``) or the next newt launch; the message names
    the newt kernel(s) launched since the last successful synchronisation.  Set
    ``NEWT_LAUNCH_BLOCKING=1`` to synchronise after every launch and pinpoint it.
    """
