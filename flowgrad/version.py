"""torch.version's fields, which scripts read to log their environment or pick a code path
(`if torch.version.cuda: ...`): flowgrad runs on NumPy, with no CUDA, ROCm or XPU build."""
__version__ = "0.1.0"
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "unknown"
