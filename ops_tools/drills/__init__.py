"""Chaos drills (``ops-tools drill``): inject a fault into a healthy network, see its alert fire
in Alertmanager, remove the fault and see the network recover; journaled on ``ops_tools.runbook``
so that a killed drill's fault is restored by ``--resume`` or by the next drill.

- ``scenarios``: what each drill injects and which alert and recovery it expects (pure data,
  the registry ``SCENARIOS``);
- ``faults``: how each kind of fault is injected, removed and seen (through ``Env``);
- ``network``: the network a drill acts on (hosts, programs, URLs), read from its manifests;
- ``health``: the check a drill starts with; ``report``: what it measured (pure);
- ``runner``: the steps, on the shared journaled runner.
"""
