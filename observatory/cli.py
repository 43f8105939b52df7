"""The ``observatory`` command line. Each command lives in ``observatory/commands/``."""

from __future__ import annotations

import click

from observatory.commands import alerts as alerts_commands
from observatory.commands import bench as bench_commands
from observatory.commands import convert as convert_commands
from observatory.commands import crawl as crawl_commands
from observatory.commands import db as db_commands
from observatory.commands import errors
from observatory.commands import inspect as inspect_commands
from observatory.commands import oracle as oracle_commands
from observatory.commands import serve as serve_commands
from observatory.commands import snapshot as snapshot_commands
from observatory.commands import uptrain as uptrain_commands
from observatory.commands import worker as worker_commands


@click.group(cls=errors.OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gqa-observatory")
@click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=errors.enable_debug,
              help="Show the full traceback when a command fails (every command also takes --debug).")
def main() -> None:
    """GQA Observatory: how open language models spend memory on attention state.

    A command that fails prints one line saying why and exits with status 1; --debug shows the
    traceback instead.
    """


# One line per command; add yours below.
main.add_command(db_commands.db)
main.add_command(inspect_commands.inspect)
main.add_command(snapshot_commands.snapshot)
main.add_command(serve_commands.serve)
main.add_command(crawl_commands.crawl)
main.add_command(worker_commands.worker)
main.add_command(bench_commands.bench)
main.add_command(alerts_commands.alerts)
main.add_command(oracle_commands.oracle)
main.add_command(convert_commands.convert)
main.add_command(uptrain_commands.uptrain)
