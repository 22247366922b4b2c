"""Operator settings: one typed object, one precedence.

defaults < ``$KX_HOME/config.toml`` < ``KX_*`` environment < command-line flags.

Each setting is declared once, as its field of `Settings` (`setting(...)`:
area, parser and its validation, default, the sentence `kx info` shows; its
environment name is KX_ and the field's name in capitals, `ENV.<name>` in
code); SPECS, `--set`, config.toml's known names and the README's
table (`python -m engine.config`) are read from there. `Settings.sources` remembers where
every effective value came from, so `kx info` can say why a value is what it
is. KX_HOME itself cannot come from the config file (the file lives in it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

from . import setting_values as values
from .errors import KxError, Status, invalid
from .records import Doc, RetrievalMode


class Runtime(StrEnum):
    """How the embedding model runs (embed_runtime)."""

    ONNX = "onnx"
    TORCH = "torch"


class Device(StrEnum):
    """Where ONNX Runtime embeds (embed_device)."""

    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


class OcrMode(StrEnum):
    """Whether scanned pages and images are read by OCR (ocr)."""

    AUTO = "auto"
    OFF = "off"


class BackendKind(StrEnum):
    """Where datasets are stored and searched (backend)."""

    EMBEDDED = "embedded"
    MILVUS = "milvus"


_runtime, _device, _backend = values.one_of(Runtime), values.one_of(Device), values.one_of(BackendKind)
_ocr = values.one_of(OcrMode)



def _default_home() -> Path:
    import platformdirs  # deferred: only needed when KX_HOME is unset

    return Path(platformdirs.user_data_dir("kx", appauthor=False))


def cores() -> int:
    """The CPU cores this process may use."""
    return _cores()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class SettingSpec:
    """How one setting is named, parsed, defaulted and explained: read off its `Settings` field."""

    name: str
    area: str  # engine, extract, gateway, milvus or agent: how `kx info` and the README group them
    env: str
    parse: Callable[[str], Any]
    default: Callable[[], Any]
    doc: str
    in_config_file: bool = True
    secret: bool = False  # shown masked by `kx info`
    shown_default: str | None = None  # the README's words for a default computed at run time


def setting(area: str, parse: Callable[[str], Any], default: Callable[[], Any], doc: str, *, env: str | None = None,
            in_config_file: bool = True, secret: bool = False, shown_default: str | None = None) -> Any:
    """One `Settings` field with everything else about it: the one place a setting is declared.

    Its environment variable is named after the field (`max_k`: KX_MAX_K); `env` only for a name kept from
    before that rule. The field has no dataclass default (load_settings resolves every value by precedence
    and passes them all); SPECS, `kx info`, `--set`, config.toml's known names and the README's table are
    read from here.
    """
    return field(metadata={"kx": dict(area=area, env=env, parse=parse, default=default, doc=doc,
                                      in_config_file=in_config_file, secret=secret, shown_default=shown_default)})


def env_name_of(name: str) -> str:
    """The environment variable of the setting `name`, by the rule every setting but embed_model follows."""
    return f"KX_{name.upper()}"


@dataclass(frozen=True)
class Settings:
    """Every effective setting. Each field is the setting's whole declaration (`setting(...)`):
    area, parser (its validation), default and the sentence `kx info` shows; the environment variable is
    named after the field (env_name_of), embed_model's alone kept from before that rule."""

    # -- engine: where things live, the model, chunking, retrieval and fusion
    home: Path = setting("engine", values.path, _default_home,
        "where datasets, config.toml and the gateway token live", in_config_file=False,
        shown_default="the platform's user data dir")
    embed_model: str = setting("engine", values.embed_model, lambda: "default",
        "embedding model: 'default' (bundled all-MiniLM-L6-v2), 'default-int8' (the same model quantised "
        "to int8: faster ingest), a local model folder, a model id in the local Hugging Face cache, or 'none'; "
        "any of these with ':int8' appended for its int8 variant; or a served model, "
        "'openai:MODEL@BASE_URL' (BASE_URL/embeddings is called; several base URLs comma-separated share the "
        "work; a bearer key is read from the environment variable KX_EMBED_API_KEY only)",
        env="KX_SERVE_EMBED_MODEL")  # the name it had before settings were named after their fields
    embed_runtime: Runtime = setting("engine", _runtime, lambda: Runtime.ONNX,
        "how the model runs: 'onnx' (ONNX Runtime, exported once from the model and checked against "
        "torch; torch is used when it does not validate) or 'torch' (sentence-transformers)")
    embed_device: Device = setting("engine", _device, lambda: Device.AUTO,
        "where ONNX Runtime embeds: 'cpu', 'cuda' (a GPU through onnxruntime-gpu's CUDA provider) or "
        "'auto' (CUDA when that provider and a GPU are present, else CPU; `kx info` says which and why)")
    embed_endpoint_requests: int = setting("engine", values.int_in(1, 64), lambda: 2,
        "served model: embedding requests in flight per base URL")
    embed_endpoint_timeout: float = setting("engine", values.float_in(0.5, 3600.0),
                                            lambda: 60.0,
        "served model: seconds one embedding request may take before it is retried")
    embed_endpoint_retries: int = setting("engine", values.int_in(0, 20), lambda: 4,
        "served model: retries of a request that timed out or was answered 429 or 5xx (backing off "
        "0.5 s, 1 s, 2 s ... up to 8 s, or as Retry-After says) before the server is UNAVAILABLE")
    embed_threads: int = setting("engine", values.int_in(0, 1024), lambda: 0,
        "threads one ONNX Runtime encode uses; 0: one per CPU core")
    model_cache: Path | None = setting("engine", values.path_or_empty, lambda: None,
        "where exported ONNX graphs are kept, one folder per model id; empty: $KX_HOME/models",
        shown_default="$KX_HOME/models")
    chunk_size: int = setting("engine", values.int_in(50, 100_000), lambda: 1000,
        "passage length in characters")
    chunk_overlap: int = setting("engine", values.int_in(0, 99_999), lambda: 200,
        "characters shared by neighbouring passages; smaller than chunk_size")
    stopwords: bool = setting("engine", values.on_off, lambda: True,
        "drop English stopwords from the BM25 index and queries (on/off)")
    rrf_k: int = setting("engine", values.int_in(1, 100_000), lambda: 60,
        "Reciprocal Rank Fusion constant K in 1/(K + rank)")
    mmr_lambda: float = setting("engine", values.float_in(0.0, 1.0), lambda: 0.7,
        "MMR trade-off: 1.0 is pure relevance, lower favours diversity")
    mmr_duplicate_threshold: float = setting("engine", values.float_in(0.5, 1.0), lambda: 0.92,
        "MMR: a passage whose cosine to a higher-ranked hit is at least this is a near-duplicate and gives "
        "up its slot to the next two to four distinct passages (those at least half as strong), no further "
        "(engine/fusion.py mmr; 1.0: only identical vectors)")
    rerank: bool = setting("engine", values.on_off, lambda: True,
        "apply the MMR pass by default (on/off)")
    query_expansion: bool = setting("engine", values.on_off, lambda: False,
        "expand queries by default (on/off; `--expand` per query): a first pass's top passages add RM3 "
        "terms to the sparse list and move the dense query vector towards them (engine/expansion.py); "
        "off by default: it helps some collections and hurts others (BENCHMARKS.md)")
    mmr_depth: int = setting("engine", values.int_in(2, 10_000), lambda: 30,
        "how many of the best fused passages MMR may reorder")
    default_mode: RetrievalMode = setting("engine", values.retrieval_mode, lambda: RetrievalMode.HYBRID,
        "retrieval mode when a query names none: hybrid, dense or sparse")
    bm25_k1: float = setting("engine", values.float_in(0.0, 10.0), lambda: 1.2,
        "BM25 term-frequency saturation k1")
    bm25_b: float = setting("engine", values.float_in(0.0, 1.0), lambda: 0.75,
        "BM25 length normalisation b")
    default_k: int = setting("engine", values.int_in(1, 10_000), lambda: 10,
        "hits returned when a query names no k")
    max_k: int = setting("engine", values.int_in(1, 10_000), lambda: 64,
        "largest k a query may ask for; larger asks are clamped")
    candidate_pool: int = setting("engine", values.int_in(100, 10_000), lambda: 100,
        "passages each retriever hands to fusion (never fewer than k)")
    embed_batch_size: int = setting("engine", values.int_in(1, 4096), lambda: 16,
        "passages per model.encode batch (16: the fastest measured on 2 cores, BENCHMARKS.md; progress moves "
        "once per batch)")
    ingest_commit_passages: int = setting("engine", values.int_in(1, 1_000_000), lambda: 2048,
        "passages per stage-1 commit group (a group also closes after 2 s): a crash loses at most one group")
    max_document_bytes: int = setting("engine", values.int_in(1, 2**31), lambda: 50 * 2**20,
        "largest document accepted, in bytes",
        shown_default="50 MiB")
    # -- extract: the isolated document extractors (engine/extract/) and their limits
    extract_timeout: float = setting("extract", values.float_in(0.1, 86_400.0), lambda: 60.0,
        "seconds one document (PDF, DOCX, HTML, EPUB) may take to extract before it is refused")
    extract_memory_mb: int = setting("extract", values.int_in(64, 2**20), lambda: 2048,
        "memory (MiB of address space) an extraction worker may add for one document before it is refused")
    extract_workers: int = setting("extract", values.int_in(1, 256), _cores,
        "extraction worker processes (default: the CPU cores this process may use)",
        shown_default="the CPU cores")
    extract_max_pages: int = setting("extract", values.int_in(1, 10_000_000), lambda: 10_000,
        "largest page count a PDF may declare; larger ones are refused before any page is read")
    extract_max_unpacked_mb: int = setting("extract", values.int_in(1, 2**20), lambda: 256,
        "MiB a DOCX or EPUB may unpack to (ZIP bombs are refused before they inflate)")
    ocr: OcrMode = setting("extract", _ocr, lambda: OcrMode.AUTO,
        "'auto': PDF pages without a text layer and images (PNG, JPEG, TIFF, WebP, BMP) are read by OCR "
        "(RapidOCR's bundled models, about 2-6 s of CPU a page); 'off': they are refused, as without OCR")
    # -- gateway: `kx serve` and the CLI working through it
    max_request_bytes: int = setting("gateway", values.int_in(1024, 2**40), lambda: 64 * 2**20,
        "largest request body `kx serve` reads, in bytes; larger ones are refused unread",
        shown_default="64 MiB")
    gateway: str = setting("gateway", values.url_or_empty, lambda: "",
        "a `kx serve` address (e.g. http://127.0.0.1:50151) for the CLI to work through; "
        "empty: run the engine in-process")
    gateway_allowed_origins: tuple[str, ...] = setting("gateway", values.origins, tuple,
        "web origins (comma-separated, e.g. http://localhost:3000) whose pages may call `kx serve` "
        "from a browser (CORS); empty: browsers get no CORS headers and any foreign Origin is refused")
    gateway_allowed_hosts: tuple[str, ...] = setting("gateway", values.host_names, tuple,
        "extra Host names `kx serve` answers to besides loopback and its --host (e.g. a LAN name); "
        "any other Host is refused, the defence against DNS rebinding")
    # -- milvus: where datasets live (engine/milvus/): this machine's folders, or a Milvus server / milvus-lite file
    backend: BackendKind = setting("milvus", _backend, lambda: BackendKind.EMBEDDED,
        "where datasets are stored and searched: 'embedded' (SQLite + voyager + whoosh under "
        "$KX_HOME/datasets) or 'milvus' (a Milvus cluster or milvus-lite at KX_MILVUS_URI)")
    milvus_uri: str = setting("milvus", values.milvus_uri, lambda: "",
        "the Milvus to use with backend=milvus: http(s)://host:port for a server or cluster, or a local "
        "path ending in .db for milvus-lite (one process at a time); empty: $KX_HOME/milvus.db",
        shown_default="$KX_HOME/milvus.db")
    milvus_token: str = setting("milvus", lambda t: t.strip(), lambda: "",
        "Milvus credentials, 'user:password' or an API key (empty: none)", secret=True)
    milvus_database: str = setting("milvus", values.milvus_database, lambda: "default",
        "the Milvus database kx keeps its collections in (created on first use), so several kx "
        "installations can share one cluster")
    milvus_timeout: float = setting("milvus", values.float_in(0.1, 3600.0), lambda: 30.0,
        "seconds one Milvus call (connecting included) may take before it is UNAVAILABLE; pymilvus "
        "would otherwise retry a lost server for minutes")
    # -- agent: the research loop (`kx agent run`, engine/agent/): hard bounds, and the optional chat model
    agent_max_steps: int = setting("agent", values.int_in(1, 100), lambda: 12,
        "most searches one agent run may make (a malformed tool call counts as one)")
    agent_max_passages: int = setting("agent", values.int_in(1, 2000), lambda: 100,
        "most distinct passages one agent run may read")
    agent_max_seconds: float = setting("agent", values.float_in(1.0, 3600.0), lambda: 120.0,
        "wall-time bound of one agent run, in seconds")
    agent_k: int = setting("agent", values.int_in(1, 64), lambda: 8,
        "passages each of the agent's searches reads")
    agent_chat_url: str = setting("agent", values.chat_url, lambda: "",
        "an OpenAI-compatible chat-completions endpoint (e.g. http://127.0.0.1:8080/v1) that drives "
        "the agent; empty: the offline brain (embedder only)")
    agent_chat_model: str = setting("agent", values.plain_text, lambda: "default",
        "model name sent to the chat endpoint")
    agent_chat_key: str = setting("agent", lambda t: t.strip(), lambda: "",
        "bearer key for the chat endpoint (empty: none)", secret=True)
    # setting name -> "default", "config file <path>", "env KX_...", or "flag"
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def datasets_dir(self) -> Path:
        return self.home / "datasets"

    @property
    def milvus_target(self) -> str:
        """The Milvus URI backend=milvus connects to: the setting, or milvus-lite under KX_HOME."""
        return self.milvus_uri or str(self.home / "milvus.db")

    @property
    def model_cache_dir(self) -> Path:
        return self.model_cache if self.model_cache is not None else self.home / "models"

    @property
    def config_path(self) -> Path:
        return self.home / "config.toml"

    def describe(self) -> list[dict[str, Any]]:
        """Every effective value, where it came from, and what it means."""
        rows = []
        for spec in SPECS:
            value = getattr(self, spec.name)
            rows.append({
                "name": spec.name,
                "env": spec.env,
                "value": ("***" if value else "") if spec.secret else _without_password(_show(value)),
                "source": self.sources.get(spec.name, "default"),
                "doc": spec.doc,
            })
        return rows


