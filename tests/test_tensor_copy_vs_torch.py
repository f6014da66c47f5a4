"""copy.deepcopy, copy.copy and pickling of tensors, and a tensor's own attributes, against
torch (flowgrad/tensor_copy.py): each case is a snippet run unchanged by torch and by
flowgrad through the programs' import shim (the harness of test_torch_function_vs_torch)."""
import json

import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch, checkpoint_runner

CASES = {
    # views deep-copied together stay views of one copy: a write shows through, strides and
    # offsets are the source's (an expanded view's stride 0 too)
    "deepcopy_keeps_views_of_one_storage": """
import copy
a = torch.arange(12.).reshape(3, 4)
views = [a, a[1:], a.t(), a[:, ::2], a[0].expand(2, 4), a.view(-1)[5:7]]
c = copy.deepcopy(views)
c[0][1, 0] = 100.
out = [c, [v.stride() for v in c], [v.storage_offset() for v in c], a,
       [v.is_contiguous() for v in c], c[1]._base is c[0]]
""",
    "deepcopy_of_a_view_alone_keeps_its_layout": """
import copy
x = torch.arange(6.).reshape(2, 3)
d = copy.deepcopy(x.t())
e = copy.deepcopy(x[:, 1:])
out = [d, d.stride(), d.is_contiguous(), e, e.stride(), e.storage_offset()]
""",
    "deepcopy_copies_attributes_grad_and_requires_grad": """
import copy
w = torch.ones(3, requires_grad=True)
(w * torch.arange(3.)).sum().backward()
w.info = {"lr": [0.1]}
d = copy.deepcopy(w)
d.info["lr"].append(1)
out = [d, d.requires_grad, d.is_leaf, d.grad, d.grad is w.grad, d.info, w.info]
""",
    "deepcopy_of_a_non_leaf_raises": """
import copy
copy.deepcopy(torch.ones(2, requires_grad=True) * 2)
""",
    "deepcopy_of_a_result_made_without_grad": """
import copy
x = torch.ones(2, requires_grad=True)
with torch.no_grad():
    y = x * 2
d = copy.deepcopy(y)
out = [d, d.requires_grad]
""",
    "deepcopy_keeps_tensors_shared_in_a_structure": """
import copy
t = torch.arange(3.)
s = {"a": t, "b": [t, t[1:]], "c": (t,)}
c = copy.deepcopy(s)
c["a"][2] = -1.
out = [c["b"][0] is c["a"], c["c"][0] is c["a"], c["b"][1], t]
""",
    "deepcopy_of_a_subclass_without_new_empty_raises": """
import copy
class My(torch.Tensor): pass
copy.deepcopy(torch.ones(2).as_subclass(My))
""",
    "deepcopy_of_an_opted_out_subclass_raises": """
import copy
class Plain(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl
copy.deepcopy(torch.ones(2).as_subclass(Plain))
""",
    "deepcopy_of_a_subclass_with_new_empty": """
import copy
class My(torch.Tensor):
    def new_empty(self, *args, **kwargs):
        return super().new_empty(*args, **kwargs).as_subclass(My)
t = torch.arange(3.).as_subclass(My)
t.meta = [1, 2]
d = copy.deepcopy(t)
d.meta.append(3)
out = [type(d).__name__, d, d.meta, t.meta]
""",
    "deepcopy_of_parameters_and_modules": """
import copy
p = nn.Parameter(torch.ones(3, 2).t())
p.note = "kept out"
p.grad = torch.ones(2, 3)
d = copy.deepcopy(p)
m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
m[1].weight = m[0].weight
with torch.no_grad():
    m[0].weight.fill_(0.5)
m2 = copy.deepcopy(m)
with torch.no_grad():
    m2[0].weight.add_(1.)
out = [type(d).__name__, d, d.stride(), hasattr(d, "note"), d.grad, d.requires_grad,
       m2[1].weight is m2[0].weight, m2[1].weight, m[0].weight]
""",
    # a plain tensor takes attributes; copy.copy and pickling keep them (copy: the same
    # objects, over the same storage)
    "attributes_of_plain_tensors": """
import copy, pickle
t = torch.arange(3.)
t.tag = {"k": [1]}
t._private = 2
c = copy.copy(t)
p = pickle.loads(pickle.dumps(t))
u = torch.ones(1)
u.x = 1
del u.x
out = [sorted(vars(t)), c.tag is t.tag, c.data_ptr() == t.data_ptr(), p, p.tag, p._private,
       hasattr(u, "x"), hasattr(torch.ones(1), "tag"), "tag" in dir(t)]
""",
    "parameters_pickle_their_attributes": """
import copy, pickle
p = nn.Parameter(torch.ones(2))
p.flag = True
q = pickle.loads(pickle.dumps(p))
c = copy.copy(p)
out = [type(q).__name__, q.flag, q.requires_grad, type(c).__name__, c.flag]
""",
    "checkpoints_keep_attributes": """
import io
t = torch.arange(3.)
t.tag = {"epoch": 3}
p = nn.Parameter(torch.zeros(2))
p.flag = "x"
buf = io.BytesIO()
torch.save({"t": t, "p": p, "plain": torch.ones(1)}, buf)
buf.seek(0)
r = torch.load(buf)
out = [r["t"], r["t"].tag, type(r["p"]).__name__, r["p"].flag, hasattr(r["plain"], "tag")]
""",
    # torch's format keeps views of one storage: their offsets after a load are torch's
    "checkpoint_views_keep_storage_offsets": """
import io
a = torch.arange(10.)
buf = io.BytesIO()
torch.save({"a": a, "v": a[3:7], "t": a.view(2, 5).t()}, buf,
           **({} if torch.__name__ == "torch" else {"format": "torch"}))
buf.seek(0)
r = torch.load(buf)
r["a"][4] = 100.
out = [r["v"].storage_offset(), r["t"].stride(), r["a"].storage_offset(), r["v"]]
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_copy_case_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])


_CHECKPOINT_SCRIPT = '''
import json, sys
torch = __import__(sys.argv[1])
if sys.argv[2] == "write":
    t = torch.arange(3.0)
    t.tag = {"epoch": 3}
    p = torch.nn.Parameter(torch.ones(2))
    p.flag = "x"
    torch.save({"t": t, "p": p}, sys.argv[3])
else:
    r = torch.load(sys.argv[3])
    print(json.dumps([r["t"].tolist(), r["t"].tag, type(r["p"]).__name__, r["p"].flag]))
'''


def test_checkpoints_with_attributes_both_ways(tmp_path):
    """Attributes of a plain tensor and of a Parameter, written by torch and read by
    flowgrad, and the other way round (torch's _rebuild_from_type_v2 and
    _rebuild_parameter_with_state); a .bin path, which flowgrad would write as safetensors,
    goes to torch's format as safetensors cannot hold them."""
    run = checkpoint_runner(tmp_path, _CHECKPOINT_SCRIPT)

    expected = [[0.0, 1.0, 2.0], {"epoch": 3}, "Parameter", "x"]
    run("torch", "write", tmp_path / "a.pt")
    run("flowgrad", "write", tmp_path / "b.bin")
    assert json.loads(run("flowgrad", "read", tmp_path / "a.pt")) == expected
    assert json.loads(run("torch", "read", tmp_path / "b.bin")) == expected
