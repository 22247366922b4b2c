"""The bash (and zsh, through bashcompinit) completion script: kx's command tree written out as shell code.

click's own completion starts Python and imports kx at every TAB (0.15-0.3 s
over a bare interpreter on 2 cores). This script knows the commands, options
and choices from the moment `kx completion bash` printed it, and reads what
changes from where it lives, in the shell itself: dataset names are the
folders of $KX_HOME/datasets holding a catalogue (`--home` on the line wins;
through `--gateway` / KX_GATEWAY they come from `kx datasets list --names`),
model names are `default`, `default-int8`, `none` and the Hugging Face cache's
models. A folder is offered where a folder is expected (`watch NAME DIR`,
`mcp --allow-path`, `retire --from`, `--home`), files where files are.

Regenerate it after upgrading kx (`kx completion bash > ...`): a command
added later is not in an older script.
"""

from __future__ import annotations

import shlex
from enum import Enum
from typing import Any, Iterator

import click

# argument and option destinations that name a dataset / a folder (any command)
_DATASET_DESTS = {"name", "dataset"}
_FOLDER_DESTS = {"folder", "allow_paths", "folders", "home"}
_NOT_A_DATASET = {("completion", "shell")}
WHERE_KINDS = ("name:", "type:", "after:", "before:", "pages:", "ref:")
WHERE_TYPES = ("pdf", "docx", "html", "epub", "md", "txt", "rst", "record")
MODELS = ("default", "default-int8", "none")


def _kind(path: tuple[str, ...], param: click.Parameter) -> str:
    """How a parameter's value is completed: dataset, dir, file, model, setting, where, choice:A B, or none."""
    dest = param.name or ""
    if dest in _DATASET_DESTS and (path[-1:] + (dest,)) not in _NOT_A_DATASET and isinstance(
            param.type, click.types.StringParamType):
        return "dataset"
    if isinstance(param.type, click.Choice):
        return "choice:" + " ".join(str(c) for c in param.type.choices)
    if isinstance(param.type, click.Path):
        return "dir" if dest in _FOLDER_DESTS or not param.type.file_okay else "file"
    if dest == "sets":
        return "setting"
    if dest == "where":
        return "where"
    if dest == "names" and path[-2:] == ("models", "prepare"):
        return "model"
    return "none"


def _commands(command: click.Command, path: tuple[str, ...],
              ctx: click.Context) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, (*path, name), ctx)


def _q(words: list[str] | tuple[str, ...]) -> str:
    return shlex.quote(" ".join(words))


def _command_case(path: tuple[str, ...], command: click.Command, ctx: click.Context) -> str:
    """One `case` arm: the command's subcommands, options, which options take a value and how, and its
    arguments' kinds in order (a variadic last one repeats: `*` before it)."""
    subs = [n for n in command.list_commands(ctx)] if isinstance(command, click.Group) else []
    options, valued, kinds, args = ["-h", "--help"], [], [], []
    for param in command.params:
        if isinstance(param, click.Option):
            names = [*param.opts, *param.secondary_opts]
            options += [n for n in names if n.startswith("--")] or names
            if not param.is_flag and not param.count:
                valued += param.opts
                kinds += [f"{opt}) kind={shlex.quote(_kind(path, param))};;" for opt in param.opts]
        elif isinstance(param, click.Argument):
            args.append(("*" if param.nargs == -1 else "") + _kind(path, param).replace(" ", ","))
    kinds_case = " ".join(kinds)
    return (f"    {_q(path) if path else chr(39) * 2}) subs={_q(subs)}; opts={_q(options)}; valued={_q(valued)}; "
            f"args={_q(args)}\n        _kx_option_kind() {{ case $1 in {kinds_case} *) kind=none;; esac; }};;")


def _setting_values() -> list[str]:
    """`NAME=` for --set, and `NAME=VALUE` for the settings with a few values (on/off, a choice)."""
    from engine.config import SPECS

    out = []
    for spec in SPECS:
        if spec.name == "home":
            continue
        out.append(f"{spec.name}=")
        default = spec.default() if spec.shown_default is None else None
        if spec.name == "embed_model":
            out += [f"embed_model={m}" for m in MODELS]
        elif isinstance(default, bool):
            out += [f"{spec.name}=on", f"{spec.name}=off"]
        elif isinstance(default, Enum):
            out += [f"{spec.name}={member.value}" for member in type(default)]
    return out