SPECS: tuple[SettingSpec, ...] = tuple(
    SettingSpec(name=f.name, **{**f.metadata["kx"], "env": f.metadata["kx"]["env"] or env_name_of(f.name)})
    for f in dataclasses.fields(Settings) if "kx" in f.metadata)
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}
# each setting's environment name by the setting's name, for messages and help that name one: f"{ENV.max_k}"
ENV = SimpleNamespace(**{spec.name: spec.env for spec in SPECS})
AREAS = ("engine", "extract", "gateway", "milvus", "agent")


def option_help(doc: Doc | None) -> str | None:
    """A query option's description (engine/records.py QueryOptions) as every door shows it: its text, a
    setting it names ({max_k}) by that setting's environment name, then the setting its absent value comes
    from ("; default KX_DEFAULT_K.")."""
    if doc is None:
        return None
    text = doc.text.format_map(vars(ENV))
    return text if doc.default is None else f"{text.removesuffix('.')}; default {getattr(ENV, doc.default)}."


def settings_table() -> str:
    """The README's settings table (Markdown), one row per setting in declaration order.

    tests/test_config.py checks the README holds exactly this; `python -m engine.config` prints it.
    """
    rows = ["| area | setting | environment | default | meaning |", "|---|---|---|---|---|"]
    for spec in SPECS:
        default = spec.shown_default
        if default is None:
            shown = _show(spec.default())
            default = f"`{shown}`" if shown != "" else "(none)"
        doc = spec.doc.replace("|", "\\|")
        rows.append(f"| {spec.area} | {spec.name} | `{spec.env}` | {default} | {doc} |")
    return "\n".join(rows) + "\n"


