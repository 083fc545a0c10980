"""The load & chaos tool: experiments that produce load, inject faults and check the outputs."""
