"""Exceptions raised by diffattn, grouped as the command-line tool groups its exit codes.

The core decides which code an error has and the message; each code has one class here, whose base
(and `exit_code`) is the CLI's class for that code (`diffattn_exit_code`; a test holds them equal).
"""

from __future__ import annotations


class DiffattnError(Exception):
    """Any error diffattn reports. `code` is the core's stable name, `exit_code` the CLI's status."""

    exit_code = 1

    def __init__(self, message: str, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


class UsageError(DiffattnError, ValueError):
    """Exit code 2: invalid configuration or usage (fix the request)."""

    exit_code = 2


class InvalidConfigError(UsageError):
    """A configuration value is malformed or inconsistent."""


class UnknownBackendError(UsageError):
    """A backend name that is not registered."""


class InvalidInputError(UsageError):
    """Arguments or tensors that do not describe a valid call."""


class CannotRunHereError(DiffattnError, RuntimeError):
    """Exit code 3: a valid request that this platform or build cannot run (choose another backend)."""

    exit_code = 3


class UnsupportedError(CannotRunHereError):
    """The platform or backend cannot run this request."""


class UnavailableError(CannotRunHereError):
    """A dependency (library, kernel build, device) is missing."""


class RuntimeFailure(DiffattnError, RuntimeError):
    """Exit code 1: a failure while running (CUDA) or a defect in diffattn."""


class CudaError(RuntimeFailure):
    """A CUDA or cuDNN call failed."""


class InternalError(RuntimeFailure):
    """A defect in diffattn; please report it with the message."""


BY_CODE: dict[str, type[DiffattnError]] = {
    "invalid_config": InvalidConfigError,
    "unknown_backend": UnknownBackendError,
    "invalid_input": InvalidInputError,
    "unsupported": UnsupportedError,
    "unavailable": UnavailableError,
    "cuda_error": CudaError,
    "internal": InternalError,
}
