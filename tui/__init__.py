"""The operator console (``daggers tui``): a Textual app over :class:`job.control.ControlPlane`."""
