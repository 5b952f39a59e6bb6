"""netcast's exceptions and warnings: each message names what was wrong and where.

The command line turns every one into one line on stderr with the exception's ``exit_code``
(``netcast.cli.errors``): 2 for bad input, 1 for a model call that failed after what finished
was saved (the same command resumes)."""


class NetcastError(Exception):
    """Base class for errors netcast reports to the user."""

    exit_code = 2


class InputError(NetcastError, ValueError):
    """Bad user input: a file, line or field that cannot be used."""


class ModelFileError(NetcastError):
    """The embedded model file is missing, truncated or not the expected file."""


class ModelCallError(NetcastError):
    """A model call failed after its retries (what finished is saved: the run resumes)."""

    exit_code = 1


class ModelSetupError(ModelCallError):
    """The model cannot be called at all as given (a missing or refused key, a model the server
    does not serve): found before any question, so nothing is lost and nothing resumes."""

    exit_code = 2


class NetcastWarning(UserWarning):
    """Input netcast used after changing it (e.g. a repeated document kept once); the command
    line prints it as one ``warning:`` line."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """``err`` as one line: its type and the first line of its message (provider errors add
    advice lines), cut at ``limit`` characters."""
    first = (str(err).strip().splitlines() or [""])[0]
    text = f"{type(err).__name__}: {first}" if first else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
