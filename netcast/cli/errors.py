"""The one place where the command line turns an error into its line on stderr.

Every command runs inside ``one_line_errors`` (the ``netcast`` group's ``invoke``), which maps:

- ``NetcastError`` -> ``error: <message>``, exit ``err.exit_code`` (2: bad input, found before
  anything ran; 1: a model call failed, what finished is saved and the same command resumes);
- a bad option value or an unknown option or command (click's ``UsageError``) -> one line and
  ``netcast COMMAND --help``, exit 2 (not a usage panel);
- a model call that failed outside a run that saves per question (``netcast ask``): DSPy's
  ``LMError`` and litellm's exceptions -> one line, exit 1;
- an Optuna storage that fails mid-run (SQLAlchemy, Optuna's storage errors) -> one line, exit 1
  (a bad ``--storage`` is refused before any trial: ``netcast.optimize.tune.check_storage``);
- ``KeyboardInterrupt`` (Ctrl-C) -> ``interrupted: ...``, exit 130. Where questions are still
  running in worker threads (``netcast.interrupts``: DSPy's parallel executor cannot stop a
  model call), the command says so and waits for them, so their rows are saved; a second Ctrl-C
  stops at once (a row cut mid-write is dropped and redone on resume). A training still running
  in its thread (a second Ctrl-C: the first asked it to save and stop) is left at once.
- SIGTERM (``kill``, ``timeout``, a job scheduler, ``docker stop``) -> what Ctrl-C would do at
  that moment (``terminate_as_interrupt``), also where Ctrl-C is ignored (a background job of a
  script); a second SIGTERM ends the process at once.

Files netcast reads are checked where they are read (``netcast.formats``), so a damaged file
arrives here as a ``NetcastError`` naming it. While a command runs, ``NetcastWarning``\\ s are
one ``warning:`` line each, and the library log records that would repeat a failure netcast
reports itself (Optuna's failed-trial records with their traceback, DSPy's per-question error
lines) are held back.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import typer
from rich.markup import escape
from typer._click.exceptions import UsageError  # typer's bundled click: typer.BadParameter's base
from typer.core import TyperGroup

from netcast import interrupts
from netcast.errors import NetcastError, NetcastWarning
from netcast.render import err_console

INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT


def error_line(message: str) -> None:
    """``error: message`` on stderr, as one line."""
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)


def first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _model_call_errors() -> tuple[type[BaseException], ...]:
    from dspy.utils.exceptions import LMError

    errors: list[type[BaseException]] = [LMError]
    try:
        import litellm

        errors.append(litellm.exceptions.OpenAIError)  # every litellm API exception's base
    except (ImportError, AttributeError):  # pragma: no cover - litellm ships with DSPy
        pass
    return tuple(errors)


def _storage_errors() -> tuple[type[BaseException], ...]:
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import SQLAlchemyError

    return (SQLAlchemyError, StorageInternalError)


class _HeldBack(logging.Filter):
    """Drops the log records a command reports in its own line."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.name.startswith("optuna"):  # "Trial 3 failed with ...", with the traceback
            return not (text.startswith("Trial ") and " failed" in text)
        if record.name == "dspy.utils.parallelizer":  # "Error for <question>: ...", "cancelled"
            return record.levelno < logging.WARNING
        return True


HELD_BACK = ("optuna", "optuna.study._optimize", "dspy.utils.parallelizer")


@contextmanager
def _quiet_library_logs() -> Iterator[None]:
    held = _HeldBack()
    loggers = [logging.getLogger(name) for name in HELD_BACK]
    for logger in loggers:
        logger.addFilter(held)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(held)


def _show_warning(message, category, filename, lineno, file=None, line=None, *, shown=None):
    if issubclass(category, NetcastWarning):
        err_console.print(
            f"[yellow]warning:[/yellow] {escape(str(message))}", soft_wrap=True, highlight=False
        )
    else:
        shown(message, category, filename, lineno, file, line)


def finish_or_stop() -> None:
    """Say the command was interrupted. A training still running in its thread (a second
    Ctrl-C: its first asked it to save and stop) is left at once; questions still running in
    worker threads are waited for (each saves its row as it ends), and a Ctrl-C meanwhile ends
    the process at once. Exit 130 either way."""
    questions = interrupts.in_progress("question")
    training = interrupts.in_progress("training")
    try:
        if training:
            waiting = "; the training is left at its last checkpoint"
        elif questions:
            waiting = (
                f"; waiting for the {len(questions)} question(s) in progress so they are "
                "saved too (Ctrl-C again stops at once)"
            )
        else:
            waiting = ""
        err_console.print(
            "interrupted: what finished is saved (answered questions, finished trials, "
            "encoded passages); run the same command again to resume" + waiting,
            soft_wrap=True,
            highlight=False,
        )
        if training:
            _exit_now()
        for thread in questions:
            thread.join()
    except KeyboardInterrupt:
        _exit_now()


def _exit_now() -> None:
    """End the process with exit 130 without waiting for its threads (output flushed where it
    can be; a further Ctrl-C is ignored meanwhile)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
    finally:
        os._exit(INTERRUPTED)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, the first SIGTERM does what Ctrl-C would do then: the SIGINT
    handler in place is called (a training's saves a checkpoint at the end of its step), or,
    where there is none (SIGINT ignored, as a script's background job starts), a
    ``KeyboardInterrupt`` is raised (questions in progress are waited for and saved). A second
    SIGTERM takes the default action: the process ends at once. Signals reach the main thread
    only: in another thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        on_interrupt = signal.getsignal(signal.SIGINT)
        if not callable(on_interrupt):
            raise KeyboardInterrupt
        on_interrupt(signal.SIGINT, frame)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def one_line_errors(command: str | None = None) -> Iterator[None]:
    """Run a command: its errors become one line on stderr and an exit code (module
    docstring); ``command`` names it in the ``--help`` hint of a usage error."""
    with warnings.catch_warnings(), _quiet_library_logs(), terminate_as_interrupt():
        shown = warnings.showwarning
        warnings.showwarning = lambda *args, **kwargs: _show_warning(*args, **kwargs, shown=shown)
        warnings.simplefilter("always", NetcastWarning)
        try:
            yield
        except NetcastError as err:
            error_line(str(err))
            raise typer.Exit(err.exit_code) from None
        except UsageError as err:
            name = err.ctx.command.name if err.ctx is not None and err.ctx.parent else None
            where = f"netcast {name or command or ''}".strip()
            error_line(f"{err.format_message()} (see {where} --help)")
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            finish_or_stop()
            raise typer.Exit(INTERRUPTED) from None
        except _model_call_errors() as err:
            error_line(f"a model call failed: {first_line(err)}")
            raise typer.Exit(1) from None
        except _storage_errors() as err:
            error_line(
                f"the Optuna storage failed: {first_line(err)}; the trials finished are kept "
                "in it: run the same command again to resume"
            )
            raise typer.Exit(1) from None


class NetcastGroup(TyperGroup):
    """The ``netcast`` command group: every command runs inside ``one_line_errors``."""

    def invoke(self, ctx):  # type: ignore[override]
        with one_line_errors():
            return super().invoke(ctx)
