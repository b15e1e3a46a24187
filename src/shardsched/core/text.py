"""What text that people read may hold: names, pause and cancel reasons.

It is shown in tables, logs, the console and notifications, so it must look like what it
is: no control characters (C0, DEL, C1: a NUL, an ESC that starts a terminal sequence, a
newline that forges a log line) and no invisible format characters (zero-width,
bidirectional overrides such as U+202E, BOM).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

UNPRINTABLE = "\x00-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
PRINTABLE = f"^[^{UNPRINTABLE}]*$"
#: Why a run was cancelled or a job paused: one printable line.
Reason = Annotated[str, msgspec.Meta(max_length=500, pattern=PRINTABLE)]
