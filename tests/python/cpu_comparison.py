"""One way for tests to check an op and its gradients against the CPU: run it on copies of the
inputs on each device, back-propagate a fixed weighted sum of the output (weights spread over
[-1, 1], so every element's gradient counts and none cancels by symmetry), and compare the output
and every input's gradient."""
import torch


def output_and_gradients(fn, inputs, device):
    """fn(*inputs) on `device`, detached, and the gradients of its floating inputs."""
    moved = [x.to(device).detach().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*moved)
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)).sum().backward()
    return [out.detach().cpu()] + [x.grad.cpu() for x in moved if x.requires_grad]


def assert_matches_cpu(fn, *inputs, **tolerance):
    torch.testing.assert_close(output_and_gradients(fn, inputs, "tpu"), output_and_gradients(fn, inputs, "cpu"),
                               **tolerance)
