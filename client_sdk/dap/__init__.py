"""DAP (draft-ietf-ppm-dap-18): the device's side and the messages every party shares.

``hpke`` seals and opens with RFC 9180's X25519/HKDF-SHA256/AES-128-GCM suite, ``codec`` and
``messages`` encode the DAP-18 messages, ``upload`` builds a device's sealed ``Report``. The
Leader/Helper service is not built yet. See docs/dap.md.
"""
