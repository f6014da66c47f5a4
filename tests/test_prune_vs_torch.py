"""nn.utils.prune against torch: the masks, names, state_dict keys, forward values and
training of pruned modules for the deterministic methods (magnitude, Ln-structured, custom
masks, global pruning, iterative pruning, importance scores), the counts and shapes of the
random methods' masks, and the same errors for bad amounts."""
import numpy as np
import pytest
import torch
import torch.nn.utils.prune  # noqa: F401 - (torch does not import it with nn.utils)

import flowgrad as flow


def _model(m):
    rng = np.random.default_rng(0)
    model = m.nn.Sequential(m.nn.Conv2d(2, 4, 3), m.nn.ReLU(), m.nn.Flatten(),
                            m.nn.Linear(16, 5), m.nn.Linear(5, 3))
    with m.no_grad():
        for p in model.parameters():
            p.copy_(m.tensor(rng.standard_normal(tuple(p.shape))))
    return model.double()


def _scores(m, shape, seed=1):
    return m.tensor(np.random.default_rng(seed).standard_normal(shape))


# name -> f(m, prune, model): prunes the model in place
PROGRAMS = {
    "l1_fraction": lambda m, P, model: P.l1_unstructured(model[3], "weight", amount=0.3),
    "l1_count": lambda m, P, model: P.l1_unstructured(model[0], "bias", amount=2),
    "l1_zero": lambda m, P, model: P.l1_unstructured(model[3], "weight", amount=0),
    "l1_importance": lambda m, P, model: P.l1_unstructured(
        model[3], "weight", amount=0.5, importance_scores=_scores(m, (5, 16))),
    "ln_structured_l2_rows": lambda m, P, model: P.ln_structured(model[3], "weight", 0.4, 2,
                                                                 dim=0),
    "ln_structured_l1_in_channels": lambda m, P, model: P.ln_structured(
        model[0], "weight", amount=1, n=1, dim=1),
    "ln_structured_inf_last": lambda m, P, model: P.ln_structured(
        model[0], "weight", amount=0.34, n=float("inf"), dim=-1),
    "ln_structured_importance": lambda m, P, model: P.ln_structured(
        model[4], "weight", 2, 2, 1, importance_scores=_scores(m, (3, 5))),
    "custom_mask": lambda m, P, model: P.custom_from_mask(
        model[4], "weight", m.tensor(np.arange(15).reshape(3, 5) % 3 != 0)),
    "identity": lambda m, P, model: P.identity(model[4], "bias"),
    "iterative": lambda m, P, model: [
        P.l1_unstructured(model[3], "weight", amount=0.25),
        P.ln_structured(model[3], "weight", amount=1, n=2, dim=0),
        P.l1_unstructured(model[3], "weight", amount=5),
        P.custom_from_mask(model[3], "weight", m.ones(5, 16, dtype=m.bool).tril())],
    "global": lambda m, P, model: P.global_unstructured(
        [(model[0], "weight"), (model[3], "weight"), (model[4], "weight")],
        pruning_method=P.L1Unstructured, amount=0.4),
    "global_after_local": lambda m, P, model: [
        P.l1_unstructured(model[3], "weight", amount=0.5),
        P.global_unstructured([(model[3], "weight"), (model[4], "bias")],
                              pruning_method=P.L1Unstructured, amount=10,
                              importance_scores={(model[4], "bias"): _scores(m, (3,))})],
    "class_apply": lambda m, P, model: P.L1Unstructured.apply(model[4], "weight", 4),
}


def _state(m, name, remove):
    P = m.nn.utils.prune
    model = _model(m)
    PROGRAMS[name](m, P, model)
    x = m.tensor(np.random.default_rng(2).standard_normal((2, 2, 4, 4)))
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        loss = (model(x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    pruned = P.is_pruned(model)
    if remove:
        for module in model:
            for hook in list(module._forward_pre_hooks.values()):
                P.remove(module, hook._tensor_name)
    state = {k: v.detach().numpy().astype(float) for k, v in model.state_dict().items()}
    names = [n for n, _ in model.named_parameters()], [n for n, _ in model.named_buffers()]
    return losses, pruned, P.is_pruned(model), state, names


@pytest.mark.parametrize("remove", [False, True], ids=["kept", "removed"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_pruned_model_matches_torch(name, remove):
    ours, theirs = _state(flow, name, remove), _state(torch, name, remove)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:3] == theirs[1:3] and ours[4] == theirs[4]
    assert list(ours[3]) == list(theirs[3])
    for key in theirs[3]:
        np.testing.assert_allclose(ours[3][key], theirs[3][key], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("method", ["random_unstructured", "random_structured"])
def test_random_methods_prune_the_asked_count(method):
    P = flow.nn.utils.prune
    layer = flow.nn.Linear(10, 6)
    if method == "random_unstructured":
        P.random_unstructured(layer, "weight", amount=0.25)
        P.random_unstructured(layer, "weight", amount=7)
        assert int((layer.weight_mask == 0).sum()) == 15 + 7
    else:
        P.random_structured(layer, "weight", amount=2, dim=0)
        P.random_structured(layer, "weight", amount=0.5, dim=1)
        rows = (layer.weight_mask.sum(1) == 0).sum()
        cols = (layer.weight_mask.sum(0) == 0).sum()
        assert int(rows) == 2 and int(cols) == 5
        assert set(layer.weight_mask.unique().tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(layer.weight.detach().numpy(),
                                  (layer.weight_orig * layer.weight_mask).detach().numpy())


BAD = {
    "negative_count": lambda P, layer: P.l1_unstructured(layer, "weight", amount=-1),
    "fraction_above_one": lambda P, layer: P.l1_unstructured(layer, "weight", amount=1.5),
    "string_amount": lambda P, layer: P.random_unstructured(layer, "weight", amount="a"),
    "count_too_large": lambda P, layer: P.l1_unstructured(layer, "bias", amount=4),
    "structured_1d": lambda P, layer: P.ln_structured(layer, "bias", 1, 2, dim=0),
    "structured_bad_dim": lambda P, layer: P.ln_structured(layer, "weight", 1, 2, dim=2),
    "remove_unpruned": lambda P, layer: P.remove(layer, "weight"),
    "scores_shape": lambda P, layer: P.l1_unstructured(layer, "weight", 1,
                                                       importance_scores=layer.bias),
    "global_structured": lambda P, layer: P.global_unstructured(
        [(layer, "weight")], pruning_method=P.LnStructured, amount=1, n=2, dim=0),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_pruning_raises_as_torch_and_leaves_the_module(name):
    errors, names = [], []
    for m in (flow, torch):
        layer = m.nn.Linear(2, 3)
        try:
            BAD[name](m.nn.utils.prune, layer)
            errors.append(None)
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            errors.append(type(e))
        names.append(([n for n, _ in layer.named_parameters()],
                      [n for n, _ in layer.named_buffers()]))
    assert errors[0] is errors[1] and errors[0] is not None
    assert names[0] == names[1]
