"""Operator settings: one typed object, one precedence.

defaults < ``$KX_HOME/config.toml`` < ``KX_*`` environment < command-line flags.

Each setting is declared once below, with its environment name, default,
parser and the sentence `kx info` shows. `Settings.sources` remembers where
every effective value came from, so `kx info` can say why a value is what it
is. KX_HOME itself cannot come from the config file (the file lives in it).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import KxError, Status, invalid
from .records import RetrievalMode

_TRUE = {"on", "true", "yes", "1"}
_FALSE = {"off", "false", "no", "0"}
RUNTIMES = ("onnx", "torch")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("embedded", "milvus")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("expected on or off")


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}")
        return value

    return parse


def _float_in(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not low <= value <= high:  # also rejects NaN
            raise ValueError(f"expected a number from {low} to {high}")
        return value

    return parse


def _mode(text: str) -> RetrievalMode:
    return RetrievalMode.parse(text)


def _text(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("expected a non-empty value")
    return value


def _path(text: str) -> Path:
    return Path(_text(text)).expanduser()


def _path_or_empty(text: str) -> Path | None:
    value = text.strip()
    return Path(value).expanduser() if value else None


def _runtime(text: str) -> str:
    low = text.strip().lower()
    if low not in RUNTIMES:
        raise ValueError("expected one of " + ", ".join(RUNTIMES))
    return low


def _device(text: str) -> str:
    low = text.strip().lower()
    if low not in DEVICES:
        raise ValueError("expected one of " + ", ".join(DEVICES))
    return low


def _url_or_empty(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// address, or nothing for in-process")
    return value


def _origins(text: str) -> tuple[str, ...]:
    """Comma-separated web origins (scheme://host[:port]), as a browser sends them in Origin."""
    out = []
    for item in (part.strip().rstrip("/").lower() for part in text.split(",")):
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"expected origins like http://localhost:3000, comma-separated; {item!r} is not one")
        out.append(item)
    return tuple(out)


def _hosts(text: str) -> tuple[str, ...]:
    """Comma-separated host names (no ports), lowercased."""
    out = []
    for item in (part.strip().lower() for part in text.split(",")):
        if not item:
            continue
        if "/" in item or " " in item:
            raise ValueError(f"expected host names like kx.lan, comma-separated; {item!r} is not one")
        out.append(item)
    return tuple(out)
def _backend(text: str) -> str:
    low = text.strip().lower()
    if low not in BACKENDS:
        raise ValueError("expected one of " + ", ".join(BACKENDS))
    return low


def _milvus_uri(text: str) -> str:
    """A Milvus address (http(s)://host:port) or a local milvus-lite path, which must end in .db."""
    value = text.strip()
    if not value or value.startswith(("http://", "https://")):
        return value
    if "://" in value or not value.endswith(".db"):
        raise ValueError("expected http(s)://host:port for a Milvus server, or a local path ending in .db "
                         "for milvus-lite")
    return str(Path(value).expanduser())


def _milvus_database(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,254}", value):
        raise ValueError("expected a Milvus database name: letters, digits and '_', not starting with a digit")
    return value


def _chat_url(text: str) -> str:
    value = text.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// address, or nothing for the offline brain")
    return value.rstrip("/")


@dataclass(frozen=True)
class SettingSpec:
    """How one setting is named, parsed, defaulted and explained."""

    name: str
    env: str
    parse: Callable[[str], Any]
    default: Callable[[], Any]
    doc: str
    in_config_file: bool = True
    secret: bool = False  # shown masked by `kx info`


def _default_home() -> Path:
    import platformdirs  # deferred: only needed when KX_HOME is unset

    return Path(platformdirs.user_data_dir("kx", appauthor=False))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


