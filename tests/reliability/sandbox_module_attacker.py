"""An outside adapter module whose import is itself the attack (test-only, never registered): importing it in the
suite's process (not a worker: ``GRU4REC_WORKER`` unset) writes the file named by ``SBX_MODULE_MARKER``, as code
at module level could equally patch the record writer. ``ModuleAttacker`` declares ``isolated = True``,
``InProcess`` ``isolated = False``."""

from __future__ import annotations

import os

from gru4rec_conformance.implementations.template import TemplateAdapter

if os.environ.get("GRU4REC_WORKER") != "1" and os.environ.get("SBX_MODULE_MARKER"):
    with open(os.environ["SBX_MODULE_MARKER"], "a", encoding="utf-8") as _fh:
        import traceback

        _fh.write(f"module code ran in process {os.getpid()}\n" + "".join(traceback.format_stack()))


class ModuleAttacker(TemplateAdapter):
    name = "attack-module"
    isolated = True


class InProcess(TemplateAdapter):
    name = "attack-in-process"
    isolated = False
