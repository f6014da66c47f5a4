"""linalg.det's gradients at singular matrices.

The first derivative is the cofactor matrix at every rank: torch's under create_graph (its
SVD branch; without create_graph torch 2.13 solves with det(A) = 0 as the right-hand side and
gives 0 at an exactly singular matrix, [[1, 2], [2, 4]] included). Its own derivative
at a matrix of rank n - 2 (the 2 x 2 zero matrix, diag(1, 0, 0)) was finite and wrong: the
singular branch went through svd's rule, undefined where zero singular values repeat (torch
gives nan there). Up to 3 x 3 the branch is now the cofactor matrix itself, a polynomial, whose
derivative is exact; larger, the adjugate op, whose rule (from adj(U S Vh) = sign V adj(S) U^H)
is a polynomial in the singular values, exact too (diag(1, 2, 0, 0) was off by 2.1, diag(1, 2,
3, 0, 0) by 3.0). Checked against central differences of the first derivative.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

SINGULAR = {
    "zero_1x1": np.zeros((1, 1)),
    "zero_2x2": np.zeros((2, 2)),
    "rank1_2x2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "diag100": np.diag([1.0, 0.0, 0.0]),
    "zero_3x3": np.zeros((3, 3)),
    "rank2_3x3": np.array([[2.0, 0.0, 1.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]),
    "batch": np.stack([np.zeros((2, 2)), np.array([[1.0, 2.0], [3.0, 4.0]])]),
    "rank2_4x4": np.diag([1.0, 2.0, 0.0, 0.0]),
    "rank2_4x4_dense": np.array([[1.0, 2.0, 0.0, 3.0], [4.0, 5.0, 0.0, 6.0], [0.0, 0.0, 0.0, 0.0],
                                 [7.0, 8.0, 0.0, 9.0]]),
    "rank3_5x5": np.diag([1.0, 2.0, 3.0, 0.0, 0.0]),
    "rank2_5x5": np.diag([1.0, 2.0, 0.0, 0.0, 0.0]),
    "batch_4x4": np.stack([np.diag([1.0, 2.0, 0.0, 0.0]), np.diag([0.0, 3.0, 0.0, 1.0]),
                           np.arange(16.0).reshape(4, 4) % 7 + np.eye(4)]),
}


def _weights(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("name", list(SINGULAR))
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_det_first_derivative_at_singular_matrices_as_torch(name, dtype):
    a = SINGULAR[name].astype(dtype)
    if dtype == "complex128":
        a = a * (1 - 0.5j)
    v = _weights(a.shape[:-2], 1) + (0.3j if dtype == "complex128" else 0)
    grads = []
    for m in (torch, flow):
        x = m.tensor(a, requires_grad=True)
        (g,) = m.autograd.grad(m.linalg.det(x), [x], grad_outputs=[m.tensor(v)],
                               create_graph=True)
        grads.append(g.detach().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-12)


def _first(a, v):
    x = flow.tensor(a, requires_grad=True)
    (g,) = flow.autograd.grad(flow.linalg.det(x), [x], grad_outputs=[flow.tensor(v)])
    return g.numpy()


@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_second_derivative_at_singular_matrices_is_exact(name):
    a, v = SINGULAR[name], _weights(SINGULAR[name].shape[:-2], 2)
    u = _weights(a.shape, 3)
    x = flow.tensor(a, requires_grad=True)
    (g,) = flow.autograd.grad(flow.linalg.det(x), [x], grad_outputs=[flow.tensor(v)],
                              create_graph=True)
    (h,) = flow.autograd.grad(g, [x], grad_outputs=[flow.tensor(u)])
    expected = np.zeros_like(a)
    for index in np.ndindex(*a.shape):  # central differences of <u, first derivative>
        step = np.zeros_like(a)
        step[index] = 1e-4
        expected[index] = ((_first(a + step, v) - _first(a - step, v)) * u).sum() / 2e-4
    np.testing.assert_allclose(h.numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["rank2_3x3", "rank2_4x4", "rank2_4x4_dense", "rank3_5x5"])
def test_det_complex_second_derivative_at_singular_matrices_is_exact(name):
    """torch's complex convention: the gradient of a real L is dL/dRe + i dL/dIm."""
    a = SINGULAR[name] * (1 - 0.5j) + np.triu(SINGULAR[name], 1) * 0.25j
    v = np.asarray(0.7 - 0.2j)
    u = _weights(a.shape, 4) + 1j * _weights(a.shape, 5)
    x = flow.tensor(a, requires_grad=True)
    (g,) = flow.autograd.grad(flow.linalg.det(x), [x], grad_outputs=[flow.tensor(v)],
                              create_graph=True)
    (h,) = flow.autograd.grad(g, [x], grad_outputs=[flow.tensor(u)])

    def loss(b):
        return (np.conj(u) * _first(b, v)).sum().real
    expected = np.zeros_like(a)
    for index in np.ndindex(*a.shape):
        step = np.zeros(a.shape)
        step[index] = 1e-4
        expected[index] = ((loss(a + step) - loss(a - step))
                           + 1j * (loss(a + 1j * step) - loss(a - 1j * step))) / 2e-4
    np.testing.assert_allclose(h.numpy(), expected, rtol=1e-6, atol=1e-6)
