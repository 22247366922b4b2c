"""`kx completion bash|zsh|fish`: print the shell's completion script for kx.

bash: kx's own script (completion_script.py), the command tree written out
and dataset names read from KX_HOME in the shell, so a TAB starts no Python.
zsh and fish: click's own, which calls back into kx with `_KX_COMPLETE` set
at each TAB; main() then gives the parameters the bash script's value kinds
(completion_script.attach_dynamic): dataset names, folders, --set names.
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
    if shell == "bash":   # kx's own: answers in the shell, no Python at each TAB (completion_script.py)
        from .completion_script import bash_script

        assert isinstance(root, click.Group)
        click.echo(bash_script(root), nl=False)
        return
    made = get_completion_class(shell)
    assert made is not None  # every name in SHELLS is one of click's
    click.echo(made(root, {}, "kx", "_KX_COMPLETE").source())
