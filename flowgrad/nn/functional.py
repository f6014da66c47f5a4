"""flowgrad.nn.functional: the functional forms of layers, activations and losses."""
from ..ops.activation import gelu, leaky_relu, log_softmax, relu, silu, softmax, softplus
from ..ops.elementwise import sigmoid, tanh
from ..ops.loss import cross_entropy, mse_loss, nll_loss

__all__ = ["gelu", "leaky_relu", "log_softmax", "relu", "silu", "softmax", "softplus",
           "sigmoid", "tanh", "cross_entropy", "mse_loss", "nll_loss"]