def _without_password(value: Any) -> Any:
    """A URL's user:password@ masked (KX_MILVUS_URI may carry one), so `kx info` never prints it."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", value) if isinstance(value, str) else value


def _show(value: Any) -> Any:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Path):
        return str(value)
    if value is None:
        return ""
    if isinstance(value, (tuple, list)):  # a list in config.toml reads like the comma-separated env form
        return ",".join(str(v) for v in value)
    return value


def _parse(spec: SettingSpec, raw: Any, where: str) -> Any:
    text = _show(raw) if not isinstance(raw, str) else raw
    try:
        return spec.parse(str(text))
    except ValueError as exc:
        reason = str(exc) if "expected" in str(exc) else f"expected {_expected(spec)}"
        raise invalid(
            f"setting {spec.name} ({spec.env}) from {where} has the malformed value {str(raw)[:80]!r}: "
            f"{reason}; fix it or unset it to use the default"
        ) from None


def _expected(spec: SettingSpec) -> str:
    default = spec.default() if spec.name != "home" else "a path"
    if isinstance(default, bool):
        return "on or off"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a number"
    return "a value"


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        raise KxError(Status.FAILED_PRECONDITION,
                      f"KX_HOME {path.parent} is not a folder (a file lies on that path); point KX_HOME "
                      "(or --home) at a folder") from None
    except OSError as exc:
        raise invalid(f"cannot read config file {path}: {exc.strerror}; fix its permissions or remove it") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise invalid(f"config file {path} is not valid TOML ({exc}); fix or remove it") from None
    unknown = sorted(set(data) - {s.name for s in SPECS if s.in_config_file})
    if unknown:
        known = ", ".join(s.name for s in SPECS if s.in_config_file)
        raise invalid(f"config file {path} has unknown setting(s) {', '.join(unknown)}; known settings: {known}")
    return data


def load_settings(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Resolve every setting by precedence: defaults < config file < KX_* env < flags.

    `flags` maps setting names to values given on the command line (None means
    not given). Raises INVALID_ARGUMENT naming the setting for a malformed value.
    """
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    unknown = sorted(set(flags) - set(SPEC_BY_NAME))
    if unknown:
        raise invalid(f"unknown setting(s) {', '.join(unknown)}; known settings: {', '.join(SPEC_BY_NAME)}")

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    home_spec = SPEC_BY_NAME["home"]
    if "home" in flags:
        values["home"], sources["home"] = _parse(home_spec, flags["home"], "a flag"), "flag"
    elif env.get(home_spec.env):
        values["home"], sources["home"] = _parse(home_spec, env[home_spec.env], home_spec.env), f"env {home_spec.env}"
    else:
        values["home"], sources["home"] = home_spec.default(), "default"

    config_path = Path(values["home"]) / "config.toml"
    from_file = _read_config_file(config_path)

    for spec in SPECS:
        if spec.name == "home":
            continue
        if spec.name in flags:
            values[spec.name] = _parse(spec, flags[spec.name], "a flag")
            sources[spec.name] = "flag"
        elif env.get(spec.env) is not None and env.get(spec.env) != "":
            values[spec.name] = _parse(spec, env[spec.env], f"env {spec.env}")
            sources[spec.name] = f"env {spec.env}"
        elif spec.name in from_file:
            values[spec.name] = _parse(spec, from_file[spec.name], f"config file {config_path}")
            sources[spec.name] = f"config file {config_path}"
        else:
            values[spec.name] = spec.default()
            sources[spec.name] = "default"
    return _validated(values, sources)


def _validated(values: dict[str, Any], sources: dict[str, str]) -> Settings:
    if values["chunk_overlap"] >= values["chunk_size"]:
        raise invalid(
            f"setting chunk_overlap ({values['chunk_overlap']}, from {sources['chunk_overlap']}) "
            f"must be smaller than chunk_size ({values['chunk_size']}, from {sources['chunk_size']}); "
            "lower KX_CHUNK_OVERLAP or raise KX_CHUNK_SIZE"
        )
    return Settings(**values, sources=sources)


if __name__ == "__main__":  # the README's table: python -m engine.config
    print(settings_table(), end="")
