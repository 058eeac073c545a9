"""`agentd improve`: the agent improving itself from its own work. The commands on tasks
are in agentd/cli/improve/tasks.py, those of the seal and the loop in loop.py, practice
tasks in practice.py, code changes and releases in code.py, attesting a release in
attest.py, installing one in install.py, pass@k in evaluate.py, the judge in judge.py,
the improver improved in improver.py, public benchmarks' tasks in imports.py, an
examiner's seal revealed and its examinations rerun in revealed.py."""

from __future__ import annotations

import click

from agentd.cli.improve import (
    attest,
    code,
    evaluate,
    imports,
    improver,
    install,
    judge,
    loop,
    practice,
    revealed,
    tasks,
)


@click.group("improve", short_help="Improve the agent from its own work: tasks, seals, the loop.")
def command() -> None:
    """Improve the agent from its own work: mark sessions, harvest tasks, seal, run the loop."""


for _each in (tasks.mark, tasks.harvest, tasks.validate, tasks.env, tasks.export):
    command.add_command(_each)
for _each in (
    loop.seal,
    loop.run,
    loop.adopt,
    loop.undo,
    loop.lineage,
    practice.practice,
    code.code,
    code.releases_command,
    revealed.reveal,
    revealed.reexamine,
):
    command.add_command(_each)
command.add_command(evaluate.eval_command)
command.add_command(judge.judge)
command.add_command(improver.improver)
command.add_command(install.install_command)
command.add_command(attest.attest_command)
command.add_command(imports.import_group)

lineage = loop.lineage  # also `agentd lineage`
