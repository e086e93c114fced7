"""tern's PyTorch API: train a PyTorch model from Python against tern's shards.

    import tern.torch as tt
    tt.init(ps=["host1:50051", "host2:50051"], worker_id=rank,
            num_workers=n, codec="terngrad")
    opt = tt.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01), model.named_parameters())
    tt.broadcast_parameters(model)   # join: the shards check the start
    ... loss.backward(); opt.step()  # exchange the encoded gradients, step

The gradients go through the same codecs, chunks and shards as those of
`tern worker` (the C++ exchange of worker/gradient_exchange.h, not a
re-implementation), so Python workers and `tern worker`s train one model
together with bit-identical replicas, when every worker applies the same
update (python/tern/README.md).

Errors of the shards (a refusal at join, a divergence, a shard that does not
answer within rpc_timeout_s) raise ShardError with .code (the gRPC status
code's name, e.g. "FAILED_PRECONDITION"), .code_value and .message. Bad
arguments raise ValueError or TypeError.
"""

import torch

from tern import _tern

ShardError = _tern.ShardError


def _flag(name, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return f"--{name}={value}"


def _check_tensor(tensor, what):
    """Raises unless `tensor` is a dense, contiguous float32 CPU tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} is a {type(tensor).__name__}, not a tensor")
    if tensor.layout != torch.strided or tensor.device.type != "cpu":
        raise ValueError(f"{what} must be a dense CPU tensor, not "
                         f"{tensor.layout} on {tensor.device}")
    if tensor.dtype != torch.float32:
        raise TypeError(f"{what} is {tensor.dtype}, not torch.float32")
    if not tensor.is_contiguous():
        raise ValueError(f"{what} is not contiguous")


class Worker:
    """One worker's connection to the shards (what init() makes).

    Takes tern worker's flags as keyword arguments (worker/README.md), with
    their defaults: ps (list of host:port, required), worker_id,
    num_workers, codec, model (a .pt file: its hash is the ParamSpec hash,
    as for `tern worker --model=PATH.pt`), run_id, seed, check_every,
    fp32_tensors, clip, and the timeouts rpc_timeout_s (60, every RPC's
    deadline), join_timeout_s (300), server_loss_timeout_s (120) and
    straggler_warn_s (10). Flags of training that Python does (lr,
    optimizer, dataset, batch_size, ...) are accepted and ignored.
    """

    def __init__(self, ps, **flags):
        if isinstance(ps, str):
            ps = [ps]
        self._args = [_flag("ps", list(ps))]
        self._args += [_flag(k, v) for k, v in flags.items() if v is not None]
        _tern.check_flags(self._args)  # ValueError now, not at the first use
        self._params = None
        self._exchange = None

    def attach(self, named_parameters):
        """Takes the model's parameters (the ParamSpec, in this order).

        Frozen ones (requires_grad False) are left out, as `tern worker`
        leaves them: not exchanged, not broadcast, never given a gradient,
        so the wrapped optimizer skips them as PyTorch's do.
        """
        params = [(name, p) for name, p in named_parameters if p.requires_grad]
        if self._params is not None:
            # The same storage: a scripted module's parameters may come
            # back as new Python objects.
            if [(n, p.data_ptr()) for n, p in params] != \
                    [(n, p.data_ptr()) for n, p in self._params]:
                raise ValueError("these are not the parameters the "
                                 "DistributedOptimizer was given")
            return
        for name, p in params:
            _check_tensor(p, f"parameter '{name}'")
        # Views of the parameters' memory: the checksum reads them in place.
        views = [(name, p.detach().numpy()) for name, p in params]
        self._exchange = _tern.Exchange(self._args, views)
        self._params = params
        self._pointers = [p.data_ptr() for _, p in params]
        self._buffers = [torch.from_numpy(self._exchange.gradient_buffer(t))
                         for t in range(len(params))]

    def _ready(self):
        if self._exchange is None:
            raise RuntimeError("no parameters yet: create the "
                               "DistributedOptimizer or call "
                               "broadcast_parameters(model) first")
        moved = [n for (n, p), ptr in zip(self._params, self._pointers)
                 if p.data_ptr() != ptr]
        if moved:
            raise RuntimeError(f"parameters {moved} were replaced or moved "
                               "since they were given to tern")
        return self._exchange

    def join(self, broadcast_start=False):
        """Joins the shards, once; they refuse another model or start.

        broadcast_start: every worker starts from worker 0's parameters,
        which worker 0 sends and the others' tensors are overwritten with.
        """
        exchange = self._ready()
        if not exchange.joined:
            with torch.no_grad():
                exchange.join(broadcast_start=broadcast_start)

    def exchange(self):
        """Replaces every parameter's .grad by the workers' average."""
        exchange = self._ready()
        grads = []
        for t, (name, p) in enumerate(self._params):
            if p.grad is not None:
                _check_tensor(p.grad, f"the gradient of '{name}'")
            grads.append(self._bound_grad(t, p).numpy())
        return exchange.step(grads)

    def _bound_grad(self, t, p):
        """p.grad, kept in the exchange's own memory for it.

        The exchange then encodes it and decodes the average into it in
        place; backward adds into it there while zero_grad() zeroes it in
        place (set_to_none=False, PyTorch 1.13's default). A gradient
        that was replaced (set_to_none=True, an assignment) is copied in
        once more.
        """
        buffer = self._buffers[t]
        if p.grad is None or p.grad.data_ptr() != buffer.data_ptr():
            with torch.no_grad():
                if p.grad is None:
                    buffer.zero_()
                else:
                    buffer.copy_(p.grad.reshape(-1))
                p.grad = buffer.view_as(p)
        return p.grad.detach()

    def checksum(self):
        """The parameters' checksum, "0x" + 16 hex digits, as tern logs it."""
        return self._ready().checksum()

    def check_params(self):
        """Sends the checksum to the shards (they compare the workers')."""
        return self._ready().check_params()

    @property
    def steps(self):
        return self._ready().next_step

    @property
    def check_every(self):
        return self._ready().check_every


_worker = None
# tern worker's --rpc_timeout_s, --join_timeout_s, --server_loss_timeout_s
# and --straggler_warn_s defaults, read from the C++ side.
_TIMEOUTS = _tern.timeout_defaults()


def init(ps, worker_id=0, num_workers=1, codec="terngrad",
         rpc_timeout_s=_TIMEOUTS["rpc_timeout_s"],
         join_timeout_s=_TIMEOUTS["join_timeout_s"],
         server_loss_timeout_s=_TIMEOUTS["server_loss_timeout_s"],
         straggler_warn_s=_TIMEOUTS["straggler_warn_s"], **flags):
    """Configures this process's worker; see Worker for the other flags.

    rpc_timeout_s is every RPC's deadline; join_timeout_s how long the join
    keeps trying shards that are not up yet; server_loss_timeout_s how long
    a step keeps retrying a shard that went away; straggler_warn_s when a
    call still unanswered is logged (0: never).
    """
    global _worker
    _worker = Worker(ps, worker_id=worker_id, num_workers=num_workers,
                     codec=codec, rpc_timeout_s=rpc_timeout_s,
                     join_timeout_s=join_timeout_s,
                     server_loss_timeout_s=server_loss_timeout_s,
                     straggler_warn_s=straggler_warn_s, **flags)
    return _worker


def _current(worker):
    if worker is not None:
        return worker
    if _worker is None:
        raise RuntimeError("call tern.torch.init(ps=[...], ...) first")
    return _worker


def broadcast_parameters(model, worker=None):
    """Joins the shards and starts every worker from worker 0's parameters.

    Worker 0 sends its parameters with its join (each shard its chunks), and
    every other worker's tensors are overwritten in place with what the
    shards hand back, checked against worker 0's checksum (tern worker's
    --broadcast_start: a C++ worker in the same run sets it too; the shards
    refuse a mix, naming broadcast_start). Without this call (a lazy join at
    the first step), every worker must build the same start itself.
    """
    worker = _current(worker)
    worker.attach(model.named_parameters())
    worker.join(broadcast_start=True)


def checksum(worker=None):
    """The parameters' checksum, comparable with tern worker's records."""
    return _current(worker).checksum()


class DistributedOptimizer:
    """Wraps a torch optimizer: step() exchanges, then the optimizer steps.

    step() hands every parameter's gradient to the shards (encoded with the
    run's codec) and replaces it by the decoded average of all workers', then
    steps the wrapped optimizer; every check_every steps it sends the
    parameters' checksum to the shards, which raise ShardError when replicas
    differ. Everything else (zero_grad, param_groups, state_dict) is the
    wrapped optimizer's.
    """

    def __init__(self, optimizer, named_parameters, worker=None):
        self._optimizer = optimizer
        self._worker = _current(worker)
        named = list(named_parameters)
        given = {p.data_ptr() for _, p in named}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.data_ptr() not in given:
                    raise ValueError("the optimizer updates a parameter that "
                                     "is not in named_parameters")
        self._worker.attach(named)
        self.last_exchange = None

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.last_exchange = self._worker.exchange()
        self._optimizer.step()
        every = self._worker.check_every
        if every and self._worker.steps % every == 0:
            self._worker.check_params()
        return loss

    def check_params(self):
        """Sends the parameters' checksum to the shards now; returns it."""
        return self._worker.check_params()

    def __getattr__(self, name):
        return getattr(self._optimizer, name)
