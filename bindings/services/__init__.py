"""The authority's state changes, one module per entity (import the module you need):

- ``bindings``: create, change, enable, remove and ensure app bindings
- ``policies``: a tool's policy under a binding
- ``authorize``: the decision of every action, one typed request per family (``tool_call_authorize``...)
- ``approvals``: approval requests, their decisions and expiry
- ``allowances``: remembered consent, its revocation, view messages allowed in a thread
- ``permissions``: browser permissions allowed for an app from a view's prompt
- ``csp_drops``: the audit of CSP sources dropped from a view's resource
- ``scopes``: what goes when chat deletes a workspace or a thread
- ``catalogues``: loading the catalogues of the servers bound to a thread
- ``errors``: ``BindingError``, the refusal every service raises
"""
