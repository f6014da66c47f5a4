"""SummaryWriter, as torch.utils.tensorboard's: one event file per writer directory, events
appended as TFRecords (`events.py`) and flushed every `max_queue` events, on `flush()` and on
`close()`.

>>> import os, tempfile
>>> import flowgrad as flow
>>> from flowgrad.utils.tensorboard import SummaryWriter
>>> logdir = tempfile.mkdtemp()
>>> with SummaryWriter(logdir) as writer:
...     for step in range(3):
...         writer.add_scalar("loss", 1.0 / (step + 1), step)
...     writer.add_histogram("weights", flow.randn(100), 2)
>>> [name.startswith("events.out.tfevents.") for name in os.listdir(logdir)]
[True]
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np

from . import events

__all__ = ["SummaryWriter", "FileWriter"]

_UID = [0]


def _numpy(value):
    """A tensor's (or anything array-like's) values as a NumPy array."""
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value)


class FileWriter:
    """Appends events to one new event file in `log_dir`."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        os.makedirs(log_dir, exist_ok=True)
        self._log_dir = str(log_dir)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{_UID[0]}{filename_suffix}")
        _UID[0] += 1
        self._path = os.path.join(self._log_dir, name)
        self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        self._pending, self._max_queue, self._flush_secs = 0, max_queue, flush_secs
        self._last_flush = time.time()
        self.add_event(events.event(time.time(), 0, file_version="brain.Event:2"))
        self.flush()

    def get_logdir(self):
        return self._log_dir

    def add_event(self, event):
        if self._file is None:
            raise RuntimeError(f"SummaryWriter: the event file {self._path} is closed")
        self._file.write(events.record(event))
        self._pending += 1
        if self._pending >= self._max_queue or time.time() - self._last_flush > self._flush_secs:
            self.flush()

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(events.event(time.time() if walltime is None else walltime,
                                    global_step, summary=summary))

    def flush(self):
        if self._file is not None:
            self._file.flush()
            self._pending, self._last_flush = 0, time.time()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


