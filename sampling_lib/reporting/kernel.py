"""The runner's notebook kernels: IPC transport and no TCP listener.

:class:`RunnerKernelManager` (what :func:`~sampling_lib.reporting.notebook.execute_notebook`
hands to papermill) connects to its kernel over IPC: the connection file and
the kernel's Unix sockets live in a folder of the runner's (mode 0700), so its
five channels open no network port and ipykernel's warning "Kernel is running
over TCP without encryption" does not apply.

ipykernel opens one more socket of its own: its IOPub thread listens on a
random loopback TCP port for the output of forked subprocesses
(``IOPubThread(..., pipe=True)``, hard-coded in ``IPKernelApp.init_iopub``),
and any local process can connect to it. The manager therefore starts the
kernel through this module (``python -m sampling_lib.reporting.kernel -f
FILE``, the arguments of ``ipykernel_launcher``), which launches the same
kernel with that pipe switched off (``pipe=False``, an option of ipykernel's
own). A notebook kernel of the runner listens on no TCP port at all. The
price: text printed by a *forked* child process of a notebook
(``multiprocessing`` with the ``fork`` start method) is not forwarded to the
notebook; the notebooks do not rely on it (joblib and Dask start their
workers by spawning, whose output never reached the notebook anyway).
"""
import sys
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import CaselessStrEnum

__all__ = ["RunnerKernelManager", "main"]

LAUNCHER = "sampling_lib.reporting.kernel"


class RunnerKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager with IPC transport, starting the kernel through :func:`main`.

    Give it its ``connection_file`` in a private folder (the sockets are
    created beside it, ``<file stem>-ipc-<n>``).
    """

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    def format_kernel_cmd(self, extra_arguments=None):
        """The kernel spec's command with ``-m ipykernel_launcher`` replaced by ``-m`` this module."""
        cmd = super().format_kernel_cmd(extra_arguments)
        if "ipykernel_launcher" not in cmd:
            raise RuntimeError(f"kernel {self.kernel_name!r} is not started with `-m ipykernel_launcher` "
                               f"({' '.join(cmd)}); the runner needs the python3 kernel of ipykernel")
        return [LAUNCHER if part == "ipykernel_launcher" else part for part in cmd]


def main():
    """Start an IPython kernel (same arguments as ``ipykernel_launcher``) without the IOPub pipe."""
    # as ipykernel_launcher does: the working directory leaves sys.path while the kernel loads
    # (IPython puts it back in InteractiveShellApp.init_path)
    if sys.path and (sys.path[0] == "" or Path(sys.path[0]) == Path.cwd()):
        del sys.path[0]
    from ipykernel import iostream, kernelapp

    class IOPubThreadWithoutPipe(iostream.IOPubThread):
        """ipykernel's IOPub thread without its loopback TCP listener for forked subprocesses."""

        def __init__(self, socket, pipe=False, **kwargs):
            super().__init__(socket, pipe=False, **kwargs)

    kernelapp.IOPubThread = IOPubThreadWithoutPipe
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
