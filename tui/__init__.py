"""The operator console (``daggers tui``): a Textual app over a control plane (:class:`job.control.protocol.Plane`)."""
