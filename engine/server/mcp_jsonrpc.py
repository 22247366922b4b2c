"""JSON-RPC for `kx mcp`: KxErrors as JSON-RPC errors, and the refusals given before a tool, resource or prompt
runs (arguments a tool does not take, lone surrogates, a prompt's missing arguments, a line the SDK cannot read).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from ..errors import KxError, Status, invalid, not_found
from ..text.inputs import shown_surrogates

SERVER_ERROR = -32000  # JSON-RPC's range for a server's own errors (-32000 to -32099); MCP names none for this


def _rpc_error(exc: KxError) -> MCPError:
    """A KxError as a JSON-RPC error: the caller's mistakes (INVALID_ARGUMENT, NOT_FOUND) are invalid params,
    as MCP asks for an unknown resource; the rest are the server's own (-32000)."""
    code = INVALID_PARAMS if exc.status in (Status.INVALID_ARGUMENT, Status.NOT_FOUND) else SERVER_ERROR
    return MCPError(code=code, message=f"{exc.code}: {exc.message}", data=exc.to_dict())


def _unreadable(error: Exception) -> SessionMessage | None:
    """The JSON-RPC error for a request line the SDK could not read, when the line names the request's id; None
    for anything else (a line that is not JSON at all has no id to answer under)."""
    if not isinstance(error, ValidationError):
        return None
    # the whole message is the input of one of the errors: the line (it did not parse) or its object
    given = next((e.get("input") for e in error.errors() if isinstance(e.get("input"), (str, bytes, dict))), None)
    try:
        message = json.loads(given) if isinstance(given, (str, bytes)) else given
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        refusal, code = invalid(f"not a JSON-RPC request MCP knows ({_first_problem(error)}); send "
                                "{jsonrpc: '2.0', id, method: string, params: object}"), INVALID_REQUEST
    except UnicodeEncodeError as exc:
        bad = json.dumps(message, ensure_ascii=False)[exc.start:exc.end]
        refusal, code = invalid(f"the request holds {shown_surrogates(bad)}, an unpaired surrogate escape that is "
                                "not valid text (a string cut inside a character?); send valid Unicode "
                                "text"), PARSE_ERROR
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=code, message=f"{refusal.code}: {refusal.message}", data=refusal.to_dict())))


def _first_problem(error: ValidationError) -> str:
    errors = error.errors()
    if not errors:
        return "invalid"
    where = ".".join(str(p) for p in errors[0]["loc"] if not str(p).startswith("JSONRPC"))
    return f"{where}: {errors[0]['msg']}" if where else errors[0]["msg"]


def _prompt_refusal(server: MCPServer, name: str, arguments: dict[str, Any] | None) -> KxError | None:
    """NOT_FOUND for a prompt this server does not have, INVALID_ARGUMENT for a required argument missing or
    one it does not take; None when the call is well formed."""
    prompts = {p.name: p for p in server._prompt_manager.list_prompts()}
    prompt = prompts.get(name)
    if prompt is None:
        return not_found(f"no prompt named {name!r}; this server has {', '.join(prompts) or 'none'}")
    given = arguments or {}
    declared = [a.name for a in prompt.arguments or []]
    missing = [a.name for a in prompt.arguments or [] if a.required and given.get(a.name) is None]
    unknown = sorted(set(given) - set(declared))
    if missing or unknown:
        wrong = [f"{a} is required" for a in missing] + [f"unknown argument {a!r}"[:60] for a in unknown]
        return invalid(f"prompt {name}: {'; '.join(wrong)}; it takes {', '.join(declared) or 'no arguments'}")
    return None


def _refuse_arguments(tool: str, arguments: dict[str, Any], known: dict[str, Any]) -> KxError | None:
    """INVALID_ARGUMENT for an argument the tool does not take (the SDK drops it silently: a model that sent
    `top_k` or `filter` believed it applied), or a string holding a lone surrogate (JSON's unpaired "\\ud800",
    which no store, path or index can take: it failed deep inside as an INTERNAL error); None when both hold."""
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        takes = ", ".join(known) or "no arguments"
        return invalid(f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(repr(a)[:40] for a in unknown[:5])}; it takes {takes} (see the tool's input "
                       "schema)")
    for key, value in arguments.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return invalid(f"{tool}: {key} holds {shown_surrogates(item[exc.start:exc.end])} at character "
                                   f"{exc.start + 1}, an unpaired surrogate that is not valid text; send valid "
                                   "Unicode (UTF-8) text")
    return None


def _describe(tool: str, error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        if item.get("type") == "missing":
            parts.append(f"{where} is required")
        elif item.get("type") == "extra_forbidden":
            parts.append(f"unknown argument {where}")
        else:
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return f"{tool}: " + "; ".join(parts) + " (see the tool's input schema)"


