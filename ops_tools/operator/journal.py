"""The onboarding journal: the operator's run over the shared step journal (``ops_tools.runbook``):
one record per step, written after every change (atomically, 0600). A step that was
``running`` when the process died, or ``failed``, runs again and keeps its one record
(``attempts`` counts the runs). Facts that later steps need (the account, the attestation hash,
...) are kept beside the steps. Nothing secret is written here: no passphrase, no key, no API key.

The journal belongs to one network: a journal of another genesis (the network was reset) is
moved aside as ``journal.<genesis>.json`` and onboarding starts afresh on the new one, except for
what belongs to the machine, not the network: the GPU detection and the account (whose check
then refuses to go on without it rather than create another).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ops_tools import runbook
from ops_tools.errors import OpsError

VERSION = 1
# Steps and facts of the machine, kept across a network reset (their checks still run).
MACHINE_STEPS = ("gpu", "wallet")
MACHINE_FACTS = ("gpu", "account", "eth_address", "keystore", "mnemonic_backup")


@dataclass(kw_only=True)
class Journal(runbook.Journal):
    name: str
    genesis_hash: str | None = None
    version: int = VERSION

    @classmethod
    def open(cls, path: Path, name: str) -> Journal:
        """The journal at ``path``, or a new one (written at once) when there is none."""
        if not path.exists():
            journal = cls(path=path, name=name)
            journal.save()
            return journal
        try:
            journal = cls.read(path)
        except (OSError, ValueError) as exc:
            raise OpsError(f"journal {path}: unreadable ({exc}); move it aside to start the"
                           " onboarding afresh") from None
        if journal.name != name:
            raise OpsError(f"journal {path} is operator {journal.name!r}'s, not {name!r}; give"
                           " each operator its own --state-dir")
        return journal

    def bind_network(self, genesis_hash: str) -> bool:
        """Tie the journal to ``genesis_hash``; False (and a fresh journal) after a reset."""
        if self.genesis_hash in (None, genesis_hash):
            if self.genesis_hash is None:
                self.genesis_hash = genesis_hash
                self.save()
            return True
        old = self.path.with_name(f"journal.{self.genesis_hash}.json")
        self.path.rename(old)
        self.genesis_hash = genesis_hash
        self.steps = [s for s in self.steps if s.name in MACHINE_STEPS and s.status == "done"]
        self.facts = {k: v for k, v in self.facts.items() if k in MACHINE_FACTS}
        self.save()
        return False
