"""`flow.nn.Graph`: OneFlow's lazy mode. The first call traces `build` into a Program (the
backward joins it through the autograd pass), runs the optimization passes and generates a
plan; later calls run the plan without running `build` again.

>>> import flowgrad as flow
>>> model = flow.nn.Linear(3, 1)
>>> opt = flow.optim.SGD(model.parameters(), lr=0.1)
>>> class Step(flow.nn.Graph):
...     def __init__(self):
...         super().__init__()
...         self.model = model
...         self.add_optimizer(opt)
...     def build(self, x, y):
...         loss = ((self.model(x) - y) ** 2).mean()
...         loss.backward()
...         return loss
>>> step = Step()
>>> x, y = flow.ones(4, 3), flow.zeros(4, 1)
>>> first, second = step(x, y), step(x, y)
>>> bool(second < first), step.is_compiled
(True, True)
"""
from __future__ import annotations

import contextlib
import gc
import inspect
import reprlib
import time

from .. import random as _random
from ..amp.autocast_mode import autocast
from ..amp.autocast_mode import state as _amp_state
from ..autograd import engine
from ..autograd import interpreter as _interpreter
from ..autograd import profiling as _profiling
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..autograd.inplace import bump_version
from ..autograd.interpreter import using_interpreter
from ..device import ARRAY_MODULES, HOST_XP, array_module
from ..dtypes import _default_float
from ..nn.module import Module
from ..nn.parameter import is_lazy
from ..optim.optimizer import Optimizer
from ..tensor import Tensor
from . import checkpointing, codegen, optimizer_pass, passes
from .call_args import (
    bound_to_build,
    captured_by,
    check_signature,
    flatten_inputs,
    flatten_outputs,
    input_signature,
    micro_batches,
    signature_key,
)
from .container_writes import contents, refuse_container_writes
from .escapes import escape_watch, warn_escaped
from .group_reads import noting_group_reads, watched_exactly
from .ir import INPUT, NODE, STATE, StalePlanError
from .layout_reads import (
    alias_watch,
    check_layouts,
    layout_watches,
    watching_layout_reads,
    written_state_watch,
)
from .layout_reads import layout as _layout
from .plan_checks import (
    _GONE,
    _bindings,
    _group_settings,
    _hooks,
    _module_settings,
    _rebound,
    _refuse_group_writes,
    _refuse_setting_writes,
    _refuse_without_grad,
    _settings,
    _state_meta,
    _trainable,
    ambient,
    host_random_states,
    put_back,
    refuse_host_draws,
    same_array,
)
from .python_reads import copied_arrays, is_python_read, python_reads
from .sites import user_line
from .tracer import Tracer


class GraphConfig:
    """`graph.config`: the switches OneFlow's nn.Graph has; recorded, honoured where they
    mean something to this compiler."""

    def __init__(self):
        self.gradient_accumulation_steps = 1
        self.switches = {}
        self.amp, self.amp_dtype = False, None

    def set_gradient_accumulation_steps(self, steps):
        """Split each call's batch (dim 0 of every tensor input) into `steps` micro-batches:
        the step runs on each, their mean gradient makes one update, and every output comes
        back with one row per micro-batch."""
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"nn.Graph: gradient accumulation steps must be a positive int, "
                             f"got {steps!r}")
        self.gradient_accumulation_steps = steps

    def enable_amp(self, mode=True, *, dtype=None):
        """Trace `build` under CPU autocast (`flowgrad.autocast`) in `dtype` (OneFlow's
        default float16): the compiled plan holds the casts eager autocast would make."""
        from .. import dtypes

        self.amp_dtype = dtypes.float16 if dtype is None else dtypes.as_dtype(dtype)
        self.amp = bool(mode)

    def __getattr__(self, name):
        if name.startswith(("allow_", "enable_", "set_")):
            return lambda *args, **kwargs: self.switches.__setitem__(name, (args, kwargs))
        raise AttributeError(name)


