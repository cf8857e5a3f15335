"""The newt kernel language server (pygls 2 + lsprotocol).

``python -m lsp_server`` / ``newt-lsp`` speaks LSP over stdio (``--tcp``
optional).  The protocol is documented in docs/lsp-protocol.md, the features in
docs/lsp.md.  The analysis is plain functions (``lsp_server.analysis.analyze``,
``lsp_server.hover.hover``, ``lsp_server.features``) that tests call directly;
``lsp_server.server`` only wires them to LSP.  Nothing here imports torch or the
CUDA bindings: compiling and running kernels happens in a worker process
(``lsp_server.worker``).
"""

__version__ = "0.1.0"
