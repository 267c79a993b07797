"""The error types caught at the top of the CLI, each printed as one line with its exit code.

A verdict is no error: the commands return its exit status (rtlab.cli._common), 1 when a
deadline is exceeded and 6 when a case's conditions were not met (CONDITIONS NOT MET:
the run measured something else than asked); 6 wins over 1."""


class UserError(Exception):
    """Bad input from the user (options, experiment files, imported files): exit 2."""


class UnsupportedError(Exception):
    """Cannot be done on this system: exit 3."""


class InternalError(Exception):
    """A bug, in rtlab or in the probe (which exited 4): exit 4."""


class LostError(UnsupportedError):
    """The target a case ran on went away (its connection was lost): exit 3. The case is
    failed, the finished ones are kept, and `rtlab run --resume` continues."""


class OutputError(Exception):
    """A result could not be written (no space left, an I/O error; the probe exited 5):
    exit 5. The case is failed, the finished ones are kept, and `rtlab run --resume`
    continues once the cause is fixed."""


class SettingError(UserError):
    """A runtime setting of an experiment (sysctl.*, a tune knob) the system refused, or
    one not put back after its case: exit 2. The run stops; the finished cases are kept."""
