"""Bad input raises torch's exception type with a message naming the op and the argument,
and leaves every tensor unchanged."""
import re

import numpy as np
import pytest
import torch

import flowgrad as flow
import flowgrad.nn.functional as F


def _both(fn):
    """(torch's exception type, flowgrad's exception) for fn run on each library."""
    with pytest.raises(Exception) as t_info:
        fn(torch)
    with pytest.raises(Exception) as f_info:
        fn(flow)
    return t_info.type, f_info.value


# (id, fn(lib), a regex flowgrad's message must match)
SAME_TYPE = [
    ("embedding_neg", lambda m: m.nn.functional.embedding(m.tensor([0, -1]), m.ones(3, 2)),
     r"embedding: index out of range in self: index -1 .*3 rows.*\[0, 2\]"),
    ("embedding_high", lambda m: m.nn.functional.embedding(m.tensor([3]), m.ones(3, 2)),
     r"index 3 .*3 rows"),
    ("nn_embedding_neg", lambda m: m.nn.Embedding(3, 2)(m.tensor([-1])), r"index -1"),
    ("index_add_neg", lambda m: m.zeros(3, 2).index_add(0, m.tensor([-1]), m.ones(1, 2)),
     r"index_add\(\): index -1 is out of bounds for dimension 0 with size 3"),
    ("index_copy_neg", lambda m: m.zeros(3, 2).index_copy(0, m.tensor([-1]), m.ones(1, 2)),
     r"index_copy\(\): index -1 is out of bounds"),
    ("multinomial_neg", lambda m: m.multinomial(m.tensor([-1.0, 1.0]), 1),
     r"multinomial\(\): probability tensor contains.*element < 0"),
    ("multinomial_nan", lambda m: m.multinomial(m.tensor([float("nan"), 1.0]), 1),
     r"multinomial\(\): probability tensor contains either `inf`, `nan`"),
    ("multinomial_inf", lambda m: m.multinomial(m.tensor([float("inf"), 1.0]), 1), r"`inf`"),
    ("multinomial_zero", lambda m: m.multinomial(m.tensor([[1.0, 0.0], [0.0, 0.0]]), 1),
     r"multinomial\(\): invalid multinomial distribution \(sum of probabilities <= 0\)"),
    ("multinomial_3d", lambda m: m.multinomial(m.ones(2, 2, 2), 1), r"1 or 2 dim"),
    ("multinomial_int", lambda m: m.multinomial(m.tensor([1, 2]), 1), r"floating-point"),
    ("multinomial_n0", lambda m: m.multinomial(m.ones(2), 0), r"n_sample <= 0"),
    ("randn_float_size", lambda m: m.randn(2, 3.5), r"randn\(\): argument 'size'.*3\.5"),
    ("zeros_float_size", lambda m: m.zeros((2, 3.5)), r"zeros\(\): argument 'size'"),
    ("ones_str", lambda m: m.ones("a"), r"ones\(\): argument 'size'.*'a'"),
    ("randint_float_size", lambda m: m.randint(0, 3, (2, 0.5)), r"randint\(\): argument 'size'"),
    ("randperm_neg", lambda m: m.randperm(-1), r"randperm\(\): .*negative dimension -1"),
    ("randperm_float", lambda m: m.randperm(3.5), r"randperm\(\): argument 'n' must be an int"),
    ("arange_inf", lambda m: m.arange(0, float("inf")), r"arange\(\): unsupported range.*'end'"),
    ("arange_nan", lambda m: m.arange(float("nan"), 2), r"arange\(\): .*'start' must be finite"),
    ("linspace_neg", lambda m: m.linspace(0, 1, -1),
     r"linspace\(\): number of steps must be non-negative, got -1"),
    ("logspace_neg", lambda m: m.logspace(0, 1, -2), r"logspace\(\): number of steps"),
    ("linspace_float", lambda m: m.linspace(0, 1, 2.5), r"linspace\(\): argument 'steps'"),
    ("eye_neg", lambda m: m.eye(-1), r"eye\(\): n must be greater or equal to 0, got -1"),
    ("eye_neg_m", lambda m: m.eye(2, -1), r"eye\(\): m must be greater or equal to 0"),
    ("eye_float", lambda m: m.eye(2.5), r"eye\(\): argument 'n' must be an int"),
    ("sum_str", lambda m: m.sum("a"), r"sum\(\): argument 'input' \(position 1\) must be "
                                      r"Tensor, not str"),
    ("mean_list", lambda m: m.mean([1.0]), r"mean\(\): argument 'input'.*not list"),
    ("full_str", lambda m: m.full((2,), "a"), r"full\(\): argument 'fill_value'"),
    ("zeros_overflow", lambda m: m.zeros(2 ** 62),
     r"zeros\(\): Storage size calculation overflowed with sizes=\[4611686018427387904\]"),
    ("zeros_overflow_2d", lambda m: m.zeros(1 << 40, 1 << 40), r"zeros\(\): Storage size"),
    ("ones_overflow", lambda m: m.ones((1 << 40, 1 << 40)), r"ones\(\): Storage size"),
    ("empty_overflow", lambda m: m.empty(1 << 40, 1 << 40), r"empty\(\): Storage size"),
    ("full_overflow", lambda m: m.full((1 << 40, 1 << 40), 1.0), r"full\(\): Storage size"),
    ("rand_overflow", lambda m: m.rand(1 << 40, 1 << 40), r"rand\(\): Storage size"),
    ("randn_overflow", lambda m: m.randn(1 << 40, 1 << 40), r"randn\(\): Storage size"),
    ("arange_overflow", lambda m: m.arange(0, 1e30), r"arange\(\):"),
    ("index_select_neg", lambda m: m.index_select(m.ones(3, 2), 0, m.tensor([-1])),
     r"index_select\(\): index out of range in self: index -1 for dim 0 of size 3"),
    ("index_select_high", lambda m: m.ones(2, 3, 4).index_select(2, m.tensor([0, 4])),
     r"index 4 for dim 2 of size 4"),
    ("backward_str", lambda m: (m.ones(2, requires_grad=True) * 2).sum().backward("a"),
     r"backward: gradients can be either Tensors or None, but got str"),
    ("backward_list", lambda m: (m.ones(2, requires_grad=True) * 2).backward([1.0, 2.0]),
     r"but got list for output 0 \(shape \(2,\)\)"),
    ("transpose_0d", lambda m: m.tensor(1.0).transpose(0, 1),
     r"transpose: Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"),
]


