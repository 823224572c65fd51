"""Doors into nb from training frameworks; each module imports its framework when used.

- ``nblog.integrations.lightning.NbLogger``: ``Trainer(logger=NbLogger("proj"))``
- ``nblog.integrations.transformers.NbCallback``: ``Trainer(callbacks=[NbCallback("proj")])``
- ``nblog.integrations.accelerate.NbTracker``: ``Accelerator(log_with=NbTracker("proj"))``
- ``nblog.tensorboard.SummaryWriter``: in place of ``torch.utils.tensorboard.SummaryWriter``

``import nblog`` does not import this package, and this package imports no framework:
only ``import nblog.integrations.<framework>`` does.
"""

from __future__ import annotations


def missing_extra(framework: str, extra: str, err: ImportError) -> ImportError:
    """The ``ImportError`` to raise when ``framework`` cannot be imported: it names the
    extra that installs it (``pip install "nblog[<extra>]"``) and the original error."""
    return ImportError(
        f"nblog: this integration needs {framework}, which cannot be imported ({err}); "
        f'install it with: pip install "nblog[{extra}]"',
        name=getattr(err, "name", None),
    )
