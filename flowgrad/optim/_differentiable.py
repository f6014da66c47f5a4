"""The differentiable=True steps: torch's single-tensor updates written in flowgrad tensor
ops, run with grad mode on (`Optimizer.step`), so that autograd records them. The new
parameters and state are then functions of the old parameters, the gradients, the state and
tensor hyperparameters (a tensor lr), as torch's are: the same operations, in place where
torch's are (a leaf parameter that requires grad raises, as in torch), and the same scalar
arithmetic (the step count is a 0-d tensor of the scalar dtype in Adam's bias corrections).
The fast array kernels (`_update`, `_step_group`) serve differentiable=False.

Each function takes (param, grad, state, group): the parameter and its `.grad` (tensors),
its state dict (made by the optimizer's `_init_state`) and the group as the user holds it
(a tensor lr stays a tensor).

>>> import flowgrad as flow
>>> w = flow.tensor([1.0, 2.0], requires_grad=True)
>>> p = w.clone(); p.grad = 2 * w
>>> flow.optim.SGD([p], lr=0.1, differentiable=True).step()
>>> flow.autograd.grad(p.sum(), w)[0]
tensor([0.8000, 0.8000])
"""
from __future__ import annotations

from ..dtypes import get_default_dtype
from ..ops.shape import cat
from ..tensor import Tensor

__all__ = ["STEPS"]


def _number(value, op="add_", arg="alpha"):
    """A hyperparameter passed as torch passes a Scalar argument (alpha=, value=): a tensor
    read as its number (no gradient flows through it, as in torch); one that requires grad
    is refused with torch's TypeError (a tensor lr that requires grad is differentiable only
    in SGD, Adam, AdamW, NAdam and RAdam)."""
    if not isinstance(value, Tensor):
        return value
    if value.requires_grad:
        raise TypeError(f"{op}(): argument '{arg}' must be Number, not Tensor (the optimizer "
                        "passes this hyperparameter as a number; give it as a float, or a "
                        "tensor that does not require grad)")
    return value.item()


def _squeezed(lr):
    """torch's `_to_scalar`: a 1-element tensor hyperparameter as a 0-d tensor."""
    return lr.squeeze() if isinstance(lr, Tensor) and lr.dim() != 0 else lr


def _grad_tensor(value):
    """A tensor hyperparameter that requires grad (torch keeps those in the graph)."""
    return isinstance(value, Tensor) and value.requires_grad


def _maximized(grad, group):
    return -grad if group["maximize"] else grad


def _weight_decayed(param, grad, weight_decay):
    """grad + weight_decay * param (torch's grad.add(param, alpha=weight_decay); a tensor
    weight decay that requires grad stays in the graph: grad.addcmul_(param.clone(), wd))."""
    if _grad_tensor(weight_decay):
        return grad.addcmul_(param.clone(), weight_decay)
    return grad.add(param, alpha=_number(weight_decay))


def sgd(param, grad, state, group):
    lr, momentum = _squeezed(group["lr"]), group["momentum"]
    grad = _maximized(grad, group)
    if group["weight_decay"] != 0:
        grad = _weight_decayed(param, grad, group["weight_decay"])
    if momentum != 0:
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = grad.detach().clone()
        else:
            buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
        grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
    if group["foreach"]:  # torch's foreach step: _foreach_add_(params, grads, alpha=-lr)
        param.add_(grad, alpha=-_number(lr, "_foreach_add_", "alpha"))
    elif _grad_tensor(lr):
        param.addcmul_(grad, lr, value=-1)
    else:
        param.add_(grad, alpha=-_number(lr))


