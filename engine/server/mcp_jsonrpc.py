"""JSON-RPC for `kx mcp`: KxErrors as JSON-RPC errors, and the refusals given before a tool, resource or prompt
runs (arguments a tool does not take, lone surrogates, a prompt's missing arguments, a line the SDK cannot read).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, JSONRPCError
from pydantic import ValidationError

from ..errors import KxError, Status, invalid, not_found
from ..records import QueryOptions
from ..text.inputs import shown_surrogates

SERVER_ERROR = -32000  # JSON-RPC's range for a server's own errors (-32000 to -32099); MCP names none for this


def _rpc_error(exc: KxError) -> MCPError:
    """A KxError as a JSON-RPC error: the caller's mistakes (INVALID_ARGUMENT, NOT_FOUND) are invalid params,
    as MCP asks for an unknown resource; the rest are the server's own (-32000)."""
    code = INVALID_PARAMS if exc.status in (Status.INVALID_ARGUMENT, Status.NOT_FOUND) else SERVER_ERROR
    return MCPError(code=code, message=f"{exc.code}: {exc.message}", data=exc.to_dict())


# What a method's params must hold before the SDK sees them (the SDK answered these "Invalid request
# parameters" with empty data): each field, its JSON type, and whether it is required.
_PARAMS: dict[str, tuple[tuple[str, type, bool, str], ...]] = {
    "tools/call": (("name", str, True, "the tool's name"), ("arguments", dict, False, "the tool's arguments")),
    "resources/read": (("uri", str, True, "the resource's URI"),),
    "resources/subscribe": (("uri", str, True, "the resource's URI"),),
    "resources/unsubscribe": (("uri", str, True, "the resource's URI"),),
    "prompts/get": (("name", str, True, "the prompt's name"), ("arguments", dict, False, "the prompt's arguments")),
}
_SHAPE = "send {jsonrpc: '2.0', id: string or integer, method: string, params: object}"