def default_home() -> str:
    """KX_HOME's default on this machine (platformdirs), as the script falls back to it."""
    import platformdirs

    return str(platformdirs.user_data_dir("kx", appauthor=False))


def bash_script(root: click.Group, prog: str = "kx") -> str:
    """The whole script for `root` (the `kx` group): data, then the one function that reads it."""
    ctx = click.Context(root, info_name=prog)
    cases = "\n".join(_command_case(path, command, ctx) for path, command in _commands(root, (), ctx))
    data = (f"_kx_default_home={shlex.quote(default_home())}\n"
            f"_kx_settings={_q(_setting_values())}\n"
            f"_kx_where_kinds={_q(WHERE_KINDS)}\n_kx_where_types={_q(WHERE_TYPES)}\n_kx_models={_q(MODELS)}\n"
            f"_kx_command() {{\n    case \"$1\" in\n{cases}\n    *) return 1;;\n    esac\n}}\n")
    return f"# kx completion for bash (and zsh through bashcompinit); made by `kx completion bash`\n{data}{_FUNCTIONS}"


# The reading half: a few plain shell functions. `_kx_completion` re-splits the line itself (so `--set a=b`
# and `--where type:pdf` are one word whatever COMP_WORDBREAKS holds), walks it to find the command, the
# position and the global --home/--gateway/--token, and answers for the word under the cursor.
_FUNCTIONS = r'''
_kx_datasets() {
    if [[ -n $_kx_gateway ]]; then
        local -a via=(--gateway "$_kx_gateway")
        [[ -n $_kx_token ]] && via+=(--token "$_kx_token")
        command "${_kx_prog:-kx}" "${via[@]}" datasets list --names 2>/dev/null
        return
    fi
    local home=${_kx_home:-${KX_HOME:-$_kx_default_home}} d
    home=${home/#\~/$HOME}
    for d in "$home"/datasets/*/catalog.sqlite; do
        [[ -e $d ]] || continue
        d=${d%/catalog.sqlite}
        printf '%s\n' "${d##*/}"
    done
}

_kx_hf_models() {
    local hub=${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub} d
    for d in "$hub"/models--*; do
        [[ -d $d ]] || continue
        d=${d##*/models--}
        printf '%s\n' "${d//--//}"
    done
}

_kx_values() {
    # candidates for a value of kind $1 that starts with $2
    local kind=$1 cur=$2
    case $kind in
        dataset) compgen -W "$(_kx_datasets)" -- "$cur";;
        model) compgen -W "$_kx_models $(_kx_hf_models)" -- "$cur";;
        setting)
            if [[ $cur == embed_model=* ]]; then
                compgen -W "$(printf 'embed_model=%s ' $_kx_models $(_kx_hf_models))" -- "$cur"
            else
                compgen -W "$_kx_settings" -- "$cur"
            fi;;
        where)
            if [[ $cur == type:* ]]; then
                compgen -W "$(printf 'type:%s ' $_kx_where_types)" -- "$cur"
            else
                compgen -W "$_kx_where_kinds" -- "$cur"
            fi;;
        choice:*) compgen -W "${kind#choice:}" -- "$cur";;
        dir) compgen -d -- "$cur";;
        file) compgen -f -- "$cur";;
    esac
}

_kx_completion() {
    local line
    if [[ -n ${COMP_LINE+x} ]]; then
        line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
    else
        line="${COMP_WORDS[*]:0:COMP_CWORD+1}"
    fi
    local -a words
    read -r -a words <<< "$line"
    [[ $line =~ [[:space:]]$ ]] && words+=("")
    local cur=${words[-1]} n=$(( ${#words[@]} - 1 ))
    _kx_prog=${words[0]}
    local path="" pos=0 i=1 w kind="" subs opts valued args _kx_files=""
    _kx_home="" _kx_gateway=${KX_GATEWAY:-} _kx_token=${KX_GATEWAY_TOKEN:-}
    _kx_command "" || return
    local pending=""
    while (( i < n )); do
        w=${words[i]}
        if [[ -n $pending ]]; then
            case $pending in
                --home) _kx_home=$w;; --gateway) _kx_gateway=$w;; --token) _kx_token=$w;;
            esac
            pending=""
        elif [[ $w == -* ]]; then
            if [[ $w == *=* ]]; then
                case ${w%%=*} in
                    --home) _kx_home=${w#*=};; --gateway) _kx_gateway=${w#*=};; --token) _kx_token=${w#*=};;
                esac
            elif [[ " $valued " == *" $w "* ]]; then
                pending=$w
            fi
        elif (( pos == 0 )) && [[ " $subs " == *" $w "* ]]; then
            path="${path:+$path }$w"
            _kx_command "$path" || return
        else
            pos=$(( pos + 1 ))
        fi
        i=$(( i + 1 ))
    done
    local -a found
    if [[ -n $pending ]]; then
        _kx_option_kind "$pending"
        mapfile -t found < <(_kx_values "$kind" "$cur")
    elif [[ $cur == -* ]]; then
        if [[ $cur == --*=* ]]; then
            _kx_option_kind "${cur%%=*}"
            mapfile -t found < <(_kx_values "$kind" "${cur#*=}")
            found=("${found[@]/#/${cur%%=*}=}")
        else
            mapfile -t found < <(compgen -W "$opts" -- "$cur")
        fi
    elif (( pos == 0 )) && [[ -n $subs ]]; then
        mapfile -t found < <(compgen -W "$subs" -- "$cur")
    else
        local -a kinds=($args)
        kind=none
        if (( pos < ${#kinds[@]} )); then
            kind=${kinds[pos]}
        elif (( ${#kinds[@]} )) && [[ ${kinds[-1]} == \** ]]; then
            kind=${kinds[-1]}
        fi
        kind=${kind#\*}
        mapfile -t found < <(_kx_values "${kind//,/ }" "$cur")
    fi
    [[ $kind == dir || $kind == file ]] && _kx_files=1
    # bash splits the word under the cursor at '=' and ':' (COMP_WORDBREAKS): answer for its last piece
    local bashcur=${COMP_WORDS[COMP_CWORD]:-}
    [[ $bashcur =~ ^[=:]+$ ]] && bashcur=""   # the cursor right after '=': readline's word is empty
    if [[ $cur != "$bashcur" && $cur == *"$bashcur" ]]; then
        local cut=$(( ${#cur} - ${#bashcur} ))
        local j
        for j in "${!found[@]}"; do found[j]=${found[j]:cut}; done
    fi
    COMPREPLY=("${found[@]}")
    if [[ -n $_kx_files ]] && type compopt &>/dev/null; then
        compopt -o filenames 2>/dev/null
    elif (( ${#COMPREPLY[@]} == 1 )) && [[ ${COMPREPLY[0]} == *[=:] ]] && type compopt &>/dev/null; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}

complete -F _kx_completion kx
'''