def adam(param, grad, state, group):
    """Adam and AdamW (decoupled_weight_decay); torch's differentiable branch: the bias
    corrections from the step tensor, the step size folded into the denominator."""
    lr, (beta1, beta2) = _squeezed(group["lr"]), map(_squeezed, group["betas"])
    wd, eps, amsgrad = group["weight_decay"], group["eps"], group["amsgrad"]
    grad = _maximized(grad, group)
    exp_avg, exp_avg_sq, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
    step += 1
    if wd != 0:
        if group.get("decoupled_weight_decay", False):
            param.mul_(1 - lr * wd)
        else:
            grad = _weight_decayed(param, grad, wd)
    # (a tensor beta1 in the parameter's dtype: torch's beta1_dict)
    exp_avg.lerp_(grad, 1 - (beta1.to(param.dtype) if isinstance(beta1, Tensor) else beta1))
    if _grad_tensor(beta2):
        exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    else:
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=_number(1 - beta2))
    bias_correction1 = 1 - beta1 ** (step.clone() if _grad_tensor(beta1) else step)
    bias_correction2 = 1 - beta2 ** (step.clone() if _grad_tensor(beta2) else step)
    step_size_neg = (lr / bias_correction1).neg()
    bias_correction2_sqrt = bias_correction2.sqrt()
    if amsgrad:
        if "max_exp_avg_sq" not in state:  # amsgrad switched on after the first step
            state["max_exp_avg_sq"] = exp_avg_sq.detach().new_zeros(exp_avg_sq.shape)
        vmax = state["max_exp_avg_sq"]
        vmax.copy_(vmax.clone().maximum(exp_avg_sq))
        exp_avg_sq = vmax
    denom = (exp_avg_sq.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(
        eps / step_size_neg)
    param.addcdiv_(exp_avg.clone(), denom)


def adamax(param, grad, state, group):
    lr, (beta1, beta2), eps = _squeezed(group["lr"]), group["betas"], group["eps"]
    grad = _maximized(grad, group)
    exp_avg, exp_inf, step = state["exp_avg"], state["exp_inf"], state["step"]
    step += 1
    if group["weight_decay"] != 0:
        grad = grad.add(param, alpha=group["weight_decay"])
    exp_avg.lerp_(grad, 1 - beta1)
    norm_buf = cat([exp_inf.mul_(beta2).unsqueeze(0), grad.abs().add_(eps).unsqueeze_(0)], 0)
    exp_inf.copy_(norm_buf.amax(0, keepdim=False))
    clr = lr / (1 - beta1 ** step.item())
    param.addcdiv_(exp_avg, exp_inf, value=-_number(clr, "addcdiv_", "value"))


def nadam(param, grad, state, group):
    lr, (beta1, beta2) = _squeezed(group["lr"]), group["betas"]
    wd, decay = group["weight_decay"], group["momentum_decay"]
    grad = _maximized(grad, group)
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    mu_product, step_t = state["mu_product"], state["step"]
    step_t += 1
    step = step_t.item()
    bias_correction2 = 1 - beta2 ** step
    if wd != 0:
        if group["decoupled_weight_decay"]:
            param.mul_(1 - lr * wd)
        else:
            grad = grad.add(param, alpha=wd)
    mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
    mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
    mu_product *= mu
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = exp_avg_sq.div(bias_correction2).sqrt().add(group["eps"])
    mu_product_next = mu_product * mu_next
    grad = grad * (-lr * (1.0 - mu) / (1.0 - mu_product))
    exp_avg = exp_avg * (-lr * mu_next / (1.0 - mu_product_next))
    param.addcdiv_(grad, denom)
    param.addcdiv_(exp_avg, denom)


def radam_rectification(beta2, step):
    """RAdam's scalars at `step` (a number): (1 - beta2 ** step, the variance rectification
    term, or None while the approximated SMA is at most 5). Both RAdam step paths use it."""
    bias_correction2 = 1 - beta2 ** step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
    if rho_t <= 5.0:
        return bias_correction2, None
    return bias_correction2, ((rho_t - 4) * (rho_t - 2) * rho_inf
                              / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5


def radam(param, grad, state, group):
    lr, (beta1, beta2), wd = _squeezed(group["lr"]), group["betas"], group["weight_decay"]
    grad = _maximized(grad, group)
    exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
    step_t += 1
    step = step_t.item()
    if wd != 0:
        if group["decoupled_weight_decay"]:
            param.mul_(1 - lr * wd)
        else:
            grad = grad.add(param, alpha=wd)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    corrected = exp_avg / (1 - beta1 ** step)
    bias_correction2, rect = radam_rectification(beta2, step)
    if rect is not None:
        adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add(group["eps"])
        param.add_(corrected * lr * adaptive * rect, alpha=-1.0)
    else:
        param.add_(corrected * lr, alpha=-1.0)


def rmsprop(param, grad, state, group):
    lr, alpha, momentum = _squeezed(group["lr"]), group["alpha"], group["momentum"]
    grad = _maximized(grad, group)
    square_avg = state["square_avg"]
    state["step"] += 1
    if group["weight_decay"] != 0:
        grad = grad.add(param, alpha=group["weight_decay"])
    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    if group["centered"]:
        grad_avg = state["grad_avg"]
        grad_avg.lerp_(grad, 1 - alpha)
        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    else:
        avg = square_avg.sqrt()
    avg = avg.add(group["eps"])
    if momentum > 0:
        buf = state["momentum_buffer"]
        buf.mul_(momentum).addcdiv_(grad, avg)
        param.add_(buf, alpha=-_number(lr))
    else:
        param.addcdiv_(grad, avg, value=-_number(lr, "addcdiv_", "value"))


def rprop(param, grad, state, group):
    etaminus, etaplus = group["etas"]
    step_size_min, step_size_max = group["step_sizes"]
    grad = _maximized(grad, group)
    prev, step_size = state["prev"], state["step_size"]
    state["step"] += 1
    sign = grad.mul(prev.clone()).sign()
    sign[sign.gt(0)] = etaplus
    sign[sign.lt(0)] = etaminus
    sign[sign.eq(0)] = 1
    step_size.mul_(sign).clamp_(step_size_min, step_size_max)
    grad = grad.clone()
    grad[sign.eq(etaminus)] = 0
    param.addcmul_(grad.sign(), step_size, value=-1)
    prev.copy_(grad)


def adagrad(param, grad, state, group):
    lr, state_sum, step_t = _squeezed(group["lr"]), state["sum"], state["step"]
    step_t += 1
    step = step_t.item()
    grad = _maximized(grad, group)
    if group["weight_decay"] != 0:
        grad = grad.add(param, alpha=group["weight_decay"])
    clr = lr / (1 + (step - 1) * group["lr_decay"])
    state_sum.addcmul_(grad, grad, value=1)
    std = state_sum.sqrt() + group["eps"]
    param.addcdiv_(grad, std, value=-_number(clr, "addcdiv_", "value"))


def adadelta(param, grad, state, group):
    lr, rho, eps = _squeezed(group["lr"]), group["rho"], group["eps"]
    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
    state["step"] += 1
    grad = _maximized(grad, group)
    if group["weight_decay"] != 0:
        grad = grad.add(param, alpha=group["weight_decay"])
    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
    std = square_avg.add(eps).sqrt_()
    delta = acc_delta.add(eps).sqrt_().clone()
    delta.div_(std).mul_(grad)
    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    param.add_(delta, alpha=-_number(lr))


def asgd(param, grad, state, group):
    lr, lambd, t0 = _squeezed(group["lr"]), group["lambd"], group["t0"]
    grad = _maximized(grad, group)
    mu, ax, eta, step_t = state["mu"], state["ax"], state["eta"], state["step"]
    step_t += 1
    if group["weight_decay"] != 0:
        grad = grad.add(param, alpha=group["weight_decay"])
    eta_value = eta.item()
    param.mul_(1 - lambd * eta_value)
    param.add_(grad, alpha=-eta_value)
    if mu.item() != 1:
        ax.add_(param.sub(ax).mul_(mu))
    else:
        ax.copy_(param)
    step = step_t.item()
    # torch.as_tensor(new value) copied into the state: a number becomes a tensor of the
    # default dtype (float32-rounded under float32); a tensor lr keeps its dtype and graph
    new_eta = lr / ((1 + lambd * lr * step) ** group["alpha"])
    scalar = get_default_dtype().np.type
    if isinstance(new_eta, Tensor):
        eta.copy_(new_eta)
    else:
        eta.fill_(float(scalar(new_eta)))
    mu.fill_(float(scalar(1 / max(1, step - t0))))


STEPS = {"SGD": sgd, "Adam": adam, "AdamW": adam, "Adamax": adamax, "NAdam": nadam,
         "RAdam": radam, "RMSprop": rmsprop, "Rprop": rprop, "Adagrad": adagrad,
         "Adadelta": adadelta, "ASGD": asgd}
