"""kx's own files (KX_HOME, the gateway's token) are no one's documents, through every door.

Doors: `kx datasets ingest` (a file, a folder), the gateway's ingest, `kx mcp`'s ingest_file (its policy
is the same object over stdio and HTTP; the CLI is checked with both), and the folder watcher. The
hash-embedded engine, the real gateway under uvicorn, the real MCP client in memory, the real watcher.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import httpx
import pytest

from engine import Engine, KxError, Status
from engine.server.mcp_policy import Policy
from engine.server.mcp_server import build_server
from engine.server.security import ensure_token
from engine.watch.events import Ingested, Refused
from engine.watch.watcher import FolderWatcher

from .helpers import EventLog, mcp_call, mcp_text, run_cli, serving


def _policy(engine: Engine, *folders: Path) -> Policy:
    return Policy.of(True, [str(f) for f in folders], 10**6, home=engine.settings.home,
                     datasets=engine.settings.datasets_dir)


def test_allow_path_refuses_kx_home_a_folder_holding_it_and_one_inside_it(hash_engine: Engine,
                                                                          tmp_path: Path) -> None:
    home = hash_engine.settings.home
    (home / "datasets").mkdir(parents=True)
    (home / "inbox").mkdir()
    hidden_parent = tmp_path / "outer"
    (hidden_parent / ".config").mkdir(parents=True)
    for folder in (home, tmp_path, home / "datasets", home / "inbox"):
        with pytest.raises(KxError) as caught:
            _policy(hash_engine, folder)
        assert caught.value.status is Status.INVALID_ARGUMENT and "kx's own files" in caught.value.message, folder
    (tmp_path / "linked").symlink_to(home, target_is_directory=True)   # a link to KX_HOME is KX_HOME
    with pytest.raises(KxError):
        _policy(hash_engine, tmp_path / "linked")
    mine = tmp_path / "mine"
    mine.mkdir()
    assert _policy(hash_engine, mine).allow_paths == (mine.resolve(),)
    for flags in (["mcp"], ["mcp", "--http"]):   # refused before the server starts, stdio and HTTP alike
        answer = run_cli(*flags, "--allow-ingest", "--allow-path", str(tmp_path))
        assert answer.code == Status.INVALID_ARGUMENT.exit_code and "kx's own files" in answer.stderr, answer.stderr


def test_ingest_file_refuses_a_hardlink_and_the_token_however_it_is_reached(hash_engine: Engine,
                                                                            tmp_path: Path) -> None:
    token = ensure_token(hash_engine.settings.home)
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "vault.md").write_text("The vault code is 1234.")
    os.link(outside / "vault.md", allowed / "vault.md")        # the same file, a name inside the folder
    os.link(hash_engine.settings.home / "gateway.token", allowed / "token.txt")
    (allowed / "copy.txt").write_text(f"token: {token}\n")      # a copy made by someone: its bytes say it
    (allowed / "memo.md").write_text("The loading dock closes at six.")
    server = build_server(hash_engine, _policy(hash_engine, allowed))
    for name, words in (("vault.md", "has 2 names (hard links)"), ("token.txt", "has 2 names (hard links)"),
                        ("copy.txt", "holds the gateway's token")):
        refused = mcp_call(server, "ingest_file", {"dataset": "loot", "path": name})
        assert refused.is_error and refused.structured_content["code"] == "PERMISSION_DENIED", mcp_text(refused)
        assert words in mcp_text(refused), mcp_text(refused)
    for name in ("../kx-home/gateway.token", str(hash_engine.settings.home / "gateway.token")):
        refused = mcp_call(server, "ingest_file", {"dataset": "loot", "path": name})
        assert refused.structured_content["code"] == "PERMISSION_DENIED", mcp_text(refused)
    ok = mcp_call(server, "ingest_file", {"dataset": "loot", "path": "memo.md"})
    assert not ok.is_error and ok.structured_content["added"] == 1
    names = [d.name for d in hash_engine.list_documents("loot", 0, 100)]
    assert names == ["memo"]
    assert token not in str(hash_engine.document_text("loot", hash_engine.list_documents("loot", 0, 1)[0].ref))


def test_the_policy_rechecks_where_the_opened_file_lies(hash_engine: Engine, tmp_path: Path) -> None:
    """A link swapped in after the path was resolved: opened without following it, it is refused."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "vault.md").write_text("The vault code is 1234.")
    policy = _policy(hash_engine, allowed)
    (allowed / "memo.md").write_text("memo")
    resolved = policy.confine("memo.md")
    (allowed / "memo.md").unlink()
    (allowed / "memo.md").symlink_to(outside / "vault.md")    # swapped between confine and open
    from engine.text.inputs import from_file

    doc = from_file(resolved, 10**6, follow_symlinks=False, vet=policy.vet("memo.md"))
    assert doc.error is not None and "symbolic link" in doc.error.message and doc.data == b""
    fd = os.open(outside / "vault.md", os.O_RDONLY)
    try:
        with pytest.raises(KxError) as caught:
            policy.vet("memo.md")(fd, os.fstat(fd))   # a descriptor that lies outside, however it was reached
        assert caught.value.status is Status.PERMISSION_DENIED and "outside the folders" in caught.value.message
    finally:
        os.close(fd)


