#!/usr/bin/env python3
"""Prints what Meson needs to build against the installed torch: include dirs, lib dir, ABI flag."""
import sys

import torch
from torch.utils import cpp_extension

what = sys.argv[1]
if what == "includes":
    print("\n".join(cpp_extension.include_paths()))
elif what == "libdir":
    print(cpp_extension.library_paths()[0])
elif what == "abi":
    print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
elif what == "version":
    print(torch.__version__)
