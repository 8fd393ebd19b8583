"""PyTorch baselines for the element-wise conformance kernels, written by hand: each takes the
positional arguments the module's make_inputs returns and returns the result in their dtype.
Used by tests/gpu/gpu_throughput.py through `dtx measure --baseline FILE:FUNCTION[:compile]`."""
import torch


def torch_geglu(A, B):
    return torch.nn.functional.gelu(A, approximate="tanh") * B


def torch_swish(A, beta):
    return A * torch.sigmoid(beta * A)


def torch_relu(A):
    return torch.relu(A)


def torch_add_out(A, B, alpha):
    return alpha * (A + B)


def torch_fma(a, b, s):
    return a * s + b
