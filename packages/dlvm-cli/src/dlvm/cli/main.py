"""Entry point of the `dlvm` script: build the app, add plugin commands, run, map errors.

Importing this module is cheap (no typer, rich, numpy or dlvm.ir): they load
inside `main()`, so a broken install is reported as a one-line error too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from dlvm.cli import errors

if TYPE_CHECKING:
    import typer

    from dlvm.ir.plugin import Registry

PROG_NAME = "dlvm"
HOOK = "register_commands"


def main(argv: list[str] | None = None) -> NoReturn:
    """Run `dlvm` with `argv` (default: `sys.argv[1:]`) and exit with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    code: int | str | None
    try:
        code = run(args)
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        code = errors.interrupted()
    except BrokenPipeError:
        silence_stdout()
        code = errors.EXIT_FAILURE
    except Exception as e:
        if debug or plugins_strict():
            raise
        code = errors.report(e)
    sys.exit(finish(code))


def plugins_strict() -> bool:
    """`DLVM_STRICT_PLUGINS=1`: a plugin's loading error is raised rather than recorded,
    and shown with its traceback (the point of the variable), not as a one-line error."""
    try:
        from dlvm.ir.plugin import strict_mode
    except Exception:  # dlvm.ir itself is broken: report that, as any other error
        return False
    return strict_mode()


def run(args: list[str]) -> int | str | None:
    """Build the app and run it in Typer's standalone mode (which ends in SystemExit)."""
    from typer.main import get_command

    command = get_command(make_app(debug=debug_requested(args)))
    result: int | str | None = command.main(args=args, prog_name=PROG_NAME)
    return result


def make_app(*, debug: bool = False) -> typer.Typer:
    """The full app: core commands plus those that plugins register."""
    from dlvm.cli.app import build_app
    from dlvm.ir.plugin import registry

    app = build_app()
    add_plugin_commands(app, registry(), debug=debug)
    return app


def debug_requested(args: list[str]) -> bool:
    """`--debug` anywhere before a `--` (every command accepts it), or `DLVM_DEBUG=1`."""
    options = args[: args.index("--")] if "--" in args else args
    return "--debug" in options or errors.debug_from_env()


# ------------------------------------------------------------------ plugin commands


def add_plugin_commands(app: typer.Typer, reg: Registry, *, debug: bool = False) -> None:
    """Call each plugin's `register_commands(app)` separately, so a broken one is skipped,
    recorded as failed (for `dlvm plugins`) and named in a warning."""
    manager = reg.manager
    invalid = install_hookspecs(reg)
    if invalid is None:
        return
    for impl in getattr(manager.hook, HOOK).get_hookimpls():
        if impl.plugin_name in invalid:
            continue
        others = [p for p in manager.get_plugins() if p is not impl.plugin]
        call = manager.subset_hook_caller(HOOK, remove_plugins=others)
        try:
            register_atomically(app, functools.partial(call, app=app))
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # SystemExit too: one plugin must not end every command
            from dlvm.ir.plugin import RegistryError, describe_error, strict_mode

            if strict_mode():
                raise RegistryError(f"{plugin_label(reg, impl.plugin_name)} failed to register "
                                    f"commands: {describe_error(e)}") from e
            plugin_failed(reg, impl.plugin_name, describe_error(e))
            if debug:
                traceback.print_exception(e, file=sys.stderr)


def install_hookspecs(reg: Registry) -> set[str] | None:
    """Add the CLI hook to the registry's manager once.

    Returns the plugins whose `register_commands` does not match the specification (they are
    recorded as failed), or None when the hook cannot be called at all.
    """
    from dlvm.cli.hookspecs import CliHooks

    caller = getattr(reg.manager.hook, HOOK, None)
    if caller is None or not caller.has_spec():
        with contextlib.suppress(Exception):  # pluggy stops at the first bad hookimpl;
            reg.manager.add_hookspecs(CliHooks)  # all of them are checked below
    caller = getattr(reg.manager.hook, HOOK, None)
    if caller is None or not caller.has_spec() or caller.spec is None:
        errors.warning("plugin commands: the 'register_commands' hook could not be installed")
        return None
    invalid = set()
    for impl in caller.get_hookimpls():
        unknown = sorted(set(impl.argnames) - set(caller.spec.argnames))
        if unknown:
            invalid.add(impl.plugin_name)
            plugin_failed(reg, impl.plugin_name,
                          f"PluginValidationError: unknown arguments {', '.join(unknown)} "
                          f"(the hook passes only: {', '.join(caller.spec.argnames)})")
    return invalid


def plugin_failed(reg: Registry, name: str, detail: str) -> None:
    """Warn that a plugin's commands are missing, and record it for `dlvm plugins`."""
    info = reg.plugin(name)
    if info is not None:
        info.fail(detail, where=HOOK)
    errors.warning(f"{plugin_label(reg, name)} failed to register commands: {detail}; skipped")


def register_atomically(app: typer.Typer, register: Callable[[], object]) -> None:
    """Run `register()`; undo what it added if it fails or reuses a command name."""
    from dlvm.cli.app import command_names
    from dlvm.ir import RegistryError

    n_commands, n_groups = len(app.registered_commands), len(app.registered_groups)
    callback = app.registered_callback
    try:
        register()
        if app.registered_callback is not callback:
            raise RegistryError("a plugin must not replace the root callback of 'dlvm'")
        before = command_names(app.registered_commands[:n_commands],
                               app.registered_groups[:n_groups])
        added = command_names(app.registered_commands[n_commands:],
                              app.registered_groups[n_groups:])
        for name in added:
            if name in before or added.count(name) > 1:
                raise RegistryError(f"command '{name}' is already defined")
    except BaseException:
        del app.registered_commands[n_commands:]
        del app.registered_groups[n_groups:]
        app.registered_callback = callback
        raise


def plugin_label(reg: Registry, name: str) -> str:
    info = reg.plugin(name)
    return info.label if info is not None else f"plugin '{name}'"


# ------------------------------------------------------------------ exit


def finish(code: int | str | None) -> int | str | None:
    """Flush stdout now, so a closed pipe (`dlvm opt x.dl | head -1`) exits quietly."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return code or errors.EXIT_FAILURE
    except (OSError, ValueError):  # stdout closed or unusable: nothing more to say
        pass
    return code


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
