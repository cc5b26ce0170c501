"""``naiad check REPOSITORY``: the subcommand's arguments and what it prints and returns."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from naiad.check.checker import check_repositories
from naiad.check.problems import render_json, render_text
from naiad.logs import configure_logging
from naiad.plugins import DEFAULT_BACKEND_DIRECTORY

EXIT_CLEAN = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def add_check_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``check`` among the ``naiad`` subcommands."""
    check = commands.add_parser(
        "check",
        help="check every model of one or more repositories as the server would load them, without serving",
        description=(
            "Read, auto-complete and validate every model's config as `naiad serve` would, and print each "
            "problem with its file, line and fix. Exit status: 0 no problems, 1 problems, 2 usage error."
        ),
    )
    check.add_argument("repositories", nargs="+", type=Path, metavar="REPOSITORY", help="model repository folder")
    check.add_argument(
        "--format", choices=("text", "json"), default="text", help="text: one line per problem; json: for CI"
    )
    check.add_argument(
        "--disable-auto-complete-config",
        action="store_true",
        help="check as `naiad serve --disable-auto-complete-config` would load (every model needs a full config)",
    )
    check.add_argument(
        "--model-config-name",
        default="",
        metavar="NAME",
        help="check as `naiad serve --model-config-name NAME` reads configs (configs/NAME.pbtxt where a model has one)",
    )
    check.add_argument(
        "--backend-directory",
        type=Path,
        default=DEFAULT_BACKEND_DIRECTORY,
        metavar="DIR",
        help="check as `naiad serve --backend-directory DIR` finds backends that are not installed plugins",
    )
    check.add_argument("--log-verbose", type=int, default=0, metavar="N", help="backends' log lines (stderr)")


def run_check(args: argparse.Namespace) -> int:
    """Run ``naiad check``; the report goes to stdout, backends' warnings and errors to stderr."""
    configure_logging(args.log_verbose, info=args.log_verbose > 0)
    missing = [path for path in args.repositories if not path.is_dir()]
    if missing:
        for path in missing:
            print(f"naiad check: model repository '{path}' does not exist or is not a folder", file=sys.stderr)
        return EXIT_USAGE
    report = check_repositories(
        args.repositories,
        auto_complete=not args.disable_auto_complete_config,
        config_name=args.model_config_name,
        backend_directory=args.backend_directory,
    )
    print(render_json(report) if args.format == "json" else render_text(report))
    return EXIT_PROBLEMS if report.problems else EXIT_CLEAN
