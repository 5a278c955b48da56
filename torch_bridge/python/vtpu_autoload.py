"""torch's device-backend autoload hook for vtpu (entry point group "torch.backends").

A separate top-level module, so that a missing build (vtpu._C not compiled yet, e.g. while Meson
configures) warns instead of breaking every `import torch`. TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns autoloading off.
"""
import warnings


def autoload() -> None:
    try:
        import vtpu  # noqa: F401  (registers device "tpu")
    except ImportError as err:
        warnings.warn(f"vtpu: device 'tpu' not loaded ({err})", stacklevel=2)
