"""`kx completion bash|zsh|fish`: print the shell's completion script for kx (click's own completion).

The script calls back into kx with `_KX_COMPLETE` set, so it completes every
command, option and choice, and stays right as commands are added.
"""

from __future__ import annotations

import click

from .context import CONTEXT_SETTINGS

SHELLS = ("bash", "zsh", "fish")


@click.command("completion", context_settings=CONTEXT_SETTINGS)
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
    bash:  kx completion bash > ~/.local/share/bash-completion/completions/kx
    zsh:   kx completion zsh > ~/.zfunc/_kx   (with fpath+=~/.zfunc before compinit in ~/.zshrc)
    fish:  kx completion fish > ~/.config/fish/completions/kx.fish
    Or, for this shell only: eval "$(kx completion bash)".
    """
    from click.shell_completion import get_completion_class

    root = ctx.find_root().command  # the `kx` group, without importing the module that defines it
    made = get_completion_class(shell)
    assert made is not None  # every name in SHELLS is one of click's
    click.echo(made(root, {}, "kx", "_KX_COMPLETE").source())
