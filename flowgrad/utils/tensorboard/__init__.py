"""torch.utils.tensorboard: `SummaryWriter` writes TensorBoard event files (scalars, groups of
scalars, histograms, text, images), with no dependency: the records and their protocol
buffers are encoded here (`events.py`). torch's needs the tensorboard package to write;
reading the logs needs TensorBoard, wherever it is installed."""
from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