@pytest.mark.parametrize("fn,pattern", [c[1:] for c in SAME_TYPE], ids=[c[0] for c in SAME_TYPE])
def test_bad_arguments_raise_torchs_exception_type(fn, pattern):
    torch_type, error = _both(fn)
    assert type(error) is torch_type or isinstance(error, torch_type), (torch_type, error)
    assert re.search(pattern, str(error)), str(error)


def test_memory_that_cannot_be_allocated_is_a_runtime_error():
    # 16 TiB: below the overflow limit, but no machine running these tests has it
    with pytest.raises(RuntimeError, match=r"zeros\(\): not enough memory with sizes="
                                           r"\[4398046511104\]"):
        flow.zeros(1 << 42)


def test_failed_index_add_and_embedding_change_nothing():
    x = flow.zeros(3, 2)
    weight = flow.ones(3, 2, requires_grad=True)
    version = x._version
    with pytest.raises(RuntimeError, match="index_add"):
        x.index_add_(0, flow.tensor([0, -1]), flow.ones(2, 2))
    with pytest.raises(IndexError, match="embedding"):
        F.embedding(flow.tensor([-1]), weight, max_norm=0.5)
    assert x.tolist() == [[0.0, 0.0]] * 3 and x._version == version
    assert weight.tolist() == [[1.0, 1.0]] * 3 and weight.grad is None


def test_in_range_indices_still_work_and_index_fill_keeps_negative_indices():
    weight = flow.tensor([[1.0], [2.0], [3.0]])
    assert F.embedding(flow.tensor([2, 0]), weight).tolist() == [[3.0], [1.0]]
    x = flow.zeros(3).index_add(0, flow.tensor([2, 2]), flow.ones(2))
    assert x.tolist() == [0.0, 0.0, 2.0]
    got = flow.zeros(3).index_fill(0, flow.tensor([-1]), 5.0).tolist()
    assert got == torch.zeros(3).index_fill(0, torch.tensor([-1]), 5.0).tolist()


