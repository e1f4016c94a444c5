"""The ``advisor`` command. Domain errors become one-line messages and exit codes here, and only here.

The Typer object lives in advisor.cli._app; each command module registers on it and this module
imports them all (nothing imports this module back).

Command modules keep heavy imports (transformers, sklearn, jinja2, rich) inside their
functions so that ``advisor inspect``/``recommend`` start fast.
"""

from __future__ import annotations

import sys

from advisor.cli._app import app
from advisor.errors import AdvisorError, DataError, printable


def _register() -> None:
    # Each module adds its command(s) to ``app``; keep this list the only place that knows them.
    from advisor.cli import inspect as _inspect  # noqa: F401
    from advisor.cli import recommend as _recommend  # noqa: F401
    from advisor.cli import render as _render  # noqa: F401
    from advisor.cli import host as _host  # noqa: F401
    from advisor.cli import probe as _probe  # noqa: F401
    from advisor.cli import calibrate as _calibrate  # noqa: F401
    from advisor.cli import kbar as _kbar  # noqa: F401
    from advisor.cli import report as _report  # noqa: F401
    from advisor.cli import verify as _verify  # noqa: F401


_register()


GLOBAL_OPTIONS = ("--offline", "--online", "--catalog-dir", "--rules-dir", "--data-dir")
"""Options of the ``advisor`` group itself (they go before the command)."""


def _click_types() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """(ClickException, Abort, Exit) classes of click and of typer ≥ 0.20, which vendors click as
    ``typer._click`` and raises its own (typer._click.exceptions.ClickException, typer.Abort,
    typer.Exit), not click's."""
    import click

    errors: list[type] = [click.ClickException]
    aborts: list[type] = [click.exceptions.Abort]
    exits: list[type] = [click.exceptions.Exit]
    try:
        from typer._click.exceptions import ClickException as VendoredClickException  # type: ignore[import-not-found]

        errors.append(VendoredClickException)
    except ImportError:
        pass
    try:
        from typer.exceptions import Abort as TyperAbort, Exit as TyperExit  # type: ignore[attr-defined]

        aborts.append(TyperAbort)
        exits.append(TyperExit)
    except ImportError:
        pass
    return tuple(errors), tuple(aborts), tuple(exits)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns the exit code (also used by tests)."""
    click_error, click_abort, click_exit = _click_types()
    args = sys.argv[1:] if argv is None else argv
    real_stdout = sys.stdout
    sys.stdout = _Inert(real_stdout)  # a model id, path or server text never drives the terminal
    try:
        rv = app(args=args, prog_name="advisor", standalone_mode=False)
    except AdvisorError as exc:
        print(f"error: {printable(exc)}", file=sys.stderr)
        return exc.exit_code
    except click_abort:
        print("aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except click_error as exc:
        if isinstance(getattr(exc, "message", None), str):
            exc.message = printable(exc.message)  # a value echoed back must not drive the terminal
        exc.show()
        name = getattr(exc, "option_name", None)
        if name in GLOBAL_OPTIONS:
            print(f"hint: {name} is a global option: put it before the command (advisor {name} …)", file=sys.stderr)
        return exc.exit_code
    except click_exit as exc:
        return exc.exit_code
    except RecursionError:
        # An input nested thousands deep (JSON, YAML, TOML) that no reader above named: a data error, not a bug.
        print("error: an input file nests arrays or mappings too deeply to be read (thousands of levels)", file=sys.stderr)
        return DataError.exit_code
    except MemoryError:
        print("error: out of memory: an input asks for an absurd size (a config count, a --max-requests, a corpus); "
              "check the values you passed", file=sys.stderr)  # fmt: skip
        return 1
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors become a message
        import os

        if os.environ.get("ADVISOR_DEBUG"):
            raise
        print(f"error: internal error: {type(exc).__name__}: {printable(exc)} (rerun with ADVISOR_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return 70
    finally:
        sys.stdout = real_stdout
    return rv if isinstance(rv, int) else 0


class _Inert:
    """stdout with control and bidi characters made visible (advisor.errors.printable); newlines
    and tabs pass. JSON output is unchanged (json.dumps already escapes them)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text) -> int:
        if isinstance(text, (bytes, bytearray)):  # click writes bytes to a stream it cannot classify
            self._stream.write(printable(bytes(text).decode("utf-8", "replace")))
        else:
            self._stream.write(printable(text))
        return len(text)

    def isatty(self) -> bool:
        return False  # so that no library colours its output with the very escapes this removes

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
