"""What the 3-D ops composed of their 2-D forms (convolution_3d, pooling_3d) share: unbatched
inputs given a batch dim, sizes spread over three dims, and depth slices folded into the batch
so a 2-D op sees each as an image."""
from __future__ import annotations

import functools


def as_three(v) -> list[int]:
    """A size given once (an int or a one-element list) or per dim, as three."""
    v = [v] if isinstance(v, int) else list(v)
    return v * 3 if len(v) == 1 else v


def batched(op):
    """`op` on [n, c, d, h, w] also takes an unbatched [c, d, h, w] input, as torch's 3-D ops do."""
    @functools.wraps(op)
    def run(input, *args):
        if input.dim() != 4:
            return op(input, *args)
        result = op(input.unsqueeze(0), *args)
        return tuple(r.squeeze(0) for r in result) if isinstance(result, tuple) else result.squeeze(0)
    return run


def fold_depth(x):
    """[n, c, d, h, w] -> [n * d, c, h, w]: each depth slice an image of the batch."""
    n, c, d = x.shape[:3]
    return x.transpose(1, 2).reshape(n * d, c, *x.shape[3:])


def unfold_depth(y, n, d):
    """fold_depth's batch split back: [n * d, ...] -> [n, d, ...] (d given: an empty batch has no -1)."""
    return y.reshape(n, d, *y.shape[1:])
