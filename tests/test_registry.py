"""Every registered op declares a gradient rule or is explicitly marked non-differentiable."""
import flowgrad  # noqa: F401 - importing fills the registry
from flowgrad.ops import REGISTRY


def test_every_op_has_a_rule_or_a_mark():
    missing = [name for name, op in REGISTRY.items()
               if op.differentiable and op.backward is None]
    assert not missing, f"ops with neither a gradient rule nor differentiable=False: {missing}"


def test_non_differentiable_ops_have_no_rule():
    both = [name for name, op in REGISTRY.items() if not op.differentiable and op.backward]
    assert not both, f"ops marked non-differentiable yet given a rule: {both}"


def test_registry_is_keyed_by_op_name():
    assert all(op.name == name for name, op in REGISTRY.items())
    assert REGISTRY["relu"].node_name == "relu_backward"