ZSH_PREFIX = """#compdef kx
# kx completion for zsh: the bash script through zsh's bashcompinit; made by `kx completion zsh`
autoload -U +X bashcompinit && bashcompinit
"""


def attach_dynamic(root: click.Group) -> None:
    """For click's own completion (zsh and fish call back into kx at each TAB): the same kinds as the bash
    script's, as each parameter's completion: dataset names, folders only where a folder is expected, --set
    names, --where kinds and model names. Loads every command (this path is slow anyway)."""
    from click.shell_completion import CompletionItem

    def values(kind: str) -> Any:
        def complete(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
            if kind == "dir":
                return [CompletionItem(incomplete, type="dir")]
            if kind == "dataset":
                words = _dataset_names(ctx)
            elif kind == "setting":
                words = _setting_values()
            elif kind == "where":
                words = [*WHERE_KINDS, *(f"type:{t}" for t in WHERE_TYPES)]
            else:
                words = list(MODELS)
            return [CompletionItem(word) for word in words if word.startswith(incomplete)]

        return complete

    ctx = click.Context(root, info_name="kx")
    for path, command in _commands(root, (), ctx):
        for param in command.params:
            kind = _kind(path, param)
            if kind in ("dataset", "dir", "setting", "where", "model"):
                param._custom_shell_complete = values(kind)


def _dataset_names(ctx: click.Context) -> list[str]:
    """The datasets under the home this command line names (--home, else KX_HOME, else the default)."""
    import os

    root = ctx.find_root()
    home = root.params.get("home") or os.environ.get("KX_HOME") or default_home()
    folder = os.path.join(os.path.expanduser(str(home)), "datasets")
    try:
        return sorted(name for name in os.listdir(folder)
                      if os.path.exists(os.path.join(folder, name, "catalog.sqlite")))
    except OSError:
        return []
