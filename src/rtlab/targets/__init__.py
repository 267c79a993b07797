"""Where a run happens: this machine, SSH targets (asyncssh), labgrid targets, and farms
of them. One small interface (`Target`: the system tree, the probe's catalog, checks,
one case run with its progress stream, its documents brought back) that every caller
uses the same way, wherever the target is."""

from rtlab.targets._base import Target
from rtlab.targets._local import LocalTarget
from rtlab.targets._open import open_target, reopen_target
from rtlab.targets._session import Session, quote
from rtlab.targets._spec import (
    LABGRID,
    SSH,
    TargetSpec,
    parse_ssh_url,
    parse_target,
    read_targets,
    targets_file,
)

__all__ = [
    "LABGRID",
    "SSH",
    "LocalTarget",
    "Session",
    "Target",
    "TargetSpec",
    "open_target",
    "parse_ssh_url",
    "parse_target",
    "quote",
    "read_targets",
    "reopen_target",
    "targets_file",
]
