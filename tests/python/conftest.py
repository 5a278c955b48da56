"""Makes the Meson build directory's extension modules importable (VTPU_BUILD_DIR, default ./build)."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("VTPU_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(BUILD / "torch_bridge"))
