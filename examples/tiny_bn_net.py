#!/usr/bin/python3
"""A small PyTorch model with batch norm, saved as TorchScript for tern.

`tern worker --model=PATH.pt` trains any module saved by
torch.jit.script(model).save(PATH); this script makes one:

    /usr/bin/python3 examples/tiny_bn_net.py --input_shape 8,8 --outputs 4 \\
        --out tiny.pt
    tern launch --workers 2 --dataset npy --data_dir data --model tiny.pt

The network: flatten -> linear (--hidden units) -> batch norm -> ReLU ->
linear (--outputs). What tern does with its parts (worker/README.md):

- its parameters (fc1.weight, fc1.bias, bn1.weight, bn1.bias, logits.weight,
  logits.bias, in that order) are the ParamSpec, and every worker starts
  from the values saved here;
- the batch norm's running statistics are buffers: each worker keeps its
  own, updated from its own batches;
- --kind classifier (default): forward(x) returns logits [B, outputs] for
  tern's cross-entropy (int64 labels in [0, outputs));
- --kind regression: forward(x) returns [B, outputs] for --loss=mse (float32
  targets saved as [N, outputs]);
- --kind own_loss: the module computes its own loss. It says so with a bool
  attribute `returns_loss = True`, and tern then calls forward(x, y) and
  trains on the scalar it returns (here cross-entropy with label smoothing);
- --freeze fc1 (or bn1, logits): that layer's parameters get
  requires_grad False, and tern leaves them as saved, as a PyTorch
  optimizer would.

Needs Debian's python3-torch (the PyTorch 1.13 of libtorch-dev): run it with
/usr/bin/python3.
"""

import argparse
import math

import torch


class TinyBnNet(torch.nn.Module):
    def __init__(self, in_features: int, hidden: int, outputs: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(in_features, hidden)
        self.bn1 = torch.nn.BatchNorm1d(hidden)
        self.logits = torch.nn.Linear(hidden, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.fc1(x.flatten(1))))
        return self.logits(x)


class WithOwnLoss(torch.nn.Module):
    """TinyBnNet with its loss inside: tern calls forward(x, y)."""

    # The mark tern reads (a bool attribute of the scripted module).
    returns_loss: bool

    def __init__(self, net: TinyBnNet):
        super().__init__()
        self.returns_loss = True
        self.net = net

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(
            self.net(x), y, label_smoothing=0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input_shape", default="8,8",
                        help="one example's shape, comma-separated "
                             "(the npy files' shape past N)")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--outputs", type=int, default=4,
                        help="classes, or regression outputs")
    parser.add_argument("--kind", default="classifier",
                        choices=["classifier", "regression", "own_loss"])
    parser.add_argument("--freeze", default="", choices=["", "fc1", "bn1",
                                                         "logits"],
                        help="a layer whose parameters are not trained")
    parser.add_argument("--seed", type=int, default=1,
                        help="the initial parameters every worker starts from")
    parser.add_argument("--out", required=True, help="the .pt file to write")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    shape = [int(d) for d in args.input_shape.split(",")]
    net = TinyBnNet(math.prod(shape), args.hidden, args.outputs)
    if args.freeze:
        for param in getattr(net, args.freeze).parameters():
            param.requires_grad_(False)
    model = WithOwnLoss(net) if args.kind == "own_loss" else net
    torch.jit.script(model).save(args.out)
    trained = [p for p in model.parameters() if p.requires_grad]
    params = sum(p.numel() for p in trained)
    print(f"wrote {args.out}: {args.kind}, {params} parameters to train in "
          f"{len(trained)} tensors")


if __name__ == "__main__":
    main()