def test_valid_multinomial_and_factories_are_unchanged():
    flow.manual_seed(0)
    draws = flow.multinomial(flow.tensor([[0.0, 1.0], [3.0, 0.0]]), 1).tolist()
    assert draws == [[1], [0]]
    assert flow.multinomial(flow.tensor([1.0, 1.0, 0.0]), 2).sort().values.tolist() == [0, 1]
    assert flow.randperm(0).tolist() == [] and sorted(flow.randperm(4).tolist()) == [0, 1, 2, 3]
    assert flow.zeros(np.int64(2), flow.tensor(3)).shape == (2, 3)
    assert flow.zeros(size=(2, 1)).shape == (2, 1) and flow.eye(0).shape == (0, 0)
    assert flow.linspace(0, 1, 0).shape == (0,) and flow.arange(-1.0, 1.0, 0.5).shape == (4,)


def test_binary_cross_entropy_rejects_targets_outside_0_1():
    for target in (2.0, -0.5, float("nan")):
        torch_type, error = _both(lambda m: m.nn.functional.binary_cross_entropy(
            m.tensor([[0.5, 0.5]]), m.tensor([[0.0, target]])))
        assert type(error) is torch_type is RuntimeError
        assert re.search(r"binary_cross_entropy: all elements of target should be between 0 "
                         r"and 1, got .*target of shape \(1, 2\)", str(error)), str(error)
    # the input is checked first, as torch
    with pytest.raises(RuntimeError, match="elements of input"):
        F.binary_cross_entropy(flow.tensor([1.5]), flow.tensor([2.0]))
    # the ends of the range are valid
    loss = F.binary_cross_entropy(flow.tensor([0.5, 0.5]), flow.tensor([0.0, 1.0]))
    assert loss.item() == pytest.approx(0.6931, abs=1e-4)


DEVICE_FACTORIES = [
    ("tensor", lambda d: flow.tensor([1.0], device=d)),
    ("as_tensor", lambda d: flow.as_tensor([1.0], device=d)),
    ("scalar_tensor", lambda d: flow.scalar_tensor(1.0, device=d)),
    ("zeros", lambda d: flow.zeros(2, device=d)),
    ("ones", lambda d: flow.ones(2, device=d)),
    ("empty", lambda d: flow.empty(2, device=d)),
    ("full", lambda d: flow.full((2,), 1.0, device=d)),
    ("zeros_like", lambda d: flow.zeros_like(flow.ones(2), device=d)),
    ("ones_like", lambda d: flow.ones_like(flow.ones(2), device=d)),
    ("empty_like", lambda d: flow.empty_like(flow.ones(2), device=d)),
    ("full_like", lambda d: flow.full_like(flow.ones(2), 3.0, device=d)),
    ("rand_like", lambda d: flow.rand_like(flow.ones(2), device=d)),
    ("randn_like", lambda d: flow.randn_like(flow.ones(2), device=d)),
    ("randint_like", lambda d: flow.randint_like(flow.ones(2), 3, device=d)),
    ("arange", lambda d: flow.arange(3, device=d)),
    ("linspace", lambda d: flow.linspace(0, 1, 3, device=d)),
    ("logspace", lambda d: flow.logspace(0, 1, 3, device=d)),
    ("eye", lambda d: flow.eye(2, device=d)),
    ("rand", lambda d: flow.rand(2, device=d)),
    ("randn", lambda d: flow.randn(2, device=d)),
    ("randint", lambda d: flow.randint(0, 3, (2,), device=d)),
    ("randperm", lambda d: flow.randperm(3, device=d)),
    ("normal", lambda d: flow.normal(0.0, 1.0, size=(2,), device=d)),
    ("new_zeros", lambda d: flow.ones(2).new_zeros(2, device=d)),
    ("new_ones", lambda d: flow.ones(2).new_ones(2, device=d)),
    ("new_empty", lambda d: flow.ones(2).new_empty(2, device=d)),
    ("new_full", lambda d: flow.ones(2).new_full((2,), 1.0, device=d)),
    ("new_tensor", lambda d: flow.ones(2).new_tensor([1.0], device=d)),
    ("Linear", lambda d: flow.nn.Linear(2, 2, device=d)),
    ("Conv2d", lambda d: flow.nn.Conv2d(1, 1, 1, device=d)),
    ("LayerNorm", lambda d: flow.nn.LayerNorm(2, device=d)),
    ("BatchNorm1d", lambda d: flow.nn.BatchNorm1d(2, device=d)),
    ("Embedding", lambda d: flow.nn.Embedding(2, 2, device=d)),
    ("LSTM", lambda d: flow.nn.LSTM(2, 2, device=d)),
    ("MultiheadAttention", lambda d: flow.nn.MultiheadAttention(4, 2, device=d)),
    ("Module.to", lambda d: flow.nn.Linear(2, 2).to(d)),
    ("Module.to_kw", lambda d: flow.nn.Linear(2, 2).to(device=d)),
    ("Tensor.to", lambda d: flow.ones(2).to(d if d is not None else "cpu")),
]


