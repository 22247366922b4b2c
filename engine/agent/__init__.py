"""`kx agent run`: a bounded research loop over a dataset (engine side, UI-free).

engine/agent/loop.py is the entry point, reader.py the Reader and its bounds; offline.py and chat.py
are the two brains; records.py the transcript and answer.
"""

from .loop import Bounds, citation_label, run_agent, run_agent_here
from .records import AgentRun, Citation, Step, StopReason

__all__ = ["AgentRun", "Bounds", "Citation", "Step", "StopReason", "citation_label", "run_agent", "run_agent_here"]
