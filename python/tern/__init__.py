"""tern: data-parallel training with compressed gradients.

`import tern.torch` is the PyTorch API (tern/torch.py). The C++ module
tern._tern is built by Bazel (//python/tern:_tern.so) and may sit in another
directory of the path than this file (bazel-bin/python/tern): the package
looks for its modules in every `tern` directory on sys.path.
"""

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)
