"""Where a run happens when it is not here: SSH targets (asyncssh), labgrid targets, and
farms of them. One small interface (arch, push, run with a progress stream, pull) over
a transport that runs shell commands on the target."""

from rtlab.targets._remote import Remote, open_session
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
    "Remote",
    "Session",
    "TargetSpec",
    "open_session",
    "parse_ssh_url",
    "parse_target",
    "quote",
    "read_targets",
    "targets_file",
]