@pytest.mark.slow  # the CLI loads the real model
def test_the_cli_refuses_the_token_by_file_and_by_folder(hash_engine: Engine, tmp_path: Path) -> None:
    home = hash_engine.settings.home
    ensure_token(home)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("Otters hold hands while they sleep.")
    os.link(home / "gateway.token", mine / "token.txt")
    answer = run_cli("datasets", "ingest", "mine", str(mine), "--json")
    # a file a folder walk found is reported refused, and does not fail the command (kx_tui/cli/verdict.py)
    assert answer.code == 0, answer.stderr
    assert '"status": "refused"' in answer.stdout and "holds the gateway's token" in answer.stdout
    assert [d.name for d in hash_engine.list_documents("mine", 0, 10)] == ["notes"]   # the rest went in
    single = run_cli("datasets", "ingest", "mine", "--file", str(home / "gateway.token"))
    assert single.code == Status.PERMISSION_DENIED.exit_code and "gateway's token" in single.stdout + single.stderr, \
        single.stdout + single.stderr


def test_the_gateway_refuses_the_token_sent_as_a_document(hash_engine: Engine) -> None:
    token = ensure_token(hash_engine.settings.home)
    with serving(hash_engine, token) as (url, _):
        answer = httpx.post(f"{url}/v1/datasets/loot/documents", timeout=30,
                            headers={"Authorization": f"Bearer {token}"},
                            json={"documents": [{"name": "token", "data_base64": base64.b64encode(
                                (token + "\n").encode()).decode(), "media_type": "text/plain"}]})
    assert answer.status_code == 403 and answer.json()["code"] == "PERMISSION_DENIED", answer.text
    assert "loot" not in [d.name for d in hash_engine.list_datasets()]


def test_the_watcher_refuses_a_link_or_copy_of_the_token(hash_engine: Engine, tmp_path: Path) -> None:
    home = hash_engine.settings.home
    token = ensure_token(home)
    drop = tmp_path / "drop"
    drop.mkdir()
    watcher = FolderWatcher(hash_engine, "inbox", drop, (log := EventLog()), settle_seconds=0.2)
    watcher.start()
    try:
        os.link(home / "gateway.token", drop / "token.txt")
        (drop / "copy.md").write_text(f"# Keys\n{token}\n")
        (drop / "memo.md").write_text("The loading dock closes at six.")
        log.wait_for(lambda l: len(l.of(Refused)) == 2 and len(l.of(Ingested)) == 1, "two refused, one in")
    finally:
        assert watcher.stop(timeout=30)
    assert {e.code for e in log.of(Refused)} == {"PERMISSION_DENIED"}
    assert [d.name for d in hash_engine.list_documents("inbox", 0, 10)] == ["memo"]
