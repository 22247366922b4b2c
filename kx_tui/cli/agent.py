"""`kx agent run --goal TEXT [--dataset NAME]`: the bounded research loop (engine/agent/), from a shell.

Steps are printed one line each as they happen, then the cited answer and
why the run stopped; `--json` prints the whole transcript and answer instead.
Through a gateway the run happens on the gateway (where the embedder lives)
and its steps are printed when it returns.
"""

from __future__ import annotations

import json

import click

from engine.config import ENV

from .context import CONTEXT_SETTINGS, backend_of, settings_of


@click.group(context_settings=CONTEXT_SETTINGS)
def agent() -> None:
    """Let an agent search a dataset on its own and answer with citations."""


@agent.command("run", context_settings=CONTEXT_SETTINGS)
@click.option("--goal", "-g", required=True, help="What the agent should find out, e.g. \"summarise our refund "
                                                   "policy\".")
@click.option("--dataset", "-d", default=None, metavar="NAME",
              help=f"The dataset to research. Without it only a chat model ({ENV.agent_chat_url}) can answer, "
                   "as a plain agent with no corpus.")
@click.option("--max-steps", type=click.IntRange(1, 100), default=None,
              help=f"Most searches for this run (default {ENV.agent_max_steps}; never above it).")
@click.option("--json", "as_json", is_flag=True, help="Print the transcript and the answer as JSON.")
@click.pass_context
def run(ctx: click.Context, goal: str, dataset: str | None, max_steps: int | None, as_json: bool) -> None:
    """Research GOAL in a dataset: search, read, search again, then answer citing the passages read.

    Offline (the default) the loop needs only the embedding model: it asks the
    goal's clauses and key phrases, then words from the best passages read,
    and answers with the sentences that best cover the goal. With
    KX_AGENT_CHAT_URL set, an OpenAI-compatible chat model drives the loop
    through a read-only search tool. Bounds: KX_AGENT_MAX_STEPS,
    KX_AGENT_MAX_PASSAGES, KX_AGENT_MAX_SECONDS.
    """
    from ..render import Console

    out = Console()
    backend = backend_of(ctx, settings_of(ctx))
    try:
        on_step = None if as_json else (lambda step: out.print(step.summary(), markup=False, highlight=False))
        result = backend.run_agent(goal, dataset, max_steps=max_steps, on_step=on_step)
    finally:
        backend.close()
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    for note in result.notes:
        out.print(f"note: {note}", style="yellow", markup=False, highlight=False)
    out.print()
    out.print(result.answer.rstrip(), markup=False, highlight=False)
    out.print()
    out.print(result.summary(), style="dim", markup=False, highlight=False)