class Graph:
    """Subclass, call `super().__init__()`, assign modules, `add_optimizer`, write `build`."""

    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_optimizers", [])
        object.__setattr__(self, "_compiled", None)  # the plan last run
        object.__setattr__(self, "_plans", {})       # input signature -> plan (dynamic shapes)
        object.__setattr__(self, "config", GraphConfig())
        object.__setattr__(self, "_graph_modules", {})  # id(module) -> (module, GraphModule)
        object.__setattr__(self, "_name", f"{type(self).__name__}_{Graph._count}")
        Graph._count += 1

    _count = 0

    def __getattribute__(self, name):
        reads = object.__getattribute__(self, "__dict__").get("_reads")
        if reads is not None:  # tracing: the graph's own settings build reads (_settings)
            reads.add(name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if "_modules" not in self.__dict__:
            raise RuntimeError(f"nn.Graph: call super().__init__() in {type(self).__name__}."
                               f"__init__ before assigning attributes (here: {name!r})")
        if isinstance(value, Optimizer):
            raise RuntimeError(f"nn.Graph: attribute {name!r} is an optimizer; register it "
                               f"with self.add_optimizer({name}) instead")
        if isinstance(value, Tensor):
            raise RuntimeError(f"nn.Graph: attribute {name!r} is a Tensor; a graph holds "
                               f"tensors through modules: register it as a parameter or "
                               f"buffer of an nn.Module assigned to the graph")
        if isinstance(value, checkpointing.ProxyModule):
            value = value._module
        if isinstance(value, Module):  # seen through a proxy, as in OneFlow (checkpointing.py)
            self._modules[name] = value
            value = checkpointing.ProxyModule(value, self, name)
        object.__setattr__(self, name, value)

    def add_optimizer(self, optimizer, *, lr_sch=None, is_sparse=False):
        """Make the graph a training graph: each call also steps `optimizer` (clipping
        gradients as its param groups' clip_grad_max_norm/clip_grad_norm_type say), zeroes
        the gradients, then steps `lr_sch`. An optimizer whose step needs a closure (LBFGS)
        is refused."""
        from ..optim.lr_scheduler import ReduceLROnPlateau

        closure = inspect.signature(type(optimizer).step).parameters.get("closure")
        if closure is not None and closure.default is inspect.Parameter.empty:
            raise NotImplementedError(
                f"nn.Graph.add_optimizer: {type(optimizer).__name__}.step needs a closure that "
                f"re-evaluates the loss several times a step, and a graph steps its optimizers "
                f"once after its plan, without one. Step it eagerly (opt.step(closure)), or "
                f"use an optimizer whose step takes gradients only")
        if isinstance(lr_sch, ReduceLROnPlateau):
            raise TypeError("nn.Graph.add_optimizer: ReduceLROnPlateau steps on a metric the "
                            "graph does not have; leave lr_sch out and call "
                            "scheduler.step(loss) after each graph call (the plan reads the "
                            "learning rate it sets)")
        self._optimizers.append((optimizer, lr_sch))

    def build(self, *args, **kwargs):
        raise NotImplementedError(f"nn.Graph: {type(self).__name__} must override build() with "
                                  f"the step to compile")

    @property
    def name(self):
        return self._name

    @property
    def is_compiled(self):
        return self._compiled is not None

    # ---- calling -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if type(self).build is Graph.build:
            self.build()
        args, kwargs = bound_to_build(self, args, kwargs)
        steps = self.config.gradient_accumulation_steps
        if steps == 1:
            result, grads = self._step(args, kwargs)
            self._update(grads)
            return result
        # gradient accumulation: k micro-batches along dim 0, their mean gradient, one update;
        # each output comes back stacked, one row per micro-batch
        results, total, parts = [], {}, {}
        for micro_args, micro_kwargs in micro_batches(args, kwargs, steps, parts):
            result, (grads, _) = self._step(micro_args, micro_kwargs)
            results.append(result)
            for p, g in grads.items():
                total[p] = g / steps if p not in total else total[p] + g / steps
        self._update((total, None))
        for whole, chunks in parts.values():  # an input's gradient: its micro-batches', / k
            if any(c.grad is not None for c in chunks):
                xp = array_module(whole._data)
                grads = [c.grad._data if c.grad is not None else
                         xp.zeros(c._data.shape, c._data.dtype) for c in chunks]
                _add_leaf_grads([whole], [(0, xp.concatenate(grads) / steps)])
        leaves = [flatten_outputs(r)[0] for r in results]
        rebuild = flatten_outputs(results[0])[1]
        return rebuild([Tensor._wrap(array_module(leaves[0][i]._data).stack(
            [ls[i]._data for ls in leaves])) for i in range(len(leaves[0]))])

    def _step(self, args, kwargs):
        flat = flatten_inputs(args, kwargs)
        if not self._optimizers:
            self._plans_of_grad_mode()
        elif not _grad_state.enabled and self._compiled is not None:
            _refuse_without_grad(self)
        if self._compiled is None:
            return self._profiled_compile(args, kwargs, flat)
        signature = input_signature(flat)
        if self._dynamic_size and signature != self._compiled[3]:
            compiled = self._plans.get(signature_key(signature))
            if compiled is None:
                return self._profiled_compile(args, kwargs, flat)
            object.__setattr__(self, "_compiled", compiled)
        return self._run(flat)

    def _plans_of_grad_mode(self):
        """The plans traced in the grad mode of this call: build may take another path
        without grad (torch's Transformer encoder in eval converts padded batches to nested
        tensors, whose padded rows come out zero), so a graph without an optimizer called
        under no_grad and with grad holds a plan (and its dynamic-shape plans) for each."""
        mode = is_grad_enabled()
        held = self.__dict__.setdefault("_grad_mode", mode)
        if held == mode:
            return
        others = self.__dict__.setdefault("_other_grad_mode", {})
        others[held] = (self._compiled, self._plans)
        compiled, plans = others.pop(mode, (None, {}))
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_plans", plans)
        object.__setattr__(self, "_grad_mode", mode)

    def _profiled_compile(self, args, kwargs, flat):
        """`_compile`, seen by the profiler as one range (its tracer calls the ops)."""
        opened = _profiling.begin_range(f"nn.Graph {self._name} (trace and compile)")
        try:
            return self._compile(args, kwargs, flat)
        finally:
            _profiling.end_range(opened)

    _dynamic_size = 0  # with_dynamic_input_shape(size=n): up to n plans, one per signature

    @staticmethod
    def with_dynamic_input_shape(size=10):
        """Class decorator: compile one plan per input signature (shapes and dtypes), keeping
        up to `size` of them; they share the modules' state."""
        def decorate(cls):
            cls._dynamic_size = int(size)
            return cls
        return decorate

    @staticmethod
    def trace(function):
        """A graph compiled from `function(*tensors)` (an eval step: no optimizer), called like
        the function.

        >>> import flowgrad as flow
        >>> double = flow.nn.Graph.trace(lambda x: x * 2)
        >>> double(flow.ones(2)).tolist()
        [2.0, 2.0]
        """
        class Traced(Graph):
            def build(self, *args, **kwargs):
                return function(*args, **kwargs)

        Traced.__name__ = Traced.__qualname__ = f"Traced_{getattr(function, '__name__', 'fn')}"
        traced = Traced()
        # the modules the function reaches are the graph's, as if assigned in __init__: a
        # change to one after compiling (a setting, a replaced parameter) is then refused
        for i, module in enumerate(m for m in captured_by(function) if isinstance(m, Module)):
            setattr(traced, f"captured_{i}", module)
        return traced

    def _state(self):
        """The modules' parameters and buffers, then any other parameter an optimizer of the
        graph holds (used in build as a captured tensor, it is state all the same: its
        gradient is a result of the plan and the optimizer updates it)."""
        seen = {}
        for module in self._modules.values():
            for t in list(module.parameters()) + list(module.buffers()):
                seen.setdefault(id(t), t)
        for optimizer, _ in self._optimizers:
            for group in optimizer.param_groups:
                for t in group["params"]:
                    seen.setdefault(id(t), t)
        return list(seen.values())

    def _compile(self, args, kwargs, flat):
        # the trace makes thousands of objects that all live as long as the plan: the cycle
        # collector, run every 700 of them, would walk them again and again for nothing
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            result = self._trace_and_generate(args, kwargs, flat)
            # (before the collector is back: what only the trace held is gone by then)
            warn_escaped(self, self.__dict__.pop("_escape_watch"), result, flat)
            self._compiled[0].compact()
        finally:
            if was_enabled:
                gc.enable()
        return result

    def _trace_and_generate(self, args, kwargs, flat):
        started = time.perf_counter()
        state = self._state()
        if any(is_lazy(t) for t in state):
            raise RuntimeError(
                f"nn.Graph {self._name}: a module has uninitialized parameters (a lazy module: "
                f"LazyLinear, LazyConv2d, ...); run the model once eagerly on a batch before "
                f"the graph's first call, so their shapes are known")
        # the default dtype and an autocast region the graph is called in (unless
        # config.enable_amp decides): traced under them, as eagerly, and checked each call
        now = ambient(self.config.amp)
        amp, amp_dtype = (True, now[1]) if now[1] is not None else (self.config.amp,
                                                                    self.config.amp_dtype)
        tracer = Tracer()
        tracer.program.ambient = now
        for t in state:
            tracer.bind(t, STATE, t)
        for i, t in enumerate(flat):
            if isinstance(t, Tensor):
                tracer.program.inputs.append(tracer.bind(t, INPUT, i))
        tracer.program.inputs_requiring_grad = _requiring_grad(flat)
        rng_before = _random._snapshot()  # (a failed trace puts it back, and the writes)
        layout_read, group_read = [], []
        try:
            with watching_layout_reads(tracer, layout_read), noting_group_reads(
                    [opt for opt, _ in self._optimizers], group_read):
                out, rebound, bound, reads = self._traced_build(tracer, args, kwargs, amp,
                                                                amp_dtype)
        except BaseException:
            tracer.restore_writes()
            _random._restore(rng_before)
            raise
        tracer.finish()
        self.__dict__["_escape_watch"] = escape_watch(tracer)
        for store, name, old, new in rebound:  # self.avg = self.avg * 0.9 + ...: a write-back
            tracer.program.writebacks[old] = tracer.value(new)
            store[name] = old
            old._data[...] = new._data  # (the first call's value, as eagerly)
            bump_version(old)
        program = tracer.program
        leaves, rebuild = flatten_outputs(out)
        # a tensor attribute build set (`self.last = attn.detach()`): a result of the plan,
        # after the outputs, bound to the attribute after each call as eagerly each call binds
        program.outputs = [tracer.value(t) for t in leaves] + [
            tracer.value(new) for _, _, new in bound]
        program.attribute_sets = [(store, name) for store, name, _ in bound]
        first = [tracer.tensor_of[v.id] for v in program.results()]
        n, n_leaves = len(program.outputs), len(leaves)
        grads = {p: g._data for p, g in zip(program.grads, first[n:n + len(program.grads)])}
        leaf_grads = list(zip(program.leaf_grads, first[len(first) - len(program.leaf_grads):]))
        eager_update = optimizer_pass.plan_updates(
            program, [opt for opt, _ in self._optimizers], self.config)
        traced = time.perf_counter() - started
        self._log(0, lambda: _traced_summary(self._name, program, traced))
        self._log(2, lambda: f"  traced program:\n{program!r}")
        # an input the plan writes into: whether a write through a reshape of it reached it
        # depended on its layout (a view, or a copy): later calls must have the same
        reshaped = _reshaped_inputs(program) if program.input_writes else ()
        program.input_layouts = {i: (_layout, _layout(flat[i])) for i in program.input_writes
                                 if i in reshaped}
        program.input_layouts.update(alias_watch(flat, state, program.input_writes))
        program.input_layouts.update(written_state_watch(program, state))
        if layout_read:  # (build branched on a layout or autograd state: watched exactly)
            program.input_layouts.update(layout_watches(layout_read, flat, state))
        program.switches = {name: bool(args[0]) if args else True
                            for name, (args, _) in self.config.switches.items()}
        passes.optimize(program, log=(lambda m: self._log(0, "  " + m))
                        if self._debug_level >= 0 else None)
        self._log(1, lambda: f"  optimized program:\n{program!r}")
        started = time.perf_counter()
        plan = codegen.generate(program)
        generated = time.perf_counter() - started
        self._log(0, lambda: f"  codegen: {plan.source.count(chr(10)) + 1} lines in "
                             f"{generated * 1e3:.1f} ms")
        self._log(2, plan.source)
        # the globals and closure variables the traced code read: a plan keeps their values
        read_settings, read_bindings, arrays = python_reads(
            self, [s for m in self._modules.values() for s in m.modules()], _module_settings,
            state, watched_exactly)
        program.read_guards += copied_arrays(arrays, program)  # (flow.tensor(WEIGHTS))
        compiled = (program, plan, rebuild, input_signature(flat), eager_update,
                    optimizer_pass.param_layout(self._optimizers), _trainable(state),
                    _settings(self, reads) + read_settings + group_read,
                    _bindings(self, program.attribute_sets) + read_bindings,
                    _hooks(self, state),
                    _state_meta(state))
        object.__setattr__(self, "_compiled", compiled)
        _add_leaf_grads(flat, [(key, g._data) for key, g in leaf_grads])
        if self._dynamic_size:
            if len(self._plans) >= self._dynamic_size:
                self._plans.pop(next(iter(self._plans)))  # the oldest signature goes
            self._plans[signature_key(compiled[3])] = compiled
        for (store, name), t in zip(program.attribute_sets, first[n_leaves:n]):
            if t.requires_grad:  # (the trace's history: the later calls' tensors have none)
                store[name] = t.detach()
        return rebuild([t.detach() for t in first[:n_leaves]]), (grads, None)

    def _traced_build(self, tracer, args, kwargs, amp, amp_dtype):
        """Run build under the tracer: (its result, the buffers it assigned anew as two lists
        (`_rebound`), the graph attributes it read)."""
        # the weight-cast cache on, as eager autocast has it: a weight used twice is cast once,
        # and its gradients summed in the lower precision, the numbers eager gets (a cache of
        # the trace's own: an enclosing region's casts, made eagerly, would be frozen into the
        # plan, and the trace's would stay in the region's)
        with using_interpreter(tracer), _cast_cache_apart(), autocast(
                "cpu", amp_dtype, amp, cache_enabled=True), checkpointing.tracking(
                tracer.program, checkpointing.checkpointed_modules(self)), \
                _random.refusing_state_changes(_refuse_rng_change):
            self.__dict__["_reads"] = set()
            settings_before = _settings(self, None)
            containers_before = contents(self)
            groups_before = _group_settings(self)
            draws_before = host_random_states()
            try:
                out = self.build(*args, **kwargs)
                refuse_host_draws(self, draws_before)
                _refuse_setting_writes(self, settings_before)
                refuse_container_writes(self, containers_before, tracer)
                _refuse_group_writes(self, groups_before)
                rebound, bound = _rebound(self, tracer.rebinds.values())
            except BaseException:
                tracer.restore_grads()  # a failed build leaves the eager .grad as it was
                put_back(tracer.rebinds.values())  # and the modules' tensors
                raise
            finally:
                reads = self.__dict__.pop("_reads")
        return out, rebound, bound, reads

    def _run(self, flat):
        (program, plan, rebuild, signature, eager_update, layout, trainable,
         settings, bindings, hooks, state_meta) = self._compiled
        check_signature(signature, input_signature(flat))
        traced = program.ambient
        if _default_float[0] is not traced[0] or type(_interpreter.current) is not traced[2]:
            _check_ambient(self, traced)
        if program.input_layouts:  # (not `layout`: the param layout's)
            check_layouts(self._name, program.input_layouts, flat)
        for tensor, seen in program.read_guards:
            if not same_array(tensor._data, seen):
                raise StalePlanError(
                    f"nn.Graph {self._name}: build() read the values of a captured tensor "
                    f"or NumPy array (shape {tuple(seen.shape)}: item(), tolist(), an op "
                    f"taking its values as sizes or indices, flow.tensor(array), array[i]) and "
                    f"they changed since the graph compiled; its plan "
                    f"keeps the values it read. Pass the tensor to the graph as an input and "
                    f"compute with tensor ops, or build a new graph")
        for store, path, name, held in bindings:
            if store.get(name, _GONE) is not held:
                if is_python_read(path):
                    raise StalePlanError(_python_read_changed(self._name, path, held,
                                                              store.get(name, _GONE)))
                raise StalePlanError(
                    f"nn.Graph {self._name}: {path}.{name} was replaced after the graph "
                    f"compiled (a new Parameter, buffer, submodule or tensor attribute "
                    f"assigned); its plan keeps computing with the one it traced. Write new "
                    f"values into the existing tensor (with flow.no_grad(): p.copy_(new)), or "
                    f"build a new graph")
        for module, path, name, value in settings:
            now = module.__dict__.get(name, _GONE)
            if now is not value and now != value:
                if not isinstance(module, (Graph, Module)):
                    raise StalePlanError(_python_read_changed(self._name, path, value, now))
                where = "the graph" if module is self else \
                    f"module {path!r} ({type(module).__name__})"
                raise StalePlanError(
                    f"nn.Graph {self._name}: {where} had "
                    f"{name}={value!r} when the graph compiled and has {name}={now!r} now; "
                    f"its plan keeps the traced value. Build a new graph after changing a "
                    f"module's settings (for train()/eval(): a training graph and an eval "
                    f"graph can share the modules, each called in the mode it was built in)")
        for store, keys in hooks:
            if tuple(store) != keys:
                raise StalePlanError(
                    f"nn.Graph {self._name}: a hook was registered or removed after the graph "
                    f"compiled (a module's forward or backward hook, a global module hook, "
                    f"or a parameter's register_hook); its plan runs the hooks it traced, "
                    f"and would ignore the change. Build a new graph after changing hooks")
        if _state_meta(trainable[0]) != state_meta:
            changed = next(i for i, (t, meta) in enumerate(zip(trainable[0], state_meta))
                           if (t._data.shape, t._data.dtype) != meta)
            t = trainable[0][changed]
            raise StalePlanError(
                f"nn.Graph {self._name}: a parameter or buffer traced as "
                f"{state_meta[changed][0]} {state_meta[changed][1]} is now "
                f"{tuple(t._data.shape)} {t._data.dtype} (a .to(), .double(), .half(), or a "
                f".data of another shape); its plan was compiled for the traced ones. Build a "
                f"new graph after changing the model's dtype or shapes")
        if _trainable(trainable[0]) != trainable:
            raise StalePlanError(
                f"nn.Graph {self._name}: a parameter's requires_grad changed after the graph "
                f"compiled (frozen or unfrozen); its plan computes the gradients of the "
                f"parameters that required grad when it was traced, and would keep updating a "
                f"frozen one. Build a new graph after changing requires_grad")
        if optimizer_pass.param_layout(self._optimizers) != layout:
            raise StalePlanError(
                f"nn.Graph {self._name}: an optimizer's param groups changed after the graph "
                f"compiled (add_param_group, or params added or removed); the compiled "
                f"update would skip them. Build a new graph after changing the groups")
        for optimizer, _ in self._optimizers:
            if optimizer not in eager_update and not optimizer_pass.still_in_plan(
                    optimizer, self.config):
                raise StalePlanError(
                    f"nn.Graph {self._name}: {type(optimizer).__name__}'s update runs inside "
                    f"the plan, and it now needs the eager step after it (a param group's "
                    f"clip_grad_max_norm, gradient accumulation, or a step hook of its own or "
                    f"a global one, set after the graph compiled): the plan would skip it. "
                    f"Build a new graph after changing these")
        if program.differentiated:
            _check_inputs_requiring_grad(self._name, flat, program.inputs_requiring_grad)
        arrays = [t._data for t in flat if isinstance(t, Tensor)]
        xp = ARRAY_MODULES.get(type(arrays[0]), HOST_XP) if arrays else HOST_XP
        opened = _profiling.begin_range(f"nn.Graph {self._name}")  # (the profiler's view: one
        # range per run of the plan, which calls no op)
        try:
            results = plan.run(xp, [t._data if isinstance(t, Tensor) else None for t in flat])
        finally:
            _profiling.end_range(opened)
        for position in program.input_writes:  # (the plan wrote into their arrays)
            bump_version(flat[position])
        n = len(program.outputs)
        outs = [Tensor._wrap(a) for a in results[:n]]
        n_leaves = n - len(program.attribute_sets)
        for (store, name), t in zip(program.attribute_sets, outs[n_leaves:]):
            store[name] = t
        if program.leaf_grads:
            _add_leaf_grads(flat, zip(program.leaf_grads,
                                      results[len(results) - len(program.leaf_grads):]))
        return rebuild(outs[:n_leaves]), (dict(zip(program.grads, results[n:])),
                                          eager_update)

    def _update(self, grads):
        """The optimizer part of a training step after the plan ran: set the gradients, clip,
        step and zero for the optimizers the plan does not update (`eager`; None: all of
        them, as on the first call), then step the schedulers. A parameter no optimizer
        updates gets its gradient in .grad, as eagerly (summed over calls until zeroed)."""
        grads, eager = grads
        if not grads and not self._optimizers:
            return
        program = self._compiled[0]
        handed = set()
        zeroed = {id(p) for optimizer, _ in self._optimizers for group in optimizer.param_groups
                  for p in group["params"]}
        for p, array in grads.items():
            if id(p) not in zeroed and p.grad is not None:
                # no optimizer zeroes it: its .grad sums every call's, as eagerly
                with no_grad():
                    engine._accumulate(p._meta, Tensor._wrap(array.copy()), variable=p)
                continue
            grad_value = program.grads.get(p)
            # never hand out a constant's, or a view's, storage, nor one array as two
            # parameters' grads (equal gradients, as an RNN's two biases have, are one value
            # of the plan): clipping scales each grad in place, and would scale it twice
            if grad_value is None or grad_value.kind != NODE or array.base is not None \
                    or id(array) in handed:
                array = array.copy()
            handed.add(id(array))
            p.grad = Tensor._wrap(array)
        from ..nn.utils import clip_grad_norm_

        for optimizer, lr_sch in self._optimizers:
            if eager is not None and optimizer not in eager:
                if lr_sch is not None:
                    lr_sch.step()
                continue
            for group in optimizer.param_groups:
                if "clip_grad_max_norm" in group:
                    clip_grad_norm_(group["params"], group["clip_grad_max_norm"],
                                    group.get("clip_grad_norm_type", 2.0))
                if getattr(optimizer, "_takes_sparse_only", False):  # SparseAdam: the plan's
                    # dense gradients as sparse, a row with any non-zero value as an entry
                    for p in group["params"]:
                        if p.grad is not None:
                            p.grad = p.grad.to_sparse(1) if p.dim() > 1 else p.grad.to_sparse()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if lr_sch is not None:
                lr_sch.step()

    # ---- state and printing -------------------------------------------------------------------
    def state_dict(self):
        """Module states by attribute name, each optimizer's state and each lr_sch's (as
        OneFlow's: a graph resumed from it goes on with the schedule where it was)."""
        state = {name: m.state_dict() for name, m in self._modules.items()}
        state["_optimizers"] = [opt.state_dict() for opt, _ in self._optimizers]
        state["_lr_schedulers"] = [None if sch is None else sch.state_dict()
                                   for _, sch in self._optimizers]
        return state

    def load_state_dict(self, state):
        for name, module in self._modules.items():
            module.load_state_dict(state[name])
        for (opt, _), opt_state in zip(self._optimizers, state.get("_optimizers", ())):
            opt.load_state_dict(opt_state)
        for (_, sch), sch_state in zip(self._optimizers, state.get("_lr_schedulers", ())):
            if sch is not None and sch_state is not None:
                sch.load_state_dict(sch_state)

    def debug(self, v_level=0, *, ranks=None, max_py_stack_depth=2, only_user_py_stack=True):
        """Log the compilation, as OneFlow's `graph.debug`: with `v_level` 0 the trace's size
        and each pass's node count and time; 1 adds the program after the passes; 2 adds the
        traced program before them and the generated plan's source. -1 turns it off. Called
        on a graph compiled already, it prints what level `v_level` would have shown of it.

        >>> import flowgrad as flow
        >>> g = flow.nn.Graph.trace(lambda x: (x * 2).tanh())
        >>> g.debug(0)
        >>> _ = g(flow.ones(2))  # doctest: +ELLIPSIS
        nn.Graph Traced_<lambda>_...: traced 2 nodes (2 forward, 0 backward) in ... ms
          pass simplify_algebra: 2 -> 2 nodes in ... ms
        ...
          codegen: ... lines in ... ms
        """
        object.__setattr__(self, "_debug_level", int(v_level))
        if self._compiled is not None and v_level >= 0:
            print(self._compiled[0])
            if v_level >= 2:
                print(self._compiled[1].source)

    _debug_level = -1

    def _log(self, level, message):
        """Print `message` (or what a callable `message` returns: a program's repr is only
        made when the level asks for it) at debug level `level` and above."""
        if self._debug_level >= level:
            print(message() if callable(message) else message)

    def __repr__(self):
        lines = [f"({self._name}): ("]
        lines += [f"  ({name}): {module!r}".replace("\n", "\n  ")
                  for name, module in self._modules.items()]
        if self._compiled is not None:
            lines.append("  (compiled program):\n    " +
                         repr(self._compiled[0]).replace("\n", "\n    "))
        return "\n".join(lines) + "\n)"


def _refuse_rng_change(what):
    raise RuntimeError(
        f"nn.Graph: {what} inside build() changes a random generator's state once, while "
        f"build is traced, at {user_line()}; the compiled plan's random ops draw on from the "
        f"generator on every call, where the eager code would restart its stream. Seed "
        f"outside build (flow.manual_seed before calling the graph), or pass the random "
        f"values in as an input")


@contextlib.contextmanager
def _cast_cache_apart():
    held = _amp_state.cache
    _amp_state.cache = {}
    try:
        yield
    finally:
        _amp_state.cache = held


def _check_ambient(graph, traced):
    """A call under another default dtype, or inside or outside an autocast region unlike the
    traced call: the plan holds the traced dtypes and casts (eagerly, each call makes its
    constants in the default dtype, and autocast casts)."""
    now = ambient(graph.config.amp)
    if now[:2] == traced[:2]:
        return
    what = (f"the default dtype was {traced[0]} when the graph compiled and is {now[0]} "
            f"now" if now[0] != traced[0] else
            f"it was traced {'outside autocast' if traced[1] is None else 'under autocast'}"
            f"{'' if traced[1] is None else f' ({traced[1]})'} and is called "
            f"{'outside autocast' if now[1] is None else f'under autocast ({now[1]})'} now")
    raise StalePlanError(
        f"nn.Graph {graph._name}: {what}; its plan keeps the traced "
        f"dtypes and casts. Call it in the state it was traced in (or set "
        f"graph.config.enable_amp, which holds whatever region it is called in), or build a "
        f"new graph for the other state")


def _python_read_changed(name, path, value, now):
    def show(v):
        return "(none)" if v is _GONE else f"{type(v).__name__} at {id(v):#x}" if isinstance(
            v, (Tensor, Module)) else reprlib.repr(v)
    return (f"nn.Graph {name}: the traced code read {path}, which was {show(value)} when the "
            f"graph compiled and is {show(now)} now; its compiled plan keeps computing with "
            f"the traced value (a Python value read while tracing is frozen into the plan). "
            f"Pass the value to the graph as an argument (a tensor, or a Python number its "
            f"plans are keyed by), keep it in a buffer updated in place, or build a new graph")


def _add_leaf_grads(flat, leaf_grads):
    """Add each gradient the plan computed for a graph input (by position) or a captured
    tensor that requires grad into its .grad, as the eager backward accumulates it; one that
    has an eager history (an input computed from a leaf) hands it on into that history, as
    eagerly the backward goes on through it to its leaves."""
    roots, seeds = [], []
    for key, array in leaf_grads:
        tensor = flat[key] if isinstance(key, int) else key
        if tensor.grad_fn is not None:
            roots.append(tensor)
            seeds.append(Tensor._wrap(array))
            continue
        with no_grad():
            engine._accumulate(tensor._meta, Tensor._wrap(array), variable=tensor)
    if roots:
        engine.backward(roots, seeds)


def _requiring_grad(flat):
    return tuple(i for i, t in enumerate(flat) if isinstance(t, Tensor) and t.requires_grad)


def _check_inputs_requiring_grad(name, flat, traced):
    """A plan with a backward computes the gradients of the inputs that required grad when
    it was traced: refuse a call whose inputs differ in that."""
    requiring = _requiring_grad(flat)
    if requiring != traced:
        i = next(iter(set(requiring) ^ set(traced)))
        raise StalePlanError(
            f"nn.Graph {name}: input {i} "
            f"{'requires' if flat[i].requires_grad else 'does not require'} grad, and "
            f"{'did not' if flat[i].requires_grad else 'did'} when the graph compiled; "
            f"its plan computes the gradients of the inputs that required grad then. Pass "
            f"inputs with the traced requires_grad, or build a new graph")


def _traced_summary(name, program, seconds):
    phases = [n.phase for n in program.nodes]
    return (f"nn.Graph {name}: traced {len(phases)} nodes ({phases.count('forward')} forward, "
            f"{phases.count('backward')} backward) in {seconds * 1e3:.1f} ms")


def _reshaped_inputs(program):
    """Positions of the inputs that a `reshape` reads (through views of them): it is a view
    of the input or a copy as the input's layout has it."""
    origin = {v.id: v.source for v in program.inputs}  # value id -> the input it views
    found = set()
    for node in program.nodes:
        if getattr(node.op, "is_view", False) and node.inputs:
            position = origin.get(node.inputs[0].id)
            if position is not None:
                if getattr(node.op, "name", None) == "reshape":
                    found.add(position)
                origin.update((out.id, position) for out in node.outputs)
    return found
