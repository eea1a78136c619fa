"""The HTML report of a run folder (`kvreplay report`) and the comparison of two (`kvreplay diff`)."""
