"""`kx agent run`: a bounded research loop over a dataset (engine side, UI-free).

engine/agent/loop.py is the entry point, reader.py the Reader and its bounds; offline.py and chat.py
are the two brains; engine/agent_run.py the transcript and answer they hand back.
"""

from ..agent_run import AgentRun, Citation, Step, StopReason
from .loop import Bounds, citation_label, run_agent, run_agent_here

__all__ = ["AgentRun", "Bounds", "Citation", "Step", "StopReason", "citation_label", "run_agent", "run_agent_here"]
