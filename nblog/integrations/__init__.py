"""Doors into nb from training frameworks; each module imports its framework when used.

- ``nblog.integrations.lightning.NbLogger``: ``Trainer(logger=NbLogger("proj"))``
- ``nblog.integrations.transformers.NbCallback``: ``Trainer(callbacks=[NbCallback("proj")])``
- ``nblog.integrations.accelerate.NbTracker``: ``Accelerator(log_with=NbTracker("proj"))``
- ``nblog.tensorboard.SummaryWriter``: in place of ``torch.utils.tensorboard.SummaryWriter``

``import nblog`` does not import this package, and this package imports no framework:
only ``import nblog.integrations.<framework>`` does.
"""