class SummaryWriter:
    """Writes TensorBoard logs to `log_dir` (default `runs/<time>_<host><comment>`).

    add_scalar, add_scalars (one sub-directory per curve, as torch's), add_histogram
    (torch's default 'tensorflow' buckets, or any NumPy `bins`), add_text, add_image and
    add_images (uint8 kept, floats scaled by 255), flush, close; a context manager. Graphs,
    embeddings, audio, video, meshes, figures, PR curves and hparams are not written: those
    calls raise NotImplementedError.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step, self.max_queue, self.flush_secs = purge_step, max_queue, flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = None
        self.all_writers = {}
        self._get_file_writer()

    def _get_file_writer(self):
        if self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
        return self.file_writer

    def get_logdir(self):
        """The directory this writer writes into."""
        return self.log_dir

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One point `scalar_value` (a number or a one-element tensor) of curve `tag`."""
        value = float(_numpy(scalar_value).reshape(-1)[0]) if hasattr(
            scalar_value, "shape") else float(scalar_value)
        self._get_file_writer().add_summary(
            events.summary(events.scalar_value(tag, value)), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several curves on one chart `main_tag`: each in its own sub-directory
        `<log_dir>/<main_tag>_<tag>`, as torch's."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, scalar_value in tag_scalar_dict.items():
            path = logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            writer = self.all_writers.get(path)
            if writer is None:
                writer = self.all_writers[path] = FileWriter(
                    path, self.max_queue, self.flush_secs, self.filename_suffix)
            value = float(_numpy(scalar_value).reshape(-1)[0])
            writer.add_summary(events.summary(events.scalar_value(main_tag, value)),
                               global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """The distribution of `values` (any shape) as a histogram."""
        data = _numpy(values).astype(float).reshape(-1)
        if data.size == 0:
            raise ValueError("add_histogram: the input has no element.")
        if isinstance(bins, str) and bins == "tensorflow":
            bins = _tensorflow_bins()
        counts, limits = np.histogram(data, bins=bins)
        if max_bins is not None and len(counts) > max_bins:
            # merge neighbouring bins, as torch's
            subsampling = len(counts) // max_bins
            remainder = len(counts) % subsampling
            if remainder:
                counts = np.pad(counts, (0, subsampling - remainder))
            counts = counts.reshape(-1, subsampling).sum(axis=-1)
            new_limits = np.empty((counts.size + 1,), limits.dtype)
            new_limits[:-1] = limits[:-1:subsampling]
            new_limits[-1] = limits[-1]
            limits = new_limits
        # TensorBoard reads right limits only: keep the non-empty span and one empty bin left
        seen = np.cumsum(counts > 0)
        start, end = np.searchsorted(seen, [0, seen[-1] - 1], side="right")
        start, end = int(start), int(end) + 1
        counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
        limits = limits[start:end + 1]
        value = events.histogram_value(tag, data.min(), data.max(), data.size, data.sum(),
                                       data.dot(data), limits, counts)
        self._get_file_writer().add_summary(events.summary(value), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """`text_string` (markdown) under `tag` (shown as `<tag>/text_summary`)."""
        value = events.text_value(tag + "/text_summary", text_string)
        self._get_file_writer().add_summary(events.summary(value), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """One image: (C, H, W) by default (`dataformats` says otherwise: 'HWC', 'HW'); uint8
        values as they are, floats in [0, 1] scaled by 255 and clipped."""
        pixels = _to_hwc(_numpy(img_tensor), dataformats)
        self._add_pixels(tag, pixels, global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW"):
        """A batch of images (N, C, H, W), tiled 8 to a row into one image."""
        pixels = _to_hwc(_numpy(img_tensor), dataformats)
        self._add_pixels(tag, pixels, global_step, walltime)

    def _add_pixels(self, tag, pixels, global_step, walltime):
        scale = 1 if pixels.dtype == np.uint8 else 255
        pixels = (pixels.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
        height, width, channels = pixels.shape
        value = events.image_value(tag, height, width, channels, events.png(pixels))
        self._get_file_writer().add_summary(events.summary(value), global_step, walltime)

    def flush(self):
        """Write every pending event to disk."""
        for writer in self.all_writers.values():
            writer.flush()

    def close(self):
        """Flush and close every event file (a later add_* opens a new one)."""
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = None
        self.all_writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _absent(name):
    def absent(self, *args, **kwargs):
        raise NotImplementedError(f"SummaryWriter.{name} is not available in flowgrad: it "
                                  f"writes scalars, histograms, text and images")
    absent.__name__ = name
    absent.__doc__ = f"Raises NotImplementedError (flowgrad does not write {name[4:]})."
    return absent


for _name in ("add_graph", "add_hparams", "add_embedding", "add_figure", "add_audio",
              "add_video", "add_pr_curve", "add_mesh"):
    setattr(SummaryWriter, _name, _absent(_name))


def _tensorflow_bins(cache=[]):  # noqa: B006 - computed once
    """torch's default histogram buckets: +-1e-12 growing by 10% up to 1e20, and 0."""
    if not cache:
        positive, v = [], 1e-12
        while v < 1e20:
            positive.append(v)
            v *= 1.1
        cache.append(np.array([-v for v in positive[::-1]] + [0.0] + positive))
    return cache[0]


def _to_hwc(array, dataformats):
    """(H, W, 3) from an image laid out as `dataformats` (N tiles a batch into a grid, 8 to a
    row; one channel repeats to three)."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or len(fmt) != array.ndim:
        raise ValueError(f"add_image: dataformats {dataformats!r} does not describe an image "
                         f"of shape {array.shape}")
    if len(fmt) == 4:
        batch = array.transpose([fmt.find(c) for c in "NCHW"])
        if batch.shape[1] == 1:
            batch = np.concatenate([batch] * 3, 1)
        n, _, h, w = batch.shape
        cols = min(n, 8)
        rows = -(-n // cols)
        canvas = np.zeros((3, h * rows, w * cols), batch.dtype)
        for i in range(n):
            y, x = divmod(i, cols)
            canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = batch[i]
        return canvas.transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = array.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    if len(fmt) == 2:
        return np.stack([array.transpose([fmt.find(c) for c in "HW"])] * 3, 2)
    raise ValueError(f"add_image: dataformats {dataformats!r} has {len(fmt)} letters; use "
                     f"'CHW', 'HWC', 'HW' or 'NCHW'")
