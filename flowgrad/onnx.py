"""`flow.onnx`: importable, so scripts that import it run; exporting is not implemented.

>>> import flowgrad as flow
>>> flow.onnx.is_in_onnx_export()
False
"""


def is_in_onnx_export() -> bool:
    """False: no export is ever running."""
    return False


def export(model, args=(), f=None, *unused_args, **unused_kwargs):
    """Refused with the alternatives: flowgrad has no ONNX exporter."""
    raise NotImplementedError(
        "flowgrad.onnx.export: flowgrad has no ONNX exporter. Save the weights with "
        "flowgrad.save(model.state_dict(), 'model.pt'), load them into the same model in "
        "PyTorch (torch.load reads the file) and export it with torch.onnx.export")


dynamo_export = export
