"""The one user-error type: caught at the top, printed as one line, exit 2."""


class UserError(Exception):
    """Bad input from the user (options, experiment files, imported files)."""


class UnsupportedError(Exception):
    """Cannot be done on this system (exit 3)."""
