"""Passphrase sources: file, environment, prompt; never a command-line value."""

from __future__ import annotations

import pytest

from ops_tools.errors import InputError
from ops_tools.wallet.passphrase import file_is_shared, resolve_passphrase


def _no_prompt(_: str) -> str:
    raise AssertionError("must not prompt")


def test_file_wins_over_env_and_loses_one_trailing_newline(tmp_path):
    f = tmp_path / "pw"
    f.write_text("from file \n\n")
    got = resolve_passphrase(f, confirm=False, env={"NET_WALLET_PASSPHRASE": "env"},
                             interactive=True, prompt=_no_prompt)
    assert got == "from file \n"  # only the last newline is the file's; the rest is the secret
    f.write_text("crlf\r\n")
    assert resolve_passphrase(f, confirm=False, env={}, prompt=_no_prompt) == "crlf"


def test_env_wins_over_prompt():
    got = resolve_passphrase(None, confirm=True, env={"NET_WALLET_PASSPHRASE": "env pw"},
                             interactive=True, prompt=_no_prompt)
    assert got == "env pw"


def test_missing_file_names_the_option(tmp_path):
    with pytest.raises(InputError, match=r"--passphrase-file: cannot read '.*nope'"):
        resolve_passphrase(tmp_path / "nope", confirm=False, env={})


def test_no_source_and_no_terminal_is_an_error_not_a_hang():
    with pytest.raises(InputError, match="NET_WALLET_PASSPHRASE or pass --passphrase-file"):
        resolve_passphrase(None, confirm=False, env={}, interactive=False)


def test_prompt_confirms_on_creation():
    answers = iter(["s3cret", "s3cret"])
    assert resolve_passphrase(None, confirm=True, env={}, interactive=True,
                              prompt=lambda _: next(answers)) == "s3cret"
    answers = iter(["s3cret", "typo"])
    with pytest.raises(InputError, match="the two entries differ"):
        resolve_passphrase(None, confirm=True, env={}, interactive=True,
                           prompt=lambda _: next(answers))


def test_prompt_asks_once_to_unlock():
    asked = []
    got = resolve_passphrase(None, confirm=False, env={}, interactive=True,
                             prompt=lambda text: asked.append(text) or "pw")
    assert (got, len(asked)) == ("pw", 1)


def test_shared_file_is_detected(tmp_path):
    f = tmp_path / "pw"
    f.write_text("x")
    f.chmod(0o600)
    assert not file_is_shared(f)
    f.chmod(0o640)
    assert file_is_shared(f)