@pytest.mark.parametrize("make", [c[1] for c in DEVICE_FACTORIES],
                         ids=[c[0] for c in DEVICE_FACTORIES])
def test_devices_other_than_the_cpu_raise_and_cpu_spellings_work(make):
    for spec in ("cuda", "cuda:0", "mps"):
        with pytest.raises(RuntimeError, match=f"device '{spec.split(':')[0]}' is not "
                                               f"available.*use device='cpu'"):
            make(spec)
    for spec in (None, "cpu", "cpu:0", flow.device("cpu")):
        assert make(spec) is not None


def test_failed_module_to_changes_nothing():
    m = flow.nn.Linear(2, 2)
    before = m.weight.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="Module.to"):
        m.to("cuda", flow.float64)
    assert m.weight.dtype is flow.float32 and np.array_equal(m.weight.detach().numpy(), before)


def test_tensor_of_a_list_that_contains_itself_is_a_value_error():
    looped = [1.0, 2.0]
    looped.append(looped)
    wide = []
    wide += [wide, wide]  # each level doubles: must not be walked element by element
    inner = [1]
    through_tuple = (inner,)
    inner.append(through_tuple)
    for data in (looped, wide, through_tuple):
        for dtype in (None, flow.float64):
            with pytest.raises(ValueError, match=r"flow\.tensor\(\): .*contains itself"):
                flow.tensor(data, dtype=dtype)


def test_tensor_of_data_nested_5000_deep_is_a_value_error_not_recursion():
    deep = [1.0]
    for _ in range(5000):
        deep = [deep]
    for dtype in (None, flow.float64):
        with pytest.raises(ValueError, match=r"flow\.tensor\(\): .*nested more than 64 .*deep"):
            flow.tensor(deep, dtype=dtype)
    doubling = [1.0]
    for _ in range(100):  # 2**100 elements if expanded; rejected by depth, not walked
        doubling = [doubling, doubling]
    with pytest.raises(ValueError, match="nested more than 64"):
        flow.tensor(doubling)
    at_limit = [1.0]
    for _ in range(63):
        at_limit = [at_limit]
    assert flow.tensor(at_limit).shape == (1,) * 64