def refusal_of(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC error (a dict, under the message's id or null) for a parsed message kx refuses before the
    SDK reads it: not an object, no `jsonrpc: "2.0"`, no string method, an id of the wrong type (-32600
    invalid request); params that are not an object, or a method's required param missing or of the wrong
    type (-32602 invalid params, data naming the field). None for a message to pass on (responses included)."""
    if not isinstance(message, dict):
        return _error_dict(None, INVALID_REQUEST, f"a JSON-RPC message is one JSON object, not a "
                                                  f"{type(message).__name__} (batches are not part of MCP); {_SHAPE}")
    request_id = message.get("id")
    good_id = request_id is None or (isinstance(request_id, (str, int)) and not isinstance(request_id, bool))
    answer_id = request_id if good_id else None
    if message.get("jsonrpc") != "2.0":
        return _error_dict(answer_id, INVALID_REQUEST, f"jsonrpc must be \"2.0\"; {_SHAPE}", field="jsonrpc")
    if "method" not in message:
        if "result" in message or "error" in message:
            return None  # a response to one of the server's own requests
        return _error_dict(answer_id, INVALID_REQUEST, f"a request names its method; {_SHAPE}", field="method")
    method = message["method"]
    if not isinstance(method, str):
        return _error_dict(answer_id, INVALID_REQUEST, f"method must be a string, not {_json_type(method)}",
                           field="method")
    if not good_id:
        return _error_dict(None, INVALID_REQUEST, f"id must be a string or an integer, not {_json_type(request_id)}",
                           field="id")
    if request_id is None and not method.startswith("notifications/"):
        # a request without a usable id ("id": true reaches here as none: the SDK reads it as a notification,
        # which is never answered, and its caller would wait for ever)
        return _error_dict(None, INVALID_REQUEST, f"{method} is a request: it needs an id, a string or an integer",
                           field="id")
    params = message.get("params")
    if "params" in message and params is not None and not isinstance(params, dict):
        return _error_dict(answer_id, INVALID_PARAMS, f"{method}: params must be an object, not "
                                                      f"{_json_type(params)}", field="params")
    for name, kind, required, what in _PARAMS.get(method, ()):
        value = (params or {}).get(name)
        if value is None and required:
            return _error_dict(answer_id, INVALID_PARAMS, f"{method} needs params.{name}, {what} (a "
                                                          f"{_json_type(kind())})", field=f"params.{name}")
        if value is not None and not isinstance(value, kind):
            return _error_dict(answer_id, INVALID_PARAMS, f"{method}: params.{name}, {what}, must be "
                                                          f"{_json_type(kind())}, not {_json_type(value)}",
                               field=f"params.{name}")
    return None


def parse_error(detail: str) -> dict[str, Any]:
    return _error_dict(None, PARSE_ERROR, f"the message is not JSON ({detail[:200]}); send one JSON-RPC object "
                                          "per line (stdio) or per request body (HTTP)")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _error_dict(request_id: Any, code: int, message: str, field: str | None = None) -> dict[str, Any]:
    refusal = invalid(message)
    data: dict[str, Any] = refusal.to_dict()
    if field is not None:
        data["field"] = field
    return {"jsonrpc": "2.0", "id": request_id,
            "error": {"code": code, "message": f"{refusal.code}: {refusal.message}", "data": data}}


def as_session_message(error: dict[str, Any]) -> SessionMessage:
    return SessionMessage(JSONRPCError.model_validate(error))


def screened(item: Any) -> SessionMessage | None:
    """For one item of the SDK's stdio read stream (a parsed SessionMessage, or the exception a line raised):
    the JSON-RPC error to answer instead of passing it on, or None to pass it on."""
    if isinstance(item, SessionMessage):
        root = item.message
        method = getattr(root, "method", None)
        if method is None:
            return None
        found = refusal_of(root.model_dump(by_alias=True, exclude_none=True, mode="json"))
        return as_session_message(found) if found is not None else None
    if not isinstance(item, ValidationError):
        return None
    errors = item.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        line = errors[0].get("input")
        try:  # Python's parser takes a lone surrogate escape that pydantic's refuses: such a line has an id
            parsed = json.loads(line) if isinstance(line, (str, bytes)) else None
        except ValueError:
            parsed = None
        found = _unreadable(item, parsed) if isinstance(parsed, dict) else None
        return as_session_message(found or parse_error(str(errors[0].get("msg", "invalid JSON"))))
    # the whole message is the input of one of the errors (a missing field's), else its own type was wrong
    message = next((e.get("input") for e in errors if isinstance(e.get("input"), dict)
                    and e.get("type") == "missing"), None)
    message = message if message is not None else next(
        (e.get("input") for e in errors if len(e.get("loc", ())) <= 1), None)
    found = refusal_of(message)
    if found is None and isinstance(message, dict):
        found = _unreadable(item, message)
    if found is None:
        found = _error_dict(message.get("id") if isinstance(message, dict) else None, INVALID_REQUEST,
                            f"not a JSON-RPC message MCP knows ({_first_problem(item)}); {_SHAPE}")
    return as_session_message(found)


def _unreadable(error: ValidationError, message: dict[str, Any]) -> dict[str, Any] | None:
    """The error for a well-shaped request the SDK still could not read: a lone surrogate in it (JSON's unpaired
    "\\ud800", which a JavaScript client's JSON.stringify writes for a string cut inside an emoji)."""
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
        return None
    except UnicodeEncodeError as exc:
        bad = json.dumps(message, ensure_ascii=False)[exc.start:exc.end]
        request_id = message.get("id")
        good = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
        refusal = invalid(f"the request holds {shown_surrogates(bad)}, an unpaired surrogate escape that is not "
                          "valid text (a string cut inside a character?); send valid Unicode text")
        return {"jsonrpc": "2.0", "id": request_id if good else None,
                "error": {"code": PARSE_ERROR, "message": f"{refusal.code}: {refusal.message}",
                          "data": refusal.to_dict()}}


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


def refuse_types(tool: str, arguments: dict[str, Any], known: dict[str, Any]) -> KxError | None:
    """INVALID_ARGUMENT for an argument whose JSON type is not its schema's, as the gateway refuses it; None
    when every one is (enums and references are left to the SDK's check, which names the choices)."""
    for key, value in arguments.items():
        wanted = _json_types(known.get(key, {}))
        if "number" in wanted:
            wanted.add("integer")
        if value is not None and wanted and _json_kind(value) not in wanted:
            # the SDK's lax validation turned "5" into 5, true into 1 and "yes" into True; the gateway refuses them
            return invalid(f"{tool}: {key}: must be {' or '.join(sorted(wanted))}, not {_json_type(value)} "
                           "(see the tool's input schema)")
    return None


def _json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types an argument's schema allows ("integer" taken as "number" too when whole); empty: any."""
    options = schema.get("anyOf") or [schema]
    kinds = {o.get("type") for o in options if isinstance(o, dict)}
    if any(o.get("enum") or o.get("$ref") for o in options if isinstance(o, dict)) or None in kinds:
        return set()  # an enum or a reference: the SDK's own check names the choices
    return {k for k in kinds if isinstance(k, str) and k != "null"}


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"  # 10.0 is an integer to JSON Schema, as the gateway takes it
    return {str: "string", float: "number", list: "array", dict: "object"}.get(type(value), "null")


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


# The search tool's arguments under the gateway's own names: `query` is the gateway's `text`
_SEARCH_AS_QUERY = {"query": "text", **{option: option for option in QueryOptions.__annotations__}}


def search_refusal(arguments: dict[str, Any]) -> KxError | None:
    """INVALID_ARGUMENT when the search tool's arguments fail the gateway's own query schema (QueryIn: one
    validation for both doors, strict: k "5" or true, rerank "yes" are refused as the gateway refuses them),
    in the gateway's words with MCP's field names; None when they pass."""
    from .schema import QueryIn

    body = {_SEARCH_AS_QUERY[key]: value for key, value in arguments.items()
            if key in _SEARCH_AS_QUERY and value is not None}
    try:
        QueryIn.model_validate(body)
    except ValidationError as exc:
        from .gateway import _describe as describe  # the gateway's wording (its import only on this path)

        said = re.sub(r"(^|; )text:", r"\1query:", describe(exc.errors()))  # the gateway's text is `query` here
        return invalid(f"search: {said.removesuffix('; see /openapi.json for the schema')} (see the tool's input "
                       "schema)")
    return None