SPECS: tuple[SettingSpec, ...] = (
    SettingSpec("home", "KX_HOME", _path, _default_home,
                "where datasets, config.toml and the gateway token live", in_config_file=False),
    SettingSpec("embed_model", "KX_SERVE_EMBED_MODEL", _text, lambda: "default",
                "embedding model: 'default' (bundled all-MiniLM-L6-v2), a local model folder, "
                "a model id in the local Hugging Face cache, or 'none'"),
    SettingSpec("embed_runtime", "KX_EMBED_RUNTIME", _runtime, lambda: "onnx",
                "how the model runs: 'onnx' (ONNX Runtime, exported once from the model and checked against "
                "torch; torch is used when it does not validate) or 'torch' (sentence-transformers)"),
    SettingSpec("embed_device", "KX_EMBED_DEVICE", _device, lambda: "auto",
                "where ONNX Runtime embeds: 'cpu', 'cuda' (a GPU through onnxruntime-gpu's CUDA provider) or "
                "'auto' (CUDA when that provider and a GPU are present, else CPU; `kx info` says which and why)"),
    SettingSpec("embed_threads", "KX_EMBED_THREADS", _int_in(0, 1024), lambda: 0,
                "threads one ONNX Runtime encode uses; 0: one per CPU core"),
    SettingSpec("model_cache", "KX_MODEL_CACHE", _path_or_empty, lambda: None,
                "where exported ONNX graphs are kept, one folder per model id; empty: $KX_HOME/models"),
    SettingSpec("chunk_size", "KX_CHUNK_SIZE", _int_in(50, 100_000), lambda: 1000,
                "passage length in characters"),
    SettingSpec("chunk_overlap", "KX_CHUNK_OVERLAP", _int_in(0, 99_999), lambda: 200,
                "characters shared by neighbouring passages; smaller than chunk_size"),
    SettingSpec("stopwords", "KX_STOPWORDS", _bool, lambda: True,
                "drop English stopwords from the BM25 index and queries (on/off)"),
    SettingSpec("rrf_k", "KX_RRF_K", _int_in(1, 100_000), lambda: 60,
                "Reciprocal Rank Fusion constant K in 1/(K + rank)"),
    SettingSpec("mmr_lambda", "KX_MMR_LAMBDA", _float_in(0.0, 1.0), lambda: 0.7,
                "MMR trade-off: 1.0 is pure relevance, lower favours diversity"),
    SettingSpec("mmr_duplicate_threshold", "KX_MMR_DUPLICATE_THRESHOLD", _float_in(0.5, 1.0), lambda: 0.92,
                "MMR: a passage whose cosine to a higher-ranked hit is at least this is a near-duplicate "
                "and gives up its slot to every other passage (1.0: only identical vectors)"),
    SettingSpec("rerank", "KX_RERANK", _bool, lambda: True,
                "apply the MMR pass by default (on/off)"),
    SettingSpec("query_expansion", "KX_QUERY_EXPANSION", _bool, lambda: False,
                "expand queries by default (on/off): a first pass's top passages add RM3 terms to the sparse "
                "list and move the dense query vector towards them (engine/expansion.py); off by default: it "
                "helps some collections and hurts others (BENCHMARKS.md)"),
    SettingSpec("mmr_depth", "KX_MMR_DEPTH", _int_in(2, 10_000), lambda: 30,
                "how many of the best fused passages MMR may reorder"),
    SettingSpec("default_mode", "KX_DEFAULT_MODE", _mode, lambda: RetrievalMode.HYBRID,
                "retrieval mode when a query names none: hybrid, dense or sparse"),
    SettingSpec("bm25_k1", "KX_BM25_K1", _float_in(0.0, 10.0), lambda: 1.2,
                "BM25 term-frequency saturation k1"),
    SettingSpec("bm25_b", "KX_BM25_B", _float_in(0.0, 1.0), lambda: 0.75,
                "BM25 length normalisation b"),
    SettingSpec("default_k", "KX_DEFAULT_K", _int_in(1, 10_000), lambda: 10,
                "hits returned when a query names no k"),
    SettingSpec("max_k", "KX_MAX_K", _int_in(1, 10_000), lambda: 64,
                "largest k a query may ask for; larger asks are clamped"),
    SettingSpec("candidate_pool", "KX_CANDIDATE_POOL", _int_in(100, 10_000), lambda: 100,
                "passages each retriever hands to fusion (never fewer than k)"),
    SettingSpec("embed_batch_size", "KX_EMBED_BATCH_SIZE", _int_in(1, 4096), lambda: 16,
                "passages per model.encode batch (16: the fastest measured on 2 cores, BENCHMARKS.md)"),
    SettingSpec("ingest_commit_passages", "KX_INGEST_COMMIT_PASSAGES", _int_in(1, 1_000_000), lambda: 2048,
                "passages per stage-1 commit group (a group also closes after 2 s): a crash loses at most one group"),
    SettingSpec("max_document_bytes", "KX_MAX_DOCUMENT_BYTES", _int_in(1, 2**31), lambda: 50 * 2**20,
                "largest document accepted, in bytes"),
    SettingSpec("max_request_bytes", "KX_MAX_REQUEST_BYTES", _int_in(1024, 2**40), lambda: 64 * 2**20,
                "largest request body `kx serve` reads, in bytes; larger ones are refused unread"),
    SettingSpec("extract_timeout", "KX_EXTRACT_TIMEOUT", _float_in(0.1, 86_400.0), lambda: 60.0,
                "seconds one document (PDF, DOCX, HTML, EPUB) may take to extract before it is refused"),
    SettingSpec("extract_memory_mb", "KX_EXTRACT_MEMORY_MB", _int_in(64, 2**20), lambda: 2048,
                "memory (MiB of address space) an extraction worker may add for one document before it is refused"),
    SettingSpec("extract_workers", "KX_EXTRACT_WORKERS", _int_in(1, 256), _cores,
                "extraction worker processes (default: the CPU cores this process may use)"),
    SettingSpec("extract_max_pages", "KX_EXTRACT_MAX_PAGES", _int_in(1, 10_000_000), lambda: 10_000,
                "largest page count a PDF may declare; larger ones are refused before any page is read"),
    SettingSpec("extract_max_unpacked_mb", "KX_EXTRACT_MAX_UNPACKED_MB", _int_in(1, 2**20), lambda: 256,
                "MiB a DOCX or EPUB may unpack to (ZIP bombs are refused before they inflate)"),
    SettingSpec("gateway", "KX_GATEWAY", _url_or_empty, lambda: "",
                "a `kx serve` address (e.g. http://127.0.0.1:50151) for the CLI to work through; "
                "empty: run the engine in-process"),
    SettingSpec("gateway_allowed_origins", "KX_GATEWAY_ALLOWED_ORIGINS", _origins, tuple,
                "web origins (comma-separated, e.g. http://localhost:3000) whose pages may call `kx serve` "
                "from a browser (CORS); empty: browsers get no CORS headers and any foreign Origin is refused"),
    SettingSpec("gateway_allowed_hosts", "KX_GATEWAY_ALLOWED_HOSTS", _hosts, tuple,
                "extra Host names `kx serve` answers to besides loopback and its --host (e.g. a LAN name); "
                "any other Host is refused, the defence against DNS rebinding"),
    # Where datasets live (engine/milvus/): this machine's folders, or a Milvus server / milvus-lite file.
    SettingSpec("backend", "KX_BACKEND", _backend, lambda: "embedded",
                "where datasets are stored and searched: 'embedded' (SQLite + voyager + whoosh under "
                "$KX_HOME/datasets) or 'milvus' (a Milvus cluster or milvus-lite at KX_MILVUS_URI)"),
    SettingSpec("milvus_uri", "KX_MILVUS_URI", _milvus_uri, lambda: "",
                "the Milvus to use with backend=milvus: http(s)://host:port for a server or cluster, or a local "
                "path ending in .db for milvus-lite (one process at a time); empty: $KX_HOME/milvus.db"),
    SettingSpec("milvus_token", "KX_MILVUS_TOKEN", lambda t: t.strip(), lambda: "",
                "Milvus credentials, 'user:password' or an API key (empty: none)", secret=True),
    SettingSpec("milvus_database", "KX_MILVUS_DATABASE", _milvus_database, lambda: "default",
                "the Milvus database kx keeps its collections in (created on first use), so several kx "
                "installations can share one cluster"),
    SettingSpec("milvus_timeout", "KX_MILVUS_TIMEOUT", _float_in(0.1, 3600.0), lambda: 30.0,
                "seconds one Milvus call (connecting included) may take before it is UNAVAILABLE; pymilvus "
                "would otherwise retry a lost server for minutes"),
    # The research loop (`kx agent run`, engine/agent/): hard bounds, and the optional chat model.
    SettingSpec("agent_max_steps", "KX_AGENT_MAX_STEPS", _int_in(1, 100), lambda: 12,
                "most searches one agent run may make (a malformed tool call counts as one)"),
    SettingSpec("agent_max_passages", "KX_AGENT_MAX_PASSAGES", _int_in(1, 2000), lambda: 100,
                "most distinct passages one agent run may read"),
    SettingSpec("agent_max_seconds", "KX_AGENT_MAX_SECONDS", _float_in(1.0, 3600.0), lambda: 120.0,
                "wall-time bound of one agent run, in seconds"),
    SettingSpec("agent_k", "KX_AGENT_K", _int_in(1, 64), lambda: 8,
                "passages each of the agent's searches reads"),
    SettingSpec("agent_chat_url", "KX_AGENT_CHAT_URL", _chat_url, lambda: "",
                "an OpenAI-compatible chat-completions endpoint (e.g. http://127.0.0.1:8080/v1) that drives "
                "the agent; empty: the offline brain (embedder only)"),
    SettingSpec("agent_chat_model", "KX_AGENT_CHAT_MODEL", _text, lambda: "default",
                "model name sent to the chat endpoint"),
    SettingSpec("agent_chat_key", "KX_AGENT_CHAT_KEY", lambda t: t.strip(), lambda: "",
                "bearer key for the chat endpoint (empty: none)", secret=True),
)
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}


@dataclass(frozen=True)
class Settings:
    home: Path
    embed_model: str
    embed_runtime: str
    embed_device: str
    embed_threads: int
    model_cache: Path | None
    chunk_size: int
    chunk_overlap: int
    stopwords: bool
    rrf_k: int
    mmr_lambda: float
    mmr_depth: int
    mmr_duplicate_threshold: float
    rerank: bool
    query_expansion: bool
    default_mode: RetrievalMode
    bm25_k1: float
    bm25_b: float
    default_k: int
    max_k: int
    candidate_pool: int
    embed_batch_size: int
    ingest_commit_passages: int
    max_document_bytes: int
    max_request_bytes: int
    extract_timeout: float
    extract_memory_mb: int
    extract_workers: int
    extract_max_pages: int
    extract_max_unpacked_mb: int
    gateway: str
    gateway_allowed_origins: tuple[str, ...]
    gateway_allowed_hosts: tuple[str, ...]
    backend: str
    milvus_uri: str
    milvus_token: str
    milvus_database: str
    milvus_timeout: float
    agent_max_steps: int
    agent_max_passages: int
    agent_max_seconds: float
    agent_k: int
    agent_chat_url: str
    agent_chat_model: str
    agent_chat_key: str
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