_ROW = [1.0] * 3
ORDINARY = [
    ("floats", lambda m: [[1.0, 2.0], [3.0, 4.5]]), ("ints", lambda m: [1, 2, 3]),
    ("bools", lambda m: [True, False]), ("mixed", lambda m: [True, 2, 3.5]),
    ("bool_int", lambda m: [True, 2]), ("tuples", lambda m: ((1, 2), (3, 4))),
    ("list_of_tuples", lambda m: [(1, 2), [3, 4]]), ("empty", lambda m: []),
    ("empty_rows", lambda m: [[], []]), ("int", lambda m: 3), ("float", lambda m: 2.5),
    ("bool", lambda m: True), ("shared_rows", lambda m: [_ROW] * 4),
    ("np_scalars", lambda m: [np.float32(1.5), np.int32(2)]),
    ("np_bools", lambda m: [np.bool_(True)]),
    ("np_array", lambda m: np.array([[1, 2]], dtype=np.int16)),
    ("np_scalar", lambda m: np.float16(1.5)),
    ("tensors_0d", lambda m: [m.tensor(1.5), m.tensor(2.5)]),
    ("tensor_and_float", lambda m: [m.tensor(1), 2.5]),
    ("nested_tensor", lambda m: [[m.tensor(1.0)], [3]]),
    ("inf_nan", lambda m: [float("inf"), float("nan")]),
    # a NumPy scalar, array or tensor inside a list keeps its dtype in the promotion
    ("np_float64_and_int", lambda m: [np.float64(1.0), 2]),
    ("np_float64_rows", lambda m: [[np.float64(1.0)], [2.0]]),
    ("np_int32", lambda m: [np.int32(1)]), ("np_uint8", lambda m: [np.uint8(3)]),
    ("np_float16", lambda m: [np.float16(1.0)]), ("np_float16_and_float", lambda m: [
        np.float16(1.0), 2.5]), ("np_int8_and_float", lambda m: [np.int8(1), 2.5]),
    ("np_int16_and_bool", lambda m: [np.int16(1), True]),
    ("np_float64_tuple", lambda m: (np.float64(1.0), 2.0)),
    ("np_arrays", lambda m: [np.array([1, 2], np.int32), np.array([3, 4], np.int32)]),
    ("np_array_and_list", lambda m: [np.array([1, 2], np.int32), [3, 4]]),
    ("list_and_np_array", lambda m: [[1, 2], np.array([3.5, 4])]),
    # a one-element tensor inside a list is read as its value, as torch reads it
    ("one_element_tensors", lambda m: [m.tensor([1.0]), m.tensor([2.0])]),
    ("one_element_matrices", lambda m: [m.tensor([[1.0]]), m.tensor([[2.0]])]),
    ("one_element_tensor_and_float", lambda m: [m.tensor([1.0]), 2.0]),
    ("int32_tensors", lambda m: [m.tensor([1], dtype=m.int32), m.tensor([2], dtype=m.int32)]),
    ("int32_tensor_and_int", lambda m: [m.tensor(1, dtype=m.int32), 2]),
    ("float64_tensor_and_float", lambda m: [m.tensor(1.0, dtype=m.float64), 2.0]),
    ("nested_one_element_tensors", lambda m: [[m.tensor([1.0])], [m.tensor([2.0])]]),
    ("range", lambda m: range(4)), ("ranges", lambda m: [range(2), range(1, 3)]),
    ("empty_range", lambda m: range(0)),
]


@pytest.mark.parametrize("make", [c[1] for c in ORDINARY], ids=[c[0] for c in ORDINARY])
def test_tensor_of_ordinary_data_matches_torch(make):
    want, got = torch.tensor(make(torch)), flow.tensor(make(flow))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    as64 = flow.tensor(make(flow), dtype=flow.float64)
    np.testing.assert_array_equal(as64.numpy(), want.double().numpy())


def test_tensor_of_a_list_of_several_element_tensors_raises_as_torch():
    for m in (torch, flow):
        with pytest.raises(ValueError, match="one element tensors"):
            m.tensor([m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0])])
    # (flow.stack is the way; torch's legacy reading of a list of tensors as their values)
    assert flow.stack([flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])]).shape == (2, 2)


def test_tensor_of_numpy_data_torch_refuses():
    # deliberate: an unsigned NumPy scalar flowgrad has no dtype for (torch: uint16/uint32,
    # a TypeError for uint64) is an int64; a 0-d array in a list is its value (torch: a
    # TypeError from len())
    assert flow.tensor([np.uint16(3), np.uint32(4)]).dtype is flow.int64
    got = flow.tensor([np.array(1.5), 2])
    assert got.dtype is flow.float64 and got.tolist() == [1.5, 2.0]
    # full and arange read a NumPy scalar as the Python number it is, as torch
    for make in (lambda m: m.full((2,), np.float64(1.0)), lambda m: m.full((2,), np.int32(1)),
                 lambda m: m.arange(np.float64(3.0)), lambda m: m.arange(np.int32(3))):
        assert str(make(flow).dtype).split(".")[-1] == str(make(torch).dtype).split(".")[-1]


