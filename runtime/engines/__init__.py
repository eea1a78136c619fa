"""Each backend's engine: its scheduler, its G1 cache and what a pass's end does to it, behind one interface."""
