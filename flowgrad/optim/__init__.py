"""flowgrad.optim: optimizers and learning-rate schedulers, with torch's update formulas.

>>> import flowgrad as flow
>>> w = flow.zeros(3, requires_grad=True)
>>> opt = flow.optim.Adam([w], lr=0.1)
>>> sched = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
"""
from . import lr_scheduler, swa_utils
from .adafactor import Adafactor, SparseAdam
from .adagrad import Adadelta, Adagrad
from .adam import Adam, Adamax, AdamW
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .rprop import ASGD, Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop",
           "Adagrad", "Adadelta", "lr_scheduler", "LBFGS", "Rprop", "ASGD", "SparseAdam",
           "Adafactor", "Muon", "swa_utils"]