def test_tensor_of_other_objects_still_raises_type_error():
    for data in (["a"], [None], [{1, 2}]):
        with pytest.raises(TypeError):
            flow.tensor(data)
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        flow.tensor([[1, 2], [3]])  # (torch's reading of a ragged nest, and its message)



@pytest.mark.parametrize("name", ["index_copy_", "index_add_", "index_reduce_", "index_copy"])
@pytest.mark.parametrize("shape,dim,index", [((3, 4), 1, [0, 1]), ((3, 4), 0, [1]),
                                             ((4,), 0, [0, 2]), ((4,), 0, [1]), ((), 0, [0])])
def test_a_0d_source_of_index_writes_as_torch(name, shape, dim, index):
    # flowgrad broadcast a 0-d source over the selected slices; torch takes one only into a
    # vector at one index (index_copy) or a 0-d tensor (atomicity_fuzz seed 4415)
    outcome = []
    for m in (torch, flow):
        extra = ("prod",) if name == "index_reduce_" else ()
        try:
            got = getattr(m.zeros(shape), name)(dim, m.tensor(index), m.tensor(5.0), *extra)
            outcome.append(got.tolist())
        except Exception as e:  # noqa: BLE001 (the class is what is compared)
            outcome.append(type(e).__name__)
    assert outcome[1] == outcome[0]


def _refused_changes_nothing(make):
    """make() -> (tensors to watch, the call that must raise): the call raises and every
    watched tensor keeps its values."""
    watched, call = make()
    before = [t.detach().clone() for t in watched]
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        call()
    for t, b in zip(watched, before):
        assert t.shape == b.shape and bool((t.detach() == b).all()), (t, b)


def _bn_with_bad_bias():
    bn = flow.nn.BatchNorm1d(3)
    bn.bias = flow.nn.Parameter(flow.zeros(4))
    return [bn.running_mean, bn.running_var, bn.num_batches_tracked], \
        lambda: bn(flow.ones(4, 3) * flow.arange(3.0))


def _two_groups(second_lr, grad_shape):
    a, b = flow.nn.Parameter(flow.ones(3)), flow.nn.Parameter(flow.ones(3))
    opt = flow.optim.Adam([{"params": [a]}, {"params": [b], "lr": second_lr}], lr=0.1)
    a.grad, b.grad = flow.ones(3), flow.ones(3)
    b.grad.data = flow.ones(grad_shape)
    return [a, b], opt.step


@pytest.mark.parametrize("case", ["batch_norm_module", "optimizer_lr_tensor",
                                  "optimizer_grad_shape", "foreach_add_", "foreach_lerp_",
                                  "foreach_copy_"])
def test_a_refused_call_leaves_modules_parameters_and_lists_as_they_were(case):
    # flowgrad (as torch) counted the batch in num_batches_tracked before F.batch_norm refused
    # the bias; updated the first group's parameters before the second group's lr (a tensor of
    # two values) or gradient (another shape: NumPy's ValueError) was refused; and wrote the
    # foreach lists' first tensors before one whose operand does not fit
    xs = [flow.ones(2), flow.ones(3)]
    make = {
        "batch_norm_module": _bn_with_bad_bias,
        "optimizer_lr_tensor": lambda: _two_groups(flow.tensor([0.1, 0.2]), (3,)),
        "optimizer_grad_shape": lambda: _two_groups(0.1, (4,)),
        "foreach_add_": lambda: (xs, lambda: flow._foreach_add_(xs, [flow.ones(2),
                                                                   flow.ones(4)])),
        "foreach_lerp_": lambda: (xs, lambda: flow._foreach_lerp_(xs, [flow.ones(2),
                                                                     flow.ones(4)], 0.5)),
        "foreach_copy_": lambda: (xs, lambda: flow._foreach_copy_(xs, [flow.zeros(2),
                                                                     flow.zeros(2)])),
    }[case]
    _refused_changes_nothing(make)
