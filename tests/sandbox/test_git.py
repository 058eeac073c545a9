"""Hardened git: nothing of the user's configuration, no hooks, no filesystem monitor, no
external diff, and never a repository found above the folder it is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import GitError, run_git


def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    run_git(("init", "--quiet"), path)
    (path / "a.txt").write_text("one\n")
    return path


def test_hooks_fsmonitor_and_external_diff_in_a_repositorys_config_never_run(tmp_path: Path) -> None:
    path = repo(tmp_path)
    marker = tmp_path / "ran"
    hook = path / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with (path / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {path / '.git' / 'hooks'}\n")
        config.write(f"[diff]\n\texternal = touch {marker}\n")
    run_git(("add", "a.txt"), path)
    run_git(("commit", "--quiet", "-m", "one"), path)
    (path / "a.txt").write_text("two\n")
    run_git(("status", "--porcelain"), path)
    assert b"-one" in run_git(("diff",), path)
    assert not marker.exists()


def test_the_users_own_configuration_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = repo(tmp_path)
    home = tmp_path / "user"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[alias]\n\tboom = !touch {tmp_path / 'ran'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    with pytest.raises(GitError, match="git boom failed"):
        run_git(("boom",), path)
    assert not (tmp_path / "ran").exists()


def test_git_never_walks_up_into_a_repository_around_the_folder(tmp_path: Path) -> None:
    inner = repo(tmp_path) / "inner"
    inner.mkdir()
    with pytest.raises(GitError, match="not a git repository"):
        run_git(("rev-parse", "--git-dir"), inner)


def test_the_environment_holds_nothing_of_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_WALLET_PASSPHRASE", "secret")
    path = repo(tmp_path)
    (path / ".git" / "config").open("a").write("[alias]\n\tenv = !env\n")
    said = run_git(("env",), path).decode()
    assert (
        "secret" not in said
        and "GIT_CONFIG_NOSYSTEM=1" in said
        and os.environ["HOME"] not in said.split("HOME=")[1][:40]
    )
