"""Permissions of what the reports write, shared by every page writer.

Every file and folder of a run directory, of a rendered tree and of the committed verdicts gets these modes,
whatever the umask: reports are meant to be read (by CI artifact uploaders, web servers, colleagues) and hold
nothing secret (``GRU4REC_*`` values are redacted).
"""

from __future__ import annotations

__all__ = ["REPORT_FILE_MODE", "REPORT_DIR_MODE"]

REPORT_FILE_MODE = 0o644
REPORT_DIR_MODE = 0o755
